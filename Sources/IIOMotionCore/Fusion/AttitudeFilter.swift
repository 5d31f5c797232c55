// Over 500 lines: the filter is one value whose private state (the tilt loop's filters, the bias
// Kalman filter's covariance, the rest detector, the heading's reference and disturbance timers)
// every step reads and writes; kept in one file so that this state stays private to it. The
// configuration is in AttitudeFilter+Configuration.swift, the low-pass filter in LowPass.swift.
internal import Glibc

/// The attitude estimator behind ``DeviceMotion``: a pure value (no threads, no I/O, no
/// allocation per sample) fed timestamped samples and returning one estimate per gyroscope sample.
///
/// ## Algorithm
/// The structure and the default parameters of VQF, written here from its description in
/// D. Laidig and T. Seel, "VQF: Highly accurate IMU orientation estimation with bias estimation
/// and magnetic disturbance rejection", Information Fusion 91 (2023) 187–204 (§3; the defaults of
/// its Table 1). The attitude is the product of three parts:
/// - the gyroscope strapdown integration, device → an "almost inertial" frame I: the rate, less
///   the estimated bias, integrated on the unit quaternions;
/// - the inclination correction, I → a z-up frame E: each acceleration is turned into I, where a
///   user's accelerations average out (their integral is a velocity) and gravity does not, and
///   low-pass filtered there (a second-order Butterworth filter of time constant
///   ``Configuration/accelerometerTimeConstant``; the mean of the samples until that much time has
///   passed, so that the first estimates level at once), blended with a second such filter of
///   the shorter ``Configuration/fastAccelerometerTimeConstant`` while the device turns much and
///   accelerates little (``fastGravityWeight(userAcceleration:dt:)``); after every sample the
///   correction turns by the smallest rotation that puts the filtered vector, in E, on the
///   vertical;
/// - the heading correction, a rotation about the vertical (magnetic-north and corrected frames):
///   the angle between the field's horizontal part, in E, and north, followed by a first-order
///   filter of time constant ``Configuration/magnetometerTimeConstant`` (faster at the start: the
///   mean of the samples so far), paused while the field is disturbed. A disturbed field can
///   never tilt the estimate.
///
/// The gyroscope's bias is a three-state Kalman filter:
/// - in motion, the inclination correction's disagreement (the filtered vector's horizontal part
///   in E, per sample period: a rate) is a measurement of the bias through the low-pass filtered
///   rotation matrix device → E (the same filter on both sides, so the filter's lag is part of
///   the model); the part about the vertical, which gravity cannot show, is only held
///   (``Configuration/verticalBiasForgettingFactor``);
/// - at rest (``Configuration/restGyroThreshold``, ``Configuration/restAccelerationThreshold``
///   against the low-pass filtered signals, for ``Configuration/restMinimumDuration``), the
///   low-pass filtered gyroscope is a direct measurement of all three axes.
/// The covariance grows so that, unmeasured, the uncertainty returns to its initial value over
/// ``Configuration/biasForgettingTime``; estimate and innovations are limited to
/// ``Configuration/biasLimit``.
///
/// Magnetic disturbances (§3.3): the field's strength and dip, low-pass filtered, are compared
/// with a reference learned from undisturbed samples; beyond ``Configuration/magneticStrengthTolerance``
/// or ``Configuration/magneticDipTolerance`` the field is rejected (for at most
/// ``Configuration/maximumRejectionTime``, then used at half gain). A field that stays consistent
/// while the device turns for ``Configuration/newFieldTime`` (``Configuration/firstFieldTime`` for
/// the first reference) becomes the new reference.
///
/// What is this project's own: the second gravity filter and its weight; the magnetometer's
/// calibration (hard and soft iron, learned by ``DeviceMotionFusion`` with
/// ``MagnetometerCalibrator`` and applied here with its accuracy level; a new fit restarts the
/// heading's fast convergence, a refinement moves the field's reference with it and is applied
/// only if it does not make the heading's scatter over the last accepted field samples clearly
/// wider, ``admits(_:over:at:)``), Core Motion's reference
/// frames (arbitrary: the gyroscope and gravity; corrected: the magnetometer keeps the
/// arbitrary heading from drifting; north), the field sample turned with the device to the
/// gyroscope's time, timestamps with gaps, and the estimate's outputs (gravity, user
/// acceleration, bias-corrected rate, calibrated field).
///
/// ## Units
/// Core Motion's throughout: acceleration in g with Core Motion's sign (face up reads
/// `(0, 0, −1)`), rotation in rad/s, field in µT, time in seconds. ``DeviceMotionFusion``
/// converts from ``MotionUnits/si``.
package struct AttitudeFilter: Sendable {

    // Fixed parts of VQF's disturbance rejection (Table 1), not worth a parameter each.
    /// Seconds: the time constant of the field's filtered strength and dip.
    private static let fieldFilterTimeConstant = 0.05
    /// Seconds: the time constant the reference follows an undisturbed field with.
    private static let referenceTimeConstant = 20.0
    /// Seconds a field must be undisturbed before it is used again.
    private static let minimumUndisturbedTime = 0.5
    /// rad/s: the turn rate a new field must be seen at to count towards becoming the reference.
    private static let newFieldMinimumRate = 20 * Double.pi / 180
    /// How much slower rejection time is regained than spent, and the gain's divisor past it.
    private static let rejectionFactor = 2.0
    /// How much wider a refined calibration may make the heading's scatter over the
    /// ``FieldWindow`` than the calibration in use and still be applied. The scatter holds
    /// what no calibration changes (the estimate's tilt errors, which the field's dip
    /// multiplies, sensor noise, the gyroscope's drift over the window), so only a fit that
    /// is clearly worse for the heading waits.
    private static let refinedFitScatterRatio = 1.1
    /// Radians: how far the calibrated field's heading may be from the estimate when the first
    /// fit is applied and still be corrected at the heading correction's pace. Beyond it, the
    /// heading so far came from a field the calibration shows to be off (a hard-iron offset
    /// comparable to the Earth's field turns it by any angle), and it is learned again as at
    /// the start. A first fit is rough: on BROAD's recordings started at rest it is 1–16° from
    /// the estimate, and the start's fast correction towards every first fit costs more than it
    /// saves (9-axis total error 2.14° → 2.38°, mean of the 14 shared trials). 45° lies between
    /// those and what an uncalibrated field next to a magnet gives: 59° and 70° on BROAD's
    /// attached magnets (32, 34) started 5 s into the movement, 150–180° on iio-sim's iron case.
    private static let firstFitRestartAngle = 45 * Double.pi / 180

    /// The reference frame estimates are given in.
    let referenceFrame: AttitudeReferenceFrame
    /// The parameters.
    let configuration: Configuration

    /// The current attitude (device to reference frame).
    private(set) var quaternion = Quaternion.identity
    /// Whether the first sample has been taken (estimates are produced from then on).
    private(set) var isInitialized = false
    /// The estimated gyroscope bias, rad/s.
    private(set) var gyroBias = Vector3.zero
    /// The bias estimate's covariance ((rad/s)², symmetric 3×3, rows).
    var biasCovariance: Matrix3 { Self.unitSquare * p }
    /// Seconds of rest the bias estimate has used.
    private(set) var biasStillTime = 0.0
    /// Whether rest is detected.
    private(set) var isStill = false
    /// Whether the last magnetometer sample used was accepted as the Earth's field.
    private(set) var isMagneticFieldAccepted = false
    /// The calibration applied to the magnetometer's samples.
    var magnetometerCalibration = MagnetometerCalibrator()

    // The covariance is kept in (0.01 °/s)², as VQF's description has it: the noises squared are
    // then of order 1 to 10⁴.
    private static let unitSquare = (Double.pi / 180 / 100) * (Double.pi / 180 / 100)
    private var p = Matrix3.diagonal(0)

    private var firstSampleTime: Double?
    private var lastTimestamp = 0.0
    /// The yaw of the first estimate before the arbitrary frames' offset (radians).
    private var startYaw = 0.0
    /// Device → almost inertial frame (the gyroscope) and almost inertial → E (the inclination).
    private var gyroQuaternion = Quaternion.identity
    /// The previous step's rate increment (rad, device frame), for the coning correction.
    private var previousIncrement = Vector3.zero
    private var inclination = Quaternion.identity
    /// Heading correction (radians about the vertical, E → east-north-up-like frame: north on +y).
    private var delta = 0.0
    /// The corrected frame's constant offset (radians), from the first heading.
    private var arbitraryOffset: Double?

    private var gravityFilter = LowPass()
    /// The second gravity filter (``Configuration/fastAccelerometerTimeConstant``) and what
    /// weighs it against the first: the user's acceleration in I (g, smoothed), its mean square
    /// (g²), the mean turn rate (rad/s) and the seconds since gravity was last averaged afresh.
    private var fastGravityFilter = LowPass()
    private var fastCoefficients = LowPass.Coefficients()
    private var userAcceleration = Vector3.zero
    private var userAccelerationPower = 0.0
    private var meanTurnRate = 0.0
    private var gravityTime = 0.0
    private var matrixFilter = (LowPass(), LowPass(), LowPass())
    private var projectedBiasFilter = LowPass()
    private var restGyroFilter = LowPass()
    private var restAccelFilter = LowPass()
    private var restTime = 0.0
    private var coefficients = LowPass.Coefficients()
    private var restCoefficients = LowPass.Coefficients()

    private var magnetometer: (timestamp: Double, field: Vector3, frameTime: Double, fresh: Bool)? = nil
    private var lastMagneticUpdate: Double?
    private var fieldFilter = LowPass()
    private var fieldCoefficients = LowPass.Coefficients()
    private var reference: (strength: Double, dip: Double)?
    private var candidate = (strength: 0.0, dip: 0.0)
    private var candidateTime = 0.0
    /// Whether the reference is the first field seen, not yet confirmed.
    private var provisional = false
    private var undisturbedTime = 0.0
    private var isDisturbed = true
    private var rejectionTime = 0.0
    /// The fast start of the heading correction: the gain of the next sample (1, ½, ⅓, …), 0 once done.
    private var initialGain = 1.0
    /// Whether the first fit of the calibration has just been applied and the next field sample
    /// decides whether the heading is learned again (``firstFitRestartAngle``).
    private var firstFitApplied = false
    /// The calibration applied to the samples, with the accuracy its fit was given: while a refined
    /// fit is held back (``admits(_:over:at:)``), the field's accuracy is this fit's, not the newest's.
    private var appliedCalibration: (offset: Vector3, softIron: Matrix3, accuracy: MagneticFieldCalibrationAccuracy)? = nil
    /// The field samples a refined calibration is tested on (``admits(_:over:at:)``), and the
    /// sample noted for it, added once the heading correction has accepted it.
    private var fieldWindow = FieldWindow()
    private var windowCandidate: (field: Vector3, attitude: Quaternion)?
    /// The refined fit last tested, when, and whether it was admitted.
    private var testedFit: (offset: Vector3, softIron: Matrix3, time: Double, admitted: Bool)?

    /// - Parameters:
    ///   - referenceFrame: the frame attitudes are given in; the magnetic-north frame's north is
    ///     magnetic north (no declination is known here).
    ///   - configuration: the parameters.
    init(referenceFrame: AttitudeReferenceFrame = .xArbitraryZVertical, configuration: Configuration = .init()) {
        self.referenceFrame = referenceFrame
        self.configuration = configuration
        let s = configuration.initialBiasDeviation * 180 / .pi * 100
        p = .diagonal(s * s)
    }

    private var usesMagnetometer: Bool { referenceFrame.needsMagnetometer }

    /// Keeps the newest magnetometer sample for the next gyroscope update (the magnetometer
    /// usually runs slower than the gyroscope, on its own clock).
    /// - Parameters:
    ///   - timestamp: seconds.
    ///   - field: µT, device frame, Core Motion axes.
    ///   - turn: for a sample that arrives after the gyroscope samples of its time, the device's
    ///     rotation from the sample's time to `turnedTo` (device frame then to device frame at
    ///     `turnedTo`); the field is turned by it so that it is compared with the attitude of one
    ///     time. Without it, the field is taken as of its own time.
    ///   - turnedTo: the time `turn` ends at (the last estimate's).
    mutating func update(magnetometerAt timestamp: Double, field: MagneticField, turn: Quaternion? = nil, turnedTo: Double = -.infinity) {
        var m = Vector3(field)
        guard m.isFinite, m.length > 0, timestamp.isFinite else { return }
        if let last = magnetometer, timestamp < last.timestamp { return }
        if let offset = configuration.hardIronOffset {
            m = m - Vector3(offset)
        } else if configuration.calibratesMagnetometer {
            let spacing = configuration.magnetometerTimeConstant / Double(FieldWindow.capacity)
            if usesMagnetometer, isInitialized, timestamp - fieldWindow.lastNoted >= spacing {
                fieldWindow.lastNoted = timestamp
                // The attitude at the field's time: a turned sample's is the last estimate's
                // with the turn since undone.
                let now = inclination.multiplied(by: gyroQuaternion)
                if let turn, turnedTo > timestamp {
                    windowCandidate = (m, now.multiplied(by: turn).normalized)
                } else {
                    windowCandidate = (m, now)
                }
            }
            // The filter alone learns its own calibration; in ``DeviceMotionFusion`` it holds the
            // feed's `applying` copy, which takes nothing here.
            magnetometerCalibration.add(m)
            if magnetometerCalibration.isCalibrated {
                // The fit's parts, not a copy of the calibrator (a large value holding its samples' arrays).
                let offset = magnetometerCalibration.offset, softIron = magnetometerCalibration.softIron
                let calibrated = softIron * (m - offset)
                let accuracy = magnetometerCalibration.accuracy
                if let applied = appliedCalibration {
                    if applied.offset == offset, applied.softIron == softIron {
                        appliedCalibration?.accuracy = accuracy
                    } else if admits((offset, softIron), over: (applied.offset, applied.softIron), at: timestamp) {
                        // A refined fit: the field's reference moves with it, so that the change
                        // is not taken for a disturbance.
                        moveReference(from: applied.softIron * (m - applied.offset), to: calibrated)
                        appliedCalibration = (offset, softIron, accuracy)
                    }
                    if let a = appliedCalibration { m = a.softIron * (m - a.offset) }
                } else {
                    // The first fit: the field's reference is learned again from the calibrated
                    // field (provisionally, as at the start); the heading moves to it at the
                    // heading correction's pace, not at once (a first fit is rough), unless it
                    // is far off (``firstFitRestartAngle``).
                    appliedCalibration = (offset, softIron, accuracy)
                    reference = nil
                    provisional = false
                    candidateTime = 0
                    firstFitApplied = true
                    m = calibrated
                }
            }
        }
        if let turn, turnedTo > timestamp {
            magnetometer = (timestamp, turn.rotate(m), turnedTo, true)
        } else {
            magnetometer = (timestamp, m, timestamp, true)
        }
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
        let measured = acceleration.map(Vector3.init)
        // The specific force (VQF's sign: up when still), in g.
        let specific = measured.flatMap { a in a.isFinite && a.length > 0.1 ? -a : nil }

        guard isInitialized else {
            if firstSampleTime == nil { firstSampleTime = timestamp }
            let waited = timestamp - (firstSampleTime ?? timestamp)
            guard let f = specific ?? (waited >= configuration.startWithoutGravityAfter ? Vector3(0, 0, 1) : nil) else { return nil }
            if usesMagnetometer, magnetometer == nil { return nil }
            isInitialized = true
            lastTimestamp = timestamp
            correctInclination(specific: f, dt: 0)
            // Arbitrary frames start at yaw 0.
            startYaw = Attitude(quaternion: inclination.multiplied(by: gyroQuaternion)).yaw
            if usesMagnetometer { correctHeading(at: timestamp, stepStart: timestamp, step: .zero) }
            quaternion = output()
            return estimate(timestamp: timestamp, rawRate: raw, measured: measured)
        }

        let dt = timestamp - lastTimestamp
        guard dt > 0 else { return nil }
        lastTimestamp = timestamp
        if dt > configuration.maximumGap {
            // Unknown motion in the gap: not integrated; gravity averaged afresh from here.
            restartGravity()
            previousIncrement = .zero
            restTime = 0
            isStill = false
            if let f = specific { correctInclination(specific: f, dt: 0) }
            quaternion = output()
            return estimate(timestamp: timestamp, rawRate: raw, measured: measured)
        }
        coefficients.update(timeConstant: configuration.accelerometerTimeConstant, dt: dt)
        fastCoefficients.update(timeConstant: fastTimeConstant, dt: dt)
        meanTurnRate += min(1, dt / Self.indicatorTimeConstant) * (raw.length - meanTurnRate)
        restCoefficients.update(timeConstant: configuration.restFilterTimeConstant, dt: dt)

        // 1. The gyroscope: each sample's rate, less the bias, is its mean over the step that ends
        // at it (as VQF takes it; on the BROAD recordings a parabola through three samples, or the
        // midpoint of two, both put the rate half a step later than the sensor does and cost
        // 0.15° of inclination). The step's rotation is that increment with the two-sample
        // coning correction α₋₁ × α / 12 (P. G. Savage, "Strapdown inertial navigation
        // integration algorithm design part 1: attitude algorithms", J. Guidance, Control, and
        // Dynamics 21(1), 1998: its two-sample form, the rate taken as linear over two steps): a rotation whose axis
        // itself turns is not the integral of its rate.
        let stepStart = timestamp - dt
        let increment = dt * (raw - gyroBias)
        let step = increment + (1.0 / 12) * previousIncrement.cross(increment)
        previousIncrement = increment
        let angle = step.length
        if angle > 0, angle.isFinite {
            gyroQuaternion = gyroQuaternion.multiplied(by: Quaternion(axis: (1 / angle) * step, angle: angle)).normalized
        }
        detectRest(rate: raw, specific: specific, dt: dt)

        // 2. Gravity, and the bias from it.
        if isStill, specific != nil, isLost() {
            restartGravity()
            correctInclination(specific: restAccelFilter.value, dt: 0)
        } else if let f = specific {
            correctInclination(specific: f, dt: dt)
        }

        // 3. The field.
        if usesMagnetometer { correctHeading(at: timestamp, stepStart: stepStart, step: step) }
        quaternion = output()
        return estimate(timestamp: timestamp, rawRate: raw, measured: measured)
    }

    // MARK: - Steps

    /// Gravity averaged afresh: the filters of the inclination correction and of the bias's
    /// motion measurement restart.
    private mutating func restartGravity() {
        gravityFilter = LowPass()
        fastGravityFilter = LowPass()
        userAcceleration = .zero
        userAccelerationPower = 0
        gravityTime = 0
        matrixFilter = (LowPass(), LowPass(), LowPass())
        projectedBiasFilter = LowPass()
    }

    /// At rest: whether the estimate's vertical is further than ``Configuration/recoveryAngle``
    /// from the accelerometer's filtered direction, whose magnitude is 1 g within
    /// ``Configuration/recoveryMagnitudeTolerance``.
    private func isLost() -> Bool {
        let a = restAccelFilter.value
        let n = a.length
        guard n > 0, abs(n - 1) <= configuration.recoveryMagnitudeTolerance else { return false }
        let up = inclination.multiplied(by: gyroQuaternion).inverseRotate(Vector3(0, 0, 1))
        return up.dot((1 / n) * a) < cos(configuration.recoveryAngle)
    }

    /// Rest: the gyroscope and the accelerometer each within their threshold of their low-pass
    /// filtered values (and the filtered rate within its threshold) for the minimum duration.
    private mutating func detectRest(rate: Vector3, specific: Vector3?, dt: Double) {
        let gyro = restGyroFilter.filter(rate, restCoefficients, timeConstant: configuration.restFilterTimeConstant, dt: dt)
        let th = configuration.restGyroThreshold
        let d = rate - gyro
        if d.dot(d) >= th * th || abs(gyro.x) > th || abs(gyro.y) > th || abs(gyro.z) > th {
            restTime = 0
            isStill = false
        }
        guard let f = specific else { return }
        let accel = restAccelFilter.filter(f, restCoefficients, timeConstant: configuration.restFilterTimeConstant, dt: dt)
        let a = f - accel
        let tha = configuration.restAccelerationThreshold
        if a.dot(a) >= tha * tha {
            restTime = 0
            isStill = false
        } else if d.dot(d) < th * th && abs(gyro.x) <= th && abs(gyro.y) <= th && abs(gyro.z) <= th {
            restTime += dt
            if restTime >= configuration.restMinimumDuration { isStill = true }
        }
    }

    /// The inclination correction and the bias filter (`dt` 0: the first sample, or after a gap).
    private mutating func correctInclination(specific f: Vector3, dt: Double) {
        let tau = configuration.accelerometerTimeConstant
        let inI = gyroQuaternion.rotate(f)
        let slow = gravityFilter.filter(inI, coefficients, timeConstant: tau, dt: dt)
        let fast = fastGravityFilter.filter(inI, fastCoefficients, timeConstant: fastTimeConstant, dt: dt)
        let weight = fastGravityWeight(userAcceleration: inI - slow, dt: dt)
        let filtered = weight > 0 ? slow + weight * (fast - slow) : slow
        let e0 = inclination.rotate(filtered)
        let n = e0.length
        guard n > 0, n.isFinite else { return }
        let e = (1 / n) * e0
        // The smallest rotation taking e onto +z.
        let w = ((e.z + 1) / 2).squareRoot()
        let correction = w > 1e-6
            ? Quaternion(x: 0.5 * e.y / w, y: -0.5 * e.x / w, z: 0, w: w)
            : Quaternion(x: 1, y: 0, z: 0, w: 0)
        inclination = correction.multiplied(by: inclination).normalized
        guard dt > 0 else { return }
        estimateBias(disagreement: e, dt: dt)
    }

    /// Seconds: how long the user's acceleration is smoothed (before it is squared) for
    /// ``fastGravityWeight(userAcceleration:dt:)``: a hand's tremor and a tap average out of it.
    private static let userAccelerationTimeConstant = 0.5
    /// Seconds: the time constant of the mean square of the user's acceleration and of the mean
    /// turn rate that ``fastGravityWeight(userAcceleration:dt:)`` compares.
    private static let indicatorTimeConstant = 2.0

    private var fastTimeConstant: Double {
        min(configuration.fastAccelerometerTimeConstant, configuration.accelerometerTimeConstant)
    }

    /// The weight of the fast gravity filter (0: the slow one alone; 1: the fast one alone)
    /// from the ratio of the user's acceleration (`userAcceleration`: the specific force less the
    /// slow filter's gravity, g, frame I) to the turn rate: a gyroscope's errors grow with the
    /// turn rate, the accelerometer's departure from gravity is the user's acceleration. Zero
    /// until both filters and the indicator have settled after gravity was averaged afresh.
    private mutating func fastGravityWeight(userAcceleration a: Vector3, dt: Double) -> Double {
        guard dt > 0 else { return 0 }
        gravityTime += dt
        userAcceleration += min(1, dt / Self.userAccelerationTimeConstant) * (a - userAcceleration)
        userAccelerationPower += min(1, dt / Self.indicatorTimeConstant)
            * (userAcceleration.dot(userAcceleration) - userAccelerationPower)
        guard gravityTime >= configuration.accelerometerTimeConstant + Self.indicatorTimeConstant else { return 0 }
        let low = configuration.fastGravityBelow, high = configuration.slowGravityAbove
        // m/s: the RMS user acceleration (g → m/s²) per unit turn rate.
        let ratio = standardGravity * userAccelerationPower.squareRoot() / max(meanTurnRate, 1e-3)
        guard ratio < high else { return 0 }
        return high > low ? min(1, (high - ratio) / (high - low)) : 1
    }

    /// One step of the bias's Kalman filter (VQF §3.2).
    private mutating func estimateBias(disagreement e: Vector3, dt: Double) {
        let tau = configuration.accelerometerTimeConstant
        let c = configuration
        let limit = c.biasLimit
        let r = RotationMatrix(inclination.multiplied(by: gyroQuaternion))
        let row0 = Vector3(r.m11, r.m12, r.m13), row1 = Vector3(r.m21, r.m22, r.m23), row2 = Vector3(r.m31, r.m32, r.m33)
        let projected = Vector3(row0.dot(gyroBias), row1.dot(gyroBias), 0)
        let lr0 = matrixFilter.0.filter(row0, coefficients, timeConstant: tau, dt: dt)
        let lr1 = matrixFilter.1.filter(row1, coefficients, timeConstant: tau, dt: dt)
        let lr2 = matrixFilter.2.filter(row2, coefficients, timeConstant: tau, dt: dt)
        let lp = projectedBiasFilter.filter(projected, coefficients, timeConstant: tau, dt: dt)

        // Noises in (0.01 °/s)²: the covariance's growth per step, and the measurements'.
        let s0 = c.initialBiasDeviation * 180 / .pi * 100
        let growth = (0.1 * s0) * (0.1 * s0) * dt / c.biasForgettingTime
        let p0 = s0 * s0
        if p.r0.x < p0 { p.r0.x += growth }
        if p.r1.y < p0 { p.r1.y += growth }
        if p.r2.z < p0 { p.r2.z += growth }

        var h: Matrix3
        var y: Vector3
        var noise: Vector3
        if isStill {
            let sr = c.biasRestNoise * 180 / .pi * 100
            let w = sr * sr * sr * sr / growth + sr * sr
            h = .diagonal(1)
            y = restGyroFilter.value - gyroBias
            noise = Vector3(w, w, w)
            biasStillTime += dt
        } else {
            let sm = c.biasMotionNoise * 180 / .pi * 100
            let w = sm * sm * sm * sm / growth + sm * sm
            h = Matrix3(r0: lr0, r1: lr1, r2: lr2)
            y = Vector3(-e.y / dt + lp.x - lr0.dot(gyroBias), e.x / dt + lp.y - lr1.dot(gyroBias), -lr2.dot(gyroBias))
            noise = Vector3(w, w, w / max(c.verticalBiasForgettingFactor, 1e-10))
        }
        y = Vector3(min(limit, max(-limit, y.x)), min(limit, max(-limit, y.y)), min(limit, max(-limit, y.z)))
        // K = P Hᵀ (W + H P Hᵀ)⁻¹; b += K y; P −= K H P.
        let ph = p * h.transposed
        var s = h * ph
        s.r0.x += noise.x
        s.r1.y += noise.y
        s.r2.z += noise.z
        guard let si = s.inverse else { return }
        let k = ph * si
        let b = gyroBias + k * y
        gyroBias = Vector3(min(limit, max(-limit, b.x)), min(limit, max(-limit, b.y)), min(limit, max(-limit, b.z)))
        p = p - k * (h * p)
    }

    /// The heading correction from the newest field sample, turned with the device to now
    /// (`step`: this update's rotation vector from `stepStart`, device frame).
    private mutating func correctHeading(at timestamp: Double, stepStart: Double, step: Vector3) {
        guard var m = magnetometer else { isMagneticFieldAccepted = false; return }
        if m.frameTime < timestamp {
            // Turned with the device into its frame now, as the attitude is.
            let dt = timestamp - stepStart
            let share = dt > 0 ? min(1, (timestamp - max(m.frameTime, stepStart)) / dt) : 1
            let turn = share * step
            let a = turn.length
            if a > 0, a.isFinite { m.field = Quaternion(axis: (1 / a) * turn, angle: a).inverseRotate(m.field) }
            m.frameTime = timestamp
        }
        let fresh = m.fresh
        m.fresh = false
        magnetometer = m
        guard timestamp - m.timestamp <= configuration.magnetometerMaximumAge else { isMagneticFieldAccepted = false; return }
        guard fresh else { return }
        let noted = windowCandidate
        windowCandidate = nil
        let dt = lastMagneticUpdate.map { min(max(m.timestamp - $0, 0), configuration.magnetometerMaximumAge) } ?? 0
        lastMagneticUpdate = m.timestamp
        let world = inclination.multiplied(by: gyroQuaternion).rotate(m.field)
        let strength = world.length
        guard strength > 0 else { return }
        let dip = -asin(max(-1, min(1, world.z / strength)))
        let error = Self.wrap(atan2(world.x, world.y) - delta)
        if firstFitApplied {
            firstFitApplied = false
            if abs(error) > Self.firstFitRestartAngle {
                // Learned again as at the start: the heading with the fast correction (its first
                // gain is 1: the heading moves by `error` now), the reference from the calibrated
                // field alone (the filtered strength and dip were the uncalibrated field's). The
                // corrected frame's yaw is arbitrary: its origin moves with the heading, so that
                // its estimates do not jump.
                initialGain = 1
                fieldFilter = LowPass()
                if let o = arbitraryOffset { arbitraryOffset = Self.wrap(o + error) }
            }
        }
        judgeDisturbance(strength: strength, dip: dip, dt: dt)
        // A sample the filtered judgement still takes as undisturbed but which is itself beyond
        // the tolerances (the first samples of a disturbance, before the filtered field shows
        // it) is not used.
        let outlier = !isDisturbed && reference.map { r in
            abs(strength - r.strength) >= configuration.magneticStrengthTolerance * r.strength
                || abs(dip - r.dip) >= configuration.magneticDipTolerance
        } == true

        var k = dt > 0 ? 1 - exp(-dt / configuration.magnetometerTimeConstant) : 0
        if outlier {
            isMagneticFieldAccepted = false
            return
        }
        if isDisturbed {
            if rejectionTime <= configuration.maximumRejectionTime {
                rejectionTime += dt
                k = 0
            } else {
                k /= Self.rejectionFactor
            }
        } else {
            rejectionTime = max(rejectionTime - Self.rejectionFactor * dt, 0)
        }
        if initialGain > 0, !isDisturbed || reference == nil {
            k = max(k, initialGain)
            initialGain = initialGain / (initialGain + 1)
            if initialGain * configuration.magnetometerTimeConstant < max(dt, 1e-3) { initialGain = 0 }
        }
        isMagneticFieldAccepted = !isDisturbed
        if !isDisturbed, let noted { fieldWindow.append(field: noted.field, attitude: noted.attitude) }
        if !isDisturbed, initialGain == 0, dt > 0 {
            estimateVerticalBias(headingError: error, dt: dt)
        }
        delta = Self.wrap(delta + k * error)
        if arbitraryOffset == nil { arbitraryOffset = delta }
    }

    /// The bias about the vertical from the heading correction (one more measurement of the
    /// Kalman filter VQF builds on the inclination correction): a bias's residual r turns the
    /// estimate about the vertical at v·r (v: the device's vertical), which the first-order
    /// heading correction follows with the error −τ_mag·v·r, so −error/τ_mag measures v·r, with
    /// the noise ``Configuration/biasHeadingNoise`` (`dt`: seconds since the previous field sample).
    private mutating func estimateVerticalBias(headingError error: Double, dt: Double) {
        let c = configuration
        guard c.biasHeadingNoise.isFinite, c.biasLimit > 0 else { return }
        let h = inclination.multiplied(by: gyroQuaternion).inverseRotate(Vector3(0, 0, 1))
        let s0 = c.initialBiasDeviation * 180 / .pi * 100
        let growth = (0.1 * s0) * (0.1 * s0) * dt / c.biasForgettingTime
        let sh = c.biasHeadingNoise * 180 / .pi * 100
        let w = sh * sh * sh * sh / growth + sh * sh
        let limit = c.biasLimit
        let y = min(limit, max(-limit, -error / c.magnetometerTimeConstant))
        let ph = p * h
        let k = (1 / (h.dot(ph) + w)) * ph
        let b = gyroBias + y * k
        gyroBias = Vector3(min(limit, max(-limit, b.x)), min(limit, max(-limit, b.y)), min(limit, max(-limit, b.z)))
        p = p - Matrix3.outer(k, ph)
    }

    /// VQF's magnetic disturbance detection and new-field acceptance.
    private mutating func judgeDisturbance(strength: Double, dip: Double, dt: Double) {
        let c = configuration
        var now = Vector3(strength, dip, 0)
        if dt > 0 {
            fieldCoefficients.update(timeConstant: Self.fieldFilterTimeConstant, dt: dt)
            now = fieldFilter.filter(now, fieldCoefficients, timeConstant: Self.fieldFilterTimeConstant, dt: dt)
        } else {
            fieldFilter = LowPass()
        }
        let kRef = dt > 0 ? 1 - exp(-dt / Self.referenceTimeConstant) : 0
        let starting = lastTimestamp - (firstSampleTime ?? lastTimestamp) < c.accelerometerTimeConstant
        if reference == nil && !provisional || provisional && starting {
            // The first field is the reference until a consistent one replaces it (after
            // ``Configuration/firstFieldTime``): a disturbance at the start is rejected too. Until
            // the start's gravity has been averaged (``Configuration/accelerometerTimeConstant``
            // from the first sample) the inclination, and with it the field's dip, is not known
            // (a start in motion tilts the first estimate by tens of degrees), so the first
            // reference follows the field until then.
            reference = (now.x, now.y)
            candidate = (now.x, now.y)
            candidateTime = 0
            provisional = true
            isDisturbed = false
        }
        if var r = reference {
            if abs(now.x - r.strength) < c.magneticStrengthTolerance * r.strength, abs(now.y - r.dip) < c.magneticDipTolerance {
                undisturbedTime += dt
                if undisturbedTime >= Self.minimumUndisturbedTime {
                    isDisturbed = false
                    r.strength += kRef * (now.x - r.strength)
                    r.dip += kRef * (now.y - r.dip)
                    reference = r
                }
            } else {
                undisturbedTime = 0
                isDisturbed = true
            }
        }
        if abs(now.x - candidate.strength) < c.magneticStrengthTolerance * candidate.strength, abs(now.y - candidate.dip) < c.magneticDipTolerance {
            if restGyroFilter.value.length >= Self.newFieldMinimumRate || provisional { candidateTime += dt }
            candidate.strength += kRef * (now.x - candidate.strength)
            candidate.dip += kRef * (now.y - candidate.dip)
            if isDisturbed, candidateTime >= (provisional ? c.firstFieldTime : c.newFieldTime) {
                reference = candidate
                provisional = false
                isDisturbed = false
                undisturbedTime = Self.minimumUndisturbedTime
            }
        } else {
            candidateTime = 0
            candidate = (now.x, now.y)
        }
    }

    /// Whether a refined fit of the calibration replaces the one in use: unless the heading it
    /// gives over the ``FieldWindow`` (the last accepted field samples, each with the attitude
    /// without heading at its time) scatters more than ``refinedFitScatterRatio`` times as
    /// widely as the one in use gives. The Earth's field keeps its heading in the frame the
    /// gyroscope and gravity hold over the window's seconds, so a calibration that
    /// is off turns the field's heading with the device, and its scatter grows (at a dip of 70°
    /// the field's horizontal part is a third of it, and an offset error of a few µT across
    /// it turns the heading by 10° or more while strength and dip stay within the disturbance
    /// tolerances). A fit held back is tested again when the fit changes, or after
    /// ``Configuration/magnetometerTimeConstant`` (the window then holds other samples).
    private mutating func admits(_ fit: (offset: Vector3, softIron: Matrix3),
                                 over applied: (offset: Vector3, softIron: Matrix3), at timestamp: Double) -> Bool {
        if let t = testedFit, t.offset == fit.offset, t.softIron == fit.softIron,
           timestamp - t.time < configuration.magnetometerTimeConstant {
            return t.admitted
        }
        let admitted = fieldWindow.headingScatter(offset: fit.offset, softIron: fit.softIron)
            <= Self.refinedFitScatterRatio * fieldWindow.headingScatter(offset: applied.offset, softIron: applied.softIron)
        testedFit = (fit.offset, fit.softIron, timestamp, admitted)
        return admitted
    }

    /// Moves the field's reference and candidate by what a refined calibration changes in the
    /// field now (`old`, `new`: device frame).
    private mutating func moveReference(from old: Vector3, to new: Vector3) {
        let q = inclination.multiplied(by: gyroQuaternion)
        let wo = q.rotate(old), wn = q.rotate(new)
        let so = wo.length, sn = wn.length
        guard so > 0, sn > 0 else { return }
        let dso = sn - so
        let ddip = -asin(max(-1, min(1, wn.z / sn))) + asin(max(-1, min(1, wo.z / so)))
        if var r = reference {
            r.strength += dso
            r.dip += ddip
            reference = r
        }
        candidate.strength += dso
        candidate.dip += ddip
        fieldFilter.shift(by: Vector3(dso, ddip, 0), fieldCoefficients)
    }

    private static func wrap(_ a: Double) -> Double {
        var x = a
        while x > .pi { x -= 2 * .pi }
        while x < -.pi { x += 2 * .pi }
        return x
    }

    /// The attitude in the reference frame.
    private func output() -> Quaternion {
        let six = inclination.multiplied(by: gyroQuaternion)
        let heading: Double
        switch referenceFrame {
        case .xMagneticNorthZVertical, .xTrueNorthZVertical:
            // East-north-up turned by the heading correction, then to north-west-up (x north).
            heading = delta - .pi / 2
        case .xArbitraryCorrectedZVertical:
            heading = delta - (arbitraryOffset ?? delta) - startYaw
        default:
            heading = -startYaw
        }
        guard heading != 0 else { return six }
        return Quaternion(axis: Vector3(0, 0, 1), angle: heading).multiplied(by: six).normalized
    }

    private func estimate(timestamp: Double, rawRate: Vector3, measured: Vector3?) -> DeviceMotion {
        let attitude = Attitude(quaternion: quaternion)
        let gravity = quaternion.inverseRotate(Vector3(0, 0, -1))
        let user = measured.map { $0 - gravity } ?? .zero
        var field = CalibratedMagneticField.unavailable
        if let m = magnetometer, abs(timestamp - m.timestamp) <= configuration.magnetometerMaximumAge {
            let fitted = magnetometerCalibration.isCalibrated
                ? appliedCalibration?.accuracy ?? magnetometerCalibration.accuracy : magnetometerCalibration.accuracy
            let learned: MagneticFieldCalibrationAccuracy = fitted == .uncalibrated ? .uncalibrated
                : (isMagneticFieldAccepted || !usesMagnetometer ? fitted : .low)
            let accuracy: MagneticFieldCalibrationAccuracy = configuration.hardIronOffset == nil ? learned
                : (isMagneticFieldAccepted || !usesMagnetometer ? .medium : .low)
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

/// The last ``capacity`` magnetometer samples the heading correction accepted as the Earth's
/// field (one per ``capacity``-th of the magnetometer time constant), raw, each with the
/// filter's attitude without heading (device → E) when it arrived: what
/// ``AttitudeFilter`` tests a refined calibration on. Allocated once.
struct FieldWindow: Sendable {
    static let capacity = 128
    private var fields: [Vector3]
    private var attitudes: [Quaternion]
    private var count = 0
    private var next = 0
    /// When the last sample was noted for the window.
    var lastNoted = -Double.infinity

    init() {
        fields = [Vector3](repeating: .zero, count: Self.capacity)
        attitudes = [Quaternion](repeating: .identity, count: Self.capacity)
    }

    /// Adds a sample (the oldest goes once ``capacity`` are kept).
    mutating func append(field: Vector3, attitude: Quaternion) {
        fields[next] = field
        attitudes[next] = attitude
        next = (next + 1) % Self.capacity
        count = min(count + 1, Self.capacity)
    }

    /// The RMS (radians) of the samples' headings about their circular mean with the
    /// calibration `W (m − c)` applied; 0 with fewer than two samples.
    func headingScatter(offset: Vector3, softIron: Matrix3) -> Double {
        guard count > 1 else { return 0 }
        var sx = 0.0, sy = 0.0
        for i in 0..<count {
            let v = attitudes[i].rotate(softIron * (fields[i] - offset))
            let h = (v.x * v.x + v.y * v.y).squareRoot()
            guard h > 0 else { continue }
            sx += v.x / h
            sy += v.y / h
        }
        let mean = atan2(sx, sy)
        var sum = 0.0
        for i in 0..<count {
            let v = attitudes[i].rotate(softIron * (fields[i] - offset))
            var d = atan2(v.x, v.y) - mean
            while d > .pi { d -= 2 * .pi }
            while d < -.pi { d += 2 * .pi }
            sum += d * d
        }
        return (sum / Double(count)).squareRoot()
    }
}
