// Device motion: the attitude, gravity, user acceleration and bias-free rotation rate that sensor
// fusion (Fusion/AttitudeFilter.swift) derives from the accelerometer, gyroscope and magnetometer,
// shaped like Core Motion's CMDeviceMotion, CMAttitude, CMQuaternion, CMRotationMatrix,
// CMAttitudeReferenceFrame and CMCalibratedMagneticField.
//
// Axes. The device frame is the one every sample in this library uses (the mount matrix applied):
// x to the right of the screen, y to its top, z out of the screen. A reference frame has z
// vertical, pointing up (away from the centre of the Earth), and x horizontal: arbitrary, or
// magnetic north. y completes a right-handed frame, so with x north, y points west.

internal import Glibc

/// A unit quaternion `x·i + y·j + z·k + w` describing a rotation, as Core Motion's `CMQuaternion`.
///
/// As an attitude, it rotates the reference frame onto the device: a vector `v` given in device
/// coordinates has reference-frame coordinates `q ⊗ v ⊗ q*` (the device's z axis, the screen
/// normal, is `q ⊗ (0, 0, 1) ⊗ q*` in the reference frame).
///
/// ```swift
/// let quarterTurn = Quaternion(x: 0, y: 0, z: 0.5.squareRoot(), w: 0.5.squareRoot()) // 90° about z
/// let back = quarterTurn.multiplied(by: quarterTurn.conjugate)                     // identity
/// ```
public struct Quaternion: Sendable, Hashable {
    /// The i component.
    public var x: Double
    /// The j component.
    public var y: Double
    /// The k component.
    public var z: Double
    /// The real (scalar) component.
    public var w: Double

    /// Creates a quaternion from its components; it is not normalised.
    /// - Parameters:
    ///   - x: the i component.
    ///   - y: the j component.
    ///   - z: the k component.
    ///   - w: the real component.
    public init(x: Double, y: Double, z: Double, w: Double) {
        self.x = x
        self.y = y
        self.z = z
        self.w = w
    }

    /// The identity rotation, `(0, 0, 0, 1)`.
    public static let identity = Quaternion(x: 0, y: 0, z: 0, w: 1)

    /// The conjugate `(−x, −y, −z, w)`: for a unit quaternion, the inverse rotation.
    public var conjugate: Quaternion { Quaternion(x: -x, y: -y, z: -z, w: w) }

    /// The Euclidean norm; 1 for a rotation.
    public var norm: Double { (x * x + y * y + z * z + w * w).squareRoot() }

    /// The Hamilton product `self ⊗ other`: the rotation `other` followed by `self` (both as
    /// rotations of vectors, `(self ⊗ other) ⊗ v ⊗ (self ⊗ other)* = self ⊗ (other ⊗ v ⊗ other*) ⊗ self*`).
    /// - Parameter other: the right-hand factor.
    /// - Returns: the product.
    public func multiplied(by other: Quaternion) -> Quaternion {
        Quaternion(
            x: w * other.x + x * other.w + y * other.z - z * other.y,
            y: w * other.y - x * other.z + y * other.w + z * other.x,
            z: w * other.z + x * other.y - y * other.x + z * other.w,
            w: w * other.w - x * other.x - y * other.y - z * other.z
        )
    }

    /// This quaternion scaled to norm 1 (the identity if its norm is zero or not finite).
    var normalized: Quaternion {
        let n = norm
        guard n > 0, n.isFinite else { return .identity }
        return Quaternion(x: x / n, y: y / n, z: z / n, w: w / n)
    }

    /// The rotation by `angle` radians about the unit vector `axis`, right-hand rule.
    init(axis: Vector3, angle: Double) {
        let s = sin(angle / 2)
        self.init(x: axis.x * s, y: axis.y * s, z: axis.z * s, w: cos(angle / 2))
    }

    /// `self ⊗ v ⊗ self*`: `v` (device coordinates) in the reference frame, for a unit quaternion.
    func rotate(_ v: Vector3) -> Vector3 {
        // v + 2w(u × v) + 2u × (u × v), u the vector part.
        let u = Vector3(x, y, z)
        let t = 2 * u.cross(v)
        return v + w * t + u.cross(t)
    }

