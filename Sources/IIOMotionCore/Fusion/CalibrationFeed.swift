internal import Glibc

/// The magnetometer's calibration as ``DeviceMotionFusion`` learns it: the calibrator, the
/// magnetometer samples waiting for the estimate at their time, the last estimate's gravity,
/// and the attitude the estimates' bias-corrected rates integrate to (the gyroscope alone: the
/// calibrator relates samples the device turned between by it), with its recent history, which
/// turns a sample that arrives late (and its gravity) between its time and the last estimate's.
///
/// Gravity goes to the calibrator with each sample only while the accelerometer agrees with the
/// estimate: while the estimates' user acceleration, turned into the reference frame and low-pass
/// filtered over ``disagreementTimeConstant``, is longer than ``disagreementLimit``, the samples
/// go without it (the strength and the pairs still count). That is a sustained acceleration (a
/// vehicle pulling away, braking, in a bend) or an estimate still levelling: either way the
/// estimate's gravity may be degrees off for seconds, and a field's vertical part taken against
/// it would move the offset (a holder's tilt of 5° against a 49 µT field with a 60° dip puts the
/// vertical part about 2 µT off). Vibration and a hand's to-and-fro average out in the filter.
struct CalibrationFeed: Sendable {
    /// The time constant (seconds) of the filter on the user acceleration that decides whether
    /// gravity goes to the calibrator.
    static let disagreementTimeConstant = 3.0
    /// The filtered user acceleration (g) beyond which it does not.
    static let disagreementLimit = 0.05
    /// The longest step between estimates taken as continuous: the filter's ``AttitudeFilter/Configuration/maximumGap``.
    static let maximumStep = AttitudeFilter.Configuration().maximumGap
    /// How many magnetometer samples may wait for an estimate (the oldest go first).
    static let pendingLimit = 64
    /// A sample at most this far (seconds) before the oldest estimate kept is taken as of it.
    static let maximumGap = 0.05
    /// How many estimates' gyroscope attitudes are kept: 0.5 s (the filter's
    /// ``AttitudeFilter/Configuration/magnetometerMaximumAge``) at 2 kHz.
    static let historyLimit = 1024

    /// The calibration being learned (it refits off the sample path, see ``refitDelay``); setting
    /// it drops a refit still running for the one it replaces.
    var learner: MagnetometerCalibrator {
        get { calibrator }
        set {
            calibrator = newValue
            calibrator.fitsInPlace = false
            refit = nil
        }
    }
    private var calibrator: MagnetometerCalibrator
    /// The refit running, and the magnetometer time from which its result is taken.
    private var refit: (running: MagnetometerRefit, due: Double)?
    /// Seconds of the magnetometer's time from the sample a refit is due at to the one that
    /// takes its result: the thread's time to fit (a few milliseconds to tens under load) with a
    /// wide margin at real-time pace, so that the sample path seldom waits.
    static let refitDelay = 0.25

    /// The work the calibration has done on the sample path, and off it.
    struct Work: Sendable, Hashable {
        /// Refits run in place on the sample path (none: they run on their own thread).
        var refitsInPlace = 0
        /// Refits started on their own thread, and taken.
        var refitsStarted = 0
        var refitsTaken = 0
        /// Stored samples visited on the sample path (binning again and evicting after a refit).
        var samplesRevisited = 0
    }

    /// The work so far.
    var work: Work {
        Work(refitsInPlace: calibrator.refitsInPlace, refitsStarted: refitsStarted, refitsTaken: refitsTaken,
             samplesRevisited: calibrator.samplesRevisited)
    }
    /// How long the magnetometer's samples lag the gyroscope's (seconds; 0 until measured).
    var magnetometerLag: Double { lag.seconds }
    /// Whether ``magnetometerLag`` is a measurement (this run's or a saved one).
    var isMagnetometerLagKnown: Bool { lag.isKnown }

    /// Starts from a lag measured before (``MagnetometerLag/start(from:)``).
    mutating func startMagnetometerLag(from saved: Double) { lag.start(from: saved) }
    private var lag = MagnetometerLag()
    private var refitsStarted = 0
    private var refitsTaken = 0
    private var pending = BoundedQueue<(timestamp: Double, field: Vector3)>(limit: pendingLimit)
    private var last: (timestamp: Double, gravity: Vector3)?
    /// The gyroscope's attitude and rate at the latest estimates, oldest first from
    /// `historyStart`, a ring of `historyCount` entries (since the start or the last gap).
    private var history: [(timestamp: Double, turn: Quaternion, rate: Vector3)]
    private var historyStart = 0
    private var historyCount = 0
    /// Magnetometer samples newer than the last estimate, for the filter once the gyroscope
    /// reaches their time (at most ``pendingLimit``: the oldest go first).
    private var upcoming = BoundedQueue<MagnetometerData>(limit: pendingLimit)
    /// The gyroscope's attitude at the last estimate, and that estimate's rate (rad/s).
    private var turn = Quaternion.identity
    private var rate = Vector3.zero
    /// The covariance of the bias the rates were corrected by, at the last estimate ((rad/s)²).
    private var rateCovariance = Matrix3.diagonal(0)
    /// The estimates' user acceleration in the reference frame (g), low-pass filtered.
    private var disagreement = Vector3.zero

