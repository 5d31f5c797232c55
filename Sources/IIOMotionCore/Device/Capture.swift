internal import Dispatch
internal import Glibc
import SystemSupport

/// One device's capture: a dedicated thread owns the device's buffer (or polls its `raw`
/// files), decodes every scan without allocating per sample, and hands batches to `deliver`.
///
/// It runs on any ``DeviceIO``: ``LibIIODevice`` (IIOMotionLibIIO) in production, an embedded device in the unit
/// tests. The thread opens the device, and every call on it is made there.
///
/// Other threads only call ``stop()``, which cancels the buffer (libiio's one thread-safe call)
/// and joins the thread before anything is destroyed.
final class DeviceCapture<Device: DeviceIO>: Sendable {
    let settings: CaptureSettings
    private let open: @Sendable () throws(MotionError) -> Device?
    private let deliver: @Sendable (CaptureBatch) -> Void
    private let fail: @Sendable ([SensorKind], MotionError, Bool) -> Void
    private let state = Locked(State())
    private let wake = DispatchSemaphore(value: 0)
    private let started = DispatchSemaphore(value: 0)
    private let thread = Locked<JoinableThread?>(nil)

    private struct State: Sendable {
        var stopping = false
        var buffer: Device.Buffer?
        var setup: Result<CaptureStatus, MotionError>?
    }

    /// - Parameters:
    ///   - settings: what to capture.
    ///   - open: opens the device on the capture thread (nil: it is not there); throws when the
    ///     device's context cannot be opened.
    ///   - deliver: called on the capture thread with each refill's (or poll's) batch.
    ///   - fail: called on the capture thread when sensors fail: which ones, why, and whether the
    ///     capture ended (a buffered capture fails whole; a polled one drops only the failing
    ///     sensor and goes on polling the others).
    init(settings: CaptureSettings,
         open: @escaping @Sendable () throws(MotionError) -> Device?,
         deliver: @escaping @Sendable (CaptureBatch) -> Void,
         fail: @escaping @Sendable ([SensorKind], MotionError, Bool) -> Void) {
        self.settings = settings
        self.open = open
        self.deliver = deliver
        self.fail = fail
    }

    var deviceText: String { settings.plans.first?.info.deviceDescription ?? "?" }

    /// Starts the thread and waits until it has set the device up.
    /// - Returns: the mode, frequency and batch size in force.
    /// - Throws: ``MotionError`` when the device cannot be captured at all.
    func start() throws(MotionError) -> CaptureStatus {
        let t = try JoinableThread(name: settings.plans.first?.info.deviceID ?? "iio capture") { [self] in run() }
        thread.withLock { $0 = t }
        started.wait()
        let setup = state.withLock { $0.setup }
        switch setup {
        case .success(let status)?: return status
        case .failure(let error)?:
            t.join()
            thread.withLock { $0 = nil }
            throw error
        case nil:
            throw MotionError(code: .ioError, device: deviceText, detail: "the capture thread of \(deviceText) ended before starting")
        }
    }

    /// Stops the capture and joins its thread; idempotent. Safe from any thread. On the capture
    /// thread itself (from a handler delivered there) it cancels the buffer and returns: the
    /// thread ends when the handler returns, and releases the device itself.
    func stop() {
        let buffer = state.withLock { s -> Device.Buffer? in
            s.stopping = true
            return s.buffer
        }
        buffer?.cancel()
        wake.signal()
        let t = thread.withLock { t -> JoinableThread? in
            let old = t
            t = nil
            return old
        }
        t?.join()
    }

    private var isStopping: Bool { state.withLock { $0.stopping } }

    private func reportSetup(_ result: Result<CaptureStatus, MotionError>) {
        state.withLock { $0.setup = result }
        started.signal()
    }

    // MARK: The capture thread

