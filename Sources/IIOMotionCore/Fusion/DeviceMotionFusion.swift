internal import Glibc

/// Device motion from the three sensors' sample streams: the ``SampleAligner`` pairing gyroscope
/// and accelerometer samples by timestamp, then the ``AttitudeFilter``. What a manager feeds.
///
/// A value: feed it from one thread (or under one lock), in each sensor's
/// timestamp order; the sensors may interleave in any way. Each call hands the estimates it
/// completes to `emit` (zero or more; one per gyroscope sample once started), without allocating
/// (except when the magnetometer's calibration is fitted again, every 2 s of its time).
///
/// The calibration's refits run off the sample path, the only thread this value starts: when one is due, the calibrator as it is
/// then goes to a thread (``MagnetometerRefit``), and its result is taken with the first
/// magnetometer sample ``CalibrationFeed/refitDelay`` of the magnetometer's time later, the
/// sample path waiting for the thread then if it has not finished. So the estimates depend on the
/// samples and their timestamps only, not on how fast the thread ran.
///
/// The magnetometer's calibration is learned here rather than in the filter: each magnetometer
/// sample waits (at most ``CalibrationFeed/pendingLimit`` of them) until the filter has estimated
/// the attitude at its time, then goes to the ``MagnetometerCalibrator`` with the gravity of the
/// last estimate turned back by the gyroscope's rotation since the sample's time; the filter
/// applies the newest fit (``MagnetometerCalibrator/applying``) and learns nothing itself.
///
/// Each sensor arrives in refills of its own device, so a magnetometer sample may come before
/// the gyroscope samples of its time or after them. The filter gets it when the gyroscope reaches
/// its time, or, if it comes late, turned by the gyroscope's rotation from its time to the last
/// estimate's (kept for the last ``CalibrationFeed/historyLimit`` estimates): field and attitude
/// are compared at one time however the refills interleave.
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
    /// For a frame that uses the magnetometer: the gyroscope's pairs and the field samples
    /// waiting to be merged in timestamp order (see ``TimestampMerge``).
    private var merge: TimestampMerge

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
        self.merge = TimestampMerge(holds: referenceFrame.needsMagnetometer)
    }

    /// The magnetometer's calibration learned so far, with the magnetometer's lag once measured
    /// (to save with ``MagnetometerCalibrationStore``), or a saved one to start from (its lag, if
    /// it has one, is used until this run measures its own).
    var magnetometerCalibration: MagnetometerCalibrator {
        get {
            var c = feed.learner.applying
            if feed.isMagnetometerLagKnown { c.lag = feed.magnetometerLag }
            return c
        }
        set {
            feed.learner = newValue
            if let lag = newValue.lag { feed.startMagnetometerLag(from: lag) }
            filter.magnetometerCalibration = feed.learner.applying
        }
    }

    /// How long the magnetometer's samples lag the gyroscope's, as measured (seconds; 0 until
    /// known; see ``MagnetometerLag``). Field samples are taken as of their timestamp less it.
    var magnetometerLag: Double { feed.magnetometerLag }

    /// The work the calibration has done on the sample path (see ``CalibrationFeed/Work``).
    var calibrationWork: CalibrationFeed.Work { feed.work }

    /// An acceleration in g with Core Motion's sign, from the given units.
    static func coreMotionAcceleration(_ a: Acceleration, from units: MotionUnits) -> Acceleration {
        switch units {
        case .coreMotion: a
        case .si: Conversion.acceleration((a.x, a.y, a.z), units: .coreMotion)
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
        aligner.add(accelerometer: converted)
        while let pair = aligner.nextPair() { merged(pair, emit: emit) }
    }

    /// Adds a gyroscope sample.
    /// - Parameters:
    ///   - sample: rad/s (the same in both units).
    ///   - emit: receives the estimates completed.
    mutating func add(gyro sample: GyroData, emit: (DeviceMotion) -> Void) {
        aligner.add(gyro: sample)
        while let pair = aligner.nextPair() { merged(pair, emit: emit) }
    }

    /// One pair through the filter: the magnetometer samples the gyroscope has reached first,
    /// then the estimate, noted by the calibration feed and handed to `emit`.
    private mutating func fuse(_ pair: SampleAligner.Pair, emit: (DeviceMotion) -> Void) {
        while let f = feed.takeUpcoming(upTo: pair.timestamp) { filter.update(magnetometerAt: f.timestamp, field: f.magneticField) }
        if let m = filter.update(timestamp: pair.timestamp, rotationRate: pair.rotationRate, acceleration: pair.acceleration) {
            if feed.estimated(m, biasCovariance: filter.biasCovariance) { filter.magnetometerCalibration = feed.learner.applying }
            emit(m)
        }
    }

    /// Adds a magnetometer sample (µT in both units); it is used from the gyroscope sample at or
    /// after its time on.
    /// - Parameter sample: the sample.
    mutating func add(magnetometer sample: MagnetometerData) {
        queueField(sample)
    }

    /// Adds a magnetometer sample (µT in both units), handing `emit` the estimates it completes:
    /// in a frame that uses the magnetometer, the gyroscope's samples wait for the field's up to
    /// their time (``TimestampMerge``), and this sample may be the one they waited for. Without
    /// `emit` (``add(magnetometer:)``), they go with the next gyroscope or accelerometer sample,
    /// or ``flush(emit:)``.
    mutating func add(magnetometer sample: MagnetometerData, emit: (DeviceMotion) -> Void) {
        guard queueField(sample) else { return }
        release(emit: emit)
    }

    /// The sample to the filter now, or queued for the merge (true: pairs may be released).
    @discardableResult
    private mutating func queueField(_ sample: MagnetometerData) -> Bool {
        guard merge.holds else {
            applyField(sample)
            return false
        }
        guard sample.timestamp.isFinite, sample.timestamp > merge.fieldHorizon else { return false }
        merge.fieldHorizon = sample.timestamp
        if merge.fields.isFull, let f = merge.fields.first {
            // The field far ahead of the gyroscope: its oldest sample goes now.
            merge.fields.removeFirst()
            applyField(f)
        }
        merge.fields.append(sample)
        return true
    }

    /// A field sample to the filter and the calibration.
    private mutating func applyField(_ sample: MagnetometerData) {
        // The field's time: the sample's timestamp less the magnetometer's lag (``MagnetometerLag``).
        var field = sample
        field.timestamp -= feed.magnetometerLag
        // A sample newer than the last estimate waits for the gyroscope to reach its time; one
        // older (a pair released without waiting for it) is turned with the device from its time
        // to the estimate's. Either way the filter compares it with the attitude of one time.
        if !feed.queueUpcoming(field) {
            if let (turn, to) = feed.turnSince(field.timestamp) {
                filter.update(magnetometerAt: field.timestamp, field: field.magneticField, turn: turn, turnedTo: to)
            } else {
                filter.update(magnetometerAt: field.timestamp, field: field.magneticField)
            }
        }
        if feed.add(sample) { filter.magnetometerCalibration = feed.learner.applying }
    }

    /// A pair from the aligner: straight to the filter, or held until the field samples up to its
    /// time have arrived.
    private mutating func merged(_ pair: SampleAligner.Pair, emit: (DeviceMotion) -> Void) {
        guard merge.holds else {
            fuse(pair, emit: emit)
            return
        }
        if merge.pairs.isFull, let p = merge.pairs.first {
            // Held too long (no field sample for TimestampMerge.pairLimit pairs): it goes now.
            merge.pairs.removeFirst()
            fieldsUpTo(p.timestamp)
            fuse(p, emit: emit)
        }
        merge.pairs.append(pair)
        merge.pairHorizon = max(merge.pairHorizon, pair.timestamp)
        release(emit: emit)
    }

    /// The held pairs whose time the field samples have reached (or that waited longer than
    /// ``TimestampMerge/maximumHold`` of the gyroscope's time), each after the field samples up to it.
    private mutating func release(emit: (DeviceMotion) -> Void) {
        while let p = merge.pairs.first,
              p.timestamp <= merge.fieldHorizon || merge.pairHorizon - p.timestamp > TimestampMerge.maximumHold {
            merge.pairs.removeFirst()
            fieldsUpTo(p.timestamp)
            fuse(p, emit: emit)
        }
    }

    private mutating func fieldsUpTo(_ time: Double) {
        while let f = merge.fields.first, f.timestamp <= time {
            merge.fields.removeFirst()
            applyField(f)
        }
    }

    /// Sends out the gyroscope samples still waiting for acceleration (when updates stop).
    /// - Parameter emit: receives the estimates completed.
    mutating func flush(emit: (DeviceMotion) -> Void) {
        while let pair = aligner.nextPair(flushing: true) { merged(pair, emit: emit) }
        // Every pair still held goes now, each after the field samples up to its time.
        while let p = merge.pairs.first {
            merge.pairs.removeFirst()
            fieldsUpTo(p.timestamp)
            fuse(p, emit: emit)
        }
    }
}

