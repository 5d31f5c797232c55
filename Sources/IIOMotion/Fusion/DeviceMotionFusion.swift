/// Device motion from the three sensors' sample streams: the ``SampleAligner`` pairing gyroscope
/// and accelerometer samples by timestamp, then the ``AttitudeFilter``. What a manager feeds.
///
/// A value with no threads: feed it from one thread (or under one lock), in each sensor's
/// timestamp order; the sensors may interleave in any way. Each call hands the estimates it
/// completes to `emit` (zero or more; one per gyroscope sample once started), without allocating.
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
    }

    /// The magnetometer's calibration learned so far (to save with ``MagnetometerCalibrationStore``),
    /// or a saved one to start from.
    var magnetometerCalibration: MagnetometerCalibrator {
        get { filter.magnetometerCalibration }
        set { filter.magnetometerCalibration = newValue }
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
        aligner.add(accelerometer: converted) { pair in
            if let m = filter.update(timestamp: pair.timestamp, rotationRate: pair.rotationRate, acceleration: pair.acceleration) {
                emit(m)
            }
        }
        self.filter = filter
    }

    /// Adds a gyroscope sample.
    /// - Parameters:
    ///   - sample: rad/s (the same in both units).
    ///   - emit: receives the estimates completed.
    mutating func add(gyro sample: GyroData, emit: (DeviceMotion) -> Void) {
        var filter = self.filter
        aligner.add(gyro: sample) { pair in
            if let m = filter.update(timestamp: pair.timestamp, rotationRate: pair.rotationRate, acceleration: pair.acceleration) {
                emit(m)
            }
        }
        self.filter = filter
    }

    /// Adds a magnetometer sample (µT in both units); it is used from the next gyroscope sample on.
    /// - Parameter sample: the sample.
    mutating func add(magnetometer sample: MagnetometerData) {
        filter.update(magnetometerAt: sample.timestamp, field: sample.magneticField)
    }

    /// Sends out the gyroscope samples still waiting for acceleration (when updates stop).
    /// - Parameter emit: receives the estimates completed.
    mutating func flush(emit: (DeviceMotion) -> Void) {
        var filter = self.filter
        aligner.flush { pair in
            if let m = filter.update(timestamp: pair.timestamp, rotationRate: pair.rotationRate, acceleration: pair.acceleration) {
                emit(m)
            }
        }
        self.filter = filter
    }
}