    /// `self* ⊗ v ⊗ self`: `v` (reference coordinates) in the device frame, for a unit quaternion.
    func inverseRotate(_ v: Vector3) -> Vector3 { conjugate.rotate(v) }
}

/// A 3×3 rotation matrix, as Core Motion's `CMRotationMatrix`, row by row (`m12` is row 1,
/// column 2).
///
/// As an attitude it is the standard matrix of the same rotation as ``Attitude/quaternion``: it
/// takes device coordinates to reference-frame coordinates, `v_ref = M · v_device`. So its
/// columns are the device's axes seen in the reference frame, and its third row is the reference
/// frame's vertical seen in the device frame: gravity, in g, is `(−m31, −m32, −m33)`. (Core
/// Motion's documentation does not say which way its matrix maps; code ported from it that
/// reads gravity as `(−m13, −m23, −m33)` needs the transpose.)
public struct RotationMatrix: Sendable, Hashable {
    /// Row 1, column 1.
    public var m11: Double
    /// Row 1, column 2.
    public var m12: Double
    /// Row 1, column 3.
    public var m13: Double
    /// Row 2, column 1.
    public var m21: Double
    /// Row 2, column 2.
    public var m22: Double
    /// Row 2, column 3.
    public var m23: Double
    /// Row 3, column 1.
    public var m31: Double
    /// Row 3, column 2.
    public var m32: Double
    /// Row 3, column 3.
    public var m33: Double

    /// Creates a matrix from its elements, row by row.
    /// - Parameters:
    ///   - m11: row 1, column 1.
    ///   - m12: row 1, column 2.
    ///   - m13: row 1, column 3.
    ///   - m21: row 2, column 1.
    ///   - m22: row 2, column 2.
    ///   - m23: row 2, column 3.
    ///   - m31: row 3, column 1.
    ///   - m32: row 3, column 2.
    ///   - m33: row 3, column 3.
    public init(
        m11: Double, m12: Double, m13: Double,
        m21: Double, m22: Double, m23: Double,
        m31: Double, m32: Double, m33: Double
    ) {
        self.m11 = m11; self.m12 = m12; self.m13 = m13
        self.m21 = m21; self.m22 = m22; self.m23 = m23
        self.m31 = m31; self.m32 = m32; self.m33 = m33
    }

    /// The identity matrix.
    public static let identity = RotationMatrix(m11: 1, m12: 0, m13: 0, m21: 0, m22: 1, m23: 0, m31: 0, m32: 0, m33: 1)

    /// The matrix of a unit quaternion's rotation.
    /// - Parameter q: a unit quaternion.
    public init(_ q: Quaternion) {
        let xx = q.x * q.x, yy = q.y * q.y, zz = q.z * q.z
        let xy = q.x * q.y, xz = q.x * q.z, yz = q.y * q.z
        let wx = q.w * q.x, wy = q.w * q.y, wz = q.w * q.z
        self.init(
            m11: 1 - 2 * (yy + zz), m12: 2 * (xy - wz), m13: 2 * (xz + wy),
            m21: 2 * (xy + wz), m22: 1 - 2 * (xx + zz), m23: 2 * (yz - wx),
            m31: 2 * (xz - wy), m32: 2 * (yz + wx), m33: 1 - 2 * (xx + yy)
        )
    }
}