    private func run() {
        let opened: Device?
        do throws(MotionError) {
            opened = try open()
        } catch {
            reportSetup(.failure(error))
            return
        }
        guard let device = opened, let raw = device.describe() else {
            reportSetup(.failure(MotionError(code: .ioError, underlyingErrno: ENODEV, device: deviceText,
                                             detail: "\(deviceText) is no longer there")))
            return
        }
        let layout = DeviceLayout(raw: raw, plans: settings.plans)
        // What the capture may change, as it is now: put back however the capture ends.
        var saved = DeviceSettings(device: device, layout: layout,
                                   frequencyFiles: settings.plans.compactMap(\.info.samplingFrequencyFile))
        defer {
            saved.restore(.buffer, device: device)
            saved.restore(.frequency, device: device)
        }
        var fallback: (reason: String, cause: MotionError)?
        var configure = true
        if settings.preference != .polled {
            switch prepareBuffer(device: device, layout: layout, saved: &saved) {
            case .success(let prepared):
                switch firstRefill(prepared, device: device) {
                case .success(let first):
                    reportSetup(.success(prepared.status))
                    streamBuffer(prepared, device: device, first: first)
                    prepared.buffer.destroy()
                    return
                case .failure(.fatal(let error)):
                    prepared.buffer.destroy()
                    reportSetup(.failure(error))
                    return
                case .failure(.cannotBuffer(let reason, let error, _)):
                    prepared.buffer.destroy()
                    saved.restore(.buffer, device: device)
                    if settings.preference == .buffered {
                        reportSetup(.failure(error))
                        return
                    }
                    fallback = (reason, error)
                }
            case .failure(.fatal(let error)):
                reportSetup(.failure(error))
                return
            case .failure(.cannotBuffer(let reason, let error, let shared)):
                saved.restore(.buffer, device: device)
                if settings.preference == .buffered {
                    reportSetup(.failure(error))
                    return
                }
                fallback = (reason, error)
                configure = !shared
            }
        }
        poll(device: device, layout: layout, fallback: fallback, configure: configure, saved: &saved)
    }

    /// Why buffered capture cannot start.
    private enum SetupFailure: Error {
        /// Buffering is impossible here (no scan elements, no trigger, no permission, the buffer
        /// held elsewhere): polling may do. `shared` when another program streams the device: its
        /// settings are then that program's, and polling leaves them alone.
        case cannotBuffer(reason: String, error: MotionError, shared: Bool = false)
        /// Nothing will work.
        case fatal(MotionError)
    }

    /// A buffer ready to stream, with its decoder.
    private struct Prepared {
        var buffer: Device.Buffer
        var decoder: ScanDecoder
        var status: CaptureStatus
        var period: Double
        /// How long the first refill may take before a device whose trigger is missing is declared
        /// unable to deliver (nil: the first refill has the usual timeout).
        var probe: Double?
    }

    /// The text of a device's sysfs file that libiio does not expose as an attribute (the
    /// scan elements' `_type` files), trimmed and made printable; nil unless readable.
    private static func localText(of file: String, device: Device) -> String? {
        guard let raw = device.sysfsText(file) else { return nil }
        let text = AttributeText.trimmed(raw)
        return String(text.prefix(40).map { $0.isASCII && !$0.isWhitespace || $0 == " " ? $0 : "?" })
    }

    /// The advice every "cannot stream without a trigger" reason ends with.
    private static var triggerAdvice: String { "wiring the sensor's interrupt line to the driver, or setting a trigger such as iio-trig-hrtimer in trigger/current_trigger, would enable buffered streaming" }

