import Dispatch
import Foundation
import Glibc
import IIOScanFormat
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// A BMI160 as Linux 6.1 registers it, in an ``EmbeddedDevice``: accelerometer (channels 0-2)
/// and gyroscope (3-5) as `le:s16/16>>0` scan elements, a 64-bit timestamp (6), a temperature
/// channel that is no scan element (7), its own trigger `bmi160-dev0` set.
enum BMI160 {
    static let accelScale = 0.000598, gyroScale = 0.001065
    static let s16 = ScanFormat(isBigEndian: false, isSigned: true, realBits: 16, storageBits: 16, repeat: 1, shift: 0)
    static let s64 = ScanFormat(isBigEndian: false, isSigned: true, realBits: 64, storageBits: 64, repeat: 1, shift: 0)
    static let ids = ["accel_x", "accel_y", "accel_z", "anglvel_x", "anglvel_y", "anglvel_z"]
    /// Channels a capture of both sensors enables.
    static let allChannels = [0, 1, 2, 3, 4, 5, 6]

    static func raw(name: String = "bmi160", scanFormat: ScanFormat? = s16) -> RawDevice {
        var channels = ids.enumerated().map { i, id in
            RawChannel(index: i, id: id, kind: i < 3 ? .accel : .anglvel, axis: Axis(rawValue: i % 3), hasRaw: true,
                       rawFile: "in_\(id)_raw", scanIndex: scanFormat == nil ? nil : i, format: scanFormat,
                       unreadableFormat: nil)
        }
        channels.append(RawChannel(index: 6, id: "timestamp", kind: .timestamp, axis: nil, hasRaw: false, rawFile: nil,
                                   scanIndex: scanFormat == nil ? nil : 6, format: scanFormat == nil ? nil : s64, unreadableFormat: nil))
        channels.append(RawChannel(index: 7, id: "temp", kind: .other, axis: nil, hasRaw: true, rawFile: "in_temp_raw",
                                   scanIndex: nil, format: nil, unreadableFormat: nil))
        return RawDevice(index: 0, id: "iio:device0", name: name, label: nil, isTrigger: false, canBuffer: true, channels: channels)
    }

    /// The device's folder as the driver leaves it after probing.
    static func files(trigger: String? = "bmi160-dev0") -> [String: String] {
        var f: [String: String] = [
            "in_accel_x_raw": "100", "in_accel_y_raw": "-200", "in_accel_z_raw": "16000",
            "in_anglvel_x_raw": "7", "in_anglvel_y_raw": "-9", "in_anglvel_z_raw": "11",
            "in_accel_sampling_frequency": "100", "in_anglvel_sampling_frequency": "100",
            "buffer/length": "0", "buffer/watermark": "1", "buffer/enable": "0",
            "current_timestamp_clock": "realtime",
            "in_accel_scale": "\(accelScale)", "in_anglvel_scale": "\(gyroScale)",
            "in_accel_sampling_frequency_available": "25 50 100 200 400 800 1600",
            "in_anglvel_sampling_frequency_available": "25 50 100 200 400 800 1600",
        ]
        for id in ids + ["timestamp"] {
            f["scan_elements/in_\(id)_en"] = "0"
            f["scan_elements/in_\(id)_type"] = id == "timestamp" ? "le:s64/64>>0" : "le:s16/16>>0"
        }
        if let trigger { f["trigger/current_trigger"] = trigger }
        return f
    }

    static func device(trigger: String? = "bmi160-dev0", triggers: Set<String> = ["bmi160-dev0"],
                       raw: RawDevice = raw(), _ change: (inout EmbeddedDevice.State) -> Void = { _ in }) -> EmbeddedDevice {
        var state = EmbeddedDevice.State()
        state.files = files(trigger: trigger)
        state.triggers = triggers
        state.accepted["in_accel_sampling_frequency"] = ["25", "50", "100", "200", "400", "800", "1600"]
        state.accepted["in_anglvel_sampling_frequency"] = ["25", "50", "100", "200", "400", "800", "1600"]
        change(&state)
        return EmbeddedDevice(raw: raw, state: state)
    }

    /// The plan discovery makes for the probed device's sensor of `kind`.
    static func plan(_ kind: SensorKind, name: String = "bmi160") -> SensorPlan {
        let discovery = Discovery(context: EmbeddedContext([device(raw: raw(name: name))]), udev: UdevDatabase(unavailable: "none"))
        return discovery.plans.first { $0.info.kind == kind }!
    }

