public import Dispatch

/// How a sensor is being read.
public enum SensorMode: String, Sendable, Hashable, CustomStringConvertible {
    /// From the kernel's buffer (`/dev/iio:deviceN`): every sample, with the kernel's timestamps.
    case buffered
    /// By reading the `raw` files on a timer: needs no permissions beyond read access, but
    /// costs a system call per axis and may miss samples between reads.
    case polled

    /// Which mode to use.
    public enum Preference: String, Sendable, Hashable, CustomStringConvertible {
        /// Buffered where possible, else polled (announced once, with the reason).
        case auto
        /// Buffered only: a device that cannot stream is an error.
        case buffered
        /// Polled only.
        case polled

        /// The raw value.
        public var description: String { rawValue }
    }

    /// The raw value.
    public var description: String { rawValue }
}

/// Counts of one sensor's updates since it started.
public struct UpdateStatistics: Sendable, Hashable {
    /// Samples the sensor produced and the manager received.
    public var samples = 0
    /// Samples handed to push-mode handlers.
    public var delivered = 0
    /// Samples a push-mode handler did not get because a newer one replaced them within an
    /// update interval (batched handlers and async batch streams get every sample), or because
    /// the handler had not yet returned from the previous one (it then gets the newest).
    public var coalesced = 0
    /// Samples a batched handler did not get because it fell more than
    /// ``MotionManager/maximumBatchBacklog`` samples behind (its queue blocked): new batches are
    /// dropped, whole, until it catches up, so that a stuck handler cannot exhaust memory.
    public var dropped = 0

    /// Zero counts.
    public init() {}
}

/// Where a handler runs: push handlers (``MotionManager/startAccelerometerUpdates(on:withHandler:)``),
/// batched handlers (``MotionManager/startAccelerometerBatches(on:withHandler:)``), the
/// gyroscope's and magnetometer's counterparts, and device motion handlers
/// (``MotionManager/startDeviceMotionUpdates(using:on:withHandler:)``).
public enum HandlerDelivery: Sendable {
    /// On `queue`, or the sensor's private serial queue (device motion's for its handlers) when
    /// nil. The capture thread hands each update or batch over and goes straight back to the
    /// kernel, so a slow handler holds up nothing; a batched one loses nothing until it is
    /// ``MotionManager/maximumBatchBacklog`` samples behind. Each update costs a thread wake-up
    /// and moves the samples from one CPU's cache to another's.
    case queue(DispatchQueue?)
    /// On the device's capture thread itself, right after each refill and before the next: no
    /// wake-up, no queue, the samples still in the cache that decoded them. For recorders,
    /// loggers and displays that copy the samples away quickly; the cheapest way to get every
    /// sample, and the way to wake no more often than the device is read.
    ///
    /// While the handler runs the device is not read: the kernel holds about four batches, so a
    /// handler that takes longer than about three update intervals makes the kernel drop
    /// samples, which nothing reports. Do not block here (no disk writes that may stall, no
    /// waiting on locks a slow thread holds). Handlers of sensors on one device run one after
    /// the other on the same thread, never concurrently; sensors on different devices have
    /// different capture threads (device motion's handler runs on whichever of its sensors'
    /// capture threads made the estimate). SIGPIPE is blocked on capture threads (libiio's
    /// network backend needs that), so a write to a closed pipe fails with `EPIPE` here instead
    /// of ending the process. Errors still arrive on the sensor's (or device motion's) private
    /// queue, after the last update. Starting or stopping updates from such a handler takes
    /// effect just after it returns.
    case captureThread
}

// MARK: - The Core Motion surface

extension MotionManager {
    // MARK: Accelerometer

    /// The interval, in seconds, at which push-mode handlers get accelerometer samples: a cap,
    /// as in Core Motion (a handler gets at most one sample per interval, the newest). `0` delivers
    /// every sample as soon as it is made: one at a time for push and pull (lowest latency), or
    /// in batches of about 50 ms when a batched consumer wants every sample (the kernel buffer then
    /// has room for 200 ms of delay). Values shorter than the fastest rate the device offers are
    /// raised to it, longer than an hour lowered to it.
    /// Takes effect at once (running updates restart).
    public var accelerometerUpdateInterval: Double {
        get { hub.sensor(.accelerometer).interval }
        set { setInterval(newValue, for: .accelerometer) }
    }