    private func prepareBuffer(device: Device, layout: DeviceLayout,
                               saved: inout DeviceSettings) -> Result<Prepared, SetupFailure> {
        guard layout.canBuffer else {
            // One text per device whatever sensors this capture serves, so that a restart with
            // another set of sensors (fxos8700: accelerometer, then with the magnetometer) is not
            // announced again.
            if let first = layout.unreadableTypes.first {
                let files = layout.unreadableTypes.map { t in
                    let file = "scan_elements/in_\(t.id)_type"
                    let text = Self.localText(of: file, device: device)
                    let read = "\(t.format)"
                    guard let text else { return "\(file) (read as \(read))" }
                    return text == read ? "\(file) (\"\(text)\")" : "\(file) (\"\(text)\", read as \(read))"
                }
                let reason = "\(deviceText): \(files.joined(separator: " and ")) \(files.count == 1 ? "is not a scan-element type" : "are not scan-element types") that can be decoded, so it can only be polled"
                return .failure(.cannotBuffer(reason: reason, error: MotionError(
                    code: .invalidAttribute, device: deviceText, attribute: "scan_elements/in_\(first.id)_type", detail: reason)))
            }
            let reason = layout.scanElementIDs.isEmpty
                ? "\(deviceText) has no buffer (no scan elements), so it can only be polled"
                : "\(deviceText) has no scan elements for its \(settings.plans.map(\.info.kind.description).joined(separator: " and ")), so it can only be polled"
            return .failure(.cannotBuffer(reason: reason, error: MotionError(code: .notAvailable, device: deviceText, detail: reason)))
        }
        let trigger: TriggerState
        switch ensureTrigger(device: device, name: layout.deviceName, saved: &saved) {
        case .failure(let problem): return .failure(problem)
        case .success(let t): trigger = t
        }
        let rate = configureFrequencies(device: device, layout: layout, saved: &saved)
        let clockOffset = configureClock(device: device, saved: &saved)

        let samples = RefillSizing.samplesPerRefill(rate: rate, interval: settings.interval,
                                            everySample: settings.everySample && !settings.timely)
        let fillTime = rate.map { Double(samples) / $0 } ?? 1
        let timeout = settings.timeout ?? max(1.0, 2.5 * fillTime + 0.5)
        device.setTimeout(seconds: timeout)

        let kernelBuffers = RefillSizing.kernelBuffers(rate: rate, samplesPerRefill: samples, scanBytes: layout.scanBytes)
        saved.bufferCreated()
        switch device.openBuffer(channels: layout.bufferChannels, samples: samples, kernelBuffers: kernelBuffers) {
        case .failure(let e):
            let error = MotionError.io(e.rawValue, call: "iio_device_create_buffer", device: deviceText, attribute: nil)
            switch e.rawValue {
            case EACCES, EPERM:
                return .failure(.cannotBuffer(
                    reason: "no permission to enable the buffer of \(deviceText)",
                    error: error))
            case EBUSY:
                return .failure(.cannotBuffer(
                    reason: "the buffer of \(deviceText) is held by another process (iio-sensor-proxy or iiod usually)",
                    error: error, shared: true))
            case EINVAL where trigger == .missing:
                // bmi160, mxc4005, kxcjk1013 without an interrupt: a triggered buffer and no trigger.
                let reason = "\(deviceText) has no trigger and no data-ready interrupt, and the kernel refused to enable its buffer without one (EINVAL); " + Self.triggerAdvice
                return .failure(.cannotBuffer(reason: reason, error: MotionError(
                    code: .notAvailable, underlyingErrno: EINVAL, call: "iio_device_create_buffer", device: deviceText,
                    attribute: "trigger/current_trigger", detail: reason)))
            default:
                return .failure(.fatal(error))
            }
        case .success(let buffer):
            guard let decoder = ScanDecoder(layout: layout, buffer: buffer, clockOffset: clockOffset,
                                            units: settings.units) else {
                buffer.destroy()
                return .failure(.fatal(MotionError(code: .ioError, device: deviceText,
                                                   detail: "libiio did not enable every channel of \(deviceText)'s buffer")))
            }
            let stopping = state.withLock { s -> Bool in
                if !s.stopping { s.buffer = buffer }
                return s.stopping
            }
            if stopping { buffer.cancel() }
            let status = CaptureStatus(mode: .buffered, samplingFrequency: rate, fallbackReason: nil,
                                       samplesPerWakeup: samples, timeout: timeout)
            // A triggered driver without its trigger may enable the buffer in software mode and
            // never deliver (bmc150_accel without an interrupt): the first refill then gets a few
            // fill times, well under a second at usual rates, before the device is polled
            // instead. Devices without trigger support (hardware FIFOs such as st_lsm6dsx, which
            // have a buffer only with their interrupt wired) are not probed: silence there is a
            // fault, reported after the usual timeout.
            let probe = trigger == .missing ? min(timeout, max(0.25, 2 * fillTime + 0.15)) : nil
            return .success(Prepared(buffer: buffer, decoder: decoder, status: status, period: rate.map { 1 / $0 } ?? 0,
                                     probe: probe))
        }
    }