    static func settings(_ kinds: [SensorKind] = [.accelerometer, .gyroscope], interval: Double = 0.01, everySample: Bool = true,
                         preference: SensorMode.Preference = .auto, timeout: Double? = nil, rate: Double? = nil) -> CaptureSettings {
        CaptureSettings(uri: "embedded:", plans: kinds.map { plan($0) }, units: .si, interval: interval, everySample: everySample,
                        handsOff: false, timely: false, requestedRate: rate, timeout: timeout, preference: preference)
    }

    /// `count` scans of both sensors (pinned raw values, the accelerometer's x counting up) with
    /// timestamps 10 ms apart from `start` ns.
    static func scans(_ device: EmbeddedDevice, count: Int, from first: Int = 0, start: Int64 = 5_000_000_000,
                      enabled: [Int] = allChannels) -> [UInt8] {
        device.scans((first..<(first + count)).map { i in
            [0: Int64(i), 1: -200, 2: 16000, 3: 7, 4: -9, 5: 11, 6: start + Int64(i) * 10_000_000]
        }, enabled: enabled)
    }
}

/// A ``DeviceCapture`` on an embedded device, with what it delivered and reported.
final class EmbeddedRun: Sendable {
    let device: EmbeddedDevice
    let capture: DeviceCapture<EmbeddedDevice>
    let batches: Locked<[CaptureBatch]>
    let failures: Locked<[(kinds: [SensorKind], error: MotionError, ended: Bool)]>

    init(_ device: EmbeddedDevice, _ settings: CaptureSettings) {
        self.device = device
        let batches = Locked<[CaptureBatch]>([])
        let failures = Locked<[(kinds: [SensorKind], error: MotionError, ended: Bool)]>([])
        self.batches = batches
        self.failures = failures
        capture = DeviceCapture(settings: settings, open: { device },
                                deliver: { b in batches.withLock { $0.append(b) } },
                                fail: { k, e, ended in failures.withLock { $0.append((k, e, ended)) } })
    }

    var accelerometer: [AccelerometerData] { batches.withLock { $0.flatMap(\.accelerometer) } }
    var samples: Int { batches.withLock { $0.reduce(0) { $0 + $1.count(.accelerometer) } } }

    /// Waits (real time, at most 5 s) until `condition` holds.
    @discardableResult
    func wait(_ condition: () -> Bool) -> Bool {
        let end = monotonicSeconds() + 5
        while monotonicSeconds() < end {
            if condition() { return true }
            usleep(200)
        }
        return condition()
    }
}

/// The capture's decisions, on an embedded device with a virtual clock: trigger or none, the
/// sampling frequency, buffer or polled fallback, timeouts, unplug, and the device left as found.
@Suite("Capture on an embedded device", .timeLimit(.minutes(1)))
struct CaptureTests {
    @Test("Trigger set: buffered, every scan decoded in order with exact values and the kernel's timestamps on CLOCK_MONOTONIC")
    func bufferedWithTrigger() throws {
        let device = BMI160.device()
        device.state.withLock { $0.refills = [.scans(BMI160.scans(device, count: 5)), .scans(BMI160.scans(device, count: 5, from: 5))] }
        let run = EmbeddedRun(device, BMI160.settings(interval: 0.01))
        let status = try run.capture.start()
        #expect(status.mode == .buffered)
        #expect(status.samplingFrequency == 100)
        #expect(status.samplesPerWakeup == 5)
        #expect(status.fallbackReason == nil)
        run.wait { run.samples == 10 }
        run.capture.stop()
        let a = run.accelerometer
        #expect(a.map(\.acceleration.x) == (0..<10).map { Double($0) * BMI160.accelScale })
        #expect(a.allSatisfy { $0.acceleration.y == -200 * BMI160.accelScale && $0.acceleration.z == 16000 * BMI160.accelScale })
        // realtime stamps, asked to become monotonic: the write took, so no offset applies.
        #expect(a.first.map { abs($0.timestamp - 5.0) < 1e-9 } == true, "\(a.first.map { "\($0.timestamp)" } ?? "none")")
        #expect(device.file("trigger/current_trigger") == "bmi160-dev0")
        #expect(!device.state.withLock { $0.writes.contains { $0.path == "trigger/current_trigger" } }, "the trigger in force was kept")
        #expect(run.failures.withLock { $0.isEmpty })
    }

