public import IIOMotionCore
internal import IIOMotionLibIIO

/// The public way to make a manager: on libiio (``LibIIOBackend``) and this machine's udev.
extension MotionManager {
    /// Opens the IIO context and discovers its motion sensors. Never fails: a machine without IIO,
    /// or an unreachable iiod, just has no sensors (``isAccelerometerAvailable`` is false and
    /// ``devices`` throws the reason).
    ///
    /// - Parameters:
    ///   - uri: `"local:"` (default) for this machine, or `"ip:HOST[:PORT]"` for a remote iiod.
    ///   - units: ``MotionUnits/coreMotion`` (default: g, Core Motion's sign) or ``MotionUnits/si``.
    ///   - accelerometer: which device provides the accelerometer (default: automatic, preferring
    ///     the display's sensor over the base's on 2-in-1s).
    ///   - gyroscope: which device provides the gyroscope.
    ///   - magnetometer: which device provides the magnetometer.
    ///   - mountMatrixOverrides: mount matrices to use instead of the ones discovery finds. Without
    ///     an override a sensor's matrix is udev's (`ACCEL_MOUNT_MATRIX` from systemd's hardware
    ///     database, for a local context's accelerometer and a gyroscope on the same device), else
    ///     the kernel's (`in_accel_mount_matrix`, `mount_matrix`, ...), else the identity;
    ///     ``SensorInfo/mountMatrixSource`` says which.
    ///   - calibration: the accelerometer and gyroscope calibrations applied to readings: the
    ///     ones `motion-monitor calibrate` stored (default), none, or the caller's.
    public convenience init(
        uri: String = "local:",
        units: MotionUnits = .coreMotion,
        accelerometer: DeviceSelector = .automatic,
        gyroscope: DeviceSelector = .automatic,
        magnetometer: DeviceSelector = .automatic,
        mountMatrixOverrides: [SensorKind: MountMatrix] = [:],
        calibration: CalibrationChoice = .stored
    ) {
        self.init(uri: uri, units: units, accelerometer: accelerometer, gyroscope: gyroscope, magnetometer: magnetometer,
                  mountMatrixOverrides: mountMatrixOverrides, calibration: calibration, backend: LibIIOBackend())
    }
}