/// The device's orientation relative to a reference frame, as Core Motion's `CMAttitude`: one
/// rotation given three ways (quaternion, matrix, Euler angles).
///
/// The Euler angles follow Core Motion (all in radians, right-hand rule):
/// - ``pitch`` is a rotation about the device's x axis, −π/2…π/2: positive when the top edge
///   rises; +π/2 with the device upright in portrait, screen towards you.
/// - ``roll`` is a rotation about the device's y axis, −π…π: positive when the right edge goes
///   down (screen turning to the right); ±π face down.
/// - ``yaw`` is a rotation about the vertical, −π…π: positive turning counter-clockwise seen
///   from above.
///
/// The attitude is `Rz(yaw) · Rx(pitch) · Ry(roll)` (yaw applied last, about the reference
/// vertical); pitch is the middle angle, which is why it alone is limited to ±π/2. At exactly
/// ±π/2 pitch, yaw and roll turn about the same axis and only their difference is defined (this
/// type then reports roll 0).
///
/// ```swift
/// let motion: DeviceMotion = …
/// let start = motion.attitude
/// // later: how far the device turned since `start`, in the device's starting frame
/// let turned = laterMotion.attitude.relative(to: start)
/// print(turned.yaw * 180 / .pi)
/// ```
public struct Attitude: Sendable, Hashable {
    /// The attitude as a unit quaternion (see ``Quaternion`` for its direction). `q` and `−q`
    /// are the same rotation but compare unequal; compare angles or matrices instead.
    public var quaternion: Quaternion

    /// An attitude from a quaternion, normalised (a zero or non-finite one gives the identity).
    /// - Parameter quaternion: the rotation from the device frame to the reference frame.
    public init(quaternion: Quaternion) {
        self.quaternion = quaternion.normalized
    }

    /// An attitude from Core Motion's Euler angles, in radians.
    /// - Parameters:
    ///   - roll: rotation about the device's y axis.
    ///   - pitch: rotation about the device's x axis.
    ///   - yaw: rotation about the vertical.
    public init(roll: Double, pitch: Double, yaw: Double) {
        let qz = Quaternion(axis: Vector3(0, 0, 1), angle: yaw)
        let qx = Quaternion(axis: Vector3(1, 0, 0), angle: pitch)
        let qy = Quaternion(axis: Vector3(0, 1, 0), angle: roll)
        self.init(quaternion: qz.multiplied(by: qx).multiplied(by: qy))
    }

    /// The device lying face up, its x axis along the reference frame's x.
    public static let identity = Attitude(quaternion: .identity)

    /// The attitude as a rotation matrix (see ``RotationMatrix`` for its direction).
    public var rotationMatrix: RotationMatrix { RotationMatrix(quaternion) }

    /// Rotation about the device's y axis, in radians, −π…π; positive when the right edge goes down.
    public var roll: Double {
        let q = quaternion
        return atan2(2 * (q.w * q.y - q.x * q.z), 1 - 2 * (q.x * q.x + q.y * q.y))
    }

    /// Rotation about the device's x axis, in radians, −π/2…π/2; positive when the top edge rises.
    public var pitch: Double {
        let q = quaternion
        return asin(min(1, max(-1, 2 * (q.w * q.x + q.y * q.z))))
    }

    /// Rotation about the vertical, in radians, −π…π; positive counter-clockwise seen from above.
    /// Zero when the device's top edge (its y axis, projected on the horizontal) points along the
    /// reference frame's y axis, i.e. when the device lying face up has its x axis along the frame's x.
    public var yaw: Double {
        let q = quaternion
        return atan2(2 * (q.w * q.z - q.x * q.y), 1 - 2 * (q.x * q.x + q.z * q.z))
    }

    /// Gravity in the device frame, in g with Core Motion's sign: `(0, 0, −1)` face up.
    var gravity: Vector3 { quaternion.inverseRotate(Vector3(0, 0, -1)) }

    /// This attitude relative to another: the rotation from `reference` to `self`, expressed as
    /// if the device at `reference` were the reference frame. `a.relative(to: a)` is the identity;
    /// tilting the device's top edge up 10° after `reference` gives pitch 10° whatever the
    /// reference's heading.
    /// - Parameter reference: the attitude to measure from; both must share a reference frame.
    /// - Returns: `reference⁻¹ ⊗ self`.
    public func relative(to reference: Attitude) -> Attitude {
        Attitude(quaternion: reference.quaternion.conjugate.multiplied(by: quaternion))
    }

    /// Replaces this attitude by its change from `attitude`, as Core Motion's
    /// `multiply(byInverseOf:)`; the same as `self = self.relative(to: attitude)`.
    /// - Parameter attitude: the reference attitude, e.g. one saved when a game started.
    public mutating func multiply(byInverseOf attitude: Attitude) {
        self = relative(to: attitude)
    }
}

