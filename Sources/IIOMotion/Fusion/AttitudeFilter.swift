internal import Glibc

/// The attitude estimator behind ``DeviceMotion``: a pure value (no threads, no I/O, no
/// allocation per sample) fed timestamped samples and returning one estimate per gyroscope sample.
///
/// ## Algorithm
/// The explicit complementary filter of R. Mahony, T. Hamel and J.-M. Pflimlin, "Nonlinear
/// Complementary Filters on the Special Orthogonal Group", IEEE Transactions on Automatic Control
/// 53(5):1203–1218, 2008 (eq. 32, with vector measurements): the gyroscope's rate, less its
/// estimated bias, is integrated on the unit quaternions, and a correction rate
/// `kP · Σ vᵢ × v̂ᵢ` turns the estimate towards each measured direction `vᵢ` (device frame) from
/// its predicted direction `v̂ᵢ = q* ⊗ v₀ᵢ ⊗ q`. The one vector measurement is gravity from the
/// accelerometer. The magnetometer enters as a rotation about the vertical only (the angle
/// between the horizontal part of the measured field, in the reference frame, and its reference
/// direction), so a disturbed field can never tilt the estimate, only turn it; the same
/// decoupling as Madgwick's filter with magnetic distortion compensation (S. Madgwick, "An
/// efficient orientation filter for inertial and inertial/magnetic sensor arrays", 2010, §3.4).
///
/// Added to the paper's filter, as the issue asks:
/// - Initialisation from the first accelerometer sample (roll and pitch) and magnetometer
///   sample (yaw in the north frame), and gains that start at ``Configuration/startupGain`` and
///   fall linearly to their working values over ``Configuration/startupDuration`` of usable
///   accelerometer data (the same idea as the start-up ramp of Madgwick's later "Fusion" AHRS
///   library). The ramp restarts after a gap.
/// - Gyroscope bias from stillness instead of Mahony's integral term: over each
///   ``Configuration/stillnessWindow`` the device is still when the gyroscope's and
///   accelerometer's standard deviations are small, |a| is within a tolerance of 1 g and the mean
///   rate is small enough to be a bias; the bias then moves towards that window's mean rate
///   (the first still window sets it outright, later ones average over up to
///   ``Configuration/biasTimeConstant``). Mahony's integral term would also learn from the
///   accelerometer during motion, but only the two tilt axes, and it couples linear
///   acceleration into the bias; a still device shows all three axes' bias directly.
/// - The accelerometer's correction is weighted by how close |a| has recently been to 1 g (an
///   envelope of `||a| − 1 g|`): full weight within ``Configuration/accelerationTolerance``,
///   none beyond ``Configuration/accelerationRejection``; and, once started, by the angle between
///   measured and estimated gravity (full within ``Configuration/accelerationAngleTolerance``,
///   none beyond ``Configuration/accelerationAngleRejection``), so shaking does not tilt the
///   estimate. A rejection by angle lasting ``Configuration/accelerationRecoveryTime`` restarts
///   the start-up ramp (the estimate, not the accelerometer, is then taken to be wrong); the same
///   scheme as the acceleration rejection of Madgwick's "Fusion" library.
/// - The magnetometer is ignored while its strength or dip differs from the reference (learned
///   at start, then slowly tracked) by more than ``Configuration/magneticFieldTolerance`` or
///   ``Configuration/magneticDipTolerance``; a difference lasting
///   ``Configuration/magneticRelearnTime`` becomes the new reference.
/// - `dt` comes from timestamps: a sample not later than the previous one is dropped; a gap
///   longer than ``Configuration/maximumGap`` is not integrated (the motion in it is unknown),
///   and the start-up ramp runs again to re-level quickly.
///
/// ## Units
/// Core Motion's throughout: acceleration in g with Core Motion's sign (face up reads
/// `(0, 0, −1)`), rotation in rad/s, field in µT, time in seconds. ``DeviceMotionFusion``
/// converts from ``MotionUnits/si``.
struct AttitudeFilter: Sendable {
    /// Gains and thresholds. The defaults suit consumer MEMS parts (BMI160, LSM6DSx, MPU-6050)
    /// at 50–1600 Hz.
    struct Configuration: Sendable, Hashable {
        /// Mahony's `kP` for gravity, in rad/s per unit of `|v × v̂|`: tilt errors decay with a
        /// time constant of about 1/kP seconds; a residual bias `b` leaves a tilt error of b/kP.
        var accelerometerGain = 1.0
        /// The same for the magnetometer's yaw correction, rad/s per radian of heading error.
        var magnetometerGain = 0.5
        /// Both gains start here at initialisation (and after a gap)…
        var startupGain = 10.0
        /// …and fall linearly to their working values over this many seconds.
        var startupDuration = 1.0
        /// `||a| − 1 g|` below this (g) gives the accelerometer full weight.
        var accelerationTolerance = 0.05
        /// `||a| − 1 g|` above this (g) gives it none.
        var accelerationRejection = 0.25
        /// Seconds for the envelope of `||a| − 1 g|` to decay: weight returns this long after shaking.
        var disturbanceDecay = 0.2
        /// Angle (radians) between measured and estimated gravity below which the accelerometer
        /// has full weight, once started. Sideways shaking barely changes |a| (0.5 g sideways
        /// makes it 1.12 g) but turns it by 27°.
        var accelerationAngleTolerance = 3 * Double.pi / 180
        /// The angle beyond which it has none.
        var accelerationAngleRejection = 10 * Double.pi / 180
        /// Seconds of such rejection after which the estimate is taken to be wrong instead (say,
        /// after the gyroscope saturated): the start-up ramp runs again, without the angle test.
        var accelerationRecoveryTime = 2.0
        /// Length in seconds of the windows stillness is judged over.
        var stillnessWindow = 0.5
        /// The largest standard deviation of each gyroscope axis (rad/s) over a still window.
        var stillGyroDeviation = 0.01
        /// The largest standard deviation of each accelerometer axis (g) over a still window.
        var stillAccelerationDeviation = 0.01
        /// The largest `||mean a| − 1 g|` (g) over a still window.
        var stillAccelerationTolerance = 0.05
        /// The largest mean rate (rad/s, each axis) taken as bias rather than slow rotation: a
        /// device turning steadily about the vertical more slowly than this (11°/s) looks still,
        /// and its rate would be learned as bias. Datasheets give zero-rate offsets of ±3°/s
        /// (BMI160) to ±20°/s (MPU-6050) before calibration.
        var maximumGyroBias = 0.2
        /// Still time (s) the bias estimate averages over once learned (tracks temperature drift).
        var biasTimeConstant = 10.0
        /// Timestamp gaps (s) longer than this are not integrated.
        var maximumGap = 0.25
        /// Seconds of gyroscope samples without a usable acceleration (free fall, a broken or
        /// zero-reading accelerometer) after which the filter starts anyway, level, following the
        /// gyroscope: it levels itself once gravity is measured (the start-up ramp runs again).
        /// Device motion then never waits forever for its first estimate.
        var startWithoutGravityAfter = 0.5
        /// Relative difference in field strength beyond which a magnetometer sample is ignored.
        var magneticFieldTolerance = 0.15
        /// Difference in dip (radians) beyond which a magnetometer sample is ignored.
        var magneticDipTolerance = 10 * Double.pi / 180
        /// Seconds a changed field must last before it becomes the reference.
        var magneticRelearnTime = 10.0
        /// Seconds after which a magnetometer sample is too old to use.
        var magnetometerMaximumAge = 0.5
        /// The device's own field (hard-iron offset, µT, device frame) to subtract from every
        /// magnetometer sample, if the application knows it.
        var hardIronOffset: MagneticField? = nil

