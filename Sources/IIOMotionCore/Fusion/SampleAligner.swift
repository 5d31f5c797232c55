/// Pairs each gyroscope sample with the acceleration at its timestamp, for accelerometers and
/// gyroscopes that are separate IIO devices (the LSM6DSx driver makes two; an MPU-6050 or BMI160
/// is one device, whose samples share timestamps and pair exactly).
///
/// The gyroscope drives the output: one pair per gyroscope sample, in timestamp order. The
/// acceleration is interpolated linearly between the two accelerometer samples around the gyroscope
/// sample's time. A gyroscope sample newer than every accelerometer sample waits for the next one,
/// but never longer than ``maximumWait`` of gyroscope time: if the accelerometer stalls, pairs go
/// out with the newest acceleration held (if it is at most ``maximumHold`` old, else with none).
/// If the gyroscope stalls, nothing goes out and old accelerometer samples are overwritten.
///
/// The caller pulls the pairs: after each ``add(accelerometer:)`` or ``add(gyro:)``, it takes
/// ``nextPair(flushing:)`` until nil (the pairs that sample completed, oldest first), so that it
/// can hand them on without a closure (``DeviceMotionFusion`` updates its filter in place).
/// ``add(accelerometer:emit:)`` and ``add(gyro:emit:)`` do both.
///
/// Memory is two fixed rings of ``capacity`` samples (the gyroscope's one more, for the sample
/// that fills it), allocated once; nothing blocks and nothing allocates per sample. A full
/// gyroscope ring sends its oldest sample out as if the wait were over. Samples whose timestamp
/// is not later than the previous one of the same sensor are dropped.
struct SampleAligner: Sendable {
    /// One gyroscope sample and the acceleration at its time.
    struct Pair: Sendable, Hashable {
        /// The gyroscope sample's time, seconds.
        var timestamp: Double
        /// As measured.
        var rotationRate: RotationRate
        /// Interpolated or held; nil when no accelerometer sample is close enough in time.
        var acceleration: Acceleration?
    }

    /// Ring capacity of each sensor (samples).
    let capacity: Int
    /// Gyroscope time (s) a sample may wait for the accelerometer to catch up.
    let maximumWait: Double
    /// Age (s) beyond which an accelerometer sample is not held or interpolated across.
    let maximumHold: Double

    private var accel: [AccelerometerData]
    private var accelStart = 0
    private var accelCount = 0
    /// `capacity + 1` slots: a sample added to a full ring is kept beside the oldest, which
    /// ``nextPair(flushing:)`` sends out first.
    private var gyro: [GyroData]
    private var gyroStart = 0
    private var gyroCount = 0
    private var newestGyro = -Double.infinity
    private var newestAccel = -Double.infinity

    /// - Parameters:
    ///   - capacity: samples kept per sensor; cover the larger of the two sensors' batch sizes
    ///     (256 is 160 ms at 1.6 kHz).
    ///   - maximumWait: seconds a gyroscope sample waits for acceleration.
    ///   - maximumHold: seconds an acceleration may be held or interpolated across.
    init(capacity: Int = 256, maximumWait: Double = 0.1, maximumHold: Double = 0.5) {
        precondition(capacity >= 2, "SampleAligner needs room for two samples")
        self.capacity = capacity
        self.maximumWait = maximumWait
        self.maximumHold = maximumHold
        accel = Array(repeating: AccelerometerData(timestamp: 0, acceleration: Acceleration(x: 0, y: 0, z: 0)), count: capacity)
        gyro = Array(repeating: GyroData(timestamp: 0, rotationRate: RotationRate(x: 0, y: 0, z: 0)), count: capacity + 1)
    }

    /// Gyroscope samples waiting for acceleration.
    var pendingCount: Int { gyroCount }
    /// Accelerometer samples kept.
    var bufferedAccelerometerCount: Int { accelCount }

    /// Adds an accelerometer sample; the gyroscope samples it completes are then ready
    /// (``nextPair(flushing:)``).
    /// - Parameter sample: the sample, in any units (interpolation is linear).
    mutating func add(accelerometer sample: AccelerometerData) {
        guard sample.timestamp.isFinite, sample.timestamp > newestAccel else { return }
        newestAccel = sample.timestamp
        if accelCount == capacity {
            accelStart = (accelStart + 1) % capacity
            accelCount -= 1
        }
        accel[(accelStart + accelCount) % capacity] = sample
        accelCount += 1
    }