    /// Whether a device streams on a trigger.
    private enum TriggerState {
        /// A trigger is set (the driver's own, a HID sensor's, or one a user set up).
        case set
        /// No trigger support (no `trigger/` folder): the buffer is filled by the driver itself
        /// (a hardware FIFO read on its interrupt).
        case none
        /// Trigger support but no trigger set, and none of the device's own exists.
        case missing
    }

    /// A triggered device needs a current trigger: keep the one set, else set the device's own
    /// (`<name>-dev<N>` or `<name>-trigger`). A device without one is not refused here: the kernel
    /// refuses some (EINVAL: bmi160, mxc4005, kxcjk1013 without an interrupt), others enable and
    /// stay silent (bmc150_accel), and a driver may have a FIFO of its own; what the kernel
    /// answers, and ``firstRefill(_:)``, tell.
    private func ensureTrigger(device: Device, name: String?,
                               saved: inout DeviceSettings) -> Result<TriggerState, SetupFailure> {
        guard case .success(let current) = device.triggerName() else { return .success(.none) }  // no trigger/
        if !current.isEmpty && device.triggerExists(named: current) { return .success(.set) }
        let number = settings.plans[0].info.deviceID.split(separator: "e").last.map(String.init) ?? "0"
        let candidates = name.map { ["\($0)-dev\(number)", "\($0)-trigger"] } ?? []
        for candidate in candidates {
            guard device.triggerExists(named: candidate) else { continue }
            let e = device.setTrigger(named: candidate)
            saved.wrote("trigger/current_trigger", device: device)
            if let e {
                let error = MotionError.io(e.rawValue, call: "iio_device_set_trigger", device: deviceText, attribute: "trigger/current_trigger")
                if e.rawValue == EACCES || e.rawValue == EPERM {
                    return .failure(.cannotBuffer(reason: "no permission to set the trigger of \(deviceText)", error: error))
                }
                return .failure(.fatal(error))
            }
            return .success(.set)
        }
        return .success(.missing)
    }

    /// Sets each sensor's sampling frequency to the lowest available one at or above what the
    /// interval needs (never below 10 Hz; an explicit rate wins) and reads back what is in force.
    /// Returns the fastest rate in force (one interrupt or FIFO serves every sensor of a device).
    /// With `configure` false (another program streams the device) nothing is written.
    private func configureFrequencies(device: Device, layout: DeviceLayout,
                                      saved: inout DeviceSettings, configure: Bool = true) -> Double? {
        var inForce: [Double] = []
        for (plan, channel) in zip(settings.plans, layout.firstChannels) {
            let info = plan.info
            guard let file = info.samplingFrequencyFile else { continue }
            let read: () -> Double? = {
                let text: Result<String, MotionError.Errno> = file.hasPrefix("in_")
                    ? device.readChannelAttribute(channel: channel, "sampling_frequency")
                    : device.readAttribute("sampling_frequency")
                return (try? text.get()).flatMap { AttributeText.decimal($0) }
            }
            let current = read() ?? info.samplingFrequency
            if configure,
               let target = FrequencyChoice.choose(available: info.availableSamplingFrequencies, current: current,
                                                   interval: settings.interval, requested: settings.requestedRate),
               target != current {
                let text = FrequencyChoice.format(target)
                _ = file.hasPrefix("in_")
                    ? device.writeChannelAttribute(channel: channel, "sampling_frequency", text)
                    : device.writeAttribute("sampling_frequency", text)
                saved.wrote(file, device: device)
            }
            // A frequency no motion sensor runs at (garbage in the file) counts as unknown: refills
            // are then one scan each, which works at any real rate, instead of waiting for a
            // buffer sized for a rate the device never delivers.
            if let now = read(), now.isFinite, now > 0, now <= 1_000_000 { inForce.append(now) }
        }
        return inForce.filter { $0 > 0 }.max()
    }

