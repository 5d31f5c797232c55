public import Dispatch
import SystemSupport

/// Device motion's running state: the fusion filter, fed with every accelerometer, gyroscope and
/// magnetometer sample, and what it last produced.
///
/// Batches are fused on the capture threads themselves, as they are read (a few microseconds per
/// refill): no queue to wake per refill. Sensors on two devices (LSM6DSx) have two capture threads,
/// which take turns on ``fusion``'s lock; the filter's aligner orders their samples by timestamp.
/// A handler gets the newest estimate through a ``Mailbox``, as the sensors' push handlers do: at
/// most one job is ever queued for it, so one that blocks costs no memory.
final class DeviceMotionEngine: Sendable {
    let state = Locked(EngineState())
    /// The filter: locked while a batch is fused, and while it is replaced or dropped.
    let fusion = Locked<DeviceMotionFusion?>(nil)

    /// Ends the fusion, returning the magnetometer calibration it held (to be saved).
    func endFusion() -> MagnetometerCalibrator? {
        fusion.withLock { f in
            defer { f = nil }
            return f?.magnetometerCalibration
        }
    }

    struct EngineState: Sendable {
        var interval: Double = 0.01
        var frame: AttitudeReferenceFrame = .xArbitraryZVertical
        var running: Running?
        var latest: DeviceMotion?
        var generation = 0
        /// Since the last start: estimates made (`samples`), handed to the handler, coalesced.
        var statistics = UpdateStatistics()
        /// Where magnetometer calibrations are kept (nil: not kept).
        var calibrationFolder: String?
        /// The file the running device motion's calibration came from and goes to, with the
        /// magnetometer's identity and mount matrix.
        var calibrationFile: (path: String, device: String, mount: String)?
    }

    /// One run of device motion updates.
    struct Running: Sendable {
        var generation: Int
        var consumers: [SensorKind: Int]
        /// Gets the estimates due, oldest first (one, or every one at interval 0), or the error.
        var handler: (@Sendable ([DeviceMotion]?, MotionError?) -> Void)?
        var handlerQueue: DispatchQueue
        /// Estimates go to the handler on the capture thread that made them, not on
        /// `handlerQueue` (which still gets the error and the end).
        var onCaptureThread = false
        /// How the handler hears that the updates ended without an error (an async sequence finishes).
        var ended: (@Sendable () -> Void)?
        /// When the next delivery is due, in estimate time.
        var schedule = CoalescingSchedule()
        /// The time between two estimates, as last seen (0 until then).
        var period: Double = 0
        /// Past the interval's newest estimate (which replaces the one waiting), at interval 0
        /// every estimate waits, at most 1,024 of them (the oldest go first).
        let mailbox = Mailbox<DeviceMotion>(limit: 1024)
    }

    /// One batch of one sensor, as it reaches the filter.
    enum SensorBatch: Sendable {
        case accelerometer([AccelerometerData])
        case gyroscope([GyroData])
        case magnetometer([MagnetometerData])
    }