        init() {}
    }

    /// The reference frame estimates are given in.
    let referenceFrame: AttitudeReferenceFrame
    /// The gains and thresholds.
    let configuration: Configuration

    /// The current attitude (device to reference frame).
    private(set) var quaternion = Quaternion.identity
    /// Whether the first sample has been taken (estimates are produced from then on).
    private(set) var isInitialized = false
    /// The estimated gyroscope bias, rad/s.
    private(set) var gyroBias = Vector3.zero
    /// Seconds of stillness the bias estimate rests on (0: not learned yet).
    private(set) var biasStillTime = 0.0
    /// Whether the last completed window was still.
    private(set) var isStill = false
    /// Whether the last magnetometer sample used was accepted as the Earth's field.
    private(set) var isMagneticFieldAccepted = false

    private var lastTimestamp = 0.0
    private var lastRawRate = Vector3.zero
    /// The first gyroscope sample's time, while the filter waits to start.
    private var firstSampleTime: Double?
    /// Seconds of usable (weighted) accelerometer data since start or the last gap.
    private var rampProgress = 0.0
    private var disturbance = 0.0
    private var angleRejectedTime = 0.0

    // Stillness window: sums and sums of squares.
    private var windowStart = 0.0
    private var gyroCount = 0
    private var gyroSum = Vector3.zero
    private var gyroSumSq = Vector3.zero
    private var accelCount = 0
    private var accelSum = Vector3.zero
    private var accelSumSq = Vector3.zero

