internal import Glibc

/// The attitude estimator behind ``DeviceMotion``: a pure value (no threads, no I/O, no
/// allocation per sample) fed timestamped samples and returning one estimate per gyroscope sample.
///
/// ## Algorithm
/// The gyroscope's rate, less its estimated bias, is integrated on the unit quaternions: its mean
/// over each step is that of the parabola through the last three samples when they are evenly
/// spaced (Simpson's rule on the last interval; the midpoint of the two otherwise), with the
/// coning term of a rate varying between them (``Configuration/conesRotation``). Tilt is corrected from gravity measured where it is constant: each
/// acceleration is turned into the reference frame with the current attitude and low-pass filtered
/// there (two first-order stages of ``Configuration/accelerometerTimeConstant``/2 each, a
/// critically damped second-order filter). A user's linear accelerations average out in such a
/// frame (their integral is a velocity, which stays bounded) while gravity does not; after every
/// sample the attitude, and the filter's state with it, is turned by the smallest rotation that
/// puts the filtered vector on the vertical. The same idea as the "almost inertial frame" of
/// D. Laidig and T. Seel, "VQF: Highly accurate IMU orientation estimation with bias estimation
/// and magnetic disturbance rejection", Information Fusion 91 (2023), implemented here from the
/// description. The turn is limited to a rate a bias error could explain
/// (``Configuration/correctionRateLimit``): a deviation growing faster is a sustained linear
/// acceleration (a vehicle pulling away or turning) and is worked off slowly.
///
/// The accelerometer's time constant grows as the bias is known better
/// (``Configuration/accelerationResidual``), judged by the bias's uncertainty across the vertical
/// the device has had over the last few seconds (the part about the vertical only turns the
/// heading; a device that keeps its up-axis often cannot learn it).
///
/// The gyroscope's bias is a three-state Kalman filter (``gyroBias``, its covariance growing by
/// ``Configuration/biasRandomWalk``; scalar measurements applied in turn, each innovation taken
/// against the estimate as the previous ones left it) fed these measurements:
/// - during motion, once per ``Configuration/biasWindow``: the tilt corrections applied over the
///   window divided by its length are the tilt loop's response to the attitude's horizontal
///   drift `R·(b − b̂)` in the reference frame. The loop is linear in small angles, so the
///   response is `Σⱼ (b − b̂)ⱼ` times the loop's response to a unit error on axis j, which the
///   filter computes by running the loop's equations on R's columns (``BiasResponse``); the lag
///   of the gravity filter is thereby part of the measurement model, and as the device turns,
///   every axis of the bias shows. Their noise is a floor, a part that grows with the window's
///   linear acceleration up to ``Configuration/linearNoiseSaturation`` and then stays, and a
///   share of the tilt rate the gravity filter still holds (``Configuration/quietMotionNoise``,
///   ``Configuration/biasMotionNoise``, ``Configuration/heldWeight``, without a magnetometer
///   ``Configuration/heldWeightWithoutMagnetometer``): beyond a tenth of a g,
///   what accelerations do to a window shows in what the loop holds, not in their size (a
///   vigorous shake at 3 Hz averages out in the loop; a slow push does not). A turn about the
///   vertical adds to that noise (``Configuration/turnNoise``): moving along while turning (walking
///   round a corner, a car in a bend) is a centripetal acceleration the loop takes for tilt, which
///   no gyroscope can tell from a bias. Windows the rate limit shaped are not used.
/// - after every change of the estimate in motion (``Configuration/removesBiasResponse``), the
///   tilt the old estimate's error caused and the loop has not corrected yet (the unit responses,
///   weighted by the change) is taken out of the attitude and the gravity filter at once; not
///   after a measurement at rest, whose small changes would only move a tilt already right.
/// - at rest, judged from the gyroscope alone (as x-io's Fusion library does, so that a device
///   moved without turning still teaches the bias): when every axis of the gyroscope, low-pass
///   filtered (``Configuration/restFilterTimeConstant``, which removes a running machine's
///   vibration), stays within ``Configuration/restGyroDeviation`` of its mean over
///   ``Configuration/restWindow``, the window's mean rate is a direct measurement of the bias
///   (``Configuration/restNoise``; a steady accelerometer as well makes it
///   ``Configuration/restStillNoise``).
/// - at rest in the mean (a vibrating machine, a tremor): in a window the filtered gyroscope does
///   not find still, when the rotation turned since its start (the raw rate integrated with the
///   coning term) stays within ``Configuration/restAngleDeviation`` RMS of a straight line
///   against time, the line's slope measures the bias, its noise the rest noise plus √12 times
///   that RMS over the window's length.
/// - In both rest measurements the part about gravity has that noise; the part across it also
///   has the turn the accelerometer shows over the window (the straight line through the raw
///   accelerations: gravity moving in the device frame) and that line's uncertainty: a slow
///   rocking (a car's body, a hand), which a gyroscope cannot tell from a bias over a window, then
///   teaches nothing across gravity. Where the accelerometer shows no turn beyond its own
///   uncertainty (a linear shake, a vibration, rest), that part's extra noise is that
///   uncertainty, at most ``Configuration/restTurnDeviation``: such windows still teach the
///   bias, only less.
/// - with a magnetometer in motion, once per ``Configuration/biasWindow`` and once the field is
///   calibrated: the yaw corrections divided by the window's length are the heading loop's
///   response to the drift about the vertical, `(Rᵀẑ)·(b − b̂)`, modelled as the tilt's is (the
///   first-order loop run on R's third row; ``Configuration/headingBiasNoise``). The bias about
///   the vertical, which the tilt never shows while the up-axis stays put, is learned that way.
///   The model keeps running while no window is measured (the field rejected or not calibrated
///   yet), so the heading error a bias error left then is not taken for a bias when the loop
///   works it off; the windows' innovations are limited (``Configuration/headingBiasClip``)
///   rather than gated.
///
/// The magnetometer enters as a rotation about the vertical only (the angle between the
/// horizontal part of the measured field, in the reference frame, and its reference direction),
/// so a disturbed field can never tilt the estimate, only turn it (as Madgwick's filter with
/// magnetic distortion compensation, 2010, §3.4). Its gain falls from
/// ``Configuration/magnetometerGain`` as the bias about the vertical is known better
/// (``Configuration/headingResidual``), and further while the rate limit holds a tilt back
/// (``Configuration/tiltLeak``): a tilt error turns the field's horizontal part by up to tan(dip)
/// times it, so in a vehicle's sustained accelerations the heading follows the gyroscope. The
/// newest field sample, slower than the gyroscope, is
/// turned with the device (the gyroscope's rotation since its time) so that field and attitude
/// are compared at one time; one that arrives after later gyroscope samples comes already turned
/// to the last of them (``update(magnetometerAt:field:turn:turnedTo:)``).
///
/// Also:
/// - Initialisation from the first accelerometer sample (roll and pitch) and magnetometer
///   sample (yaw in the north frame). The accelerometer's time constant starts at
///   ``Configuration/startupTimeConstant`` and the magnetometer's gain at
///   ``Configuration/startupGain``, both moving to their working values over
///   ``Configuration/startupDuration``; the ramps restart after a gap, and the magnetometer's
///   when the first calibration is applied. A later change of the calibration moves the heading
///   (north frame) or its reference (other frames) by what it turns the field's horizontal part,
///   at once: the heading loop has no transient to take for a gyroscope bias.
/// - Recovery: when gravity filtered quickly (``Configuration/recoveryTimeConstant``) stays more
///   than ``Configuration/recoveryAngle`` away from the estimate for
///   ``Configuration/accelerationRecoveryTime`` (say, after the gyroscope saturated), the
///   estimate, not the accelerometer, is taken to be wrong: the filter re-levels on the quickly
///   filtered gravity and the start-up ramp runs again (as the recovery timeout of x-io's Fusion).
///   A deviation that lengthens the filtered gravity as a horizontal acceleration would
///   (``Configuration/recoveryLengthShare``) is an acceleration, not a wrong estimate, and does
///   not count.
/// - The magnetometer is ignored while its strength or dip differs from the reference (learned
///   at start, then slowly tracked) by more than ``Configuration/magneticFieldTolerance`` or
///   ``Configuration/magneticDipTolerance``; a difference lasting
///   ``Configuration/magneticRelearnTime`` becomes the new reference, and one in dip alone
///   (the strength within tolerance: the reference's own tilt error, which a disturbance's
///   change of strength does not come with) lasting ``Configuration/magneticDipRelearnTime``.
///   While the tilt settles (the start-up ramp), the reference is the field as seen at each
///   sample.
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
        /// The magnetometer's yaw correction, rad/s per radian of heading error, at most; once the
        /// bias about the vertical is known better, it falls to `1/τ` with
        /// `τ = √(headingResidual / σ_v)` (σ_v that bias's standard deviation, rad/s) up to
        /// `maximumMagnetometerTimeConstant`: it balances the heading a bias error lets through
        /// (σ_v·τ) against what the field's errors (noise, a tilt error through the dip) leave
        /// in the heading (about headingResidual/τ).
        var magnetometerGain = 0.5
        /// The heading error (radians) the field's errors leave, for the gain above.
        var headingResidual = 1.0 * Double.pi / 180
        /// The longest time constant (s) of the magnetometer's yaw correction.
        var maximumMagnetometerTimeConstant = 20.0
        /// The noise (rad/s) of a window's measurement of the bias from the magnetometer's yaw
        /// corrections (`biasWindow` seconds of them, as the tilt's).
        var headingBiasNoise = 0.2 * Double.pi / 180
        /// Those windows' innovations are limited to this many standard deviations instead of
        /// gated (Huber's estimator): their errors come from the magnetometer's calibration as
        /// much as from noise (a rough calibration's heading error changes as the device turns),
        /// and with a gate, a bias the first windows got wrong while the calibration was rough
        /// would make every later window an outlier.
        var headingBiasClip = 1.0
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
        /// Recovery ignores a deviation that lengthens the quickly filtered gravity as a horizontal
        /// linear acceleration would (to 1/cos θ for a tilt θ): it counts only while the length is
        /// below 1 + this share of (1/cos θ − 1) g.
        var recoveryLengthShare = 0.5

        /// Whether the bias is learned at all.
        var learnsBias = true
        /// The bias's standard deviation (rad/s, each axis) before anything is learned; datasheets
        /// give zero-rate offsets of ±3°/s (BMI160) to ±20°/s (MPU-6050) before calibration, a
        /// part's own is usually well within.
        var initialBiasDeviation = 0.5 * Double.pi / 180
        /// How fast the bias may wander (temperature): its variance grows by this squared per
        /// second (rad/s/√s). 0.1°/s over about 200 s.
        var biasRandomWalk = 0.007 * Double.pi / 180
        /// Whether a change of the bias estimate in motion also takes out of the attitude the tilt
        /// the old estimate's error caused and the loop has not corrected yet.
        var removesBiasResponse = true
        /// Whether the integration adds the two-sample coning term (a linearly varying rate).
        var conesRotation = true
        /// The tilt is turned no faster than `correctionRateLimit` (rad/s) plus
        /// `correctionRateLimitPerBiasDeviation` times what the bias's and the tilt's
        /// uncertainties could explain (σ_b + σ_tilt/τ): a faster-growing deviation of the
        /// filtered gravity is a linear acceleration (a car pulling away or turning), worked off
        /// at that rate while it lasts. 0 turns the limit off.
        var correctionRateLimit = 0.1 * Double.pi / 180
        var correctionRateLimitPerBiasDeviation = 2.0
        /// The tilt's standard deviation (radians) at start and after a gap or a recovery; from
        /// the end of the start-up ramp it decays with the time constant (at least
        /// `accelerometerTimeConstant`) and grows by σ_b per second. The limit does not apply
        /// during the ramp.
        var initialTiltDeviation = 10 * Double.pi / 180
        /// A motion window with more than this share of its samples rate-limited measures
        /// accelerations, not the bias: it is not used.
        var limitedShare = 0.1
        /// Seconds of tilt corrections one motion measurement of the bias sums.
        var biasWindow = 2.0
        /// The noise (rad/s) of such a measurement: this floor (a turn without accelerations, where
        /// the gyroscope's own noise is what is left)…
        var quietMotionNoise = 0.01 * Double.pi / 180
        /// …plus this times the window's RMS linear acceleration over `linearNoiseSaturation` (g),
        /// at most once…
        var biasMotionNoise = 0.1 * Double.pi / 180
        /// The RMS linear acceleration (g) from which that part is whole.
        var linearNoiseSaturation = 0.1
        /// …plus this times the largest tilt rate the gravity filter held in the window (its first
        /// stage's deviation from the vertical over τ): what a limited turn or a change of the
        /// acceleration left there comes out as corrections later. `biasMotionNoise` was fitted
        /// to the windows' errors against the true bias on simulated hand-held, shaking,
        /// vibration and walking motions (one seed), where the RMS linear acceleration
        /// (0.2–0.9 g) predicted nothing more; windows without accelerations (a tilt, 0.004 g)
        /// erred by about 0.005 °/s. Between the two no motion was measured. That fit gives
        /// the weight 0.18, which is this one's, used with a magnetometer (whose heading windows
        /// measure the bias about the vertical); see `heldWeightWithoutMagnetometer` for the
        /// frame without.
        var heldWeight = 0.18
        /// The weight of the held tilt rate without a magnetometer, where the tilt windows alone
        /// learn the bias about the vertical as the device turns: the heading drift over many
        /// seeds is lowest from 0.4 to 0.8 on hand-held and walking motions (0.1–1.5 tried on
        /// seeds 1–30 in process, checked on seeds 31–130 and on a hundred rendered seeds). With
        /// a magnetometer, 0.5 made the heading worse on every motion (by 2–6 %) and the iron
        /// case's seed 2 2.5° RMS after medium (1.3° with 0.18), so there `heldWeight` holds.
        var heldWeightWithoutMagnetometer = 0.5
        /// A window's noise also has, in quadrature, this times a turn rate about the vertical
        /// (rad/s): the window's mean turn rate times the square of its linear acceleration's
        /// share of `linearNoiseSaturation` (a turn in place, with nothing moving the device
        /// along, carries no centripetal acceleration), or an earlier window's, decaying with the
        /// accelerometer's time constant (the loop works a held acceleration off over about that
        /// long), whichever is larger. A centripetal acceleration is the speed times the turn
        /// rate: walking round a corner, it moved a window's measurement by 0.3–0.5 °/s where the
        /// model above gave 0.2. Chosen from 0.02–0.12 on simulated hand-held, shaking, vibration
        /// and walking motions (seeds 1–5), checked on seeds 6–10.
        var turnNoise = 0.04
        /// The field's errors also have the tilt the rate limit holds back (the angle between
        /// the filtered gravity and the estimate's vertical, nonzero only while a sustained
        /// linear acceleration, a vehicle pulling away or turning, keeps them apart): with the
        /// tilt that uncertain, the field's horizontal part is that uncertain in direction by up to
        /// tan(dip) times it (the vertical component leaks into it). The magnetometer's gain is
        /// multiplied by `headingResidual / (headingResidual + tiltLeak·tan(dip)·angle)`, so
        /// while the tilt is in doubt the heading follows the gyroscope. 0 turns this off.
        var tiltLeak = 1.0
        /// The largest dip (radians) that leak is computed for (the tangent grows without bound
        /// towards the magnetic poles).
        var maximumLeakDip = 80 * Double.pi / 180
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
        /// A window the filtered gyroscope does not find still is still at rest in the mean when
        /// the raw rate's integral (the angle turned, each axis) stays within this RMS (radians)
        /// of a straight line: a vibrating machine's or a hand's tremor, which turns back and
        /// forth about a steady attitude. The line's slope measures the bias with the rest
        /// noise plus √12 times that RMS over the window's length (what one slow wobble could
        /// put in the slope). 0 turns this off.
        var restAngleDeviation = 0.2 * Double.pi / 180
        /// The largest rate (rad/s) a rest window is believed to turn at across gravity when the
        /// accelerometer shows no turn beyond its own uncertainty (a linear shake, vibration):
        /// the part across gravity of its measurement has at most this much more noise.
        var restTurnDeviation = 0.2 * Double.pi / 180

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
        /// Seconds a changed dip alone (the strength within ``magneticFieldTolerance``) must last
        /// before it becomes the reference: a tilt error when the reference was taken turns the
        /// field's dip but not its strength, while a disturbance changes the strength too.
        var magneticDipRelearnTime = 2.0
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
    /// The sample before that, and the step (s) between the two, when they were integrated
    /// (0 otherwise): three evenly spaced rates are integrated as a parabola.
    private var earlierRawRate = Vector3.zero
    private var lastStep = 0.0
    /// The first gyroscope sample's time, while the filter waits to start.
    private var firstSampleTime: Double?
    /// Seconds of accelerometer data since start, the last gap or recovery.
    private var rampProgress = 0.0
    /// Seconds of magnetometer corrections since start, the last gap or recovery, or since the
    /// first calibration was applied (the heading's start-up ramp runs again then).
    private var headingRampProgress = 0.0
    /// Gravity (g, Core Motion's sign) in the reference frame: the two stages of the low-pass
    /// filter, and the quick one recovery watches.
    private var stage1 = Vector3(0, 0, -1)
    private var stage2 = Vector3(0, 0, -1)
    private var quick = Vector3(0, 0, -1)
    private var recoveringFor = 0.0

    // Motion measurement of the bias: corrections summed over a window.
    private var correctionSum = Vector3.zero
    private var windowTime = 0.0
    /// Samples in the window, how many of them the rate limit shaped, and the sum of the squared
    /// linear accelerations (g²).
    private var windowCount = 0
    private var linearSumSq = 0.0
    /// The turn about the vertical over the window (radians), and in the latest step.
    private var windowTurn = 0.0
    private var stepTurn = 0.0
    /// The turn rate (rad/s) that sets the motion windows' turn noise (``Configuration/turnNoise``).
    private var turnRate = 0.0
    private var limitedCount = 0
    /// The largest tilt rate (rad/s) the gravity filter's first stage held in the window.
    private var heldPeak = 0.0
    /// The angle (radians) between the filtered gravity and the estimate's vertical after the last
    /// correction: 0 unless the rate limit holds a deviation back (kept with a magnetometer only).
    private var heldTilt = 0.0
    /// The device-frame vertical's second moment E[u·uᵀ], low-pass filtered (trace 1).
    private var verticalMoment = Matrix3.diagonal(1.0 / 3)
    /// The tilt's standard deviation (radians): large after a (re)start, then what the loop has
    /// not corrected yet, and what the bias's uncertainty lets through.
    private var tiltDeviation = 0.0
    /// The tilt loop's response to a unit bias error on each axis: for axis j, the attitude error
    /// (horizontal rotation vector, reference frame) and the two filter stages' deviations from
    /// the vertical it has caused so far, (x, y) each, the loop being linear in small angles.
    private var response = (BiasResponse(), BiasResponse(), BiasResponse())
    /// The corrections the unit bias errors would have caused over the window, summed (x, y).
    private var responseSum = (Vector3.zero, Vector3.zero, Vector3.zero)
    // Motion measurement of the bias about the vertical, from the magnetometer's yaw corrections:
    // the heading error (radians, about the reference vertical) a unit bias error on each axis
    // has left so far, the loop's corrections of it summed over the window, and the real ones.
    private var headingResponse = Vector3.zero
    private var headingResponseSum = Vector3.zero
    private var headingCorrectionSum = 0.0
    private var headingWindowTime = 0.0

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
    /// The raw rate's integral since the window's start (each axis, radians) and the sums a
    /// straight-line fit of it against time needs: Σt, Σt², Σθ, Σθ², Σtθ.
    private var restAngle = Vector3.zero
    private var restTimeSum = 0.0
    private var restTimeSquareSum = 0.0
    private var restAngleSum = Vector3.zero
    private var restAngleSquareSum = Vector3.zero
    private var restTimeAngleSum = Vector3.zero
    private var restAccelSeen = 0
    /// The raw acceleration's sums for a straight-line fit against time (the direction gravity
    /// turns in the device frame): Σt, Σt², Σa, Σt·a and Σ|a|².
    private var restAccelTimeSum = 0.0
    private var restAccelTimeSquareSum = 0.0
    private var restAccelSum = Vector3.zero
    private var restAccelTimeProductSum = Vector3.zero
    private var restAccelSquareSum = 0.0
    private var restPrimed = false

    // Magnetometer.
    /// The newest field sample: its time, the field (calibrated) in the device frame at
    /// `frameTime` (the sample's own time, or a later one it was turned to with the device).
    private var magnetometer: (timestamp: Double, field: Vector3, frameTime: Double)? = nil
    private var magneticReference: (strength: Double, dip: Double)? = nil
    /// The horizontal direction in the reference frame the field's horizontal part is held to.
    private var headingReference = Vector3(1, 0, 0)
    private var rejectedSince: Double? = nil
    /// Since when every magnetometer sample has differed from the reference in dip alone.
    private var dipOnlySince: Double? = nil
    /// The magnetometer's calibration, learned online (or set from a saved one).
    var magnetometerCalibration = MagnetometerCalibrator()
    /// The calibration the field is corrected with (nil before the first).
    private var appliedCalibration: (offset: Vector3, softIron: Matrix3)? = nil

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
    ///   - turn: for a sample that arrives after the gyroscope samples of its time (a
    ///     magnetometer read in its own, slower refills), the device's rotation from the sample's
    ///     time to `turnedTo` (device frame then to device frame at `turnedTo`); the field is
    ///     turned by it, after its calibration, so that it is compared with the attitude of one
    ///     time. Without it, the field is taken as of its own time.
    ///   - turnedTo: the time `turn` ends at (the last estimate's).
    mutating func update(magnetometerAt timestamp: Double, field: MagneticField, turn: Quaternion? = nil, turnedTo: Double = -.infinity) {
        var m = Vector3(field)
        guard m.isFinite, m.length > 0, timestamp.isFinite else { return }
        if let last = magnetometer, timestamp < last.timestamp { return }
        if let offset = configuration.hardIronOffset {
            m = m - Vector3(offset)
        } else if configuration.calibratesMagnetometer {
            magnetometerCalibration.add(m)
            let cal = magnetometerCalibration
            if cal.isCalibrated {
                let calibrated = cal.calibrated(m)
                if let applied = appliedCalibration {
                    if applied.offset != cal.offset || applied.softIron != cal.softIron {
                        // A refined calibration: the heading and the field's reference move with
                        // it at once, so that the heading loop has no transient to take for a bias.
                        let before = applied.softIron * (m - applied.offset)
                        let carry = turn.flatMap { turnedTo > timestamp ? $0 : nil }
                        carryCalibrationChange(from: carry?.rotate(before) ?? before, to: carry?.rotate(calibrated) ?? calibrated)
                        appliedCalibration = (cal.offset, cal.softIron)
                    }
                } else {
                    // The first calibration: the heading so far followed the raw field, so the
                    // field's strength and dip are learned again and the start-up gain runs.
                    appliedCalibration = (cal.offset, cal.softIron)
                    magneticReference = nil
                    rejectedSince = nil
                    dipOnlySince = nil
                    headingRampProgress = 0
                }
                m = calibrated
            }
        }
        if let turn, turnedTo > timestamp {
            magnetometer = (timestamp, turn.rotate(m), turnedTo)
        } else {
            magnetometer = (timestamp, m, timestamp)
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
            if let a = accel { restart(gravity: quaternion.rotate(a)) } else { rampProgress = 0; headingRampProgress = 0 }
            lastStep = 0
            resetRest(at: timestamp)
        } else {
            // 1. The gyroscope: q ← q ⊗ exp((ω̄ − b) dt), ω̄ the rate's mean over the step: the
            // parabola through this and the two samples before when they are evenly spaced
            // (Simpson's rule on the last interval, (5ω₂ + 8ω₁ − ω₀)/12), else the midpoint.
            let even = lastStep > 0 && abs(lastStep - dt) <= 0.1 * dt
            let mean = even ? (1.0 / 12) * (5 * raw + 8 * lastRawRate - earlierRawRate) : 0.5 * (raw + lastRawRate)
            let rate = mean - gyroBias
            var delta = dt * rate
            if configuration.conesRotation {
                // The rotation vector of a rate varying linearly over the step (Bortz):
                // ∫ω dt + (dt²/12)·ω₀ × ω₁, the second term the coning a shaken device's
                // out-of-phase turns leave, which would otherwise drift like a bias.
                delta += (dt * dt / 12) * (lastRawRate - gyroBias).cross(raw - gyroBias)
            }
            let gyroDelta = delta
            if usesMagnetometer {
                // The device-frame vertical: R's third row, which the heading loop's model also runs on.
                let r = RotationMatrix(quaternion)
                let vertical = Vector3(r.m31, r.m32, r.m33)
                if let yawError = magneticYawError(at: timestamp, dt: dt) {
                    let ramp = configuration.startupDuration > 0 ? max(0, 1 - headingRampProgress / configuration.startupDuration) : 0
                    headingRampProgress += dt
                    let working = magnetometerWorkingGain(vertical: vertical)
                    let kM = working + (max(configuration.startupGain, working) - working) * ramp
                    // A rotation about the reference vertical, expressed in the device frame.
                    delta += quaternion.inverseRotate(Vector3(0, 0, dt * kM * yawError))
                    // The corrections measure the bias once the field is one to trust (calibrated,
                    // or needing no calibration).
                    let trusted = configuration.hardIronOffset != nil || !configuration.calibratesMagnetometer
                        || magnetometerCalibration.isCalibrated
                    if configuration.learnsBias, ramp == 0, trusted {
                        measureHeadingBias(correction: dt * kM * yawError, gain: kM, vertical: vertical, dt: dt)
                    } else {
                        followHeadingResponse(gain: kM, vertical: vertical, dt: dt)
                        restartHeadingWindow()
                    }
                } else {
                    // No field to correct the heading: a bias error's heading error grows.
                    followHeadingResponse(gain: 0, vertical: vertical, dt: dt)
                    restartHeadingWindow()
                }
            }
            let angle = delta.length
            if angle > 0, angle.isFinite {
                quaternion = quaternion.multiplied(by: Quaternion(axis: (1 / angle) * delta, angle: angle)).normalized
            }
            // The magnetometer's newest sample, when older than this step's end, turned with the
            // device into its frame now, as the attitude is: the next step compares the two at
            // one time (at 100 °/s the device turns a degree in 10 ms).
            if var m = magnetometer, m.frameTime < timestamp {
                let step = min(1, (timestamp - max(m.frameTime, lastTimestamp)) / dt) * gyroDelta
                let turned = step.length
                if turned > 0, turned.isFinite {
                    m.field = Quaternion(axis: (1 / turned) * step, angle: turned).inverseRotate(m.field)
                }
                m.frameTime = timestamp
                magnetometer = m
            }
            if configuration.learnsBias { accumulateRest(timestamp: timestamp, rawRate: raw, acceleration: accel, dt: dt) }
            // 2. Gravity, averaged in the reference frame.
            stepTurn = quaternion.rotate(gyroDelta).z
            if let a = accel { correctTilt(with: a, dt: dt) }
        }

        if !gap {
            earlierRawRate = lastRawRate
            lastStep = dt
        }
        lastTimestamp = timestamp
        lastRawRate = raw
        return output(timestamp: timestamp, rawRate: raw, measured: measured)
    }

    // MARK: - Steps

    /// The magnetometer's yaw gain (rad/s per radian) after the start-up ramp: see
    /// ``Configuration/magnetometerGain``. `vertical`: the reference vertical in the device frame.
    private func magnetometerWorkingGain(vertical: Vector3) -> Double {
        let c = configuration
        let sigmaV = max(vertical.dot(biasCovariance * vertical), 1e-18).squareRoot()
        let dip = min(abs(magneticReference?.dip ?? 0), c.maximumLeakDip)
        let tau = min(max((c.headingResidual / sigmaV).squareRoot(), 1 / max(c.magnetometerGain, 1e-9)),
                      max(c.maximumMagnetometerTimeConstant, 1 / max(c.magnetometerGain, 1e-9)))
        // While the rate limit holds a tilt back, the field's direction is in doubt by the tilt's
        // leak through the dip as well: the gain falls by the share of its own error in the whole.
        let leak = c.tiltLeak * tan(dip) * heldTilt
        return c.headingResidual / max(c.headingResidual + leak, 1e-12) / tau
    }

    /// Bias about the vertical during motion, from the magnetometer: the yaw corrections over a
    /// window are the heading loop's response to the drift about the vertical, (Rᵀẑ)·(b − b̂),
    /// for a unit error on axis j that loop run on R's third row (a first-order loop of gain
    /// `gain`), as the tilt's corrections are for the bias across it. `vertical`: R's third row.
    private mutating func measureHeadingBias(correction: Double, gain: Double, vertical: Vector3, dt: Double) {
        headingResponseSum += followHeadingResponse(gain: gain, vertical: vertical, dt: dt)
        headingCorrectionSum += correction
        headingWindowTime += dt
        guard headingWindowTime >= configuration.biasWindow else { return }
        let T = headingWindowTime
        let noise = configuration.headingBiasNoise
        measureBias(rows: [(1 / T) * headingResponseSum], values: [headingCorrectionSum / T], variance: noise * noise,
                    clip: configuration.headingBiasClip)
        restartHeadingWindow()
    }

    /// Advances the heading error a unit bias error leaves by one step (`gain` the loop's gain,
    /// 0 without a field) and returns the loop's modelled correction of it. It runs on while no
    /// window is measured (the field rejected, too old, or not calibrated yet), so that the error
    /// the loop works off afterwards is part of the next window's model, not taken for a bias.
    @discardableResult
    private mutating func followHeadingResponse(gain: Double, vertical: Vector3, dt: Double) -> Vector3 {
        headingResponse += dt * vertical
        let modelled = (-gain * dt) * headingResponse
        headingResponse += modelled
        return modelled
    }

    /// Starts the heading's motion window again (its sums), the model running on.
    private mutating func restartHeadingWindow() {
        headingResponseSum = .zero
        headingCorrectionSum = 0
        headingWindowTime = 0
    }

    /// Starts the heading's motion window again, its model from zero (a restart).
    private mutating func resetHeadingWindow() {
        headingResponse = .zero
        restartHeadingWindow()
    }

    /// Restarts the low-pass filters on `gravity` (reference frame) and the start-up ramp.
    private mutating func restart(gravity: Vector3) {
        stage1 = gravity
        stage2 = gravity
        quick = gravity
        rampProgress = 0
        headingRampProgress = 0
        recoveringFor = 0
        tiltDeviation = configuration.initialTiltDeviation
        correctionSum = .zero
        windowTime = 0
        windowCount = 0
        linearSumSq = 0
        limitedCount = 0
        heldPeak = 0
        heldTilt = 0
        windowTurn = 0
        turnRate = 0
        response = (BiasResponse(), BiasResponse(), BiasResponse())
        responseSum = (.zero, .zero, .zero)
        resetHeadingWindow()
    }

    /// Feeds one acceleration (device frame) to the reference-frame low-pass filter and turns the
    /// attitude so that the filtered gravity is vertical; sums the turn for the bias.
    private mutating func correctTilt(with a: Vector3, dt: Double) {
        let c = configuration
        rampProgress += dt
        let ramp = c.startupDuration > 0 ? min(1, rampProgress / c.startupDuration) : 1
        // The bias error that tilts the estimate is the part across the vertical, which the
        // device's turns mix with the part about it: σ_b is the standard deviation per axis of
        // the part across the vertical the device had over the last `accelerometerTimeConstant`
        // (its moment E[u·uᵀ], u the vertical in the device frame). A device that keeps its
        // up-axis leaves out the part about it (often unobservable, so uncertain: it turns the
        // heading only); one turning every way keeps trace/3.
        let vertical = quaternion.inverseRotate(Vector3(0, 0, 1))
        let momentAlpha = 1 - exp(-dt / max(c.accelerometerTimeConstant, 1e-6))
        verticalMoment = verticalMoment + momentAlpha * (Matrix3.outer(vertical, vertical) - verticalMoment)
        let across = biasCovariance.trace - biasCovariance.frobeniusProduct(verticalMoment)
        let sigmaB = (max(across, 1e-18) / max(3 - verticalMoment.trace, 1)).squareRoot()
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
        var turn = Quaternion(x: axis.x / qn, y: axis.y / qn, z: 0, w: w / qn)
        // Once started, the tilt is not turned faster than a bias error could tilt it: a longer
        // deviation is a linear acceleration, worked off at that rate as long as it lasts.
        // The tilt's uncertainty holds through the start-up ramp (the first estimates may follow
        // the user's accelerations), then decays as the loop corrects it.
        if ramp >= 1 {
            tiltDeviation = tiltDeviation * exp(-dt / max(tau, c.accelerometerTimeConstant, 1e-6)) + sigmaB * dt
        }
        let limit = c.correctionRateLimitPerBiasDeviation * (sigmaB + tiltDeviation / max(tau, 1e-6)) + c.correctionRateLimit
        var limited = false
        if ramp >= 1, c.correctionRateLimit > 0 {
            let half = (turn.x * turn.x + turn.y * turn.y).squareRoot()
            let angle = 2 * atan2(half, turn.w)
            if angle > limit * dt, half > 0 {
                turn = Quaternion(axis: (1 / half) * Vector3(turn.x, turn.y, 0), angle: limit * dt)
                limited = true
            }
        }
        if limited { limitedCount += 1 }
        quaternion = turn.multiplied(by: quaternion).normalized
        stage1 = turn.rotate(stage1)
        stage2 = turn.rotate(stage2)
        quick = turn.rotate(quick)
        // What the loop still holds after the turn, to come out as corrections over about τ.
        let held = (stage1.x * stage1.x + stage1.y * stage1.y).squareRoot() / max(stage1.length, 1e-9)
        if usesMagnetometer { heldTilt = atan2((stage2.x * stage2.x + stage2.y * stage2.y).squareRoot(), -stage2.z) }
        heldPeak = max(heldPeak, held / max(tau, 1e-6))

        // Recovery: the quickly filtered gravity far from the estimate for long.
        // A horizontal linear acceleration tilting the measured gravity by θ lengthens it to
        // 1/cos θ; an estimate that is off leaves it at 1 g. Only the latter counts.
        let quickLength = quick.length
        let quickAngle = acos(max(-1, min(1, -quick.z / max(quickLength, 1e-9))))
        let accelerated = quickLength > 1 + c.recoveryLengthShare * (1 / max(cos(quickAngle), 0.1) - 1)
        if quickAngle > c.recoveryAngle, !accelerated {
            recoveringFor += dt
            if recoveringFor >= c.accelerationRecoveryTime {
                let g = quick
                restart(gravity: g)
                return
            }
        } else {
            recoveringFor = 0
        }

        // Bias during motion: the corrections over a window are, horizontally, the tilt loop's
        // response to the drift R·(b − b̂): for a constant bias error, Σⱼ (b − b̂)ⱼ times the
        // corrections a unit error on axis j would have caused (the loop run on R's columns).
        guard c.learnsBias, ramp >= 1 else { return }
        let r = RotationMatrix(quaternion)
        let c0 = response.0.advance(drift: dt * Vector3(r.m11, r.m21, 0), alpha: alpha)
        let c1 = response.1.advance(drift: dt * Vector3(r.m12, r.m22, 0), alpha: alpha)
        let c2 = response.2.advance(drift: dt * Vector3(r.m13, r.m23, 0), alpha: alpha)
        responseSum.0 += c0
        responseSum.1 += c1
        responseSum.2 += c2
        // Rotation vector of `turn` (small): 2·(x, y, 0)/w.
        correctionSum += (2 / max(turn.w, 1e-9)) * Vector3(turn.x, turn.y, 0)
        windowTime += dt
        windowCount += 1
        let linear = measuredRef - Vector3(0, 0, -1)
        linearSumSq += linear.dot(linear)
        windowTurn += stepTurn
        if windowTime >= c.biasWindow {
            let T = windowTime
            let y = (-1 / T) * correctionSum
            let h0 = (-1 / T) * Vector3(responseSum.0.x, responseSum.1.x, responseSum.2.x)
            let h1 = (-1 / T) * Vector3(responseSum.0.y, responseSum.1.y, responseSum.2.y)
            // Per window: sigma is the noise of the window's mean drift rate.
            let linearRMS = (linearSumSq / Double(max(windowCount, 1))).squareRoot()
            let linearShare = min(1, linearRMS / max(c.linearNoiseSaturation, 1e-9))
            let held = usesMagnetometer ? c.heldWeight : c.heldWeightWithoutMagnetometer
            let sigma = c.quietMotionNoise + c.biasMotionNoise * linearShare + held * heldPeak
            turnRate = max(turnRate * exp(-T / max(tau, 1e-6)), linearShare * linearShare * abs(windowTurn) / T)
            let turnSigma = c.turnNoise * turnRate
            if Double(limitedCount) <= c.limitedShare * Double(windowCount) {
                measureBias(rows: [h0, h1], values: [y.x, y.y], variance: sigma * sigma + turnSigma * turnSigma)
            }
            correctionSum = .zero
            responseSum = (.zero, .zero, .zero)
            windowTime = 0
            windowCount = 0
            linearSumSq = 0
            windowTurn = 0
            limitedCount = 0
            heldPeak = 0
        }
    }

    /// Removes from the attitude and the gravity filter what a bias error of `change` (the bias
    /// estimate's latest change) has put there and the loop has not corrected yet: the responses
    /// to unit errors, weighted.
    private mutating func removeBiasResponse(_ change: Vector3) {
        guard configuration.removesBiasResponse else { return }
        let e = change.x * response.0.error + change.y * response.1.error + change.z * response.2.error
        let s1 = change.x * response.0.stage1 + change.y * response.1.stage1 + change.z * response.2.stage1
        let s2 = change.x * response.0.stage2 + change.y * response.1.stage2 + change.z * response.2.stage2
        let angle = e.length
        if angle > 0, angle.isFinite, angle < 0.5 {
            quaternion = Quaternion(axis: (-1 / angle) * e, angle: angle).multiplied(by: quaternion).normalized
        }
        stage1 += -1 * s1
        stage2 += -1 * s2
        // The heading the change's error has left (the magnetometer's loop), about the vertical.
        let yaw = change.dot(headingResponse)
        if yaw != 0, yaw.isFinite, abs(yaw) < 0.5 {
            quaternion = Quaternion(axis: Vector3(0, 0, 1), angle: -yaw).multiplied(by: quaternion).normalized
        }
        // What is left is the response to the remaining error.
    }

    /// A Kalman update of the bias with measurements `values[i] = rows[i]·(b − b̂)` (the bias
    /// error's projections, b̂ the estimate before the call), each of variance `variance`, applied
    /// one at a time (each innovation less what the earlier ones changed along its row); with
    /// `removing`, the change's response is then taken out (``removeBiasResponse(_:)``). An
    /// innovation beyond ``Configuration/biasGate`` standard deviations is not used; with `clip`,
    /// every innovation is instead limited to `clip` standard deviations (Huber's estimator).
    private mutating func measureBias(rows: [Vector3], values: [Double], variance: Double, removing: Bool = true, clip: Double? = nil) {
        let before = gyroBias
        defer { if removing { removeBiasResponse(gyroBias - before) } }
        for (h, value) in zip(rows, values) {
            var y = value - h.dot(gyroBias - before)
            let ph = biasCovariance * h
            let s = h.dot(ph) + variance
            guard s > 0, s.isFinite else { continue }
            if let clip {
                y = min(max(y, -clip * s.squareRoot()), clip * s.squareRoot())
            } else if y * y > configuration.biasGate * configuration.biasGate * s {
                continue
            }
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
        restAngle = .zero
        restTimeSum = 0
        restTimeSquareSum = 0
        restAngleSum = .zero
        restAngleSquareSum = .zero
        restTimeAngleSum = .zero
        restAccelSeen = 0
        restAccelTimeSum = 0
        restAccelTimeSquareSum = 0
        restAccelSum = .zero
        restAccelTimeProductSum = .zero
        restAccelSquareSum = 0
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
        if let a = acceleration {
            restAccelTimeSum += duration
            restAccelTimeSquareSum += duration * duration
            restAccelSum += a
            restAccelTimeProductSum += duration * a
            restAccelSquareSum += a.dot(a)
        }
        // The rotation turned since the window's start (Bortz: θ̇ = ω + ½ θ × ω in small angles),
        // which a wobble returns, unlike the plain integral (coning).
        restAngle += dt * (rawRate + 0.5 * restAngle.cross(rawRate))
        restTimeSum += duration
        restTimeSquareSum += duration * duration
        restAngleSum += restAngle
        restAngleSquareSum += Vector3(restAngle.x * restAngle.x, restAngle.y * restAngle.y, restAngle.z * restAngle.z)
        restTimeAngleSum += duration * restAngle
        // Whether the window is at rest in the mean (fitted only when the filtered gyroscope
        // is not still).
        func wobbling() -> (slope: Vector3, deviation: Double)? {
            guard c.restAngleDeviation > 0 else { return nil }
            let fit = angleFit()
            return fit.deviation <= c.restAngleDeviation ? fit : nil
        }
        guard duration >= c.restWindow else {
            // A window already moving is abandoned at once (a new one starts here).
            let spread = restGyroMax - restGyroMin
            if max(spread.x, spread.y, spread.z) > 2 * c.restGyroDeviation, wobbling() == nil { isStill = false; resetRest(at: timestamp) }
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
        guard still else {
            // At rest in the mean: the fitted line's slope is the rate.
            guard let fit = wobbling() else { return }
            let offSlope = fit.slope - gyroBias
            let plausibleSlope = known
                ? offSlope.length < c.restRateTolerance
                : max(abs(fit.slope.x), abs(fit.slope.y), abs(fit.slope.z)) < c.maximumGyroBias
            guard plausibleSlope, restCount >= 5 else { return }
            let noise = c.restNoise + 12.0.squareRoot() * fit.deviation / duration
            measureRestBias(offSlope, noise: noise, removing: true)
            return
        }
        let accelSpread = restAccelMax - restAccelMin
        let steady = restAccelSeen * 2 >= restCount && max(accelSpread.x, accelSpread.y, accelSpread.z) <= 2 * c.restAccelerationDeviation
        let noise = steady ? c.restStillNoise : c.restNoise
        biasStillTime += duration
        // At rest nothing is taken out of the attitude: a still window's mean is precise, but its
        // small changes times the loop's long memory would move a tilt that is already right.
        measureRestBias(offBias, noise: noise, removing: false)
    }

    /// A rest window's measurement of the bias: `offset` (the window's rate less the estimate) is
    /// `b − b̂` plus whatever the device really turned. About gravity the gyroscope alone says
    /// how much that was (`noise`). Across gravity the accelerometer also sees a turn, as gravity
    /// moving in the device frame: a slow rocking the gyroscope cannot tell from a bias (a car's
    /// body on the road, a hand). So the horizontal part's variance also has the turn rate the
    /// accelerometer's fitted line shows (which a changing linear acceleration may also cause)
    /// and that line's own uncertainty when the turn stands out of it (three standard
    /// deviations), else the uncertainty alone, at most ``Configuration/restTurnDeviation``²: a
    /// window gravity stays put in, to its noise, measures all three axes; one it clearly turns in
    /// measures the vertical only, in effect.
    private mutating func measureRestBias(_ offset: Vector3, noise: Double, removing: Bool) {
        let all = [Vector3(1, 0, 0), Vector3(0, 1, 0), Vector3(0, 0, 1)]
        let n = Double(restAccelSeen)
        let mean = (1 / max(n, 1)) * restAccelSum
        let mt = restAccelTimeSum / max(n, 1)
        let vt = restAccelTimeSquareSum / max(n, 1) - mt * mt
        let g = mean.length
        guard restAccelSeen >= 5, vt > 0, g > 0.1 else {
            measureBias(rows: all, values: [offset.x, offset.y, offset.z], variance: noise * noise, removing: removing)
            return
        }
        let slope = (1 / vt) * ((1 / n) * restAccelTimeProductSum - mt * mean)  // g/s, each axis
        // Each axis's scatter about the line, and the slope's standard deviation from it.
        let residual = max(0, (restAccelSquareSum / n - mean.dot(mean) - slope.dot(slope) * vt) / 3)
        let slopeDeviation = (residual / (n * vt)).squareRoot()
        // ȧ = a × ω for a device turning at ω under a steady gravity a: ω across a is (ȧ × a)/|a|².
        let turn = (1 / (g * g)) * slope.cross(mean)
        let turnVariance = (slopeDeviation / g) * (slopeDeviation / g)
        let seen = turnVariance + turn.dot(turn)
        let across = turn.dot(turn) > 9 * turnVariance ? seen : min(turnVariance, configuration.restTurnDeviation * configuration.restTurnDeviation)
        let up = (1 / g) * mean
        // Two horizontal directions completing `up`.
        let helper = abs(up.x) < 0.9 ? Vector3(1, 0, 0) : Vector3(0, 1, 0)
        let h1 = up.cross(helper)
        let e1 = (1 / h1.length) * h1
        let e2 = up.cross(e1)
        let before = gyroBias
        measureBias(rows: [up], values: [up.dot(offset)], variance: noise * noise, removing: false)
        measureBias(rows: [e1, e2], values: [e1.dot(offset - (gyroBias - before)), e2.dot(offset - (gyroBias - before))],
                    variance: noise * noise + across, removing: false)
        if removing { removeBiasResponse(gyroBias - before) }
    }

    /// The straight line through the window's integrated rate: its slope (rad/s, each axis) and
    /// the largest RMS (radians) of an axis's angle about it.
    private func angleFit() -> (slope: Vector3, deviation: Double) {
        let n = Double(restCount)
        guard restCount >= 2 else { return (.zero, .infinity) }
        let mt = restTimeSum / n
        let vt = restTimeSquareSum / n - mt * mt
        guard vt > 0 else { return (.zero, .infinity) }
        func axis(_ s: Double, _ ss: Double, _ ts: Double) -> (slope: Double, variance: Double) {
            let m = s / n
            let cov = ts / n - mt * m
            return (cov / vt, max(0, ss / n - m * m - cov * cov / vt))
        }
        let x = axis(restAngleSum.x, restAngleSquareSum.x, restTimeAngleSum.x)
        let y = axis(restAngleSum.y, restAngleSquareSum.y, restTimeAngleSum.y)
        let z = axis(restAngleSum.z, restAngleSquareSum.z, restTimeAngleSum.z)
        return (Vector3(x.slope, y.slope, z.slope), max(x.variance, y.variance, z.variance).squareRoot())
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

    /// Moves the heading (north frame) or the heading's reference (other frames), and the
    /// field's reference strength and dip, by what a change of the calibration does to the
    /// field now: `old` and `new` are the sample calibrated before and after the change (device
    /// frame). The heading loop's error is the same after the change as before it.
    private mutating func carryCalibrationChange(from old: Vector3, to new: Vector3) {
        let wo = quaternion.rotate(old), wn = quaternion.rotate(new)
        guard wo.x * wo.x + wo.y * wo.y > 0, wn.x * wn.x + wn.y * wn.y > 0 else { return }
        let step = atan2(wo.x * wn.y - wo.y * wn.x, wo.x * wn.x + wo.y * wn.y)
        guard step.isFinite else { return }
        let c = cos(step), s = sin(step)
        if referenceFrame.isNorthReferenced {
            // Turned by −step about the vertical, the field's horizontal part points as before
            // (the gravity filter's stages, in the reference frame, turn with the estimate).
            quaternion = Quaternion(axis: Vector3(0, 0, 1), angle: -step).multiplied(by: quaternion).normalized
            func back(_ v: Vector3) -> Vector3 { Vector3(c * v.x + s * v.y, -s * v.x + c * v.y, v.z) }
            stage1 = back(stage1)
            stage2 = back(stage2)
        } else {
            let r = headingReference
            headingReference = Vector3(c * r.x - s * r.y, s * r.x + c * r.y, 0)
        }
        if var reference = magneticReference {
            let o = Self.strengthAndDip(wo), n = Self.strengthAndDip(wn)
            reference.strength += n.strength - o.strength
            reference.dip += n.dip - o.dip
            magneticReference = reference
        }
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
            // A frame whose heading has no absolute meaning keeps the one it has: after a new
            // calibration, the field's direction now is the reference (no jump).
            if !referenceFrame.isNorthReferenced {
                let h = Vector3(world.x, world.y, 0)
                if h.length > 0 { headingReference = (1 / h.length) * h }
            }
            return nil
        }
        // While the tilt settles (the start-up ramp, after a start, a gap or a recovery), the
        // field's strength and dip as seen now are the reference: the first sample's dip carries
        // the first tilt's error, which a hand's acceleration can make larger than the tolerance,
        // and every sample after it would then be taken for a disturbance until the reference is
        // learned again (``Configuration/magneticRelearnTime``).
        if rampProgress < configuration.startupDuration {
            reference = now
        }
        let strengthOff = abs(now.strength - reference.strength) > configuration.magneticFieldTolerance * reference.strength
        let dipOff = abs(now.dip - reference.dip) > configuration.magneticDipTolerance
        if strengthOff || dipOff {
            isMagneticFieldAccepted = false
            let since = rejectedSince ?? timestamp
            rejectedSince = since
            let dipSince = strengthOff ? nil : dipOnlySince ?? timestamp
            dipOnlySince = dipSince
            if timestamp - since >= configuration.magneticRelearnTime
                || dipSince.map({ timestamp - $0 >= configuration.magneticDipRelearnTime }) == true {
                // The "disturbance" has lasted (or was the reference's own tilt): it is the field
                // here now.
                magneticReference = now
                rejectedSince = nil
                dipOnlySince = nil
                if !referenceFrame.isNorthReferenced {
                    let h = Vector3(world.x, world.y, 0)
                    if h.length > 0 { headingReference = (1 / h.length) * h }
                }
            }
            return nil
        }
        rejectedSince = nil
        dipOnlySince = nil
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

/// The tilt loop of ``AttitudeFilter``, linearised in small angles and driven by the drift of a
/// unit bias error on one axis: the attitude error it leaves (horizontal rotation vector in the
/// reference frame) and the two gravity stages' deviations from the vertical, (x, y) each.
struct BiasResponse: Sendable, Hashable {
    var error = Vector3.zero
    var stage1 = Vector3.zero
    var stage2 = Vector3.zero

    /// One sample: the error grows by `drift` (rad per rad/s), the stages filter the gravity it
    /// tilts (`E × (0, 0, −1)`), and the loop's correction (returned, a rotation vector) puts the
    /// second stage back on the vertical, as the filter does.
    mutating func advance(drift: Vector3, alpha: Double) -> Vector3 {
        error += drift
        let seen = Vector3(-error.y, error.x, 0)
        stage1 += alpha * (seen - stage1)
        stage2 += alpha * (stage1 - stage2)
        let correction = Vector3(-stage2.y, stage2.x, 0)
        error += correction
        stage1 = stage1 - stage2
        stage2 = .zero
        return correction
    }
}
