import Glibc
import IIOMotion
import Testing
@testable import motion_monitor

/// The library's code for an errno, as its I/O errors carry it.
private func code(_ e: Int32) -> MotionError.Code {
    switch e {
    case EACCES: .permissionDenied
    case EBUSY: .deviceBusy
    default: .ioError
    }
}

@Suite("motion-monitor's remedies: the library says what failed, motion-monitor what to do", .timeLimit(.minutes(3)))
struct AdviceTests {
    private let device = "iio:device0 (bmi160)"

    @Test("Permission denied: install the rules when they are missing, join the group when they are installed")
    func permission() {
        let e = MotionError(code: code(EACCES), underlyingErrno: EACCES, call: "iio_device_create_buffer", device: device)
        #expect(Advice.remedy(for: e, ruleInstalled: false)?.contains("sudo scripts/install-udev") == true)
        let joined = Advice.remedy(for: e, ruleInstalled: true) ?? ""
        #expect(joined.contains("usermod -aG iio") && !joined.contains("install-udev"))
    }

    @Test("An unreadable raw file: restore access or stream, with the rules' remedy")
    func rawFile() {
        let e = MotionError(code: code(EACCES), underlyingErrno: EACCES, call: "iio_channel_attr_read", device: device, attribute: "in_accel_x_raw")
        let text = Advice.remedy(for: e, ruleInstalled: false) ?? ""
        #expect(text.hasPrefix("Restore read access") && text.contains("scripts/install-udev"))
    }

    @Test("Busy names the usual service; a refill EINVAL offers --mode polled; others add nothing")
    func others() {
        let busy = MotionError(code: code(EBUSY), underlyingErrno: EBUSY, call: "iio_channel_attr_read", device: device, attribute: "in_accel_x_raw")
        #expect(Advice.remedy(for: busy)?.contains("systemctl stop iio-sensor-proxy") == true)
        let layout = MotionError(code: code(EINVAL), underlyingErrno: EINVAL, call: "iio_buffer_refill", device: device)
        #expect(Advice.remedy(for: layout)?.contains("--mode polled") == true)
        let garbage = MotionError(code: .invalidAttribute, device: device, attribute: "in_accel_scale", detail: "in_accel_scale contains \"abc\", which is not a number")
        #expect(Advice.remedy(for: garbage) == nil)
        #expect(Advice.text(garbage) == garbage.description)
    }

    @Test("The failure message carries the library's sentence, then the remedy")
    func failureMessage() {
        let e = MotionError(code: code(EBUSY), underlyingErrno: EBUSY, call: "iio_channel_attr_read", device: device, attribute: "in_accel_x_raw")
        let message = Report.failureMessage(.accelerometer, e)
        #expect(message.hasPrefix("Accelerometer encountered error: \(e) Stop that process"))
    }

    @Test("A polled fallback for want of permission gets the rules' remedy; one for a busy buffer none")
    func notices() {
        let denied = MotionNotice(sensors: [.accelerometer], device: device, message: "Polling \(device) instead of streaming its buffer: no permission to enable the buffer of \(device).",
                                  cause: MotionError(code: code(EACCES), underlyingErrno: EACCES, call: "iio_device_create_buffer", device: device))
        #expect(Advice.remedy(for: denied, ruleInstalled: false)?.contains("scripts/install-udev") == true)
        let busy = MotionNotice(sensors: [.accelerometer], device: device, message: "Polling …",
                                cause: MotionError(code: code(EBUSY), underlyingErrno: EBUSY, call: "iio_device_create_buffer", device: device))
        #expect(Advice.remedy(for: busy, ruleInstalled: false) == nil)
        #expect(Advice.text(busy) == "Polling …")
    }
}