    // Magnetometer.
    private var magnetometer: (timestamp: Double, field: Vector3)? = nil
    private var magneticReference: (strength: Double, dip: Double)? = nil
    /// The horizontal direction in the reference frame the field's horizontal part is held to.
    private var headingReference = Vector3(1, 0, 0)
    private var rejectedSince: Double? = nil

    /// A filter producing attitudes in `referenceFrame`.
    /// - Parameters:
    ///   - referenceFrame: one frame; ``AttitudeReferenceFrame/xTrueNorthZVertical`` is treated
    ///     as magnetic north (no declination is known here).
    ///   - configuration: gains and thresholds.
    init(referenceFrame: AttitudeReferenceFrame = .xArbitraryZVertical, configuration: Configuration = .init()) {
        self.referenceFrame = referenceFrame
        self.configuration = configuration
    }

    private var usesMagnetometer: Bool { referenceFrame.needsMagnetometer }

    /// Keeps the newest magnetometer sample for the next gyroscope updates (the magnetometer
    /// usually runs slower than the gyroscope, on its own clock).
    /// - Parameters:
    ///   - timestamp: seconds.
    ///   - field: µT, device frame, Core Motion axes.
    mutating func update(magnetometerAt timestamp: Double, field: MagneticField) {
        var m = Vector3(field)
        if let offset = configuration.hardIronOffset { m = m - Vector3(offset) }
        guard m.isFinite, m.length > 0, timestamp.isFinite else { return }
        if let last = magnetometer, timestamp < last.timestamp { return }
        magnetometer = (timestamp, m)
    }

    /// Advances the estimate to a gyroscope sample.
    /// - Parameters:
    ///   - timestamp: the gyroscope sample's time, seconds.
    ///   - rotationRate: rad/s, as measured (bias included).
    ///   - acceleration: the acceleration at the same time, in g with Core Motion's sign, or nil
    ///     if none is known (the attitude then follows the gyroscope alone).
    /// - Returns: the estimate, or nil if the sample was dropped (not later than the previous
    ///   one, not finite) or the filter cannot start yet (no acceleration, or no magnetometer
    ///   sample for a frame that needs one).
    mutating func update(timestamp: Double, rotationRate: RotationRate, acceleration: Acceleration?) -> DeviceMotion? {
        let raw = Vector3(rotationRate)
        guard timestamp.isFinite, raw.isFinite else { return nil }
        let accel = acceleration.map(Vector3.init).flatMap { a in a.isFinite && a.length > 0.1 ? a : nil }
        let measured = acceleration.map(Vector3.init)

        guard isInitialized else {
            if firstSampleTime == nil { firstSampleTime = timestamp }
            let waited = timestamp - (firstSampleTime ?? timestamp)
            let start = accel ?? (waited >= configuration.startWithoutGravityAfter ? Vector3(0, 0, -1) : nil)
            guard let a = start, initialize(timestamp: timestamp, acceleration: a) else { return nil }
            lastTimestamp = timestamp
            lastRawRate = raw
            rampProgress = 0
            resetWindow(at: timestamp)
            return output(timestamp: timestamp, rawRate: raw, measured: measured)
        }

        let dt = timestamp - lastTimestamp
        guard dt > 0 else { return nil }
        let gap = dt > configuration.maximumGap
        if gap {
            // Unknown motion in the gap: do not integrate; re-level quickly from here.
            rampProgress = 0
            resetWindow(at: timestamp)
        } else {
            accumulateStillness(timestamp: timestamp, rawRate: raw, acceleration: measured)
        }

        // The rate over [last, now]: the midpoint of the two samples, less the bias.
        let rate = 0.5 * (raw + lastRawRate) - gyroBias

        // How far to trust the accelerometer now: an envelope of ||a| − 1 g| that rises at once
        // and decays over `disturbanceDecay`, mapped to a weight from 1 to 0.
        var weight = 0.0
        if let a = accel {
            let decay = configuration.disturbanceDecay > 0 ? exp(-dt / configuration.disturbanceDecay) : 0
            disturbance = max(abs(a.length - 1), disturbance * decay)
            let span = configuration.accelerationRejection - configuration.accelerationTolerance
            weight = span > 0
                ? min(1, max(0, (configuration.accelerationRejection - disturbance) / span))
                : (disturbance <= configuration.accelerationTolerance ? 1 : 0)
        }

        // Gain schedule: the start-up ramp runs on usable accelerometer time, so a start in the
        // middle of shaking still gets its high gain once the shaking stops.
        if !gap { rampProgress += dt * weight }
        let ramp = configuration.startupDuration > 0 ? max(0, 1 - rampProgress / configuration.startupDuration) : 0
        let kA = configuration.accelerometerGain + (configuration.startupGain - configuration.accelerometerGain) * ramp
        let kM = configuration.magnetometerGain + (max(configuration.startupGain, configuration.magnetometerGain) - configuration.magnetometerGain) * ramp

        var correction = Vector3.zero
        if let a = accel, weight > 0 {
            let measuredDown = (1 / a.length) * a
            let predictedDown = quaternion.inverseRotate(Vector3(0, 0, -1))
            let error = measuredDown.cross(predictedDown)
            if ramp == 0 {
                // Started: also weight by the angle between measured and estimated gravity.
                let angle = atan2(error.length, measuredDown.dot(predictedDown))
                let tolerance = configuration.accelerationAngleTolerance
                let rejection = configuration.accelerationAngleRejection
                let angleWeight = rejection > tolerance
                    ? min(1, max(0, (rejection - angle) / (rejection - tolerance)))
                    : (angle <= tolerance ? 1 : 0)
                if angleWeight == 0, !gap {
                    angleRejectedTime += dt
                    if angleRejectedTime >= configuration.accelerationRecoveryTime {
                        rampProgress = 0
                        angleRejectedTime = 0
                    }
                } else {
                    angleRejectedTime = 0
                }
                weight *= angleWeight
            }
            correction += (kA * weight) * error
        }
        if usesMagnetometer, let yawError = magneticYawError(at: timestamp, dt: dt) {
            // A rotation about the reference vertical, expressed in the device frame.
            correction += quaternion.inverseRotate(Vector3(0, 0, kM * yawError))
        }

        // q ← q ⊗ exp(½ (ω + correction) dt). After a gap only the corrections act, over one
        // 10 ms step (the start-up ramp then repeats them at a high gain).
        let delta = gap ? 0.01 * correction : dt * (rate + correction)
        let angle = delta.length
        if angle > 0, angle.isFinite {
            let dq = Quaternion(axis: (1 / angle) * delta, angle: angle)
            quaternion = quaternion.multiplied(by: dq).normalized
        }

        lastTimestamp = timestamp
        lastRawRate = raw
        return output(timestamp: timestamp, rawRate: raw, measured: measured)
    }