    /// True while accelerometer updates run.
    public var isAccelerometerActive: Bool { hub.isActive(.accelerometer) }

    /// The newest accelerometer sample, or nil before the first one (or when updates are not
    /// running). Cheap enough for every frame of a game loop: no allocation, and only a short
    /// lock that the capture thread never holds while it waits for the kernel.
    public var accelerometerData: AccelerometerData? { latest(.accelerometer) }

    /// Starts accelerometer updates without a handler: read ``accelerometerData`` when you want
    /// the newest sample.
    /// - Throws: ``MotionError`` when there is no accelerometer or it cannot be started.
    public func startAccelerometerUpdates() throws(MotionError) {
        try startPull(.accelerometer)
    }

    /// Starts accelerometer updates delivered to a handler, at most once per
    /// ``accelerometerUpdateInterval``, with the newest sample.
    /// - Parameters:
    ///   - queue: where the handler runs; this sensor's private serial queue when nil.
    ///   - handler: gets `(data, nil)` per update, or `(nil, error)` once when the sensor fails
    ///     (it is then stopped; other sensors go on). It replaces the previous push handler or
    ///     ``accelerometerUpdates()`` sequence.
    public func startAccelerometerUpdates(to queue: DispatchQueue? = nil,
                                          withHandler handler: @escaping @Sendable (AccelerometerData?, MotionError?) -> Void) {
        startPush(.accelerometer, .queue(queue), handler)
    }

    /// Starts accelerometer updates delivered to a handler, at most once per interval, with the newest
    /// sample, where `delivery` says: ``HandlerDelivery/captureThread`` costs no thread
    /// wake-up of its own, for handlers that return quickly.
    public func startAccelerometerUpdates(on delivery: HandlerDelivery,
                                          withHandler handler: @escaping @Sendable (AccelerometerData?, MotionError?) -> Void) {
        startPush(.accelerometer, delivery, handler)
    }

    /// Starts accelerometer updates delivered in batches that hold every sample the sensor made,
    /// none coalesced: what loggers and recorders use. A batch arrives about once per
    /// ``accelerometerUpdateInterval``.
    /// - Parameters:
    ///   - queue: where the handler runs; this sensor's private serial queue when nil.
    ///   - handler: gets `(samples, nil)` per batch, or `(nil, error)` once when the sensor fails.
    public func startAccelerometerBatches(to queue: DispatchQueue? = nil,
                                          withHandler handler: @escaping @Sendable ([AccelerometerData]?, MotionError?) -> Void) {
        startBatches(.accelerometer, .queue(queue), handler)
    }

    /// Starts accelerometer updates in batches holding every sample, delivered as `delivery`
    /// says: ``HandlerDelivery/captureThread`` is the cheapest (no thread hop), for handlers that
    /// return quickly.
    public func startAccelerometerBatches(on delivery: HandlerDelivery,
                                          withHandler handler: @escaping @Sendable ([AccelerometerData]?, MotionError?) -> Void) {
        startBatches(.accelerometer, delivery, handler)
    }

    /// Accelerometer updates as an async sequence (newest sample, at most once per interval).
    ///
    /// It replaces the accelerometer's push handler or previous sequence (which then ends), as a
    /// new handler does. Iteration ends when these updates end: by throwing the ``MotionError``
    /// that stopped the sensor, or plainly after ``stopAccelerometerUpdates()``,
    /// ``stopAllUpdates()``, a new push handler or sequence, or the release of the manager.
    /// Cancelling the task or dropping the sequence stops these updates.
    public func accelerometerUpdates() -> AsyncThrowingStream<AccelerometerData, any Error> {
        updates(.accelerometer)
    }