    /// Adds a gyroscope sample; the pairs ready are then ``nextPair(flushing:)``'s. Added to a
    /// full ring whose pairs were not taken, it replaces the oldest waiting sample.
    /// - Parameter sample: the sample.
    mutating func add(gyro sample: GyroData) {
        guard sample.timestamp.isFinite, sample.timestamp > newestGyro else { return }
        newestGyro = sample.timestamp
        let slots = capacity + 1
        if gyroCount == slots {
            gyroStart = (gyroStart + 1) % slots
            gyroCount -= 1
        }
        gyro[(gyroStart + gyroCount) % slots] = sample
        gyroCount += 1
    }

    /// The oldest waiting gyroscope sample with its acceleration, if it is ready: the
    /// accelerometer has reached its time, or it has waited ``maximumWait``, or the ring holds
    /// more than ``capacity``; with `flushing`, whatever acceleration is known now (when updates
    /// stop). Nil when none is ready.
    mutating func nextPair(flushing: Bool = false) -> Pair? {
        guard gyroCount > 0 else { return nil }
        let g = gyro[gyroStart]
        let ready = flushing || gyroCount > capacity || g.timestamp <= newestAccel || newestGyro - g.timestamp > maximumWait
        guard ready else { return nil }
        gyroStart = (gyroStart + 1) % (capacity + 1)
        gyroCount -= 1
        return pair(for: g)
    }

    /// Adds an accelerometer sample and sends out the gyroscope samples it completes.
    /// - Parameters:
    ///   - sample: the sample, in any units (interpolation is linear).
    ///   - emit: called with each pair, oldest first.
    mutating func add(accelerometer sample: AccelerometerData, emit: (Pair) -> Void) {
        add(accelerometer: sample)
        while let p = nextPair() { emit(p) }
    }

    /// Adds a gyroscope sample and sends out every pair that is ready.
    /// - Parameters:
    ///   - sample: the sample.
    ///   - emit: called with each pair, oldest first.
    mutating func add(gyro sample: GyroData, emit: (Pair) -> Void) {
        add(gyro: sample)
        while let p = nextPair() { emit(p) }
    }

    /// Sends out every waiting gyroscope sample with the acceleration known now (when updates stop).
    /// - Parameter emit: called with each pair, oldest first.
    mutating func flush(emit: (Pair) -> Void) {
        while let p = nextPair(flushing: true) { emit(p) }
    }

    private func accelAt(_ i: Int) -> AccelerometerData { accel[(accelStart + i) % capacity] }

    /// The acceleration at `g`'s time: interpolated when accelerometer samples lie on both sides,
    /// else the nearest one if it is close enough.
    private func pair(for g: GyroData) -> Pair {
        var result = Pair(timestamp: g.timestamp, rotationRate: g.rotationRate, acceleration: nil)
        guard accelCount > 0 else { return result }
        let t = g.timestamp
        let newest = accelAt(accelCount - 1)
        if t >= newest.timestamp {
            if t - newest.timestamp <= maximumHold { result.acceleration = newest.acceleration }
            return result
        }
        let oldest = accelAt(0)
        if t <= oldest.timestamp {
            if oldest.timestamp - t <= maximumHold { result.acceleration = oldest.acceleration }
            return result
        }
        // Newest first: the gyroscope usually waits on the newest accelerometer samples.
        var i = accelCount - 2
        while i > 0, accelAt(i).timestamp > t { i -= 1 }
        let a = accelAt(i), b = accelAt(i + 1)
        let span = b.timestamp - a.timestamp
        if span > maximumHold {
            let nearest = t - a.timestamp <= b.timestamp - t ? a : b
            if abs(nearest.timestamp - t) <= maximumHold { result.acceleration = nearest.acceleration }
            return result
        }
        let f = span > 0 ? (t - a.timestamp) / span : 0
        result.acceleration = Acceleration(
            x: a.acceleration.x + f * (b.acceleration.x - a.acceleration.x),
            y: a.acceleration.y + f * (b.acceleration.y - a.acceleration.y),
            z: a.acceleration.z + f * (b.acceleration.z - a.acceleration.z)
        )
        return result
    }
}