    // MARK: - Steps

    /// Sets the attitude from gravity (roll, pitch) and, in the north frame, the field (yaw).
    /// Returns false when the frame needs a magnetometer sample and there is none yet.
    private mutating func initialize(timestamp: Double, acceleration a: Vector3) -> Bool {
        // Gravity in the device frame is Rᵀ(0, 0, −1) = (cos p sin r, −sin p, −cos p cos r).
        let g = (1 / a.length) * a
        let pitch = asin(min(1, max(-1, -g.y)))
        let roll = atan2(g.x, -g.z)
        var attitude = Attitude(roll: roll, pitch: pitch, yaw: 0)
        if usesMagnetometer {
            guard let m = magnetometer, abs(timestamp - m.timestamp) <= configuration.magnetometerMaximumAge else {
                return false
            }
            let world = attitude.quaternion.rotate(m.field)
            let horizontal = Vector3(world.x, world.y, 0)
            guard horizontal.length > 0 else { return false }
            if referenceFrame.isNorthReferenced {
                // Turn so that the field's horizontal part lies along +x.
                attitude = Attitude(roll: roll, pitch: pitch, yaw: -atan2(world.y, world.x))
                headingReference = Vector3(1, 0, 0)
            } else {
                headingReference = (1 / horizontal.length) * horizontal
            }
            magneticReference = Self.strengthAndDip(world)
        }
        quaternion = attitude.quaternion
        isInitialized = true
        return true
    }

    /// The field's strength and dip (radians, positive pointing down) from its reference-frame vector.
    private static func strengthAndDip(_ world: Vector3) -> (strength: Double, dip: Double) {
        (world.length, atan2(-world.z, (world.x * world.x + world.y * world.y).squareRoot()))
    }