    /// Every accelerometer sample, in batches, as an async sequence.
    ///
    /// It replaces the accelerometer's batched handler or previous batch sequence (which then
    /// ends). A loop that falls more than ``maximumBatchBacklog`` samples behind loses new batches,
    /// whole, counted in ``UpdateStatistics/dropped``. Iteration ends as that of
    /// ``accelerometerUpdates()`` does.
    public func accelerometerBatches() -> AsyncThrowingStream<[AccelerometerData], any Error> {
        batches(.accelerometer)
    }

    /// Stops every kind of accelerometer update (pull, push, batched, async).
    public func stopAccelerometerUpdates() {
        stop(.accelerometer)
    }

    // MARK: Gyroscope

    /// The interval, in seconds, at which push-mode handlers get gyroscope samples (see
    /// ``accelerometerUpdateInterval``).
    public var gyroUpdateInterval: Double {
        get { hub.sensor(.gyroscope).interval }
        set { setInterval(newValue, for: .gyroscope) }
    }

    /// True while gyroscope updates run.
    public var isGyroActive: Bool { hub.isActive(.gyroscope) }

    /// The newest gyroscope sample, or nil (see ``accelerometerData``).
    public var gyroData: GyroData? { latest(.gyroscope) }

    /// Starts gyroscope updates without a handler: read ``gyroData``.
    /// - Throws: ``MotionError`` when there is no gyroscope or it cannot be started.
    public func startGyroUpdates() throws(MotionError) {
        try startPull(.gyroscope)
    }

    /// Starts gyroscope updates delivered to a handler, at most once per ``gyroUpdateInterval``.
    /// - Parameters:
    ///   - queue: where the handler runs; this sensor's private serial queue when nil.
    ///   - handler: gets `(data, nil)` per update, or `(nil, error)` once when the sensor fails.
    public func startGyroUpdates(to queue: DispatchQueue? = nil,
                                 withHandler handler: @escaping @Sendable (GyroData?, MotionError?) -> Void) {
        startPush(.gyroscope, .queue(queue), handler)
    }

    /// Starts gyroscope updates delivered to a handler where `delivery` says (see ``startAccelerometerUpdates(on:withHandler:)``).
    public func startGyroUpdates(on delivery: HandlerDelivery,
                                 withHandler handler: @escaping @Sendable (GyroData?, MotionError?) -> Void) {
        startPush(.gyroscope, delivery, handler)
    }

    /// Starts gyroscope updates in batches holding every sample.
    /// - Parameters:
    ///   - queue: where the handler runs; this sensor's private serial queue when nil.
    ///   - handler: gets `(samples, nil)` per batch, or `(nil, error)` once when the sensor fails.
    public func startGyroBatches(to queue: DispatchQueue? = nil,
                                 withHandler handler: @escaping @Sendable ([GyroData]?, MotionError?) -> Void) {
        startBatches(.gyroscope, .queue(queue), handler)
    }

    /// Starts gyroscope updates in batches holding every sample, delivered as `delivery` says
    /// (see ``startAccelerometerBatches(on:withHandler:)``).
    public func startGyroBatches(on delivery: HandlerDelivery,
                                 withHandler handler: @escaping @Sendable ([GyroData]?, MotionError?) -> Void) {
        startBatches(.gyroscope, delivery, handler)
    }

    /// Gyroscope updates as an async sequence (see ``accelerometerUpdates()``).
    public func gyroUpdates() -> AsyncThrowingStream<GyroData, any Error> {
        updates(.gyroscope)
    }

    /// Every gyroscope sample, in batches, as an async sequence (see ``accelerometerBatches()``).
    public func gyroBatches() -> AsyncThrowingStream<[GyroData], any Error> {
        batches(.gyroscope)
    }

    /// Stops every kind of gyroscope update.
    public func stopGyroUpdates() {
        stop(.gyroscope)
    }

    // MARK: Magnetometer

    /// The interval, in seconds, at which push-mode handlers get magnetometer samples (see
    /// ``accelerometerUpdateInterval``).
    public var magnetometerUpdateInterval: Double {
        get { hub.sensor(.magnetometer).interval }
        set { setInterval(newValue, for: .magnetometer) }
    }