    /// Fuses a batch (on a capture thread): updates ``EngineState/latest`` and, when a delivery is
    /// due (once per interval of estimate time, on a schedule), leaves the newest estimate in the
    /// handler's mailbox.
    func fuse(_ batch: SensorBatch, generation: Int) {
        // A batch read before a restart belongs to the previous run's filter, which is gone.
        guard state.withLock({ $0.running?.generation == generation }) else { return }
        // Every estimate is kept only at interval 0 (all are delivered); else only the newest.
        let keepAll = state.withLock { $0.interval == 0 && $0.running?.handler != nil }
        var newest: DeviceMotion?, previous: DeviceMotion?, made = 0, all: [DeviceMotion] = []
        fusion.withLock { f in
            guard f != nil else { return }
            let take: (DeviceMotion) -> Void = { m in
                previous = newest
                newest = m
                made += 1
                if keepAll { all.append(m) }
            }
            switch batch {
            case .accelerometer(let samples): for s in samples { f!.add(accelerometer: s, emit: take) }
            case .gyroscope(let samples): for s in samples { f!.add(gyro: s, emit: take) }
            case .magnetometer(let samples): for s in samples { f!.add(magnetometer: s, emit: take) }
            }
        }
        guard let newest else { return }
        let job = state.withLock { s -> (@Sendable () -> Void, DispatchQueue?)? in
            guard var run = s.running, run.generation == generation else { return nil }
            defer { s.running = run }
            s.latest = newest
            s.statistics.samples += made
            if let previous, newest.timestamp > previous.timestamp { run.period = newest.timestamp - previous.timestamp }
            guard let handler = run.handler else { return nil }
            // Half an estimate's period early still counts as due: estimate times jitter, and an
            // estimate just short of the schedule would otherwise wait a whole refill.
            let tolerance = max(1e-6, run.period / 2)
            guard run.schedule.due(newest.timestamp, interval: s.interval, tolerance: tolerance) else {
                s.statistics.coalesced += made
                return nil
            }
            // Interval 0: every estimate of the refill (at most `mailbox.limit` pending);
            // else the newest.
            let batch = keepAll && !all.isEmpty ? all : [newest]
            s.statistics.coalesced += made - batch.count
            let mailbox = run.mailbox
            let (schedule, replaced) = mailbox.put(batch, appending: keepAll)
            s.statistics.coalesced += replaced  // the handler had not taken them yet: it gets these instead
            s.statistics.delivered += batch.count - replaced
            guard schedule else { return nil }
            return ({
                let due = mailbox.take()
                if !due.isEmpty { handler(due, nil) }
            }, run.onCaptureThread ? nil : run.handlerQueue)
        }
        guard let (work, queue) = job else { return }
        if let queue { queue.async(execute: work) } else { work() }
    }

    /// The sampling frequency the filter asks of its sensors for `interval`: a steady 100 Hz or
    /// more, faster when the handler wants estimates more often.
    static func rate(interval: Double) -> Double {
        max(100, interval > 0 ? 1 / interval : 100)
    }
}

extension MotionManager {
    // MARK: Device motion

    /// True when device motion can run: an accelerometer and a gyroscope are available.
    public var isDeviceMotionAvailable: Bool { isAccelerometerAvailable && isGyroAvailable }

    /// The reference frames device motion can use here: ``AttitudeReferenceFrame/xArbitraryZVertical``
    /// whenever device motion is available; with a magnetometer also
    /// ``AttitudeReferenceFrame/xArbitraryCorrectedZVertical`` and
    /// ``AttitudeReferenceFrame/xMagneticNorthZVertical``. True north needs the declination, which
    /// no IIO device knows, so it is never offered. (An instance method, unlike Core Motion's class
    /// method: the answer depends on the machine's sensors.)
    public func availableAttitudeReferenceFrames() -> AttitudeReferenceFrame {
        guard isDeviceMotionAvailable else { return [] }
        return isMagnetometerAvailable ? [.xArbitraryZVertical, .xArbitraryCorrectedZVertical, .xMagneticNorthZVertical]
            : .xArbitraryZVertical
    }

    /// The interval, in seconds, at which a device motion handler is called at most (the newest
    /// estimate each time), and at which the sensors are read while device motion runs; the filter
    /// itself uses every sample, at 100 Hz or more (more when the interval asks for more). 0: every
    /// estimate, all of them, handed over as each refill of the sensors is fused (refills of about
    /// 50 ms, or what the sensors' own updates ask for; a handler that falls more than 1,024
    /// estimates behind loses the oldest, counted as coalesced). Default 0.01. Takes effect at once, also while
    /// running.
    public var deviceMotionUpdateInterval: Double {
        get { motionEngine.state.withLock { $0.interval } }
        set {
            let v = newValue.isFinite ? min(max(newValue, 0), 3600) : 0.01
            let run = motionEngine.state.withLock { s -> DeviceMotionEngine.Running? in
                s.interval = v
                return s.running
            }
            guard let run else { return }
            let rate = DeviceMotionEngine.rate(interval: v)
            hub.state.withLock { s in
                for (kind, id) in run.consumers {
                    s.sensors[kind]?.consumers[id]?.interval = v
                    s.sensors[kind]?.consumers[id]?.timely = v > 0
                    s.sensors[kind]?.consumers[id]?.minimumRate = rate
                }
            }
            reconcile()
        }
    }

