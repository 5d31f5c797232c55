public import Dispatch
import Locking

/// Device motion's running state: the fusion filter, fed with every accelerometer, gyroscope and
/// magnetometer sample, and what it last produced.
///
/// Batches are fused on the capture threads themselves, as they are read (a few microseconds per
/// refill): no queue to wake per refill. Sensors on two devices (LSM6DSx) have two capture threads,
/// which take turns on ``fusion``'s lock; the filter's aligner orders their samples by timestamp.
final class DeviceMotionEngine: Sendable {
    let state = Locked(EngineState())
    /// The filter: locked while a batch is fused, and while it is replaced or dropped.
    let fusion = Locked<DeviceMotionFusion?>(nil)

    struct EngineState: Sendable {
        var interval: Double = 0.01
        var frame: AttitudeReferenceFrame = .xArbitraryZVertical
        var running: Running?
        var latest: DeviceMotion?
        var generation = 0
    }

    /// One run of device motion updates.
    struct Running: Sendable {
        var generation: Int
        var consumers: [SensorKind: Int]
        var handler: (@Sendable (DeviceMotion?, MotionError?) -> Void)?
        var handlerQueue: DispatchQueue
        var nextDue: Double = -.infinity
        var delivered = 0
    }

    /// One batch of one sensor, as it reaches the filter.
    enum Feed: Sendable {
        case accelerometer([AccelerometerData])
        case gyroscope([GyroData])
        case magnetometer([MagnetometerData])
    }

    /// Fuses a batch (on a capture thread): updates ``EngineState/latest`` and calls the handler with the
    /// newest estimate when one is due (at most once per interval of sample time).
    func feed(_ feed: Feed, generation: Int) {
        // A batch read before a restart belongs to the previous run's filter, which is gone.
        guard state.withLock({ $0.running?.generation == generation }) else { return }
        var produced: [DeviceMotion] = []
        fusion.withLock { f in
            guard f != nil else { return }
            switch feed {
            case .accelerometer(let samples): for s in samples { f!.add(accelerometer: s) { produced.append($0) } }
            case .gyroscope(let samples): for s in samples { f!.add(gyro: s) { produced.append($0) } }
            case .magnetometer(let samples): for s in samples { f!.add(magnetometer: s) }
            }
        }
        guard let newest = produced.last else { return }
        let job = state.withLock { s -> (@Sendable () -> Void, DispatchQueue)? in
            guard var run = s.running, run.generation == generation else { return nil }
            s.latest = newest
            defer { s.running = run }
            guard let handler = run.handler else { return nil }
            // One estimate per interval of sample time, on a schedule (as the sensors' handlers).
            var due: [DeviceMotion] = []
            for m in produced where m.timestamp >= run.nextDue - 1e-6 {
                run.nextDue = m.timestamp - run.nextDue > s.interval ? m.timestamp + s.interval : run.nextDue + s.interval
                due.append(m)
            }
            guard !due.isEmpty else { return nil }
            run.delivered += due.count
            let batch = due
            return ({ for m in batch { handler(m, nil) } }, run.handlerQueue)
        }
        if let (work, queue) = job { queue.async(execute: work) }
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
    /// estimate each time); the filter itself uses every sample, at 100 Hz or more. Default 0.01.
    /// Takes effect at once.
    public var deviceMotionUpdateInterval: Double {
        get { motionEngine.state.withLock { $0.interval } }
        set {
            let v = newValue.isFinite ? min(max(newValue, 0), 3600) : 0.01
            motionEngine.state.withLock { $0.interval = v }
        }
    }

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
        if case .failure(let e) = startDeviceMotion(frame, handler: nil, queue: hub.motionHandlerQueue) { throw e }
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
        let q = queue ?? hub.motionHandlerQueue
        if case .failure(let e) = startDeviceMotion(frame, handler: handler, queue: q) { q.async { handler(nil, e) } }
    }