    init() {
        history = Array(repeating: (-.infinity, .identity, .zero), count: Self.historyLimit)
        calibrator = MagnetometerCalibrator()
        calibrator.fitsInPlace = false
    }

    /// The i-th kept estimate, oldest first.
    private func kept(_ i: Int) -> (timestamp: Double, turn: Quaternion, rate: Vector3) {
        history[(historyStart + i) % Self.historyLimit]
    }

    /// The gyroscope's attitude at `time`, between the kept estimates around it (nil before the
    /// oldest, less ``maximumGap``, or after the newest).
    private func gyroAttitude(at time: Double) -> Quaternion? {
        gyroState(at: time)?.attitude
    }

    /// The gyroscope's attitude at `time` (as ``gyroAttitude(at:)``) and the rate of the first
    /// kept estimate at or after it.
    private func gyroState(at time: Double) -> (attitude: Quaternion, rate: Vector3)? {
        guard historyCount > 0, time <= kept(historyCount - 1).timestamp else { return nil }
        let first = kept(0)
        if time <= first.timestamp { return first.timestamp - time <= Self.maximumGap ? (first.turn, first.rate) : nil }
        // The first kept estimate at or after `time`.
        var lo = 1, hi = historyCount - 1
        while lo < hi {
            let mid = (lo + hi) / 2
            if kept(mid).timestamp < time { lo = mid + 1 } else { hi = mid }
        }
        let a = kept(lo - 1), b = kept(lo)
        let f = (time - a.timestamp) / max(b.timestamp - a.timestamp, 1e-12)
        // Neighbouring attitudes differ by one step's turn: normalised linear interpolation.
        let s: Double = a.turn.x * b.turn.x + a.turn.y * b.turn.y + a.turn.z * b.turn.z + a.turn.w * b.turn.w < 0 ? -1 : 1
        let attitude = Quaternion(x: a.turn.x + f * (s * b.turn.x - a.turn.x), y: a.turn.y + f * (s * b.turn.y - a.turn.y),
                                  z: a.turn.z + f * (s * b.turn.z - a.turn.z), w: a.turn.w + f * (s * b.turn.w - a.turn.w)).normalized
        return (attitude, b.rate)
    }

    /// Keeps `sample` for the filter if it is newer than the last estimate (false: there is none
    /// yet, or the sample is not newer: it goes to the filter now).
    mutating func queueUpcoming(_ sample: MagnetometerData) -> Bool {
        guard let last, sample.timestamp > last.timestamp else { return false }
        upcoming.append(sample)
        return true
    }

    /// The oldest kept sample at or before `time` (the gyroscope sample about to be fused), if any.
    mutating func takeUpcoming(upTo time: Double) -> MagnetometerData? {
        guard let first = upcoming.first, first.timestamp <= time else { return nil }
        upcoming.removeFirst()
        return first
    }

    /// For a sample at `time` older than the last estimate: the device's rotation from then to
    /// that estimate (device frame then to device frame at it) and the estimate's time; nil when
    /// the sample is not older, or older than what is kept.
    func turnSince(_ time: Double) -> (Quaternion, Double)? {
        guard let last, time < last.timestamp, let then = gyroAttitude(at: time) else { return nil }
        return (turn.conjugate.multiplied(by: then).normalized, last.timestamp)
    }

    /// Queues a magnetometer sample; returns whether the calibration changed.
    mutating func add(_ sample: MagnetometerData) -> Bool {
        let v = Vector3(sample.magneticField)
        guard v.isFinite, sample.timestamp.isFinite else { return false }
        if let t = lastFieldTime, sample.timestamp > t {
            // The calibration is fitted again at most every ``refitPeriod`` of the magnetometer's
            // time, whatever its rate (at 286 Hz a refit every 40 samples would take most of the
            // sample path's time).
            fieldInterval += 0.05 * (min(sample.timestamp - t, 1) - fieldInterval)
            calibrator.refitEvery = max(40, Int(Self.refitPeriod / max(fieldInterval, 1e-4)))
            calibrator.fieldChangeMemory = Int(Self.fieldChangePeriod / max(fieldInterval, 1e-4))
        }
        lastFieldTime = sample.timestamp
        pending.append((sample.timestamp, v))
        return learn()
    }

