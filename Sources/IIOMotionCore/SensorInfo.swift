/// What discovery learned about one sensor (one IIO channel type on one IIO device).
///
/// Values are a snapshot taken when the ``MotionManager`` was created (or last
/// ``MotionManager/rediscover()``ed); if another program changes the range or rate, rediscover.
public struct SensorInfo: Sendable, Hashable {
    /// What the sensor measures.
    public var kind: SensorKind
    /// The IIO device id, e.g. `"iio:device0"`.
    public var deviceID: String
    /// The driver's name for the device, e.g. `"bmi160"`, `"lsm6dso_accel"`, `"accel_3d"`.
    public var deviceName: String?
    /// The device's `label` file, e.g. `"accel-display"` or `"accel-base"`; absent on many drivers.
    public var label: String?
    /// The device's `location` file (older ChromeOS EC kernels: `"lid"` or `"base"`).
    public var location: String?
    /// Per-axis scale: multiply `raw + offset` by this to get SI units (m/s² for acceleration,
    /// rad/s for rotation, Gauss for magnetic field). Nil if it could not be read (see ``problem``).
    public var scale: AxisValues?
    /// The sysfs file the x axis's scale came from, e.g. `"in_accel_scale"` or `"scale"`;
    /// nil if the device publishes no scale (1 is assumed).
    public var scaleFile: String?
    /// Per-axis offset added to `raw` before scaling; 0 when the device publishes none.
    public var offset: AxisValues
    /// The sysfs file the x axis's offset came from, or nil when none is published.
    public var offsetFile: String?
    /// The mount matrix applied to readings.
    public var mountMatrix: MountMatrix
    /// Where ``mountMatrix`` came from.
    public var mountMatrixSource: MountMatrix.Source
    /// The sampling frequency in force, in Hz, if the device publishes one.
    public var samplingFrequency: Double?
    /// The sysfs file ``samplingFrequency`` came from, e.g. `"in_accel_sampling_frequency"`.
    public var samplingFrequencyFile: String?
    /// The frequencies the device accepts, if it publishes them.
    public var availableSamplingFrequencies: SamplingFrequencies?
    /// True when all three axes exist and their scale, offset and mount matrix could be read.
    public var isAvailable: Bool { problem == nil }
    /// True when every axis has a `raw` file, so one-shot (polled) reads are possible.
    public var isPollable: Bool
    /// Why the sensor cannot be used, if it cannot.
    public var problem: MotionError?
    /// True when the device can stream samples through an IIO buffer.
    public var canBuffer: Bool
    /// The name of the device's current trigger (e.g. `"accel_3d-dev3"`), or nil if none is set or
    /// the device has no trigger support.
    public var triggerName: String?
    /// True when the device has a `timestamp` scan element.
    public var hasTimestampChannel: Bool
    /// The calibration applied to this sensor's readings (``SensorCalibration``), nil when none is
    /// (none stored, or ``MotionManager/CalibrationChoice/uncalibrated``). Set on the sensors a
    /// ``MotionManager`` chose (``MotionManager/sensor(_:)``), not in ``MotionManager/devices``.
    public var calibration: SensorCalibration?
    /// Why a stored calibration is not applied although a file is there (it is damaged, or of
    /// another version), naming the file; nil otherwise.
    public var calibrationProblem: MotionError?
    /// udev's `ACCEL_LOCATION` for the device, `"display"` or `"base"`, from systemd's hardware
    /// database; nil when udev gives none. Automatic selection reads it before ``label`` and
    /// ``location`` (as iio-sensor-proxy does).
    public var udevLocation: String? = nil
    /// Why a mount matrix udev gives for the device was not used (a value that is not a mount
    /// matrix), as a full sentence naming the device, the property and its value; nil otherwise. The
    /// kernel's matrix is used instead, and a ``MotionManager`` reading the sensor hands it to its
    /// ``MotionManager/noticeHandler``.
    public var rejectedUdevMountMatrix: String? = nil
    /// Why udev was not asked about the device: `"a remote (ip:) context has no udev"`, or that
    /// this machine has no udev database; nil when it was asked.
    public var udevUnavailable: String? = nil
    /// The correction applied to the scale the driver publishes, when the driver is known to
    /// publish it in another unit than the IIO ABI's (hmc5843, fxas21002c on Linux 6.1); nil when
    /// ``scale`` is as published.
    public var scaleCorrection: KernelScaleCorrection? = nil

    /// `"iio:device0 (bmi160)"`: how messages name the device.
    public var deviceDescription: String {
        deviceName.map { "\(deviceID) (\($0))" } ?? deviceID
    }
}

extension SensorInfo {
    /// This sensor with a caller's mount matrix (``MotionManager``'s `mountMatrixOverrides`), which
    /// wins over udev's and the kernel's; unchanged when `matrix` is nil.
    func overridingMountMatrix(with matrix: MountMatrix?) -> SensorInfo {
        guard let matrix else { return self }
        var info = self
        info.mountMatrix = matrix
        info.mountMatrixSource = .override
        return info
    }
}

