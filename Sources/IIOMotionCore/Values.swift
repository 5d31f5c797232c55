/// The standard acceleration of gravity, 9.80665 m/s², used to convert between m/s² and g.
public let standardGravity: Double = 9.80665

/// The kind of motion sensor.
public enum SensorKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// An accelerometer (IIO channel type `accel`, files `in_accel_*`).
    case accelerometer = "accelerometer"
    /// A gyroscope (IIO channel type `anglvel`, files `in_anglvel_*`).
    case gyroscope = "gyroscope"
    /// A magnetometer (IIO channel type `magn`, files `in_magn_*`).
    case magnetometer = "magnetometer"

    /// The same as `rawValue`.
    public var description: String { rawValue }

    /// The IIO channel type prefix, e.g. `"accel"`.
    var iioType: String {
        switch self {
        case .accelerometer: "accel"
        case .gyroscope: "anglvel"
        case .magnetometer: "magn"
        }
    }
}

/// Which units and sign conventions readings use.
///
/// | | `.coreMotion` (default) | `.si` |
/// |---|---|---|
/// | acceleration | g; device face up on a table reads z ≈ −1.00 | m/s², kernel sign: face up reads z ≈ +9.81 |
/// | rotation rate | rad/s, right-hand rule | rad/s, right-hand rule (the same) |
/// | magnetic field | microtesla | microtesla (the same) |
///
/// In both, the sensor's mount matrix has already been applied, so axes follow the device (the
/// screen or board), not the chip. Core Motion's acceleration is the kernel's value negated and
/// divided by ``standardGravity``: `coreMotion = −(M · ((raw + offset) · scale)) / 9.80665`.
public enum MotionUnits: Sendable, Hashable {
    /// Like Apple's Core Motion: acceleration in g with Core Motion's sign, rotation in rad/s.
    case coreMotion
    /// SI with the Linux kernel's sign: acceleration in m/s² (face up z ≈ +9.81), rotation in rad/s.
    case si
}

/// A three-axis acceleration. In g (1 g = 9.80665 m/s²) with Core Motion's sign by default,
/// or in m/s² with the kernel's sign when ``MotionUnits/si`` is chosen.
public struct Acceleration: Sendable, Hashable {
    /// Acceleration along the device's x axis.
    public var x: Double
    /// Acceleration along the device's y axis.
    public var y: Double
    /// Acceleration along the device's z axis (out of the screen).
    public var z: Double

    /// Creates an acceleration from its components.
    /// - Parameters:
    ///   - x: x component.
    ///   - y: y component.
    ///   - z: z component.
    public init(x: Double, y: Double, z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }
}

/// A three-axis rotation rate in radians per second, right-hand rule about each axis (the same
/// sign as IIO's `anglvel` and Core Motion's `CMRotationRate`).
public struct RotationRate: Sendable, Hashable {
    /// Rotation about the x axis, rad/s.
    public var x: Double
    /// Rotation about the y axis, rad/s.
    public var y: Double
    /// Rotation about the z axis, rad/s.
    public var z: Double

    /// Creates a rotation rate from its components in rad/s.
    /// - Parameters:
    ///   - x: rotation about x.
    ///   - y: rotation about y.
    ///   - z: rotation about z.
    public init(x: Double, y: Double, z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }
}

/// A three-axis magnetic field in microtesla (µT), as Core Motion's `CMMagneticField`. The
/// kernel reports Gauss; 1 G = 100 µT.
public struct MagneticField: Sendable, Hashable {
    /// Field along x, µT.
    public var x: Double
    /// Field along y, µT.
    public var y: Double
    /// Field along z, µT.
    public var z: Double

    /// Creates a magnetic field from its components in µT.
    /// - Parameters:
    ///   - x: field along x.
    ///   - y: field along y.
    ///   - z: field along z.
    public init(x: Double, y: Double, z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }
}

/// One accelerometer sample.
public struct AccelerometerData: Sendable, Hashable {
    /// When the sample was taken, in seconds on `CLOCK_MONOTONIC` (time since boot, not counting
    /// suspend). The type is `Double`, the same as Foundation's `TimeInterval`.
    public var timestamp: Double
    /// The acceleration, in the units the manager was created with (g by default).
    public var acceleration: Acceleration