    @Test("A triggered device with no trigger set gets its own (bmi160-dev0), streams buffered, and gets its empty trigger back")
    func ownTriggerIsSet() throws {
        let device = BMI160.device(trigger: "")
        device.state.withLock { $0.refills = (0..<12).map { [device] i in .scans(BMI160.scans(device, count: 5, from: 5 * i, enabled: [0, 1, 2, 6])) } }
        let run = EmbeddedRun(device, BMI160.settings([.accelerometer], interval: 0, everySample: true))
        let status = try run.capture.start()
        #expect(status.mode == .buffered)
        #expect(device.file("trigger/current_trigger") == "bmi160-dev0")
        #expect(run.wait { run.samples == 60 })
        run.capture.stop()
        #expect(run.samples > 50)
        #expect(device.file("trigger/current_trigger") == "", "left as found")
    }

    @Test("No trigger, the kernel refuses the buffer (EINVAL): polled, the reason says why and what would stream; exact readings; left as found")
    func refusedBuffer() throws {
        let device = BMI160.device(trigger: "", triggers: []) { $0.openError = EINVAL; $0.pollBudget = 3 }
        let before = device.state.withLock { $0.files }
        let run = EmbeddedRun(device, BMI160.settings())
        let status = try run.capture.start()
        #expect(status.mode == .polled)
        let reason = try #require(status.fallbackReason)
        #expect(reason.contains("no trigger and no data-ready interrupt") && reason.contains("(EINVAL)") && reason.contains("iio-trig-hrtimer"), "\(reason)")
        #expect(status.fallbackCause?.attribute == "trigger/current_trigger")
        #expect(run.wait { run.batches.withLock { $0.count } >= 3 })
        run.capture.stop()
        let a = run.accelerometer
        #expect(!a.isEmpty)
        for s in a {
            #expect(s.acceleration.x == 100 * BMI160.accelScale && s.acceleration.y == -200 * BMI160.accelScale
                    && s.acceleration.z == 16000 * BMI160.accelScale)
        }
        let g = run.batches.withLock { $0.flatMap(\.gyroscope) }
        #expect(!g.isEmpty && g.allSatisfy { $0.rotationRate.x == 7 * BMI160.gyroScale && $0.rotationRate.y == -9 * BMI160.gyroScale })
        // Polled at the interval: one read per 10 ms of the virtual clock.
        let t = a.map(\.timestamp)
        #expect(zip(t, t.dropFirst()).allSatisfy { abs($1 - $0 - 0.01) < 1e-9 }, "\(t)")
        #expect(device.state.withLock { $0.files } == before, "left as found")
    }

    @Test("No trigger, the buffer enables and stays silent (bmc150_accel): detected by a probe well under a second, polled; left as found")
    func silentBuffer() throws {
        let device = BMI160.device(trigger: "", triggers: []) { $0.refills = [.stall]; $0.pollBudget = 2 }
        let before = device.state.withLock { $0.files }
        let run = EmbeddedRun(device, BMI160.settings())
        let status = try run.capture.start()
        #expect(status.mode == .polled)
        let reason = try #require(status.fallbackReason)
        #expect(reason.contains("delivered nothing in 0.25 s") && reason.contains("iio-trig-hrtimer"), "\(reason)")
        #expect(status.fallbackCause?.code == .timedOut)
        let timeouts = device.state.withLock { $0.timeouts }
        #expect(timeouts.count == 3 && timeouts[1] < 0.5 && timeouts[2] == timeouts[0], "probe, then the usual timeout: \(timeouts)")
        run.capture.stop()
        #expect(device.state.withLock { $0.files } == before, "left as found")
    }

    @Test("Buffered only, and the device cannot buffer: start throws the cause")
    func bufferedOnly() {
        let device = BMI160.device(trigger: "", triggers: []) { $0.openError = EINVAL }
        let run = EmbeddedRun(device, BMI160.settings(preference: .buffered))
        #expect(throws: MotionError.self) { try run.capture.start() }
        #expect(device.file("buffer/length") == "0", "left as found")
    }

    @Test("The buffer held by another process (EBUSY): polled, the reason names the holder; its sampling frequency is left alone")
    func busyBuffer() throws {
        let device = BMI160.device { $0.openError = EBUSY; $0.pollBudget = 1 }
        let run = EmbeddedRun(device, BMI160.settings())
        let status = try run.capture.start()
        #expect(status.mode == .polled)
        #expect(status.fallbackReason == "the buffer of iio:device0 (bmi160) is held by another process (iio-sensor-proxy or iiod usually)")
        #expect(status.fallbackCause?.code == .deviceBusy)
        run.capture.stop()
        #expect(device.file("buffer/length") == "0" && device.file("current_timestamp_clock") == "realtime", "left as found")
    }

    @Test("No permission to enable the buffer: polled, the reason says so")
    func noPermission() throws {
        let device = BMI160.device { $0.openError = EACCES; $0.pollBudget = 1 }
        let run = EmbeddedRun(device, BMI160.settings())
        let status = try run.capture.start()
        run.capture.stop()
        #expect(status.mode == .polled)
        #expect(status.fallbackReason == "no permission to enable the buffer of iio:device0 (bmi160)")
    }

    @Test("Sampling frequency: the lowest available at or above the interval's; an explicit rate wins; a refused write leaves the rate in force")
    func frequencyChoice() throws {
        for (interval, rate, expected) in [(0.0025, nil, "400"), (0.05, nil, "25"), (0.01, 800.0, "800")] as [(Double, Double?, String)] {
            let device = BMI160.device()
            device.state.withLock { $0.refills = [.scans(BMI160.scans(device, count: 1))] }
            let run = EmbeddedRun(device, BMI160.settings(interval: interval, rate: rate))
            let status = try run.capture.start()
            #expect(device.file("in_accel_sampling_frequency") == expected && device.file("in_anglvel_sampling_frequency") == expected)
            #expect(status.samplingFrequency == Double(expected))
            run.capture.stop()
            #expect(device.file("in_accel_sampling_frequency") == "100", "put back")
        }
        let stubborn = BMI160.device { $0.ignoredWrites = ["in_accel_sampling_frequency", "in_anglvel_sampling_frequency"] }
        let run = EmbeddedRun(stubborn, BMI160.settings(interval: 0.0025))
        let status = try run.capture.start()
        run.capture.stop()
        #expect(status.samplingFrequency == 100, "the frequency in force, read back")
        #expect(status.samplesPerWakeup == 5, "refills sized for the 100 Hz in force (50 ms), not the 400 Hz asked for")
    }

    @Test("A refill that waits past its timeout: the capture fails whole with a timeout naming the device, in no real time")
    func stallMidStream() throws {
        let device = BMI160.device()
        device.state.withLock { $0.refills = [.scans(BMI160.scans(device, count: 1)), .stall] }
        let run = EmbeddedRun(device, BMI160.settings(interval: 0.1))
        let status = try run.capture.start()
        #expect(status.timeout == 1.0, "2.5 fill times + 0.5 s, at least 1 s")
        let start = monotonicSeconds()
        #expect(run.wait { !run.failures.withLock { $0.isEmpty } })
        #expect(monotonicSeconds() - start < 0.5, "no real waiting")
        run.capture.stop()
        let f = try #require(run.failures.withLock { $0.first })
        #expect(f.ended && Set(f.kinds) == [.accelerometer, .gyroscope])
        #expect(f.error.code == .timedOut && f.error.detail?.contains("iio:device0 (bmi160) delivered no data for 1.0 s") == true, "\(f.error)")
        #expect(device.file("buffer/length") == "0" && device.file("current_timestamp_clock") == "realtime", "left as found")
    }

    @Test("An explicit timeout wins over the automatic one")
    func explicitTimeout() throws {
        let device = BMI160.device()
        let run = EmbeddedRun(device, BMI160.settings(timeout: 0.3))
        let status = try run.capture.start()
        run.capture.stop()
        #expect(status.timeout == 0.3 && device.state.withLock { $0.timeouts } == [0.3])
    }

    @Test("Unplugged mid-stream: the error names the device and says it vanished; stop returns at once")
    func unplugBuffered() throws {
        let device = BMI160.device()
        device.state.withLock { $0.refills = [.scans(BMI160.scans(device, count: 1)), .unplug] }
        let run = EmbeddedRun(device, BMI160.settings())
        _ = try run.capture.start()
        #expect(run.wait { !run.failures.withLock { $0.isEmpty } })
        let start = monotonicSeconds()
        run.capture.stop()
        #expect(monotonicSeconds() - start < 0.5)
        let f = try #require(run.failures.withLock { $0.first })
        #expect(f.ended && f.error.code == .ioError && f.error.underlyingErrno == ENODEV)
        #expect(f.error.detail == "iio:device0 (bmi160) vanished while streaming")
    }

    @Test("Polled and unplugged: each sensor's error, once, and the capture ends")
    func unplugPolled() throws {
        let device = BMI160.device { $0.unplugAtPause = 1 }
        let run = EmbeddedRun(device, BMI160.settings(preference: .polled))
        let status = try run.capture.start()
        #expect(status.mode == .polled && status.fallbackReason == nil)
        #expect(run.wait { run.failures.withLock { $0.count } == 2 })
        run.capture.stop()
        let f = run.failures.withLock { $0 }
        #expect(f.map(\.kinds) == [[.accelerometer], [.gyroscope]] && f.map(\.ended) == [false, true])
        #expect(f.allSatisfy { $0.error.attribute?.hasSuffix("_raw") == true && $0.error.device == "iio:device0 (bmi160)" })
        #expect(run.samples == 1, "one poll before the unplug")
    }

    @Test("Stop while a refill waits: it returns at once, reports nothing, and the device is left as found")
    func stopWhileWaiting() throws {
        let device = BMI160.device()
        let before = device.state.withLock { $0.files }
        let run = EmbeddedRun(device, BMI160.settings())
        _ = try run.capture.start()
        let start = monotonicSeconds()
        run.capture.stop()
        #expect(monotonicSeconds() - start < 1)
        #expect(run.failures.withLock { $0.isEmpty })
        #expect(device.state.withLock { $0.files } == before)
    }

    @Test("Left as found: what another program changed meanwhile stays; the clock is put back after the buffer is gone")
    func leftAsFound() throws {
        let device = BMI160.device()
        let run = EmbeddedRun(device, BMI160.settings(interval: 0.0025))
        _ = try run.capture.start()
        #expect(device.file("current_timestamp_clock") == "monotonic" && device.file("buffer/enable") == "1")
        #expect(device.file("scan_elements/in_accel_x_en") == "1" && device.file("scan_elements/in_temp_en") == nil)
        // Another program sets the gyroscope's rate while the capture runs.
        device.state.withLock { $0.files["in_anglvel_sampling_frequency"] = "1600" }
        run.capture.stop()
        #expect(device.file("in_accel_sampling_frequency") == "100")
        #expect(device.file("in_anglvel_sampling_frequency") == "1600", "not the capture's to put back")
        #expect(device.file("current_timestamp_clock") == "realtime")
        #expect(device.file("buffer/length") == "0" && device.file("buffer/watermark") == "1" && device.file("buffer/enable") == "0")
        #expect(BMI160.ids.allSatisfy { device.file("scan_elements/in_\($0)_en") == "0" })
    }

    @Test("A clock that stays realtime: local timestamps are moved onto CLOCK_MONOTONIC; over iiod the remote timeline is kept")
    func clockOffset() throws {
        for local in [true, false] {
            let device = BMI160.device { $0.ignoredWrites = ["current_timestamp_clock"]; $0.isLocal = local }
            device.state.withLock { $0.refills = [.scans(BMI160.scans(device, count: 1, start: 1_700_000_005_000_000_000))] }
            let run = EmbeddedRun(device, BMI160.settings())
            _ = try run.capture.start()
            #expect(run.wait { run.samples == 1 })
            run.capture.stop()
            let t = try #require(run.accelerometer.first?.timestamp)
            #expect(abs(t - (local ? 5 : 1_700_000_005)) < 1e-6, "local \(local): \(t)")
        }
    }

    @Test("A scan-element type that cannot be decoded: polled, the reason names the file and its text (not 'no scan elements')")
    func unreadableScanType() throws {
        let bad = ScanFormat(isBigEndian: false, isSigned: true, realBits: 12, storageBits: 63, repeat: 1, shift: 0)
        var raw = BMI160.raw()
        for i in 0..<3 { raw.channels[i].scanIndex = nil; raw.channels[i].format = nil; raw.channels[i].unreadableFormat = bad }
        let device = BMI160.device(raw: raw) { $0.files["scan_elements/in_accel_x_type"] = "le:s12/63>>0"; $0.pollBudget = 1 }
        let run = EmbeddedRun(device, BMI160.settings([.accelerometer]))
        let status = try run.capture.start()
        run.capture.stop()
        #expect(status.mode == .polled)
        let reason = try #require(status.fallbackReason)
        #expect(reason.contains("scan_elements/in_accel_x_type (\"le:s12/63>>0\")") && !reason.contains("no scan elements"), "\(reason)")
        #expect(status.fallbackCause?.code == .invalidAttribute)
    }

    @Test("No scan elements at all: polled, the reason says the device has no buffer")
    func noScanElements() throws {
        let device = BMI160.device(raw: BMI160.raw(scanFormat: nil)) { $0.pollBudget = 1 }
        let run = EmbeddedRun(device, BMI160.settings())
        let status = try run.capture.start()
        run.capture.stop()
        #expect(status.fallbackReason == "iio:device0 (bmi160) has no buffer (no scan elements), so it can only be polled")
    }

    @Test("Garbage in the sampling-frequency file counts as unknown: one scan per refill")
    func garbageFrequency() throws {
        let device = BMI160.device { $0.files["in_accel_sampling_frequency"] = "1e300"; $0.files["in_anglvel_sampling_frequency"] = "1e300"
            $0.writeErrors["in_accel_sampling_frequency"] = EINVAL; $0.writeErrors["in_anglvel_sampling_frequency"] = EINVAL }
        let run = EmbeddedRun(device, BMI160.settings(interval: 0.1))
        let status = try run.capture.start()
        run.capture.stop()
        #expect(status.samplingFrequency == nil && status.samplesPerWakeup == 1)
    }

    @Test("Through the manager: polled mode when asked, on a device that could stream: no buffer opened, samples arrive")
    func managerPolledWhenAsked() throws {
        let device = BMI160.device { $0.pollBudget = 20 }
        let manager = MotionManager.embedded([device], units: .si)
        manager.preferredMode = .polled
        manager.accelerometerUpdateInterval = 0
        let samples = Locked(0)
        manager.startAccelerometerBatches { batch, _ in samples.withLock { $0 += batch?.count ?? 0 } }
        defer { manager.stopAccelerometerUpdates() }
        #expect(manager.mode(of: .accelerometer) == .polled)
        #expect(manager.fallbackReason(of: .accelerometer) == nil)
        let end = monotonicSeconds() + 5
        while samples.withLock({ $0 }) < 5 && monotonicSeconds() < end { usleep(200) }
        #expect(samples.withLock { $0 } >= 5)
        #expect(device.state.withLock { $0.opened.isEmpty }, "no buffer opened")
    }

    @Test("Through the manager: a triggered device with no trigger at all is polled (the kernel refuses its buffer, or it stays silent); the mode and the fallback reason say so, the notice saying what would stream comes once",
          arguments: [("bmi270", false), ("bma255", true)])
    func managerNoTrigger(_ name: String, silent: Bool) throws {
        let device = BMI160.device(trigger: "", triggers: [], raw: BMI160.raw(name: name)) { s in
            if silent { s.refills = [.stall] } else { s.openError = EINVAL }
            s.pollBudget = 20
        }
        let manager = MotionManager.embedded([device], units: .coreMotion)
        let notices = Locked<[String]>([])
        manager.noticeHandler = { n in notices.withLock { $0.append("\(n)") } }
        let samples = Locked(0)
        manager.accelerometerUpdateInterval = 0
        manager.startAccelerometerBatches { batch, _ in samples.withLock { $0 += batch?.count ?? 0 } }
        defer { manager.stopAccelerometerUpdates() }
        #expect(manager.mode(of: .accelerometer) == .polled)
        #expect(manager.fallbackReason(of: .accelerometer)?.hasPrefix("iio:device0 (\(name)) has no trigger and no data-ready interrupt") == true,
                "\(manager.fallbackReason(of: .accelerometer) ?? "none")")
        // The notice is delivered off the starting thread; it says why once, however long the sensor runs.
        let end = monotonicSeconds() + 5
        while (samples.withLock({ $0 }) < 5 || notices.withLock({ $0.isEmpty })) && monotonicSeconds() < end { usleep(200) }
        let notice = notices.withLock { $0 }
        #expect(notice.count == 1 && notice[0].contains("no trigger and no data-ready interrupt") && notice[0].contains("iio-trig-hrtimer"),
                "\(notice)")
        #expect(samples.withLock { $0 } >= 5)
    }
}
