internal import Glibc

/// The attitude estimator behind ``DeviceMotion``: a pure value (no threads, no I/O, no
/// allocation per sample) fed timestamped samples and returning one estimate per gyroscope sample.
///
/// ## Algorithm
/// The gyroscope's rate, less its estimated bias, is integrated on the unit quaternions (midpoint
/// of consecutive samples). Tilt is corrected from gravity measured where it is constant: each
/// acceleration is turned into the reference frame with the current attitude and low-pass filtered
/// there (two first-order stages of ``Configuration/accelerometerTimeConstant``/2 each, a
/// critically damped second-order filter). A user's linear accelerations average out in such a
/// frame (their integral is a velocity, which stays bounded) while gravity does not; after every
/// sample the attitude, and the filter's state with it, is turned by the smallest rotation that
/// puts the filtered vector on the vertical. The same idea as the "almost inertial frame" of
/// D. Laidig and T. Seel, "VQF: Highly accurate IMU orientation estimation with bias estimation
/// and magnetic disturbance rejection", Information Fusion 91 (2023), implemented here from the
/// description.
///
/// The gyroscope's bias is a three-state Kalman filter (``gyroBias``, its covariance growing by
/// ``Configuration/biasRandomWalk``) fed two kinds of measurements:
/// - during motion, once per ``Configuration/biasWindow``: the tilt corrections applied over the
///   window divided by its length are, in the reference frame, the horizontal part of the
///   attitude's drift `R·(b − b̂)`; as the device turns, every axis of the bias shows. Their
///   noise grows with the linear acceleration seen in the window
///   (``Configuration/biasMotionNoise``, ``Configuration/biasMotionNoisePerG``).
/// - at rest, judged from the gyroscope alone (as x-io's Fusion library does, so that a device
///   moved without turning still teaches the bias): when every axis of the gyroscope, low-pass
///   filtered (``Configuration/restFilterTimeConstant``, which removes a running machine's
///   vibration), stays within ``Configuration/restGyroDeviation`` of its mean over
///   ``Configuration/restWindow``, the window's mean rate is a direct measurement of all three
///   axes (``Configuration/restNoise``; a steady accelerometer as well makes it
///   ``Configuration/restStillNoise``).
///
/// The magnetometer enters as a rotation about the vertical only (the angle between the
/// horizontal part of the measured field, in the reference frame, and its reference direction),
/// so a disturbed field can never tilt the estimate, only turn it (as Madgwick's filter with
/// magnetic distortion compensation, 2010, §3.4).
///
/// Also:
/// - Initialisation from the first accelerometer sample (roll and pitch) and magnetometer
///   sample (yaw in the north frame). The accelerometer's time constant starts at
///   ``Configuration/startupTimeConstant`` and the magnetometer's gain at
///   ``Configuration/startupGain``, both moving to their working values over
///   ``Configuration/startupDuration``; the ramp restarts after a gap.
/// - Recovery: when gravity filtered quickly (``Configuration/recoveryTimeConstant``) stays more
///   than ``Configuration/recoveryAngle`` away from the estimate for
///   ``Configuration/accelerationRecoveryTime`` (say, after the gyroscope saturated), the
///   estimate, not the accelerometer, is taken to be wrong: the filter re-levels on the quickly
///   filtered gravity and the start-up ramp runs again (as the recovery timeout of x-io's Fusion).
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
    /// Time constants, noises and thresholds. The defaults suit consumer MEMS parts (BMI160,
    /// LSM6DSx, MPU-6050) at 50–1600 Hz; they are the same for every motion.
    struct Configuration: Sendable, Hashable {
        /// Seconds over which gravity is averaged in the reference frame: longer rejects more of
        /// the user's accelerations, shorter lets less of a bias error through.
        var accelerometerTimeConstant = 3.0
        /// Once the bias is known better, gravity is averaged for longer: the time constant is
        /// `√(accelerationResidual / σ_b)` (σ_b the bias's standard deviation, rad/s), within
        /// `accelerometerTimeConstant…maximumAccelerometerTimeConstant`. It balances the tilt a
        /// bias error lets through (σ_b·τ) against the user's accelerations left in the average
        /// (about accelerationResidual/τ, radians).
        var accelerationResidual = 3.0 * Double.pi / 180
        var maximumAccelerometerTimeConstant = 30.0
        /// A bias measurement further than this many standard deviations from the estimate is
        /// not used (a linear acceleration, not a bias).
        var biasGate = 3.0
        /// The time constant at start (and after a gap or a recovery) for `startupDuration`; it
        /// then grows by a second per second up to the working one…
        var startupTimeConstant = 0.1
        /// The magnetometer's yaw correction, rad/s per radian of heading error.
        var magnetometerGain = 0.5
        /// …and the magnetometer's gain then…
        var startupGain = 10.0
        /// …falling linearly to its working value over this many seconds.
        var startupDuration = 1.0
        /// Recovery: gravity filtered with this time constant (s)…
        var recoveryTimeConstant = 0.5
        /// …more than this far (radians) from the estimate…
        var recoveryAngle = 15 * Double.pi / 180
        /// …for this many seconds, and the estimate re-levels on it.
        var accelerationRecoveryTime = 1.0

        /// Whether the bias is learned at all.
        var learnsBias = true
        /// The bias's standard deviation (rad/s, each axis) before anything is learned; datasheets
        /// give zero-rate offsets of ±3°/s (BMI160) to ±20°/s (MPU-6050) before calibration, a
        /// part's own is usually well within.
        var initialBiasDeviation = 0.5 * Double.pi / 180
        /// How fast the bias may wander (temperature): its variance grows by this squared per
        /// second (rad/s/√s). 0.1°/s over about 200 s.
        var biasRandomWalk = 0.007 * Double.pi / 180
        /// Seconds of tilt corrections one motion measurement of the bias sums.
        var biasWindow = 2.0
        /// The noise (rad/s) of such a measurement when nothing accelerates the device…
        var biasMotionNoise = 0.05 * Double.pi / 180
        /// …plus this much per g of RMS linear acceleration in the window.
        var biasMotionNoisePerG = 5.0 * Double.pi / 180
        /// Windows (s) rest is judged over (a rest measurement needs one whole still window).
        var restWindow = 1.5
        /// The low-pass filter (s) the gyroscope and accelerometer pass before rest is judged.
        var restFilterTimeConstant = 0.1
        /// The largest deviation (rad/s, each axis) of the filtered gyroscope from its window mean at rest.
        var restGyroDeviation = 0.5 * Double.pi / 180
        /// The largest distance (rad/s) of a still window's mean rate from the bias estimate, once
        /// the bias is known within a tenth of it (a slow steady turn is not a bias)…
        var restRateTolerance = 2.0 * Double.pi / 180
        /// …and before: the largest bias believed (11°/s).
        var maximumGyroBias = 0.2
        /// The noise (rad/s) of a rest measurement judged from the gyroscope alone…
        var restNoise = 0.05 * Double.pi / 180
        /// …and when the accelerometer, filtered, also stays within `restAccelerationDeviation` (g).
        var restStillNoise = 0.01 * Double.pi / 180
        var restAccelerationDeviation = 0.01

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
        /// Without one, whether the magnetometer's calibration is learned online
        /// (``MagnetometerCalibrator``) and applied once fitted.
        var calibratesMagnetometer = true

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
    /// The bias estimate's covariance (symmetric 3×3, rows).
    private(set) var biasCovariance = Matrix3.diagonal(0)
    /// Seconds of rest the bias estimate has used.
    private(set) var biasStillTime = 0.0
    /// Whether the last completed rest window was still.
    private(set) var isStill = false
    /// Whether the last magnetometer sample used was accepted as the Earth's field.
    private(set) var isMagneticFieldAccepted = false

    private var lastTimestamp = 0.0
    private var lastRawRate = Vector3.zero
    /// The first gyroscope sample's time, while the filter waits to start.
    private var firstSampleTime: Double?
    /// Seconds of accelerometer data since start, the last gap or recovery.
    private var rampProgress = 0.0
    /// Gravity (g, Core Motion's sign) in the reference frame: the two stages of the low-pass
    /// filter, and the quick one recovery watches.
    private var stage1 = Vector3(0, 0, -1)
    private var stage2 = Vector3(0, 0, -1)
    private var quick = Vector3(0, 0, -1)
    private var recoveringFor = 0.0

    // Motion measurement of the bias: corrections summed over a window.
    private var correctionSum = Vector3.zero
    private var driftRows = (Vector3.zero, Vector3.zero)
    private var windowTime = 0.0
    private var linearSumSq = 0.0
    private var linearCount = 0

    // Rest: the filtered signals' sums over a window, and the raw rate's.
    private var restStart = 0.0
    private var restCount = 0
    private var restGyro = Vector3.zero
    private var restAccel = Vector3.zero
    private var restGyroMin = Vector3(.infinity, .infinity, .infinity)
    private var restGyroMax = -Vector3(.infinity, .infinity, .infinity)
    private var restAccelMin = Vector3(.infinity, .infinity, .infinity)
    private var restAccelMax = -Vector3(.infinity, .infinity, .infinity)
    private var restRawSum = Vector3.zero
    private var restAccelSeen = 0
    private var restPrimed = false

    // Magnetometer.
    private var magnetometer: (timestamp: Double, field: Vector3)? = nil
    private var magneticReference: (strength: Double, dip: Double)? = nil
    /// The horizontal direction in the reference frame the field's horizontal part is held to.
    private var headingReference = Vector3(1, 0, 0)
    private var rejectedSince: Double? = nil
    /// The magnetometer's calibration, learned online (or set from a saved one).
    var magnetometerCalibration = MagnetometerCalibrator()
    private var appliedCalibration: (offset: Vector3, accuracy: MagneticFieldCalibrationAccuracy)? = nil

    /// A filter producing attitudes in `referenceFrame`.
    /// - Parameters:
    ///   - referenceFrame: one frame; ``AttitudeReferenceFrame/xTrueNorthZVertical`` is treated
    ///     as magnetic north (no declination is known here).
    ///   - configuration: gains and thresholds.
    init(referenceFrame: AttitudeReferenceFrame = .xArbitraryZVertical, configuration: Configuration = .init()) {
        self.referenceFrame = referenceFrame
        self.configuration = configuration
        let v = configuration.initialBiasDeviation * configuration.initialBiasDeviation
        biasCovariance = .diagonal(v)
    }

    private var usesMagnetometer: Bool { referenceFrame.needsMagnetometer }

    /// Keeps the newest magnetometer sample for the next gyroscope updates (the magnetometer
    /// usually runs slower than the gyroscope, on its own clock).
    /// - Parameters:
    ///   - timestamp: seconds.
    ///   - field: µT, device frame, Core Motion axes.
    mutating func update(magnetometerAt timestamp: Double, field: MagneticField) {
        var m = Vector3(field)
        guard m.isFinite, m.length > 0, timestamp.isFinite else { return }
        if let last = magnetometer, timestamp < last.timestamp { return }
        if let offset = configuration.hardIronOffset {
            m = m - Vector3(offset)
        } else if configuration.calibratesMagnetometer {
            magnetometerCalibration.add(m)
            let cal = magnetometerCalibration
            if cal.isCalibrated {
                // A calibration that changed much: the field's strength and dip are learned again.
                if let applied = appliedCalibration, (applied.offset - cal.offset).length < 2, applied.accuracy == cal.accuracy {
                } else {
                    appliedCalibration = (cal.offset, cal.accuracy)
                    magneticReference = nil
                    rejectedSince = nil
                }
                m = cal.calibrated(m)
            }
        }
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
        let measured = acceleration.map(Vector3.init)
        let accel = measured.flatMap { a in a.isFinite && a.length > 0.1 ? a : nil }

        guard isInitialized else {
            if firstSampleTime == nil { firstSampleTime = timestamp }
            let waited = timestamp - (firstSampleTime ?? timestamp)
            let start = accel ?? (waited >= configuration.startWithoutGravityAfter ? Vector3(0, 0, -1) : nil)
            guard let a = start, initialize(timestamp: timestamp, acceleration: a) else { return nil }
            lastTimestamp = timestamp
            lastRawRate = raw
            restart(gravity: accel.map { quaternion.rotate($0) } ?? Vector3(0, 0, -1))
            resetRest(at: timestamp)
            return output(timestamp: timestamp, rawRate: raw, measured: measured)
        }

        let dt = timestamp - lastTimestamp
        guard dt > 0 else { return nil }
        let gap = dt > configuration.maximumGap
        if gap {
            // Unknown motion in the gap: do not integrate; re-level quickly from here.
            if let a = accel { restart(gravity: quaternion.rotate(a)) } else { rampProgress = 0 }
            resetRest(at: timestamp)
        } else {
            // 1. The gyroscope: q ← q ⊗ exp(½ (ω − b) dt), ω the midpoint of the two samples.
            let rate = 0.5 * (raw + lastRawRate) - gyroBias
            var delta = dt * rate
            if usesMagnetometer, let yawError = magneticYawError(at: timestamp, dt: dt) {
                let ramp = configuration.startupDuration > 0 ? max(0, 1 - rampProgress / configuration.startupDuration) : 0
                let kM = configuration.magnetometerGain + (max(configuration.startupGain, configuration.magnetometerGain) - configuration.magnetometerGain) * ramp
                // A rotation about the reference vertical, expressed in the device frame.
                delta += quaternion.inverseRotate(Vector3(0, 0, dt * kM * yawError))
            }
            let angle = delta.length
            if angle > 0, angle.isFinite {
                quaternion = quaternion.multiplied(by: Quaternion(axis: (1 / angle) * delta, angle: angle)).normalized
            }
            if configuration.learnsBias { accumulateRest(timestamp: timestamp, rawRate: raw, acceleration: accel, dt: dt) }
            // 2. Gravity, averaged in the reference frame.
            if let a = accel { correctTilt(with: a, dt: dt) }
        }

        lastTimestamp = timestamp
        lastRawRate = raw
        return output(timestamp: timestamp, rawRate: raw, measured: measured)
    }

    // MARK: - Steps

    /// Restarts the low-pass filters on `gravity` (reference frame) and the start-up ramp.
    private mutating func restart(gravity: Vector3) {
        stage1 = gravity
        stage2 = gravity
        quick = gravity
        rampProgress = 0
        recoveringFor = 0
        correctionSum = .zero
        driftRows = (.zero, .zero)
        windowTime = 0
        linearSumSq = 0
        linearCount = 0
    }

    /// Feeds one acceleration (device frame) to the reference-frame low-pass filter and turns the
    /// attitude so that the filtered gravity is vertical; sums the turn for the bias.
    private mutating func correctTilt(with a: Vector3, dt: Double) {
        let c = configuration
        rampProgress += dt
        let ramp = c.startupDuration > 0 ? min(1, rampProgress / c.startupDuration) : 1
        let sigmaB = (max(biasCovariance.trace, 1e-18) / 3).squareRoot()
        let working = min(max((c.accelerationResidual / sigmaB).squareRoot(), c.accelerometerTimeConstant),
                          c.maximumAccelerometerTimeConstant)
        // Start-up: the short time constant for `startupDuration`, then one growing by a second
        // per second (an average over everything since) until it reaches the working one.
        let tau = min(working, c.startupTimeConstant + max(0, rampProgress - c.startupDuration))
        let measuredRef = quaternion.rotate(a)
        let alpha = 1 - exp(-2 * dt / max(tau, 1e-6))  // each stage has half the time constant
        stage1 += alpha * (measuredRef - stage1)
        stage2 += alpha * (stage1 - stage2)
        let quickAlpha = 1 - exp(-dt / max(c.recoveryTimeConstant, 1e-6))
        quick += quickAlpha * (measuredRef - quick)

        // The smallest rotation taking the filtered gravity d onto the vertical t = (0, 0, −1):
        // the quaternion (1 + d·t, d × t), normalised.
        let n = stage2.length
        guard n > 1e-6 else { return }
        let d = (1 / n) * stage2
        let axis = Vector3(-d.y, d.x, 0)  // d × (0, 0, −1)
        let w = 1 - d.z
        let qn = (w * w + axis.dot(axis)).squareRoot()
        guard qn > 1e-12 else { return }
        let turn = Quaternion(x: axis.x / qn, y: axis.y / qn, z: 0, w: w / qn)
        quaternion = turn.multiplied(by: quaternion).normalized
        stage1 = turn.rotate(stage1)
        stage2 = turn.rotate(stage2)
        quick = turn.rotate(quick)

        // Recovery: the quickly filtered gravity far from the estimate for long.
        let quickAngle = acos(max(-1, min(1, -quick.z / max(quick.length, 1e-9))))
        if quickAngle > c.recoveryAngle {
            recoveringFor += dt
            if recoveringFor >= c.accelerationRecoveryTime {
                let g = quick
                restart(gravity: g)
                return
            }
        } else {
            recoveringFor = 0
        }

        // Bias during motion: the corrections over a window are −R·(b − b̂)·T, horizontally.
        guard c.learnsBias, ramp >= 1 else { return }
        // Rotation vector of `turn` (small): 2·(x, y, 0)/w.
        correctionSum += (2 / max(turn.w, 1e-9)) * Vector3(turn.x, turn.y, 0)
        let r = RotationMatrix(quaternion)
        driftRows.0 += dt * Vector3(r.m11, r.m12, r.m13)
        driftRows.1 += dt * Vector3(r.m21, r.m22, r.m23)
        windowTime += dt
        let linear = measuredRef - Vector3(0, 0, -1)
        linearSumSq += linear.dot(linear)
        linearCount += 1
        if windowTime >= c.biasWindow {
            let T = windowTime
            let y = (-1 / T) * correctionSum
            let h0 = (1 / T) * driftRows.0, h1 = (1 / T) * driftRows.1
            let linearRMS = (linearSumSq / Double(max(linearCount, 1))).squareRoot()
            let sigma = c.biasMotionNoise + c.biasMotionNoisePerG * linearRMS
            // Per window: sigma is the noise of the window's mean drift rate.
            measureBias(rows: [h0, h1], values: [y.x, y.y], variance: sigma * sigma)
            correctionSum = .zero
            driftRows = (.zero, .zero)
            windowTime = 0
            linearSumSq = 0
            linearCount = 0
        }
    }

    /// A Kalman update of the bias with measurements `values[i] = rows[i]·(b − b̂)` (the bias
    /// error's projections), each of variance `variance`, applied one at a time.
    private mutating func measureBias(rows: [Vector3], values: [Double], variance: Double) {
        for (h, y) in zip(rows, values) {
            let ph = biasCovariance * h
            let s = h.dot(ph) + variance
            guard s > 0, s.isFinite, y * y <= configuration.biasGate * configuration.biasGate * s else { continue }
            let k = (1 / s) * ph
            gyroBias += y * k
            biasCovariance = biasCovariance - Matrix3.outer(k, ph)
        }
        // Bounded: the bias never exceeds what a part could have.
        let m = configuration.maximumGyroBias
        gyroBias = Vector3(min(max(gyroBias.x, -m), m), min(max(gyroBias.y, -m), m), min(max(gyroBias.z, -m), m))
    }

    private mutating func resetRest(at timestamp: Double) {
        restStart = timestamp
        restCount = 0
        restRawSum = .zero
        restAccelSeen = 0
        restGyroMin = Vector3(.infinity, .infinity, .infinity)
        restGyroMax = -Vector3(.infinity, .infinity, .infinity)
        restAccelMin = Vector3(.infinity, .infinity, .infinity)
        restAccelMax = -Vector3(.infinity, .infinity, .infinity)
    }

    /// Rest, from the gyroscope (and, for a lower noise, the accelerometer) low-pass filtered.
    private mutating func accumulateRest(timestamp: Double, rawRate: Vector3, acceleration: Vector3?, dt: Double) {
        let c = configuration
        // The bias's covariance grows with time (a random walk).
        let q = c.biasRandomWalk * c.biasRandomWalk * dt
        biasCovariance = biasCovariance + Matrix3.diagonal(q)

        let alpha = 1 - exp(-dt / max(c.restFilterTimeConstant, 1e-6))
        if !restPrimed {
            restPrimed = true
            restGyro = rawRate
            restAccel = acceleration ?? restAccel
        }
        restGyro += alpha * (rawRate - restGyro)
        if let a = acceleration {
            restAccel += alpha * (a - restAccel)
            restAccelSeen += 1
            restAccelMin = restAccelMin.minimum(restAccel)
            restAccelMax = restAccelMax.maximum(restAccel)
        }
        restGyroMin = restGyroMin.minimum(restGyro)
        restGyroMax = restGyroMax.maximum(restGyro)
        restRawSum += rawRate
        restCount += 1
        let duration = timestamp - restStart
        guard duration >= c.restWindow else {
            // A window already moving is abandoned at once (a new one starts here).
            let spread = restGyroMax - restGyroMin
            if max(spread.x, spread.y, spread.z) > 2 * c.restGyroDeviation { isStill = false; resetRest(at: timestamp) }
            return
        }
        defer { resetRest(at: timestamp) }
        let spread = restGyroMax - restGyroMin
        let mean = (1 / Double(restCount)) * restRawSum
        let known = biasCovariance.trace < 0.03 * c.initialBiasDeviation * c.initialBiasDeviation
        let offBias = mean - gyroBias
        let plausible = known
            ? offBias.length < c.restRateTolerance
            : max(abs(mean.x), abs(mean.y), abs(mean.z)) < c.maximumGyroBias
        let still = max(spread.x, spread.y, spread.z) <= 2 * c.restGyroDeviation && plausible && restCount >= 5
        isStill = still
        guard still else { return }
        let accelSpread = restAccelMax - restAccelMin
        let steady = restAccelSeen * 2 >= restCount && max(accelSpread.x, accelSpread.y, accelSpread.z) <= 2 * c.restAccelerationDeviation
        let noise = steady ? c.restStillNoise : c.restNoise
        biasStillTime += duration
        measureBias(rows: [Vector3(1, 0, 0), Vector3(0, 1, 0), Vector3(0, 0, 1)],
                    values: [offBias.x, offBias.y, offBias.z], variance: noise * noise)
    }

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

    private func output(timestamp: Double, rawRate: Vector3, measured: Vector3?) -> DeviceMotion {
        let attitude = Attitude(quaternion: quaternion)
        let gravity = quaternion.inverseRotate(Vector3(0, 0, -1))
        let user = measured.map { $0 - gravity } ?? .zero
        var field = CalibratedMagneticField.unavailable
        if let m = magnetometer, abs(timestamp - m.timestamp) <= configuration.magnetometerMaximumAge {
            let fitted = magnetometerCalibration.accuracy
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