    /// Asks for `monotonic` timestamps; returns what to subtract (ns) from the timestamps of the
    /// clock in force to get `CLOCK_MONOTONIC`. The clock is the device's, shared with every other
    /// reader: it is put back when the capture ends.
    private func configureClock(device: Device, saved: inout DeviceSettings) -> Int64 {
        guard device.hasAttribute("current_timestamp_clock") else { return 0 }
        var name = (try? device.readAttribute("current_timestamp_clock").get()).map { AttributeText.trimmed($0) } ?? "monotonic"
        if name != "monotonic" {
            _ = device.writeAttribute("current_timestamp_clock", "monotonic")
            saved.wrote("current_timestamp_clock", device: device)
            name = (try? device.readAttribute("current_timestamp_clock").get()).map { AttributeText.trimmed($0) } ?? name
        }
        // Over iiod the clocks are the remote board's: its own timeline is kept as it is.
        guard name != "monotonic", device.isLocal, let clock = ClockNames.clock(String(name)) else { return 0 }
        return device.nanoseconds(on: clock) - device.nanoseconds(on: CLOCK_MONOTONIC)
    }

    /// The first refill of a buffer enabled without its trigger: whether it delivers at all,
    /// within ``Prepared/probe`` seconds; silence means the device cannot stream (no data-ready
    /// interrupt), and the caller polls it instead.
    /// - Returns: the first refill's result, or nil when there is nothing to probe (set-up does
    ///   not wait for data then: the stream's first refill has the usual timeout).
    private func firstRefill(_ prepared: Prepared, device: Device) -> Result<Result<Scans, MotionError.Errno>?, SetupFailure> {
        guard let probe = prepared.probe else { return .success(nil) }
        device.setTimeout(seconds: probe)
        let result = prepared.buffer.refill()
        device.setTimeout(seconds: prepared.status.timeout)
        guard case .failure(let e) = result, e.rawValue == ETIMEDOUT, !isStopping else { return .success(result) }
        let seconds = (probe * 100).rounded() / 100
        let reason = "\(deviceText) has no trigger and no data-ready interrupt: its buffer enabled but delivered nothing in \(seconds) s; " + Self.triggerAdvice
        return .failure(.cannotBuffer(reason: reason, error: MotionError(
            code: .timedOut, underlyingErrno: ETIMEDOUT, call: "iio_buffer_refill", device: deviceText, detail: reason)))
    }