    /// True while magnetometer updates run.
    public var isMagnetometerActive: Bool { hub.isActive(.magnetometer) }

    /// The newest magnetometer sample (µT, uncalibrated: hard-iron offsets included), or nil
    /// (see ``accelerometerData``).
    public var magnetometerData: MagnetometerData? { latest(.magnetometer) }

    /// Starts magnetometer updates without a handler: read ``magnetometerData``.
    /// - Throws: ``MotionError`` when there is no magnetometer or it cannot be started.
    public func startMagnetometerUpdates() throws(MotionError) {
        try startPull(.magnetometer)
    }

    /// Starts magnetometer updates delivered to a handler, at most once per ``magnetometerUpdateInterval``.
    /// - Parameters:
    ///   - queue: where the handler runs; this sensor's private serial queue when nil.
    ///   - handler: gets `(data, nil)` per update, or `(nil, error)` once when the sensor fails.
    public func startMagnetometerUpdates(to queue: DispatchQueue? = nil,
                                         withHandler handler: @escaping @Sendable (MagnetometerData?, MotionError?) -> Void) {
        startPush(.magnetometer, .queue(queue), handler)
    }

    /// Starts magnetometer updates delivered to a handler where `delivery` says (see ``startAccelerometerUpdates(on:withHandler:)``).
    public func startMagnetometerUpdates(on delivery: HandlerDelivery,
                                         withHandler handler: @escaping @Sendable (MagnetometerData?, MotionError?) -> Void) {
        startPush(.magnetometer, delivery, handler)
    }

    /// Starts magnetometer updates in batches holding every sample.
    /// - Parameters:
    ///   - queue: where the handler runs; this sensor's private serial queue when nil.
    ///   - handler: gets `(samples, nil)` per batch, or `(nil, error)` once when the sensor fails.
    public func startMagnetometerBatches(to queue: DispatchQueue? = nil,
                                         withHandler handler: @escaping @Sendable ([MagnetometerData]?, MotionError?) -> Void) {
        startBatches(.magnetometer, .queue(queue), handler)
    }

    /// Starts magnetometer updates in batches holding every sample, delivered as `delivery` says
    /// (see ``startAccelerometerBatches(on:withHandler:)``).
    public func startMagnetometerBatches(on delivery: HandlerDelivery,
                                         withHandler handler: @escaping @Sendable ([MagnetometerData]?, MotionError?) -> Void) {
        startBatches(.magnetometer, delivery, handler)
    }

    /// Magnetometer updates as an async sequence (see ``accelerometerUpdates()``).
    public func magnetometerUpdates() -> AsyncThrowingStream<MagnetometerData, any Error> {
        updates(.magnetometer)
    }

    /// Every magnetometer sample, in batches, as an async sequence (see ``accelerometerBatches()``).
    public func magnetometerBatches() -> AsyncThrowingStream<[MagnetometerData], any Error> {
        batches(.magnetometer)
    }

    /// Stops every kind of magnetometer update.
    public func stopMagnetometerUpdates() {
        stop(.magnetometer)
    }

    // MARK: Configuration and state

    /// Asks for a sampling frequency (Hz) for a sensor, instead of the lowest one that serves its
    /// update interval; nil goes back to that rule. The device may round it to what it supports:
    /// ``samplingFrequency(of:)`` says what is in force.
    /// - Parameters:
    ///   - hz: the frequency, or nil.
    ///   - kind: the sensor.
    public func requestSamplingFrequency(_ hz: Double?, for kind: SensorKind) {
        hub.state.withLock { $0.sensors[kind, default: .init()].requestedRate = hz.map { max($0, 0) } }
        restartIfActive(kind)
    }

    /// How long a buffered sensor may stay silent before it is reported as failed
    /// (``MotionError/Code/timedOut``), in seconds; nil (the default) sizes it from the buffer:
    /// at least 1 s and well over the time one buffer takes to fill.
    public var timeout: Double? {
        get { hub.state.withLock { $0.timeout } }
        set { hub.state.withLock { $0.timeout = newValue.map { max($0, 0.001) } } }
    }

