import Glibc
import Testing
import IIOMotion
@testable import motion_monitor

private func reading(_ kind: SensorKind) -> Reading {
    Reading(kind: kind, deviceID: "iio:device0", deviceDescription: "iio:device0 (bmi160)", timestamp: 1, x: 0, y: 0, z: -1)
}

private let badScale = MotionError(code: .invalidAttribute, device: "iio:device0 (bmi160)", attribute: "in_accel_scale",
                                   detail: "in_accel_scale contains \"abc\", which is not a number")
private let denied = MotionError(code: .permissionDenied, underlyingErrno: EACCES, call: "iio_channel_attr_read",
                                 device: "iio:device0 (bmi160)", attribute: "in_anglvel_x_raw")

@Suite("Availability and failure reporting", .timeLimit(.minutes(3)))
struct ReportTests {
    @Test("Every sensor read: data on stdout, nothing on stderr, status 0")
    func allPresent() {
        let r = Report.once([(.accelerometer, .reading(reading(.accelerometer))), (.gyroscope, .reading(reading(.gyroscope)))],
                            json: true, units: .coreMotion)
        #expect(r.stdout == [Format.json(reading(.accelerometer)), Format.json(reading(.gyroscope))])
        #expect(r.stderr.isEmpty)
        #expect(r.status == 0)
    }

    @Test("A missing sensor among present ones is reported on stderr but is not a failure")
    func oneMissing() {
        let r = Report.once([(.accelerometer, .reading(reading(.accelerometer))), (.gyroscope, .missing)],
                            json: false, units: .coreMotion)
        #expect(r.stdout == [Format.line(reading(.accelerometer), units: .coreMotion)])
        #expect(r.stderr == ["This device has no gyroscope."])
        #expect(r.status == 0)
    }

    @Test("None of the requested sensors: both messages, in order, status 69")
    func noneAvailable() {
        let r = Report.once([(.accelerometer, .missing), (.gyroscope, .missing)], json: true, units: .coreMotion)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == ["This device has no accelerometer.", "This device has no gyroscope."])
        #expect(r.status == 69)
        let g = Report.once([(.gyroscope, .missing)], json: true, units: .si)
        #expect(g.stderr == ["This device has no gyroscope."])
        #expect(g.status == 69)
    }

    @Test("A broken sensor is an error naming device and file, not a missing sensor")
    func broken() {
        let r = Report.once([(.accelerometer, .failed(badScale)), (.gyroscope, .reading(reading(.gyroscope)))],
                            json: true, units: .coreMotion)
        #expect(r.stdout == [Format.json(reading(.gyroscope))])
        #expect(r.stderr == ["Accelerometer encountered error: iio:device0 (bmi160): in_accel_scale contains \"abc\", which is not a number."])
        #expect(r.status == 74)
    }

    @Test("Permission denied is 77 and takes precedence over missing sensors")
    func permission() {
        let r = Report.once([(.accelerometer, .missing), (.gyroscope, .failed(denied))], json: true, units: .coreMotion)
        #expect(r.stderr.count == 2)
        #expect(r.stderr[0] == "This device has no accelerometer.")
        #expect(r.stderr[1].hasPrefix("Gyroscope encountered error: Reading in_anglvel_x_raw of iio:device0 (bmi160) failed: permission denied"))
        #expect(r.status == 77)
    }

    @Test("Exit statuses of library errors")
    func statuses() {
        #expect(ExitStatus.of(denied) == 77)
        #expect(ExitStatus.of(badScale) == 74)
        #expect(ExitStatus.of(MotionError(code: .ioError, underlyingErrno: EIO)) == 74)
        #expect(ExitStatus.of(MotionError(code: .deviceBusy, underlyingErrno: EBUSY)) == 74)
        #expect(ExitStatus.of(MotionError(code: .notAvailable)) == 69)
    }

    @Test("Before the continuous view: messages for the missing, 69 only when nothing is left")
    func availability() {
        let both = Report.availability(requested: [.accelerometer, .gyroscope], present: [.accelerometer, .gyroscope])
        #expect(both.readable == [.accelerometer, .gyroscope])
        #expect(both.report == Report())
        let some = Report.availability(requested: [.accelerometer, .gyroscope], present: [.gyroscope])
        #expect(some.readable == [.gyroscope])
        #expect(some.report.stderr == ["This device has no accelerometer."])
        #expect(some.report.status == 0)
        let none = Report.availability(requested: [.accelerometer, .gyroscope], present: [.magnetometer])
        #expect(none.readable.isEmpty)
        #expect(none.report.stderr == ["This device has no accelerometer.", "This device has no gyroscope."])
        #expect(none.report.status == 69)
    }

    @Test("No /sys/bus/iio on a local machine means no sensors; other context failures are errors")
    func contextFailures() throws {
        let noIIO = MotionError(code: .contextUnavailable, underlyingErrno: ENOENT, call: "iio_create_context_from_uri", uri: "local:")
        #expect(Report.contextFailure(noIIO, uri: "local:") == nil)
        let refused = MotionError(code: .contextUnavailable, underlyingErrno: ECONNREFUSED, call: "iio_create_context_from_uri", uri: "ip:127.0.0.1:1")
        let r = try #require(Report.contextFailure(refused, uri: "ip:127.0.0.1:1"))
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == ["motion-monitor: \(refused)"])
        #expect(r.status == 69)
        let perm = MotionError(code: .permissionDenied, underlyingErrno: EACCES, call: "iio_create_context_from_uri", uri: "local:")
        #expect(Report.contextFailure(perm, uri: "local:")?.status == 77)
    }

    @Test("The pinned messages")
    func messages() {
        #expect(Report.missingMessage(.accelerometer) == "This device has no accelerometer.")
        #expect(Report.missingMessage(.gyroscope) == "This device has no gyroscope.")
        #expect(Report.failureMessage(.gyroscope, denied).hasPrefix("Gyroscope encountered error: "))
    }
}