    /// The folder where device motion keeps each magnetometer's calibration between runs, one
    /// file per device (`magnetometer-NAME[-LABEL].txt`, named after the IIO device's name and
    /// label, and the context's URI when remote), so that a board starts calibrated; deleting a
    /// file forgets that calibration. Device motion loads the file when it starts (a saved
    /// calibration starts at most at ``MagneticFieldCalibrationAccuracy/medium``, and is replaced
    /// once the samples disagree with it) and saves it when it stops, and when the manager is
    /// released. Default: `$XDG_STATE_HOME/iiomotion`, else `~/.local/state/iiomotion`; nil (or a
    /// relative path) turns this off. Takes effect at the next start.
    ///
    /// A file that cannot be used (damaged, of an unknown version, saved with another mount
    /// matrix, unreadable) is reported once through ``noticeHandler`` and device motion learns
    /// afresh; a file that is not a calibration this library can read is never overwritten.
    public var magnetometerCalibrationFolder: String? {
        get { motionEngine.state.withLock { $0.calibrationFolder } }
        set { motionEngine.state.withLock { $0.calibrationFolder = newValue.flatMap { $0.hasPrefix("/") ? $0 : nil } } }
    }

    /// Estimates made, handed to the device motion handler and coalesced since device motion
    /// updates last started (``UpdateStatistics/samples`` counts estimates).
    public var deviceMotionUpdateStatistics: UpdateStatistics { motionEngine.state.withLock { $0.statistics } }

    /// The reference frame of the device motion updates running, or of the last ones started.
    public var attitudeReferenceFrame: AttitudeReferenceFrame { motionEngine.state.withLock { $0.frame } }

    /// True while device motion updates run.
    public var isDeviceMotionActive: Bool { motionEngine.state.withLock { $0.running != nil } }

    /// The newest device motion estimate, or nil before the first one (or when updates are not
    /// running). Cheap: a short lock and a copy.
    public var deviceMotion: DeviceMotion? { motionEngine.state.withLock { $0.latest } }

    /// Starts device motion updates without a handler: read ``deviceMotion``.
    /// - Parameter frame: the attitude reference frame (see ``availableAttitudeReferenceFrames()``).
    /// - Throws: ``MotionError`` when a sensor it needs is missing or cannot be started.
    public func startDeviceMotionUpdates(using frame: AttitudeReferenceFrame = .xArbitraryZVertical) throws(MotionError) {
        if case .failure(let f) = startDeviceMotion(frame, handler: nil, ended: nil, queue: hub.motionHandlerQueue) { throw f.error }
    }

    /// Starts device motion updates delivered to a handler, at most once per
    /// ``deviceMotionUpdateInterval``, with the newest estimate.
    /// - Parameters:
    ///   - frame: the attitude reference frame (see ``availableAttitudeReferenceFrames()``).
    ///   - queue: where the handler runs; the manager's private serial queue when nil.
    ///   - handler: gets `(motion, nil)` per update, or `(nil, error)` once when device motion
    ///     cannot start or a sensor it uses fails (device motion then stops).
    public func startDeviceMotionUpdates(using frame: AttitudeReferenceFrame = .xArbitraryZVertical,
                                         to queue: DispatchQueue? = nil,
                                         withHandler handler: @escaping @Sendable (DeviceMotion?, MotionError?) -> Void) {
        startDeviceMotionUpdates(using: frame, on: .queue(queue), withHandler: handler)
    }

    /// Starts device motion updates delivered to a handler where `delivery` says, at most once
    /// per ``deviceMotionUpdateInterval``, with the newest estimate. With
    /// ``HandlerDelivery/captureThread`` the handler runs right where the estimate is made, on
    /// the capture thread that read its last sample: no thread wake-up of its own, for handlers
    /// that return quickly. The `(nil, error)` call comes on the manager's private device motion
    /// queue.
    /// - Parameters:
    ///   - frame: the attitude reference frame (see ``availableAttitudeReferenceFrames()``).
    ///   - delivery: where the handler runs.
    ///   - handler: gets `(motion, nil)` per update, or `(nil, error)` once when device motion
    ///     cannot start or a sensor it uses fails (device motion then stops).
    public func startDeviceMotionUpdates(using frame: AttitudeReferenceFrame = .xArbitraryZVertical,
                                         on delivery: HandlerDelivery,
                                         withHandler handler: @escaping @Sendable (DeviceMotion?, MotionError?) -> Void) {
        startDeviceMotionBatches(using: frame, on: delivery) { batch, error in
            if let batch { for m in batch { handler(m, nil) } } else { handler(nil, error) }
        }
    }

