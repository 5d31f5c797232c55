internal import Glibc

extension AttitudeFilter {
    /// The filter's parameters: time constants, rejection thresholds and the bias filter's noises.
    /// The defaults are VQF's (Laidig and Seel 2023, Table 1), which its authors chose on
    /// recordings of another IMU; this project checked them on the BROAD trials
    /// (`scripts/fusion-broad`) and kept them. The second gravity filter's three
    /// (``fastAccelerometerTimeConstant``, ``fastGravityBelow``, ``slowGravityAbove``) are this
    /// project's, chosen on those trials. The same for every motion.
    package struct Configuration: Sendable, Hashable {
        /// Seconds: the time constant of the gravity filter in the almost inertial frame
        /// (VQF's τ_acc, 3 s).
        package var accelerometerTimeConstant = 3.0
        /// Seconds: the time constant of the second gravity filter, used while the device turns
        /// much and accelerates little (1.75 s; never longer than ``accelerometerTimeConstant``).
        /// A gyroscope's scale and axis errors grow with the turn rate, a user's acceleration
        /// does not: while turning, a shorter time constant corrects more of the first and lets
        /// in little of the second. Chosen on the BROAD trials (`scripts/fusion-broad`): 1.5 s
        /// to 2 s all gain on rotation; 1.75 s keeps the tapping trial level.
        package var fastAccelerometerTimeConstant = 1.75
        /// m/s: the ratio of the user's acceleration (m/s², the accelerometer's departure from
        /// the 3 s gravity filter, its RMS over 2 s) to the turn rate (rad/s, its mean over 2 s)
        /// below which the fast gravity filter alone corrects the inclination (0.2 m/s), and
        /// above which the slow one alone does (``slowGravityAbove``, 0.4 m/s), blended in
        /// between. On BROAD this ratio is 0.06–0.4 while the device is turned in the hand
        /// (median 0.07–0.12), 1.2–1.9 while it is carried along, and 0.2–0.7 with a magnet on
        /// it or while it is turned and carried; the bounds were chosen on these trials.
        package var fastGravityBelow = 0.2
        /// m/s: see ``fastGravityBelow``.
        package var slowGravityAbove = 0.4
        /// Seconds: the time constant of the heading correction (VQF's τ_mag, 9 s).
        package var magnetometerTimeConstant = 9.0
        /// rad/s: the bias's initial standard deviation (VQF's σ_bias,init, 0.5 °/s).
        package var initialBiasDeviation = 0.5 * Double.pi / 180
        /// Seconds over which an unmeasured bias's uncertainty returns to its initial value
        /// (VQF's t_b,forget, 100 s).
        package var biasForgettingTime = 100.0
        /// rad/s: the noise of a bias measurement in motion (VQF's σ_motion, 0.1 °/s).
        package var biasMotionNoise = 0.1 * Double.pi / 180
        /// How much of a motion measurement's information reaches the bias about the vertical
        /// (VQF's 0.0001): gravity cannot show it.
        package var verticalBiasForgettingFactor = 0.0001
        /// rad/s: the noise of the heading correction's measurement of the bias about the
        /// vertical (magnetometer frames; infinite: none), taken as the inclination correction's
        /// (``biasMotionNoise``, in the same form): both are a correction's rate.
        package var biasHeadingNoise = 0.1 * Double.pi / 180
        /// rad/s: the noise of a bias measurement at rest (VQF's σ_rest, 0.03 °/s).
        package var biasRestNoise = 0.03 * Double.pi / 180
        /// rad/s: the largest bias (and innovation) estimated (VQF's 2 °/s).
        package var biasLimit = 2 * Double.pi / 180
        /// Seconds the device must be still before rest is detected (VQF's 1.5 s).
        package var restMinimumDuration = 1.5
        /// Seconds: the time constant of the low-pass filters rest is judged against (VQF's 0.5 s).
        package var restFilterTimeConstant = 0.5
        /// rad/s: the gyroscope's largest deviation (and filtered rate) at rest (VQF's 2 °/s).
        package var restGyroThreshold = 2 * Double.pi / 180
        /// g: the accelerometer's largest deviation at rest (VQF's 0.5 m/s²).
        package var restAccelerationThreshold = 0.5 / 9.80665
        /// The field's largest relative change of strength taken as undisturbed (VQF's 0.1).
        package var magneticStrengthTolerance = 0.1
        /// Radians: the field's largest change of dip taken as undisturbed (VQF's 10°).
        package var magneticDipTolerance = 10 * Double.pi / 180
        /// Seconds a new consistent field (while turning) must last to become the reference
        /// (VQF's 20 s), and for the first reference (VQF's 5 s).
        package var newFieldTime = 20.0
        package var firstFieldTime = 5.0
        /// Seconds a disturbance is rejected before the field is used again at half gain (VQF's 60 s).
        package var maximumRejectionTime = 60.0
        /// Radians: at rest, an estimate whose vertical is further than this from the
        /// accelerometer's is lost (a gyroscope glitch, a turn beyond its range), and gravity is
        /// averaged afresh from the accelerometer. At rest the accelerometer measures gravity
        /// alone, to its bias (0.1 m/s², 0.6°, for a consumer device); the filter otherwise levels
        /// within its accelerometer time constant.
        package var recoveryAngle = 5 * Double.pi / 180
        /// The largest relative departure of the accelerometer's magnitude from 1 g at which a
        /// lost estimate is re-levelled: a steady horizontal acceleration that tilts it by θ
        /// lengthens it by 1/cos θ − 1 (2 %: 11°), so that a smooth sustained acceleration seen as
        /// rest is not taken for gravity.
        package var recoveryMagnitudeTolerance = 0.02
        /// Seconds: the longest step integrated; after a longer gap the motion in it is unknown
        /// and gravity is averaged afresh.
        package var maximumGap = 0.25
        /// Seconds without any acceleration after which the filter starts from the gyroscope
        /// alone, assuming the device face up.
        package var startWithoutGravityAfter = 0.5
        /// Seconds after which a magnetometer sample is too old to use.
        package var magnetometerMaximumAge = 0.5
        /// The device's own field (hard-iron offset, µT, device frame) to subtract from every
        /// magnetometer sample, if the application knows it.
        package var hardIronOffset: MagneticField? = nil
        /// Without one, whether the magnetometer's calibration learned by ``DeviceMotionFusion``
        /// is applied once fitted.
        package var calibratesMagnetometer = true

        package init() {}
    }
}
