/// Something the library tells its user once, without failing (``MotionManager/noticeHandler``):
/// that a sensor is polled because its buffer cannot be used, or that a saved magnetometer
/// calibration cannot be used or saved (``MotionManager/magnetometerCalibrationFolder``).
///
/// ```swift
/// manager.noticeHandler = { notice in
///     print("note: \(notice)")   // "Polling iio:device0 (bmi160) instead of streaming its buffer: …"
/// }
/// ```
public struct MotionNotice: Sendable, Hashable, CustomStringConvertible {
    /// The sensors it concerns.
    public var sensors: [SensorKind]
    /// The device, e.g. `"iio:device0 (bmi160)"`.
    public var device: String
    /// A full sentence saying what the library does instead and why.
    public var message: String
    /// The failure behind it, if there is one: for a polled fallback, why the buffer could not be
    /// used (``MotionError/code`` `.permissionDenied`, `.deviceBusy`, `.notAvailable` for a device
    /// without scan elements or a trigger, `.timedOut` for a buffer that stays silent).
    public var cause: MotionError?

    /// Creates a notice. The library creates these; the initializer is public so that code
    /// layered on IIOMotion (and tests) can produce the same type.
    /// - Parameters:
    ///   - sensors: the sensors it concerns.
    ///   - device: the device.
    ///   - message: the sentence.
    ///   - cause: the failure behind it.
    public init(sensors: [SensorKind], device: String, message: String, cause: MotionError? = nil) {
        self.sensors = sensors
        self.device = device
        self.message = message
        self.cause = cause
    }

    /// ``message``.
    public var description: String { message }
}