    /// Seconds of magnetometer time between refits of the calibration, at most.
    static let refitPeriod = 2.0
    /// Seconds of magnetometer time over which a changed field is recognised and learned afresh
    /// (``MagnetometerCalibrator/fieldChangeMemory``): a minute, longer than a steel object
    /// passing takes, short enough for a board moved into its case to be calibrated again while
    /// it is turned in the hand.
    static let fieldChangePeriod = 60.0
    private var lastFieldTime: Double?
    private var fieldInterval = 0.0125

    /// Notes an estimate's gravity, then learns from the samples now behind it; returns whether
    /// the calibration changed. `biasCovariance`: that of the gyroscope bias the estimate's rate
    /// is corrected by (the filter's), which tells the calibrator how far to trust the turns.
    mutating func estimated(_ m: DeviceMotion, biasCovariance: Matrix3) -> Bool {
        let g = Vector3(m.gravity)
        guard g.isFinite, g.length > 0.5 else { return false }
        if let last, m.timestamp <= last.timestamp { return false }
        let omega = Vector3(m.rotationRate)
        let user = m.attitude.quaternion.rotate(Vector3(m.userAcceleration))
        // The step since the last estimate, when there is one and no gap between.
        let step = last.map { m.timestamp - $0.timestamp }.flatMap { $0 <= Self.maximumStep ? $0 : nil }
        if let step, user.isFinite {
            disagreement += (1 - exp(-step / Self.disagreementTimeConstant)) * (user - disagreement)
        } else {
            disagreement = .zero
        }
        if let step, omega.isFinite {
            // The midpoint rate over the step.
            turn = Self.turned(turn, by: step * 0.5 * (omega + rate))
        } else if last != nil {
            calibrator.breakPairs()
            lag.breakPairs()
            historyCount = 0  // the turn over the gap is unknown
        }
        rate = omega.isFinite ? omega : .zero
        rateCovariance = biasCovariance
        last = (m.timestamp, g)
        if historyCount == Self.historyLimit {
            history[historyStart] = (m.timestamp, turn, rate)
            historyStart = (historyStart + 1) % Self.historyLimit
        } else {
            history[(historyStart + historyCount) % Self.historyLimit] = (m.timestamp, turn, rate)
            historyCount += 1
        }
        guard let next = pending.first, fieldTime(next.timestamp) <= m.timestamp else { return false }
        return learn()
    }

    /// `q` turned by the rotation vector `v` (device frame).
    private static func turned(_ q: Quaternion, by v: Vector3) -> Quaternion {
        let angle = v.length
        guard angle > 0, angle.isFinite else { return q }
        return q.multiplied(by: Quaternion(axis: (1 / angle) * v, angle: angle)).normalized
    }

    /// The later of a sample's timestamp and its field's time (the timestamp less the lag): the
    /// estimates must reach both before the sample is learned from.
    private func fieldTime(_ timestamp: Double) -> Double {
        max(timestamp, timestamp - lag.seconds)
    }

    private mutating func learn() -> Bool {
        guard let last else { return false }
        var changed = false
        while let s = pending.first, fieldTime(s.timestamp) <= last.timestamp {
            pending.removeFirst()
            let before = (calibrator.offset, calibrator.strength, calibrator.accuracy, calibrator.model, calibrator.softIron)
            // The refit running is taken at the first sample `refitDelay` after the one it was due at.
            if let r = refit, s.timestamp >= r.due {
                refit = nil
                calibrator.adopt(r.running.result())
                refitsTaken += 1
            }
            // The gyroscope's attitude at the time of the sample's field (its timestamp less
            // the magnetometer's lag), and gravity then: the last estimate's, turned back by the
            // device's rotation since.
            if let (stamped, rate) = gyroState(at: s.timestamp),  // nil: before the filter started, or a gap
               let at = lag.seconds == 0 ? stamped : gyroAttitude(at: s.timestamp - lag.seconds) {
                if calibrator.isCalibrated {
                    lag.add(time: s.timestamp, field: calibrator.softIron * (s.field - calibrator.offset), attitude: stamped,
                            rate: rate, strength: calibrator.strength)
                }
                let g = disagreement.length <= Self.disagreementLimit
                    ? turn.conjugate.multiplied(by: at).normalized.inverseRotate(last.gravity) : nil
                calibrator.add(s.field, gravity: g, turn: at, turnRateCovariance: rateCovariance)
            }
            if calibrator.isRefitDue {
                // One refit at a time: one still running is taken first.
                if let r = refit {
                    refit = nil
                    calibrator.adopt(r.running.result())
                    refitsTaken += 1
                }
                refit = (MagnetometerRefit(calibrator.takeRefit()), s.timestamp + Self.refitDelay)
                refitsStarted += 1
            }
            if before != (calibrator.offset, calibrator.strength, calibrator.accuracy, calibrator.model, calibrator.softIron) {
                changed = true
            }
        }
        return changed
    }
}