    /// The rotation about the vertical (radians, right-hand) that would bring the field's
    /// horizontal part onto its reference direction; nil when there is no usable sample.
    private mutating func magneticYawError(at timestamp: Double, dt: Double) -> Double? {
        guard let m = magnetometer, abs(timestamp - m.timestamp) <= configuration.magnetometerMaximumAge else {
            isMagneticFieldAccepted = false
            return nil
        }
        let world = quaternion.rotate(m.field)
        let now = Self.strengthAndDip(world)
        guard var reference = magneticReference else {
            magneticReference = now
            return nil
        }
        let strengthOff = abs(now.strength - reference.strength) > configuration.magneticFieldTolerance * reference.strength
        let dipOff = abs(now.dip - reference.dip) > configuration.magneticDipTolerance
        if strengthOff || dipOff {
            isMagneticFieldAccepted = false
            let since = rejectedSince ?? timestamp
            rejectedSince = since
            if timestamp - since >= configuration.magneticRelearnTime {
                // The "disturbance" has lasted: it is the field here now.
                magneticReference = now
                rejectedSince = nil
                if !referenceFrame.isNorthReferenced {
                    let h = Vector3(world.x, world.y, 0)
                    if h.length > 0 { headingReference = (1 / h.length) * h }
                }
            }
            return nil
        }
        rejectedSince = nil
        isMagneticFieldAccepted = true
        // Track slow changes (temperature, moving between rooms) over about 30 s.
        let alpha = min(1, max(0, dt) / 30)
        reference.strength += alpha * (now.strength - reference.strength)
        reference.dip += alpha * (now.dip - reference.dip)
        magneticReference = reference

        let h = Vector3(world.x, world.y, 0)
        guard h.length > 1e-9 else { return nil }
        let cross = h.x * headingReference.y - h.y * headingReference.x
        let dot = h.x * headingReference.x + h.y * headingReference.y
        return atan2(cross, dot)
    }

    private mutating func resetWindow(at timestamp: Double) {
        windowStart = timestamp
        gyroCount = 0
        gyroSum = .zero
        gyroSumSq = .zero
        accelCount = 0
        accelSum = .zero
        accelSumSq = .zero
    }

    private mutating func accumulateStillness(timestamp: Double, rawRate: Vector3, acceleration: Vector3?) {
        gyroCount += 1
        gyroSum += rawRate
        gyroSumSq += Vector3(rawRate.x * rawRate.x, rawRate.y * rawRate.y, rawRate.z * rawRate.z)
        if let a = acceleration, a.isFinite {
            accelCount += 1
            accelSum += a
            accelSumSq += Vector3(a.x * a.x, a.y * a.y, a.z * a.z)
        }
        let duration = timestamp - windowStart
        guard duration >= configuration.stillnessWindow else { return }
        defer { resetWindow(at: timestamp) }

        func deviation(_ sum: Vector3, _ sumSq: Vector3, _ n: Int) -> Double {
            let k = Double(n)
            let vx = max(0, sumSq.x / k - (sum.x / k) * (sum.x / k))
            let vy = max(0, sumSq.y / k - (sum.y / k) * (sum.y / k))
            let vz = max(0, sumSq.z / k - (sum.z / k) * (sum.z / k))
            return max(vx, vy, vz).squareRoot()
        }
        guard gyroCount >= 5, accelCount * 2 >= gyroCount else {
            isStill = false
            return
        }
        let meanRate = (1 / Double(gyroCount)) * gyroSum
        let meanAccel = (1 / Double(accelCount)) * accelSum
        let still = deviation(gyroSum, gyroSumSq, gyroCount) < configuration.stillGyroDeviation
            && deviation(accelSum, accelSumSq, accelCount) < configuration.stillAccelerationDeviation
            && abs(meanAccel.length - 1) < configuration.stillAccelerationTolerance
            && max(abs(meanRate.x), abs(meanRate.y), abs(meanRate.z)) < configuration.maximumGyroBias
        isStill = still
        guard still else { return }
        biasStillTime += duration
        let alpha = min(1, duration / min(biasStillTime, configuration.biasTimeConstant))
        gyroBias += alpha * (meanRate - gyroBias)
    }

    private func output(timestamp: Double, rawRate: Vector3, measured: Vector3?) -> DeviceMotion {
        let attitude = Attitude(quaternion: quaternion)
        let gravity = quaternion.inverseRotate(Vector3(0, 0, -1))
        let user = measured.map { $0 - gravity } ?? .zero
        var field = CalibratedMagneticField.unavailable
        if let m = magnetometer, abs(timestamp - m.timestamp) <= configuration.magnetometerMaximumAge {
            let accuracy: MagneticFieldCalibrationAccuracy =
                configuration.hardIronOffset == nil ? .uncalibrated : (isMagneticFieldAccepted || !usesMagnetometer ? .medium : .low)
            field = CalibratedMagneticField(field: m.field.magneticField, accuracy: accuracy)
        }
        return DeviceMotion(
            attitude: attitude,
            rotationRate: (rawRate - gyroBias).rotationRate,
            gravity: gravity.acceleration,
            userAcceleration: user.acceleration,
            magneticField: field,
            heading: referenceFrame.isNorthReferenced ? DeviceMotion.heading(yaw: attitude.yaw) : -1,
            timestamp: timestamp
        )
    }
}