    /// How many samples a batched handler on a queue, or the loop of an async batch sequence,
    /// may fall behind before new batches are dropped for it, whole, and counted in
    /// ``UpdateStatistics/dropped``: the bound on the memory a blocked handler or a slow loop can
    /// hold. Default 262,144 samples (164 s at 1.6 kHz, about 12 MiB of samples). Applies at once.
    public var maximumBatchBacklog: Int {
        get { hub.state.withLock { $0.batchBacklogLimit } }
        set { hub.state.withLock { $0.batchBacklogLimit = max(newValue, 1) } }
    }

    /// Buffered, polled, or buffered with a polled fallback (the default). Applies to updates
    /// started afterwards.
    public var preferredMode: SensorMode.Preference {
        get { hub.state.withLock { $0.preference } }
        set { hub.state.withLock { $0.preference = newValue } }
    }

    /// Called once per distinct notice, on the manager's private notice queue (a serial queue,
    /// never a capture thread): when a sensor is polled because its buffer cannot be used, with
    /// the reason, and when a saved magnetometer calibration cannot be used or saved
    /// (``magnetometerCalibrationFolder``). The library prints nothing itself. Any method of the manager may be
    /// called from it.
    public var noticeHandler: (@Sendable (MotionNotice) -> Void)? {
        get { hub.state.withLock { $0.noticeHandler } }
        set { hub.state.withLock { $0.noticeHandler = newValue } }
    }

    /// How a running sensor is read, or nil when it is not running.
    /// - Parameter kind: the sensor.
    /// - Returns: buffered or polled.
    public func mode(of kind: SensorKind) -> SensorMode? {
        hub.sensor(kind).status?.mode
    }

    /// The sampling frequency in force for a running sensor, as read back from the device.
    /// - Parameter kind: the sensor.
    /// - Returns: Hz, or nil when unknown or not running.
    public func samplingFrequency(of kind: SensorKind) -> Double? {
        hub.sensor(kind).status?.samplingFrequency
    }

    /// Why a running sensor is polled although buffering was allowed, or nil.
    /// - Parameter kind: the sensor.
    /// - Returns: the reason, a sentence.
    public func fallbackReason(of kind: SensorKind) -> String? {
        hub.sensor(kind).status?.fallbackReason
    }

    /// The failure that keeps a running sensor from its buffer, when it is polled although
    /// buffering was allowed, or nil: the same failure ``fallbackReason(of:)`` describes, with
    /// its code, device, file and errno (`.permissionDenied`: the buffer's files are not this
    /// user's; `.deviceBusy`: another program streams the device).
    /// - Parameter kind: the sensor.
    /// - Returns: the failure.
    public func fallbackError(of kind: SensorKind) -> MotionError? {
        hub.sensor(kind).status?.fallbackCause
    }

    /// Samples received, delivered and coalesced since the sensor's updates started.
    /// - Parameter kind: the sensor.
    /// - Returns: the counts.
    public func updateStatistics(of kind: SensorKind) -> UpdateStatistics {
        hub.sensor(kind).statistics
    }

    /// Stops every sensor's updates and device motion, and joins their capture threads.
    public func stopAllUpdates() {
        stopDeviceMotionUpdates()
        stop(SensorKind.allCases, owner: .user)
    }

    // MARK: Internals

    private func latest<T: PublicSample>(_ kind: SensorKind) -> T? {
        let s = hub.latest.withLock { $0.samples[kind] }
        return s.map { T($0) }
    }

    private func setInterval(_ value: Double, for kind: SensorKind) {
        // Between every sample (0) and an hour.
        var v = value.isFinite ? min(max(value, 0), 3600) : 0.1
        if v > 0, let fastest = sensor(kind)?.availableSamplingFrequencies?.maximum, fastest > 0 {
            v = max(v, 1 / fastest)
        }
        let changed = hub.state.withLock { s -> Bool in
            let old = s.sensors[kind]?.interval
            s.sensors[kind, default: .init()].interval = v
            return old != v
        }
        if changed { restartIfActive(kind) }
    }