    /// Refills and decodes until stopped, starting with `first` (the first refill's result, when
    /// set-up made it). When a
    /// consumer wants every sample, each refill becomes one array per sensor (decoded straight
    /// into the public type); otherwise only the newest scan of a refill is decoded (coalesced and
    /// pull consumers see nothing else).
    private func streamBuffer(_ prepared: Prepared, device: Device, first: Result<Scans, MotionError.Errno>?) {
        let decoder = prepared.decoder
        let buffer = prepared.buffer
        let everySample = settings.everySample
        var times = UnsafeMutableBufferPointer<Double>.allocate(capacity: everySample ? max(1, prepared.status.samplesPerWakeup) : 1)
        // The arrays of the last few batches, each reused once its consumers are done with it. A
        // handler on a queue is usually still reading the previous batch when the next refill is
        // decoded, rarely the one before: three spares in turn then avoid allocating (and
        // faulting in) fresh arrays on every refill. Handlers on this thread are done with a
        // batch before the next refill: one spare, the smallest cache footprint.
        var spares = [CaptureBatch](repeating: CaptureBatch(), count: everySample && settings.handsOff ? 3 : 1)
        var next = 0
        var pending: Result<Scans, MotionError.Errno>? = first
        defer {
            times.deallocate()
            state.withLock { $0.buffer = nil }
        }
        while true {
            let result = pending ?? buffer.refill()
            pending = nil
            switch result {
            case .success(let (start, bytes, step)):
                let scans = step > 0 ? bytes / step : 0
                guard scans > 0 else { continue }
                let readTime = device.now()
                if everySample && scans > times.count {  // more than asked for (never with libiio 0.24)
                    times.deallocate()
                    times = .allocate(capacity: scans)
                }
                let batch = decoder.batch(start, step: step, scans: scans, everySample: everySample, readTime: readTime,
                                          period: prepared.period, times: times.baseAddress!, reusing: &spares[next])
                next = (next + 1) % spares.count
                deliver(batch)
            case .failure(let e):
                if isStopping { return }
                fail(settings.plans.map(\.info.kind), refillError(e, timeout: prepared.status.timeout), true)
                return
            }
        }
    }

    private func refillError(_ e: MotionError.Errno, timeout: Double) -> MotionError {
        switch e.rawValue {
        case ETIMEDOUT:
            let seconds = (timeout * 10).rounded() / 10
            return MotionError(code: .timedOut, underlyingErrno: ETIMEDOUT, call: "iio_buffer_refill", device: deviceText,
                               detail: "\(deviceText) delivered no data for \(seconds) s: it was removed, or its data-ready interrupt or trigger stopped")
        case ENODEV, ENOENT, ENXIO:
            return MotionError(code: .ioError, underlyingErrno: e.rawValue, call: "iio_buffer_refill", device: deviceText,
                               detail: "\(deviceText) vanished while streaming")
        default:
            return MotionError.io(e.rawValue, call: "iio_buffer_refill", device: deviceText, attribute: nil)
        }
    }

    // MARK: Polled mode

    private func poll(device: Device, layout: DeviceLayout, fallback: (reason: String, cause: MotionError)?, configure: Bool,
                      saved: inout DeviceSettings) {
        // The same frequency rule as buffered capture: drivers at 0 or 1 Hz block sysfs reads for
        // seconds or answer with stale values. Without permission to write, the rate stays; while
        // another program streams the device, its rate is that program's and stays too.
        let rate = configureFrequencies(device: device, layout: layout, saved: &saved, configure: configure)
            ?? settings.plans.compactMap(\.info.samplingFrequency).filter { $0 > 0 }.max()
        let period = settings.interval > 0 ? settings.interval : max(0.001, 1 / (rate ?? 100))
        reportSetup(.success(CaptureStatus(mode: .polled, samplingFrequency: rate, fallbackReason: fallback?.reason,
                                           fallbackCause: fallback?.cause, samplesPerWakeup: 1, timeout: 0)))
        var next = device.now()
        var live = Array(settings.plans.indices)
        while !isStopping {
            var batch = CaptureBatch()
            for i in live {
                let plan = settings.plans[i]
                do throws(MotionError) {
                    let (v, t) = try PolledReader.readSI(device: device, channels: layout.rawChannels[i], info: plan.info)
                    batch.append(Sample(si: v, plan.info.kind, timestamp: t, units: settings.units), of: plan.info.kind,
                                 everySample: settings.everySample)
                } catch {
                    if isStopping { return }
                    live.removeAll { $0 == i }
                    fail([plan.info.kind], error, live.isEmpty)
                    if live.isEmpty { return }
                }
            }
            if !batch.isEmpty { deliver(batch) }
            next += period
            let now = device.now()
            if next < now { next = now }  // fell behind: do not try to catch up
            device.pause(until: next, wake: wake)
        }
    }
}