/// One IIO device that carries at least one motion sensor.
public struct DeviceInfo: Sendable, Hashable {
    /// The IIO device id, e.g. `"iio:device0"`.
    public var id: String
    /// The driver's name for the device, e.g. `"bmi160"`.
    public var name: String?
    /// The device's `label` file, if any.
    public var label: String?
    /// The device's `location` file, if any (older ChromeOS EC kernels).
    public var location: String?
    /// The motion sensors on this device (one for most drivers, accelerometer and gyroscope for
    /// combined IMUs such as bmi160 and inv_mpu6050).
    public var sensors: [SensorInfo]
    /// True when the device can stream samples through an IIO buffer.
    public var canBuffer: Bool
    /// The device's current trigger name, if one is set.
    public var triggerName: String?
    /// True when the device has a `timestamp` scan element.
    public var hasTimestampChannel: Bool
}

/// How to pick the device that provides a sensor.
///
/// ```swift
/// let manager = MotionManager(accelerometer: .label("accel-base"))
/// ```
public struct DeviceSelector: Sendable, Hashable, CustomStringConvertible {
    enum Rule: Sendable, Hashable {
        case automatic
        case id(String)
        case name(String)
        case label(String)
        case matching(String)
    }
    let rule: Rule

    /// Pick automatically: an accelerometer in the display (udev's `ACCEL_LOCATION` `display`,
    /// else labelled `accel-display`, else `location` `lid`) before one of unknown place, before
    /// one in the base (`ACCEL_LOCATION` `base`, `accel-base`, `location` `base`); a
    /// gyroscope or magnetometer on the same device as the chosen accelerometer when there is one;
    /// otherwise the lowest-numbered device.
    public static let automatic = DeviceSelector(rule: .automatic)

    /// The device with this IIO id.
    /// - Parameter id: e.g. `"iio:device2"`.
    /// - Returns: a selector.
    public static func id(_ id: String) -> DeviceSelector { DeviceSelector(rule: .id(id)) }

    /// The first device whose driver name is this.
    /// - Parameter name: e.g. `"lsm6dso_accel"`.
    /// - Returns: a selector.
    public static func name(_ name: String) -> DeviceSelector { DeviceSelector(rule: .name(name)) }

    /// The device with this `label`.
    /// - Parameter label: e.g. `"accel-base"`.
    /// - Returns: a selector.
    public static func label(_ label: String) -> DeviceSelector { DeviceSelector(rule: .label(label)) }

    /// The first device whose id, label or name is this (the order libiio's
    /// `iio_context_find_device` uses).
    /// - Parameter text: an id, label or name.
    /// - Returns: a selector.
    public static func matching(_ text: String) -> DeviceSelector { DeviceSelector(rule: .matching(text)) }

    /// `automatic`, `id iio:device0`, `name bmi160`, ...
    public var description: String {
        switch rule {
        case .automatic: "automatic"
        case .id(let s): "id \(s)"
        case .name(let s): "name \(s)"
        case .label(let s): "label \(s)"
        case .matching(let s): "\"\(s)\""
        }
    }

    /// Picks one of `candidates` (sensors of one kind).
    /// - Parameters:
    ///   - candidates: sensors of the kind wanted, in any order.
    ///   - sameDeviceAs: for automatic selection, a device id to prefer (the chosen accelerometer's).
    /// - Returns: the chosen sensor, or nil if none matches.
    func choose(from candidates: [SensorInfo], sameDeviceAs preferred: String? = nil) -> SensorInfo? {
        let ordered = candidates.sorted { Self.deviceNumber($0.deviceID) < Self.deviceNumber($1.deviceID) }
        switch rule {
        case .id(let id): return ordered.first { $0.deviceID == id }
        case .name(let name): return ordered.first { $0.deviceName == name }
        case .label(let label): return ordered.first { $0.label == label }
        case .matching(let s):
            return ordered.first { $0.deviceID == s } ?? ordered.first { $0.label == s }
                ?? ordered.first { $0.deviceName == s }
        case .automatic:
            return ordered.min { a, b in Self.rank(a, preferred) < Self.rank(b, preferred) }
        }
    }

    /// Sort key for automatic selection; smaller is better. `min` keeps the first of equals, and
    /// candidates are pre-sorted by device number, so ties go to the lowest-numbered device.
    private static func rank(_ s: SensorInfo, _ preferred: String?) -> (Int, Int, Int) {
        (s.isAvailable ? 0 : 1, s.deviceID == preferred ? 0 : 1,
         placementRank(label: s.label, location: s.location, udevLocation: s.udevLocation))
    }

    /// 0 display/lid, 1 unknown, 2 camera, 3 base. udev's `ACCEL_LOCATION` (systemd's hardware
    /// database, the machine's own quirk) comes first, then the `label`, then the `location` file.
    static func placementRank(label: String?, location: String?, udevLocation: String? = nil) -> Int {
        switch udevLocation?.lowercased() {
        case "display", "lid": return 0
        case "base": return 3
        default: break
        }
        let l = label?.lowercased()
        let loc = location?.lowercased()
        if l == "accel-display" || loc == "lid" || loc == "display" { return 0 }
        if l == "accel-base" || loc == "base" { return 3 }
        if l == "accel-camera" || loc == "camera" { return 2 }
        return 1
    }

    /// 7 for `"iio:device7"`; `Int.max` for ids that do not end in a number.
    static func deviceNumber(_ id: String) -> Int {
        let digits = id.reversed().prefix { $0.isNumber }
        return Int(String(digits.reversed())) ?? Int.max
    }
}