    /// Starts device motion updates delivered in batches: with a ``deviceMotionUpdateInterval``
    /// of 0, every estimate, those made from one refill of the sensors together (what a logger
    /// wants: one call, not one per estimate); otherwise the newest estimate, at most once per
    /// interval, as a batch of one. A handler that falls more than 1,024 estimates behind loses
    /// the oldest (counted as coalesced in ``deviceMotionUpdateStatistics``).
    /// - Parameters:
    ///   - frame: the attitude reference frame (see ``availableAttitudeReferenceFrames()``).
    ///   - delivery: where the handler runs (see ``startDeviceMotionUpdates(using:on:withHandler:)``).
    ///   - handler: gets `(estimates, nil)`, oldest first, or `(nil, error)` once when device
    ///     motion cannot start or a sensor it uses fails (device motion then stops).
    public func startDeviceMotionBatches(using frame: AttitudeReferenceFrame = .xArbitraryZVertical,
                                         on delivery: HandlerDelivery = .queue(nil),
                                         withHandler handler: @escaping @Sendable ([DeviceMotion]?, MotionError?) -> Void) {
        var q = hub.motionHandlerQueue
        var onCaptureThread = false
        switch delivery {
        case .queue(let queue): q = queue ?? q
        case .captureThread: onCaptureThread = true
        }
        if case .failure(let f) = startDeviceMotion(frame, handler: handler, ended: nil, queue: q, onCaptureThread: onCaptureThread),
           !f.reported {
            q.async { handler(nil, f.error) }
        }
    }

    /// Device motion updates as an async sequence (newest estimate, at most once per interval).
    /// Iteration ends when device motion ends: by throwing the ``MotionError`` that stopped it,
    /// or plainly after ``stopDeviceMotionUpdates()``, ``stopAllUpdates()``, a new start of
    /// device motion (in any form), or the release of the manager. Cancelling the task or
    /// dropping the sequence stops device motion updates.
    /// - Parameter frame: the attitude reference frame.
    public func deviceMotionUpdates(using frame: AttitudeReferenceFrame = .xArbitraryZVertical)
        -> AsyncThrowingStream<DeviceMotion, any Error> {
        let (stream, continuation) = AsyncThrowingStream<DeviceMotion, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // This run's generation, known once it started: ending the sequence must not stop a run
        // started since by someone else.
        let link = StreamLink()
        continuation.onTermination = { [weak self] _ in
            if let generation = link.end() { self?.stopDeviceMotion(generation: generation) }
        }
        switch startDeviceMotion(frame, handler: { batch, e in
            if let batch { for m in batch { continuation.yield(m) } } else { continuation.finish(throwing: e) }
        }, ended: { continuation.finish() }, queue: hub.motionHandlerQueue) {
        case .failure(let f):
            continuation.finish(throwing: f.error)
        case .success(let generation):
            if link.attach(generation) { stopDeviceMotion(generation: generation) }
        }
        return stream
    }

    /// Stops device motion updates (of every form); the sensors' own updates go on.
    public func stopDeviceMotionUpdates() {
        stopDeviceMotion(generation: nil)
    }

    // MARK: Internals

