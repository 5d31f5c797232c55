/// Device motion from the three sensors' sample streams: the ``SampleAligner`` pairing gyroscope
/// and accelerometer samples by timestamp, then the ``AttitudeFilter``. What a manager feeds.
///
/// A value with no threads: feed it from one thread (or under one lock), in each sensor's
/// timestamp order; the sensors may interleave in any way. Each call hands the estimates it
/// completes to `emit` (zero or more; one per gyroscope sample once started), without allocating
/// (except when the magnetometer's calibration is fitted again, every few dozen samples).
///
/// The magnetometer's calibration is learned here rather than in the filter: each magnetometer
/// sample waits (at most ``CalibrationFeed/pendingLimit`` of them) until the filter has estimated
/// the attitude at its time, then goes to the ``MagnetometerCalibrator`` with the gravity
/// direction interpolated between the two estimates around it; the filter applies the newest fit
/// (``MagnetometerCalibrator/applying``) and learns nothing itself.
///
/// ```swift
/// var fusion = DeviceMotionFusion(referenceFrame: .xArbitraryZVertical, units: .coreMotion)
/// for s in batch.accelerometer { fusion.add(accelerometer: s) { _ in } }
/// for s in batch.gyroscope { fusion.add(gyro: s) { motion in deliver(motion) } }
/// ```
struct DeviceMotionFusion: Sendable {
    /// The units the samples fed in are in; estimates are always in Core Motion's.
    let units: MotionUnits
    private(set) var aligner: SampleAligner
    private(set) var filter: AttitudeFilter
    /// The calibration being learned and the magnetometer samples waiting for an estimate.
    private var feed = CalibrationFeed()
    /// What ``feed`` holds while it is out being fed (shared, never changed).
    private static let idleFeed = CalibrationFeed()

    /// - Parameters:
    ///   - referenceFrame: the frame attitudes are given in; one that needs a magnetometer
    ///     produces nothing until a magnetometer sample has arrived.
    ///   - units: the units of the samples fed in (a manager's ``MotionUnits``).
    ///   - configuration: the filter's gains and thresholds.
    ///   - aligner: how gyroscope and accelerometer samples are paired.
    init(
        referenceFrame: AttitudeReferenceFrame = .xArbitraryZVertical,
        units: MotionUnits = .coreMotion,
        configuration: AttitudeFilter.Configuration = .init(),
        aligner: SampleAligner = SampleAligner()
    ) {
        self.units = units
        self.aligner = aligner
        self.filter = AttitudeFilter(referenceFrame: referenceFrame, configuration: configuration)
        self.filter.magnetometerCalibration = feed.learner.applying
    }

    /// The magnetometer's calibration learned so far (to save with ``MagnetometerCalibrationStore``),
    /// or a saved one to start from.
    var magnetometerCalibration: MagnetometerCalibrator {
        get { feed.learner.applying }
        set {
            feed.learner = newValue
            filter.magnetometerCalibration = feed.learner.applying
        }
    }

    /// An acceleration in g with Core Motion's sign, from the given units.
    static func coreMotionAcceleration(_ a: Acceleration, from units: MotionUnits) -> Acceleration {
        switch units {
        case .coreMotion: a
        case .si: Acceleration(x: -a.x / standardGravity, y: -a.y / standardGravity, z: -a.z / standardGravity)
        }
    }

    /// Adds an accelerometer sample.
    /// - Parameters:
    ///   - sample: in ``units``.
    ///   - emit: receives the estimates completed (gyroscope samples that were waiting for it).
    mutating func add(accelerometer sample: AccelerometerData, emit: (DeviceMotion) -> Void) {
        let converted = AccelerometerData(
            timestamp: sample.timestamp,
            acceleration: Self.coreMotionAcceleration(sample.acceleration, from: units))
        var filter = self.filter
        var feed = self.feed
        self.feed = Self.idleFeed  // `feed` alone holds the samples: no copy when they change
        aligner.add(accelerometer: converted) { pair in
            if let m = filter.update(timestamp: pair.timestamp, rotationRate: pair.rotationRate, acceleration: pair.acceleration) {
                if feed.estimated(m, biasCovariance: filter.biasCovariance) { filter.magnetometerCalibration = feed.learner.applying }
                emit(m)
            }
        }
        self.filter = filter
        self.feed = feed
    }

    /// Adds a gyroscope sample.
    /// - Parameters:
    ///   - sample: rad/s (the same in both units).
    ///   - emit: receives the estimates completed.
    mutating func add(gyro sample: GyroData, emit: (DeviceMotion) -> Void) {
        var filter = self.filter
        var feed = self.feed
        self.feed = Self.idleFeed  // `feed` alone holds the samples: no copy when they change
        aligner.add(gyro: sample) { pair in
            if let m = filter.update(timestamp: pair.timestamp, rotationRate: pair.rotationRate, acceleration: pair.acceleration) {
                if feed.estimated(m, biasCovariance: filter.biasCovariance) { filter.magnetometerCalibration = feed.learner.applying }
                emit(m)
            }
        }
        self.filter = filter
        self.feed = feed
    }

    /// Adds a magnetometer sample (µT in both units); it is used from the next gyroscope sample on.
    /// - Parameter sample: the sample.
    mutating func add(magnetometer sample: MagnetometerData) {
        filter.update(magnetometerAt: sample.timestamp, field: sample.magneticField)
        if feed.add(sample) { filter.magnetometerCalibration = feed.learner.applying }
    }