/// The gyroscope's pairs and the magnetometer's samples merged in timestamp order, so that device
/// motion is a function of the samples and their timestamps, not of how the devices' refills
/// interleave: a pair waits until a field sample at or after its time has arrived
/// (the magnetometer's stream has passed it), then goes after the field samples up to its time.
/// A pair goes without waiting once the gyroscope is ``maximumHold`` ahead of it (a magnetometer
/// that stopped or lags that much), or when ``pairLimit`` are held; a field sample far ahead goes
/// when ``fieldLimit`` are held. The price is latency: an estimate waits for the magnetometer's
/// refill that covers its time. Only in frames that use the magnetometer.
struct TimestampMerge: Sendable {
    /// Seconds of gyroscope time a pair waits at most for the field.
    static let maximumHold = 0.5
    /// Pairs held at most (0.5 s at 4 kHz) and field samples.
    static let pairLimit = 2048
    static let fieldLimit = 256

    let holds: Bool
    var pairs: BoundedQueue<SampleAligner.Pair>
    var fields: BoundedQueue<MagnetometerData>
    /// The newest field sample's time, and the newest pair's.
    var fieldHorizon = -Double.infinity
    var pairHorizon = -Double.infinity

    init(holds: Bool) {
        self.holds = holds
        pairs = BoundedQueue(limit: holds ? Self.pairLimit : 0)
        fields = BoundedQueue(limit: holds ? Self.fieldLimit : 0)
    }
}

/// A first-in, first-out queue of at most `limit` elements (when full, the oldest goes), in one
/// array reserved once: taking the first moves a start index, and the array is compacted only
/// when its reserved capacity is reached, so nothing allocates per element.
struct BoundedQueue<Element: Sendable>: Sendable {
    /// The most elements kept.
    let limit: Int
    private var items: [Element] = []
    private var start = 0

    init(limit: Int) {
        self.limit = limit
        items.reserveCapacity(limit)
    }

    /// The oldest element, if any.
    var first: Element? { start < items.count ? items[start] : nil }

    /// Whether `limit` elements are kept (the next append drops the oldest).
    var isFull: Bool { items.count - start >= limit }

    /// Adds `element` as the newest, dropping the oldest when `limit` are kept.
    mutating func append(_ element: Element) {
        if items.count - start >= limit { start += 1 }
        if start > 0, items.count == items.capacity {
            items.removeFirst(start)
            start = 0
        }
        items.append(element)
    }

    /// Drops the oldest element (there must be one).
    mutating func removeFirst() {
        start += 1
        if start == items.count {
            items.removeAll(keepingCapacity: true)
            start = 0
        }
    }
}