    /// The sensors device motion uses for `frame`, or why it cannot run.
    private func deviceMotionSensors(_ frame: AttitudeReferenceFrame) -> Result<[SensorKind], MotionError> {
        for kind in [SensorKind.accelerometer, .gyroscope] {
            if case .failure(let e) = plan(kind) { return .failure(e) }
        }
        let hasMagnetometer = (try? plan(.magnetometer).get()) != nil
        if frame.contains(.xTrueNorthZVertical) {
            return .failure(MotionError(code: .notAvailable, detail:
                "Device motion cannot use xTrueNorthZVertical: true north needs the magnetic declination, which no IIO device provides; use xMagneticNorthZVertical"))
        }
        if !frame.isDisjoint(with: [.xArbitraryCorrectedZVertical, .xMagneticNorthZVertical]), !hasMagnetometer {
            return .failure(MotionError(code: .notAvailable, detail:
                "Device motion in \(frame == .xMagneticNorthZVertical ? "xMagneticNorthZVertical" : "xArbitraryCorrectedZVertical") needs a magnetometer, and this machine has none; use xArbitraryZVertical"))
        }
        return .success(hasMagnetometer ? [.accelerometer, .gyroscope, .magnetometer] : [.accelerometer, .gyroscope])
    }

    /// Registers device motion's consumers on every sensor it uses, then starts the captures in one
    /// reconfiguration. Returns the run's generation, or the error that kept it from starting.
    private func startDeviceMotion(_ frame: AttitudeReferenceFrame,
                                   handler: (@Sendable ([DeviceMotion]?, MotionError?) -> Void)?,
                                   ended: (@Sendable () -> Void)?,
                                   queue: DispatchQueue, onCaptureThread: Bool = false) -> Result<Int, DeviceMotionStartFailure> {
        let kinds: [SensorKind]
        switch deviceMotionSensors(frame) {
        case .failure(let e): return .failure(DeviceMotionStartFailure(error: e, reported: false))
        case .success(let k): kinds = k
        }
        stopDeviceMotion(generation: nil)
        let engine = motionEngine
        let (generation, interval) = engine.state.withLock { s -> (Int, Double) in
            s.generation += 1
            s.frame = frame
            return (s.generation, s.interval)
        }
        var fusion = DeviceMotionFusion(referenceFrame: frame, units: units)
        let file = kinds.contains(.magnetometer) ? calibrationFile() : nil
        if let file {
            switch MagnetometerCalibrationStore.load(path: file.path, mount: file.mount) {
            case .calibration(let c): fusion.magnetometerCalibration = c
            case .none: break
            case .unusable(let why): notice(.magnetometer, "The magnetometer calibration in \(file.path) is not used: \(why). Device motion learns the calibration afresh\(MagnetometerCalibrationStore.isReplaceable(path: file.path) ? " and replaces the file when it stops" : "; the file is kept as it is (delete it to let the new calibration be saved)").")
            }
        }
        engine.state.withLock { $0.calibrationFile = file }
        engine.fusion.withLock { $0 = fusion }
        let rate = DeviceMotionEngine.rate(interval: interval)
        var consumers: [SensorKind: Int] = [:]
        for kind in kinds {
            var consumer = StreamHub.Consumer(delivery: .batched(make: { batch in
                let sensorBatch: DeviceMotionEngine.SensorBatch = switch kind {
                case .accelerometer: .accelerometer(batch.accelerometer)
                case .gyroscope: .gyroscope(batch.gyroscope)
                case .magnetometer: .magnetometer(batch.magnetometer)
                }
                return { engine.fuse(sensorBatch, generation: generation) }
            }, fail: { [weak self] error in
                self?.deviceMotionFailed(error, generation: generation)
            }, queue: nil), owner: .deviceMotion, minimumRate: rate)  // fused on the capture thread
            // The sensors are read at device motion's interval, so the newest estimate is fresh;
            // at 0 (every estimate), in refills of at least 50 ms, as batched consumers are.
            consumer.interval = interval
            consumer.timely = interval > 0
            guard let id = hub.add(kind, consumer) else { break }
            consumers[kind] = id
        }
        engine.state.withLock { s in
            s.running = DeviceMotionEngine.Running(generation: generation, consumers: consumers, handler: handler,
                                                   handlerQueue: queue, onCaptureThread: onCaptureThread, ended: ended)
            s.latest = nil
            s.statistics = UpdateStatistics()
        }
        let failures = reconcile()
        if let failure = kinds.lazy.compactMap({ failures[$0] }).first {
            // The sensor's failure may have reached the handler already (deviceMotionFailed
            // takes the handler when it reports): then it is not reported twice.
            let reported = handler != nil && engine.state.withLock { s -> Bool in
                guard s.running?.generation == generation else { return false }
                defer { s.running?.handler = nil }  // taken here: deviceMotionFailed no longer reports
                return s.running?.handler == nil
            }
            stopDeviceMotion(generation: generation, quietly: true)
            return .failure(DeviceMotionStartFailure(error: failure, reported: reported))
        }
        return .success(generation)
    }