/// The reference frames an attitude can be given in, as Core Motion's `CMAttitudeReferenceFrame`.
/// In all of them z is vertical, pointing up.
public struct AttitudeReferenceFrame: OptionSet, Sendable, Hashable {
    /// The bit mask, with Core Motion's values.
    public let rawValue: UInt

    /// Creates a set from a bit mask.
    /// - Parameter rawValue: the bits, as in Core Motion.
    public init(rawValue: UInt) {
        self.rawValue = rawValue
    }

    /// x is horizontal and fixed when updates start (yaw 0 then); from the accelerometer and
    /// gyroscope only, so yaw drifts slowly (the gyroscope's bias is learned while the device
    /// is still).
    public static let xArbitraryZVertical = AttitudeReferenceFrame(rawValue: 1 << 0)
    /// As ``xArbitraryZVertical``, but the magnetometer holds yaw against drift. Needs a
    /// magnetometer.
    public static let xArbitraryCorrectedZVertical = AttitudeReferenceFrame(rawValue: 1 << 1)
    /// x points to magnetic north (the horizontal part of the Earth's field), y west. Needs a
    /// magnetometer.
    public static let xMagneticNorthZVertical = AttitudeReferenceFrame(rawValue: 1 << 2)
    /// x points to true (geographic) north. Needs a magnetometer and the magnetic declination
    /// where the device is; not produced by this library yet.
    public static let xTrueNorthZVertical = AttitudeReferenceFrame(rawValue: 1 << 3)

    /// Whether the frame's x axis is tied to north, so that ``DeviceMotion/heading`` is defined.
    public var isNorthReferenced: Bool {
        !isDisjoint(with: [.xMagneticNorthZVertical, .xTrueNorthZVertical])
    }

    /// Whether the frame needs a magnetometer.
    public var needsMagnetometer: Bool {
        !isDisjoint(with: [.xArbitraryCorrectedZVertical, .xMagneticNorthZVertical, .xTrueNorthZVertical])
    }
}

/// How well a magnetometer's readings are calibrated, as Core Motion's
/// `CMMagneticFieldCalibrationAccuracy`.
public enum MagneticFieldCalibrationAccuracy: Int, Sendable, Hashable, CaseIterable {
    /// No calibration: the field includes the device's own (hard-iron) field, or there is no
    /// magnetometer.
    case uncalibrated = -1
    /// Calibrated roughly (few directions seen yet, or the fit is loose), or the current reading
    /// looks disturbed (its strength or dip is far from the Earth's field seen so far), so it is
    /// not being used for the attitude.
    case low = 0
    /// Calibrated from enough directions, with the soft-iron matrix determined and the fit's
    /// standard error of the hard-iron offset under 1 µT (or a saved calibration not yet
    /// verified again, or an offset supplied by the application), and the reading looks like
    /// the Earth's field. The standard error understates the offset's real error: on iio-sim's
    /// hand-held case with hard and soft iron and a steel object passing, the offset was a
    /// median 1–7 µT off at this level over 23 seeds, while the heading from it stayed within
    /// 2° RMS on 35 of 38 seeds (BENCHMARKS, "The magnetometer calibrated").
    case medium = 1
    /// Calibrated with the full soft-iron matrix determined by the samples (or nearly every
    /// direction seen), the offset's standard error under 0.5 µT, and the reading looks like
    /// the Earth's field. On the same case the offset was a median 0.5–6 µT off at this level.
    case high = 2
}

/// A magnetic field with its calibration accuracy, as Core Motion's `CMCalibratedMagneticField`.
public struct CalibratedMagneticField: Sendable, Hashable {
    /// The field in µT, in the device frame.
    public var field: MagneticField
    /// How far the field can be trusted.
    public var accuracy: MagneticFieldCalibrationAccuracy