    /// Device motion updates as an async sequence (newest estimate, at most once per interval).
    /// Iteration ends by throwing the ``MotionError`` that stopped device motion; cancelling the
    /// task or dropping the stream stops device motion updates.
    /// - Parameter frame: the attitude reference frame.
    public func deviceMotionUpdates(using frame: AttitudeReferenceFrame = .xArbitraryZVertical)
        -> AsyncThrowingStream<DeviceMotion, any Error> {
        let (stream, continuation) = AsyncThrowingStream<DeviceMotion, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        switch startDeviceMotion(frame, handler: { m, e in
            if let m { continuation.yield(m) } else { continuation.finish(throwing: e) }
        }, queue: hub.motionHandlerQueue) {
        case .failure(let error):
            continuation.finish(throwing: error)
        case .success(let generation):
            // This run's generation, returned by the start: ending the stream must not stop a
            // run started since by someone else.
            continuation.onTermination = { [weak self] _ in self?.stopDeviceMotion(generation: generation) }
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
                                   handler: (@Sendable (DeviceMotion?, MotionError?) -> Void)?,
                                   queue: DispatchQueue) -> Result<Int, MotionError> {
        let kinds: [SensorKind]
        switch deviceMotionSensors(frame) {
        case .failure(let e): return .failure(e)
        case .success(let k): kinds = k
        }
        stopDeviceMotion(generation: nil)
        let engine = motionEngine
        let (generation, interval) = engine.state.withLock { s -> (Int, Double) in
            s.generation += 1
            s.frame = frame
            return (s.generation, s.interval)
        }
        let fusion = DeviceMotionFusion(referenceFrame: frame, units: units)
        engine.fusion.withLock { $0 = fusion }
        // The filter wants a steady 100 Hz or more, whatever the handler's interval.
        let rate = max(100, interval > 0 ? 1 / interval : 100)
        var consumers: [SensorKind: Int] = [:]
        for kind in kinds {
            let delivery: StreamHub.Consumer.Delivery = .batched(make: { batch in
                let feed: DeviceMotionEngine.Feed = switch kind {
                case .accelerometer: .accelerometer(batch.accelerometer)
                case .gyroscope: .gyroscope(batch.gyroscope)
                case .magnetometer: .magnetometer(batch.magnetometer)
                }
                return { engine.feed(feed, generation: generation) }
            }, fail: { [weak self] error in
                self?.deviceMotionFailed(error, generation: generation)
            }, queue: nil)  // fused on the capture thread
            consumers[kind] = hub.add(kind, delivery, owner: .deviceMotion, minimumRate: rate)
        }
        engine.state.withLock { s in
            s.running = DeviceMotionEngine.Running(generation: generation, consumers: consumers, handler: handler, handlerQueue: queue)
            s.latest = nil
        }
        let plans = activePlans()
        let failures = hub.onControl { [hub, uri] in hub.reconcile(plans: plans, uri: uri) } ?? [:]
        if let failure = kinds.lazy.compactMap({ failures[$0] }).first {
            stopDeviceMotion(generation: generation)
            return .failure(failure)
        }
        return .success(generation)
    }

    /// A sensor device motion uses failed: the handler hears it once, and device motion stops.
    private func deviceMotionFailed(_ error: MotionError, generation: Int) {
        let target = motionEngine.state.withLock { s -> (@Sendable (DeviceMotion?, MotionError?) -> Void, DispatchQueue)? in
            guard let run = s.running, run.generation == generation, let h = run.handler else { return nil }
            s.running?.handler = nil
            return (h, run.handlerQueue)
        }
        if let (handler, queue) = target { queue.async { handler(nil, error) } }
        // Not on the capture thread that reported it: stopping joins capture threads.
        DispatchQueue.global().async { [weak self] in self?.stopDeviceMotion(generation: generation) }
    }

    /// Stops the device motion run `generation` (nil: whichever runs): its consumers go (the
    /// captures stop unless the sensors' own updates use them), the batches already read are fused,
    /// and the filter is dropped.
    func stopDeviceMotion(generation: Int?) {
        let engine = motionEngine
        let run = engine.state.withLock { s -> DeviceMotionEngine.Running? in
            guard let run = s.running, generation == nil || run.generation == generation else { return nil }
            s.running = nil
            return run
        }
        guard let run else { return }
        stop(Array(run.consumers.keys), owner: .deviceMotion)
        engine.fusion.withLock { $0 = nil }
        engine.state.withLock { s in if s.running == nil { s.latest = nil } }
    }
}