    func restartIfActive(_ kind: SensorKind) {
        guard hub.isActive(kind, owner: nil) else { return }
        reconcile()
    }

    /// Brings the captures in line with the consumers: on the control queue, waiting for it, or
    /// (from a capture thread) queued there.
    /// - Returns: the sensors that could not start, and why; empty when queued.
    @discardableResult
    func reconcile() -> [SensorKind: MotionError] {
        let plans = activePlans()
        return hub.onControl { [hub, uri] in hub.reconcile(plans: plans, uri: uri) } ?? [:]
    }

    /// The chosen plan per kind, or the reason a kind has none.
    func plan(_ kind: SensorKind) -> Result<SensorPlan, MotionError> {
        let snapshot = state.withLock { $0 }
        if let p = snapshot.chosen[kind] {
            if let problem = p.info.problem { return .failure(problem) }
            return .success(p)
        }
        switch snapshot.discovery {
        case .failure(let e): return .failure(e)
        case .success(let d): return .failure(notAvailableError(kind, discovery: d))
        }
    }

    func activePlans() -> [SensorKind: SensorPlan] {
        state.withLock { $0.chosen }
    }

    /// How a start ended.
    enum Started {
        /// Running; the consumer's id.
        case started(Int)
        /// Not running. `reported`: the consumer's callbacks have already been given the error
        /// (the capture failed to start; they are removed).
        case failed(MotionError, reported: Bool)
    }

    /// Registers a consumer, then starts (or restarts) the device capture. From a capture thread
    /// the capture's start is queued: its failure then reaches the consumer's callbacks (a pull
    /// consumer sees the sensor inactive).
    func start(_ kind: SensorKind, _ consumer: StreamHub.Consumer) -> Started {
        if case .failure(let e) = plan(kind) { return .failed(e, reported: false) }
        // Counts restart when the sensor goes from idle to active, not when a second consumer joins.
        let wasActive = hub.isActive(kind, owner: nil)
        guard let id = hub.add(kind, consumer) else {
            return .failed(MotionError(code: .notAvailable, detail: "The motion manager is being released"), reported: false)
        }
        if !wasActive { hub.state.withLock { $0.sensors[kind]?.statistics = UpdateStatistics() } }
        if let e = reconcile()[kind] { return .failed(e, reported: true) }
        return .started(id)
    }

    private func startPull(_ kind: SensorKind) throws(MotionError) {
        let running = hub.state.withLock { s in
            s.sensors[kind]?.consumers.values.contains { if case .pull = $0.delivery, $0.owner == .user { true } else { false } } ?? false
        }
        if running && hub.isActive(kind) { return }
        if case .failed(let e, _) = start(kind, StreamHub.Consumer(delivery: .pull)) { throw e }
    }

    /// Removes the user's push consumers of `kind` (a handler or an async sequence, which ends):
    /// a new one replaces them, as in Core Motion.
    private func replacePush(_ kind: SensorKind) {
        hub.remove(kind) { _, c in if case .coalesced = c.delivery, c.owner == .user { true } else { false } }
    }

    /// Removes the user's batched consumers of `kind` (a handler or an async sequence, which ends).
    private func replaceBatches(_ kind: SensorKind) {
        hub.remove(kind) { _, c in if case .batched = c.delivery, c.owner == .user { true } else { false } }
    }

    private func startPush<T: PublicSample>(_ kind: SensorKind, _ delivery: HandlerDelivery,
                                                   _ handler: @escaping @Sendable (T?, MotionError?) -> Void) {
        replacePush(kind)
        // nil: on the capture thread.
        let queue: DispatchQueue? = switch delivery {
        case .queue(let q): q ?? hub.handlerQueue(kind)
        case .captureThread: nil
        }
        let consumer = StreamHub.Consumer(delivery: .coalesced({ s, e in handler(s.map { T($0) }, e) }, queue: queue))
        if case .failed(let e, reported: false) = start(kind, consumer) { (queue ?? hub.handlerQueue(kind)).async { handler(nil, e) } }
    }