    /// Creates a value.
    /// - Parameters:
    ///   - field: the field in µT.
    ///   - accuracy: its calibration accuracy.
    public init(field: MagneticField, accuracy: MagneticFieldCalibrationAccuracy) {
        self.field = field
        self.accuracy = accuracy
    }

    /// No field: zero, ``MagneticFieldCalibrationAccuracy/uncalibrated`` (what Core Motion reports
    /// without a magnetometer).
    public static let unavailable = CalibratedMagneticField(
        field: MagneticField(x: 0, y: 0, z: 0), accuracy: .uncalibrated)
}

/// One fused estimate of the device's motion, as Core Motion's `CMDeviceMotion`.
///
/// Units are always Core Motion's, whatever ``MotionUnits`` the manager reads its sensors in:
/// ``gravity`` and ``userAcceleration`` are in g with Core Motion's sign (face up, gravity is
/// `(0, 0, −1)`), and `gravity + userAcceleration` equals the measured acceleration in g (for a
/// manager in ``MotionUnits/si``, the measured m/s² negated and divided by ``standardGravity``).
/// ``userAcceleration`` therefore has Core Motion's sign too: the device pushed up off a table
/// reads a negative z.
///
/// ```swift
/// let m: DeviceMotion = …
/// print(m.attitude.pitch * 180 / .pi)        // degrees; 90 upright in portrait
/// print(m.gravity.z)                          // −1 face up, +1 face down
/// if m.heading >= 0 { print("top edge points \(m.heading)° east of magnetic north") }
/// ```
public struct DeviceMotion: Sendable, Hashable {
    /// The device's attitude in the reference frame updates were started with.
    public var attitude: Attitude
    /// The rotation rate in rad/s, right-hand rule about the device's axes, with the estimated
    /// gyroscope bias removed.
    public var rotationRate: RotationRate
    /// Gravity in the device frame, in g with Core Motion's sign (a unit vector).
    public var gravity: Acceleration
    /// The acceleration the user gives the device: the measured acceleration minus ``gravity``,
    /// in g with Core Motion's sign.
    public var userAcceleration: Acceleration
    /// The magnetic field in the device frame and its accuracy;
    /// ``CalibratedMagneticField/unavailable`` without a magnetometer.
    public var magneticField: CalibratedMagneticField
    /// The compass heading in degrees, 0 ≤ heading < 360 clockwise from north (90 = east), of
    /// the direction the device's top edge points when it lies flat (of the back of the device
    /// when it is held upright); computed from yaw. Only in north-referenced frames
    /// (``AttitudeReferenceFrame/isNorthReferenced``); −1 in the others, as in Core Motion.
    public var heading: Double
    /// When the estimate applies, in seconds on `CLOCK_MONOTONIC` (the gyroscope sample's time).
    public var timestamp: Double

    /// Creates a value.
    /// - Parameters:
    ///   - attitude: the attitude.
    ///   - rotationRate: the bias-free rotation rate in rad/s.
    ///   - gravity: gravity in g.
    ///   - userAcceleration: the user acceleration in g.
    ///   - magneticField: the magnetic field.
    ///   - heading: degrees from north, or −1.
    ///   - timestamp: seconds on `CLOCK_MONOTONIC`.
    public init(
        attitude: Attitude,
        rotationRate: RotationRate,
        gravity: Acceleration,
        userAcceleration: Acceleration,
        magneticField: CalibratedMagneticField = .unavailable,
        heading: Double = -1,
        timestamp: Double
    ) {
        self.attitude = attitude
        self.rotationRate = rotationRate
        self.gravity = gravity
        self.userAcceleration = userAcceleration
        self.magneticField = magneticField
        self.heading = heading
        self.timestamp = timestamp
    }

    /// The compass heading in degrees of an attitude given in a north-referenced frame (x north,
    /// y west): the bearing of `Rz(yaw) · (0, 1, 0)`, i.e. `270° − yaw`, in 0..<360.
    static func heading(yaw: Double) -> Double {
        var h = 270 - yaw * 180 / .pi
        h = h.truncatingRemainder(dividingBy: 360)
        if h < 0 { h += 360 }
        return h >= 360 ? 0 : h
    }
}