    /// Creates a sample.
    /// - Parameters:
    ///   - timestamp: seconds on `CLOCK_MONOTONIC`.
    ///   - acceleration: the acceleration.
    public init(timestamp: Double, acceleration: Acceleration) {
        self.timestamp = timestamp
        self.acceleration = acceleration
    }
}

/// One gyroscope sample.
public struct GyroData: Sendable, Hashable {
    /// When the sample was taken, in seconds on `CLOCK_MONOTONIC`.
    public var timestamp: Double
    /// The rotation rate in rad/s.
    public var rotationRate: RotationRate

    /// Creates a sample.
    /// - Parameters:
    ///   - timestamp: seconds on `CLOCK_MONOTONIC`.
    ///   - rotationRate: the rotation rate in rad/s.
    public init(timestamp: Double, rotationRate: RotationRate) {
        self.timestamp = timestamp
        self.rotationRate = rotationRate
    }
}

/// One magnetometer sample.
public struct MagnetometerData: Sendable, Hashable {
    /// When the sample was taken, in seconds on `CLOCK_MONOTONIC`.
    public var timestamp: Double
    /// The magnetic field in µT.
    public var magneticField: MagneticField

    /// Creates a sample.
    /// - Parameters:
    ///   - timestamp: seconds on `CLOCK_MONOTONIC`.
    ///   - magneticField: the field in µT.
    public init(timestamp: Double, magneticField: MagneticField) {
        self.timestamp = timestamp
        self.magneticField = magneticField
    }
}

/// What the samples of the three sensors share, for code that handles any of them alike (a
/// logger, a plot): the sensor, the timestamp and the three axes.
///
/// ```swift
/// func row(_ s: some SensorSample) -> String {
///     "\(s.timestamp),\(type(of: s).sensorKind),\(s.axes.x),\(s.axes.y),\(s.axes.z)"
/// }
/// ```
public protocol SensorSample: Sendable, Hashable {
    /// The sensor this type is a sample of.
    static var sensorKind: SensorKind { get }
    /// When the sample was taken, in seconds on `CLOCK_MONOTONIC`.
    var timestamp: Double { get }
    /// The three axes, in the sample's units (acceleration in the manager's units, rad/s, µT).
    var axes: AxisValues { get }
}

extension AccelerometerData: SensorSample {
    /// ``SensorKind/accelerometer``.
    public static var sensorKind: SensorKind { .accelerometer }
    /// The acceleration's axes.
    public var axes: AxisValues { AxisValues(x: acceleration.x, y: acceleration.y, z: acceleration.z) }
}

extension GyroData: SensorSample {
    /// ``SensorKind/gyroscope``.
    public static var sensorKind: SensorKind { .gyroscope }
    /// The rotation rate's axes.
    public var axes: AxisValues { AxisValues(x: rotationRate.x, y: rotationRate.y, z: rotationRate.z) }
}

extension MagnetometerData: SensorSample {
    /// ``SensorKind/magnetometer``.
    public static var sensorKind: SensorKind { .magnetometer }
    /// The magnetic field's axes.
    public var axes: AxisValues { AxisValues(x: magneticField.x, y: magneticField.y, z: magneticField.z) }
}

/// A value per axis, e.g. the `scale` of x, y and z.
public struct AxisValues: Sendable, Hashable {
    /// The x value.
    public var x: Double
    /// The y value.
    public var y: Double
    /// The z value.
    public var z: Double

    /// Creates per-axis values.
    /// - Parameters:
    ///   - x: the x value.
    ///   - y: the y value.
    ///   - z: the z value.
    public init(x: Double, y: Double, z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }

    /// The same value on every axis.
    /// - Parameter value: the value for x, y and z.
    public init(all value: Double) {
        self.init(x: value, y: value, z: value)
    }

    subscript(axis: Axis) -> Double {
        get {
            switch axis {
            case .x: x
            case .y: y
            case .z: z
            }
        }
        set {
            switch axis {
            case .x: x = newValue
            case .y: y = newValue
            case .z: z = newValue
            }
        }
    }
}
