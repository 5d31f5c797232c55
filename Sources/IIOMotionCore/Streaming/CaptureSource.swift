/// What ``StreamHub`` runs for one device: a source of sample batches on a thread of its own.
///
/// In production it is ``DeviceCapture`` on libiio (its buffer, or polled `raw` files); the unit
/// tests use a scripted in-memory source, to drive timing, lifecycle, backlog, races and failures
/// deterministically.
///
/// The contract, which the hub relies on:
/// - ``start()`` sets the device up on the source's thread and returns once it streams (or throws
///   why it cannot). From then on the thread calls `deliver` with each batch and `fail` when
///   sensors fail, one call at a time, never both at once.
/// - ``stop()`` ends the thread and joins it: after it returns, `deliver` and `fail` are not called
///   again and every descriptor is closed. It is idempotent and safe from any thread but the
///   source's own, where it only asks the thread to end (the thread then ends, and releases the
///   device, when the call that is running returns).
/// - The source's thread is a capture thread (``StreamHub/onCaptureThread`` is true there): the
///   manager never waits for its control queue on it.
protocol CaptureSource: AnyObject, Sendable {
    /// Starts the thread and waits until the device streams.
    /// - Returns: the mode, frequency and batch size in force.
    /// - Throws: ``MotionError`` when the device cannot be captured at all.
    func start() throws(MotionError) -> CaptureStatus
    /// Stops the capture and joins its thread.
    func stop()
    /// How messages name the device, e.g. `"iio:device0 (bmi160)"`.
    var deviceText: String { get }
}

/// Makes the capture of one device. `deliver` gets each batch on the capture thread; `fail` gets
/// the sensors that failed, why, and whether the capture ended with them.
typealias CaptureFactory = @Sendable (
    _ settings: CaptureSettings,
    _ deliver: @escaping @Sendable (CaptureBatch) -> Void,
    _ fail: @escaping @Sendable ([SensorKind], MotionError, Bool) -> Void
) -> any CaptureSource

extension DeviceCapture: CaptureSource {}
