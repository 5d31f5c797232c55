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
}