    /// Sends out the gyroscope samples still waiting for acceleration (when updates stop).
    /// - Parameter emit: receives the estimates completed.
    mutating func flush(emit: (DeviceMotion) -> Void) {
        var filter = self.filter
        var feed = self.feed
        self.feed = Self.idleFeed  // `feed` alone holds the samples: no copy when they change
        aligner.flush { pair in
            if let m = filter.update(timestamp: pair.timestamp, rotationRate: pair.rotationRate, acceleration: pair.acceleration) {
                if feed.estimated(m, biasCovariance: filter.biasCovariance) { filter.magnetometerCalibration = feed.learner.applying }
                emit(m)
            }
        }
        self.filter = filter
        self.feed = feed
    }
}

/// The magnetometer's calibration as ``DeviceMotionFusion`` learns it: the calibrator, the
/// magnetometer samples waiting for the estimate at their time, the last two estimates'
/// gravity, and the attitude the estimates' bias-corrected rates integrate to (the gyroscope
/// alone: the calibrator relates samples the device turned between by it).
struct CalibrationFeed: Sendable {
    /// How many magnetometer samples may wait for an estimate (the oldest go first).
    static let pendingLimit = 64
    /// An estimate's gravity is used for a sample at most this far (seconds) before it.
    static let maximumGap = 0.05

    var learner = MagnetometerCalibrator()
    private var pending: [(timestamp: Double, field: Vector3)] = []
    private var pendingStart = 0
    private var previous: (timestamp: Double, gravity: Vector3)?
    private var last: (timestamp: Double, gravity: Vector3)?
    /// The gyroscope's attitude at the last estimate, and that estimate's rate (rad/s).
    private var turn = Quaternion.identity
    private var rate = Vector3.zero
    /// The covariance of the bias the rates were corrected by, at the last estimate ((rad/s)²).
    private var rateCovariance = Matrix3.diagonal(0)

    init() { pending.reserveCapacity(Self.pendingLimit) }

    /// Queues a magnetometer sample; returns whether the calibration changed.
    mutating func add(_ sample: MagnetometerData) -> Bool {
        let v = Vector3(sample.magneticField)
        guard v.isFinite, sample.timestamp.isFinite else { return false }
        if pending.count - pendingStart >= Self.pendingLimit { pendingStart += 1 }
        if pendingStart > 0, pending.count == pending.capacity {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
        pending.append((sample.timestamp, v))
        return learn()
    }

    /// Notes an estimate's gravity, then learns from the samples now behind it; returns whether
    /// the calibration changed. `biasCovariance`: that of the gyroscope bias the estimate's rate
    /// is corrected by (the filter's), which tells the calibrator how far to trust the turns.
    mutating func estimated(_ m: DeviceMotion, biasCovariance: Matrix3) -> Bool {
        let g = Vector3(m.gravity)
        guard g.isFinite, g.length > 0.5 else { return false }
        if let last, m.timestamp <= last.timestamp { return false }
        let omega = Vector3(m.rotationRate)
        if let last, m.timestamp - last.timestamp <= AttitudeFilter.Configuration().maximumGap, omega.isFinite {
            // The midpoint rate over the step.
            turn = Self.turned(turn, by: (m.timestamp - last.timestamp) * 0.5 * (omega + rate))
        } else if last != nil {
            learner.breakPairs()
        }
        rate = omega.isFinite ? omega : .zero
        rateCovariance = biasCovariance
        previous = last
        last = (m.timestamp, g)
        guard pendingStart < pending.count, pending[pendingStart].timestamp <= m.timestamp else { return false }
        return learn()
    }

    /// `q` turned by the rotation vector `v` (device frame).
    private static func turned(_ q: Quaternion, by v: Vector3) -> Quaternion {
        let angle = v.length
        guard angle > 0, angle.isFinite else { return q }
        return q.multiplied(by: Quaternion(axis: (1 / angle) * v, angle: angle)).normalized
    }

    private mutating func learn() -> Bool {
        guard let last else { return false }
        var changed = false
        while pendingStart < pending.count, pending[pendingStart].timestamp <= last.timestamp {
            let s = pending[pendingStart]
            pendingStart += 1
            var g = last.gravity
            if let p = previous, s.timestamp > p.timestamp {
                let f = (s.timestamp - p.timestamp) / max(last.timestamp - p.timestamp, 1e-9)
                g = p.gravity + f * (last.gravity - p.gravity)
            } else if last.timestamp - s.timestamp > Self.maximumGap {
                continue  // long before any estimate (before the filter started)
            } else if let p = previous, p.timestamp - s.timestamp <= Self.maximumGap {
                g = p.gravity
            }
            let before = (learner.offset, learner.strength, learner.accuracy, learner.model, learner.softIron)
            // The gyroscope's attitude at the sample's time, back from the last estimate's.
            let at = Self.turned(turn, by: (s.timestamp - last.timestamp) * rate)
            if learner.add(s.field, gravity: g, turn: at, turnRateCovariance: rateCovariance),
               before != (learner.offset, learner.strength, learner.accuracy, learner.model, learner.softIron) {
                changed = true
            }
        }
        if pendingStart == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingStart = 0
        }
        return changed
    }
}