    private func startBatches<T: PublicSample>(_ kind: SensorKind, _ delivery: HandlerDelivery,
                                                      _ handler: @escaping @Sendable ([T]?, MotionError?) -> Void) {
        replaceBatches(kind)
        // nil: on the capture thread.
        let queue: DispatchQueue? = switch delivery {
        case .queue(let q): q ?? hub.handlerQueue(kind)
        case .captureThread: nil
        }
        let consumer = StreamHub.Consumer(delivery: .batched(make: { batch in
            let samples = T.all(in: batch)
            return { handler(samples, nil) }
        }, fail: { handler(nil, $0) }, queue: queue))
        if case .failed(let e, reported: false) = start(kind, consumer) { (queue ?? hub.handlerQueue(kind)).async { handler(nil, e) } }
    }

    private func updates<T: PublicSample>(_ kind: SensorKind) -> AsyncThrowingStream<T, any Error> {
        let (stream, continuation) = AsyncThrowingStream<T, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        replacePush(kind)
        let link = StreamLink()
        continuation.onTermination = { [weak self] _ in
            if let id = link.end() { self?.endConsumer(kind, id: id) }
        }
        let q = hub.handlerQueue(kind)
        var consumer = StreamHub.Consumer(delivery: .coalesced({ s, e in
            if let s { continuation.yield(T(s)) } else { continuation.finish(throwing: e) }
        }, queue: q))
        consumer.ended = (q, { continuation.finish() })
        switch start(kind, consumer) {
        case .failed(let e, _): continuation.finish(throwing: e)
        case .started(let id): if link.attach(id) { endConsumer(kind, id: id) }
        }
        return stream
    }

    private func batches<T: PublicSample>(_ kind: SensorKind) -> AsyncThrowingStream<[T], any Error> {
        replaceBatches(kind)
        let backlog = StreamHub.Backlog(releasedByJob: false)
        let inbox = BatchInbox<T>(backlog: backlog)
        let link = StreamLink()
        // Ends this consumer when the sequence goes: iterated to its end, cancelled, or dropped.
        let token = StreamToken { [weak self] in
            if let id = link.end() { self?.endConsumer(kind, id: id) }
        }
        var consumer = StreamHub.Consumer(delivery: .batched(make: { batch in
            let samples = T.all(in: batch)
            return { inbox.offer(samples) }
        }, fail: { inbox.finish(throwing: $0) }, queue: nil))  // handed over on the capture thread
        consumer.backlog = backlog
        consumer.ended = (hub.handlerQueue(kind), { inbox.finish(throwing: nil) })
        switch start(kind, consumer) {
        case .failed(let e, _): inbox.finish(throwing: e)
        case .started(let id): if link.attach(id) { endConsumer(kind, id: id) }
        }
        return AsyncThrowingStream(unfolding: { [token] in
            _ = token
            return try await inbox.next()
        })
    }

    func endConsumer(_ kind: SensorKind, id: Int) {
        hub.remove(kind, id: id, quietly: true)
        let plans = activePlans()
        hub.control.async { [hub, uri] in hub.reconcile(plans: plans, uri: uri) }
    }

    private func stop(_ kind: SensorKind) {
        stop([kind], owner: .user)
    }

    /// Stops `owner`'s updates of `kinds` and waits until their captures are wound down. From a
    /// handler running on a capture thread it cannot wait (the control queue may be joining that
    /// very thread): the consumers go at once, so no further batch reaches them, and the
    /// captures are wound down just after.
    func stop(_ kinds: [SensorKind], owner: StreamHub.Owner) {
        let plans = activePlans()
        if StreamHub.onCaptureThread {
            for kind in kinds { hub.remove(kind) { _, c in c.owner == owner } }
            hub.control.async { [hub, uri] in hub.reconcile(plans: plans, uri: uri) }
            return
        }
        _ = hub.onControl { [hub, uri] in hub.stop(kinds, owner: owner, plans: plans, uri: uri) }
    }
}