    /// Why device motion did not start, and whether its handler has already heard it.
    struct DeviceMotionStartFailure: Error {
        var error: MotionError
        var reported: Bool
    }

    /// A sensor device motion uses failed: the handler hears it once, and device motion stops.
    private func deviceMotionFailed(_ error: MotionError, generation: Int) {
        let target = motionEngine.state.withLock { s -> (@Sendable ([DeviceMotion]?, MotionError?) -> Void, DispatchQueue)? in
            guard let run = s.running, run.generation == generation, let h = run.handler else { return nil }
            s.running?.handler = nil
            s.running?.ended = nil
            return (h, run.handlerQueue)
        }
        if let (handler, queue) = target { queue.async { handler(nil, error) } }
        // Not on the capture thread that reported it: stopping joins capture threads.
        DispatchQueue.global().async { [weak self] in self?.stopDeviceMotion(generation: generation) }
    }

    /// Stops the device motion run `generation` (nil: whichever runs): its consumers go (the
    /// captures stop unless the sensors' own updates use them), the batches already read are fused,
    /// and the filter is dropped. An async sequence of the run ends, unless `quietly`.
    func stopDeviceMotion(generation: Int?, quietly: Bool = false) {
        let engine = motionEngine
        let run = engine.state.withLock { s -> DeviceMotionEngine.Running? in
            guard let run = s.running, generation == nil || run.generation == generation else { return nil }
            s.running = nil
            return run
        }
        guard let run else { return }
        stop(Array(run.consumers.keys), owner: .deviceMotion)
        saveCalibration(engine.endFusion())
        engine.state.withLock { s in if s.running == nil { s.latest = nil } }
        if let ended = run.ended, !quietly { run.handlerQueue.async(execute: ended) }
    }

    /// The manager is released: device motion ends (its sequence too); the hub removes its consumers.
    func endDeviceMotionOnRelease() {
        let run = motionEngine.state.withLock { s -> DeviceMotionEngine.Running? in
            defer { s.running = nil; s.latest = nil }
            return s.running
        }
        let calibration = motionEngine.endFusion()
        if run != nil { saveCalibration(calibration) }
        if let run, let ended = run.ended { run.handlerQueue.async(execute: ended) }
    }

    /// The calibration file for the magnetometer device motion uses, or nil when calibrations
    /// are not kept.
    private func calibrationFile() -> (path: String, device: String, mount: String)? {
        guard let folder = motionEngine.state.withLock({ $0.calibrationFolder }), let info = sensor(.magnetometer) else { return nil }
        let device = MagnetometerCalibrationStore.identity(uri: uri, name: info.deviceName, label: info.label, location: info.location)
        return (MagnetometerCalibrationStore.path(folder: folder, device: device), device, info.mountMatrix.description)
    }

    /// Saves the calibration of the device motion run that ended (what it learned, or the one it
    /// loaded); a failure is reported once through ``noticeHandler``.
    private func saveCalibration(_ calibration: MagnetometerCalibrator?) {
        let file = motionEngine.state.withLock { s -> (path: String, device: String, mount: String)? in
            defer { s.calibrationFile = nil }
            return s.calibrationFile
        }
        guard let file, let calibration else { return }
        switch MagnetometerCalibrationStore.save(calibration, path: file.path, device: file.device, mount: file.mount) {
        case .saved, .nothingToSave, .kept: break  // a kept file was reported when it was loaded
        case .failed(let why): notice(.magnetometer, "The magnetometer calibration could not be saved: \(why).")
        }
    }

    /// Hands a notice about a sensor to ``noticeHandler``, once per distinct message.
    private func notice(_ kind: SensorKind, _ message: String) {
        let device = sensor(kind)?.deviceDescription ?? "?"
        hub.announce(MotionNotice(sensors: [kind], device: device, message: message), once: message)
    }
}
