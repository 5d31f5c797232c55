import Testing
@testable import IIOMotion
@testable import IIOMotionCore
import Glibc

// Sensor fusion against ground truth. Each scenario is a known attitude trajectory; the test
// derives ideal sensor readings from it with its own quaternion maths (TQ below, not the
// library's), adds seeded BMI160-like noise and bias, runs DeviceMotionFusion, and compares.
//
// Conventions the expectations are written from (Core Motion's, see DeviceMotion.swift):
// device axes x right, y top, z out of the screen; reference frame z up, x arbitrary or north
// (y then west); attitude = Rz(yaw)·Rx(pitch)·Ry(roll) taking device to reference coordinates;
// acceleration in g with Core Motion's sign (face up reads z = −1).

// MARK: - Test-side maths and noise

/// A quaternion (w + xi + yj + zk), written independently of the library's.
struct TQ {
    var w, x, y, z: Double
    static let one = TQ(w: 1, x: 0, y: 0, z: 0)
    init(w: Double, x: Double, y: Double, z: Double) { self.w = w; self.x = x; self.y = y; self.z = z }
    init(axis: (Double, Double, Double), degrees: Double) {
        let n = (axis.0 * axis.0 + axis.1 * axis.1 + axis.2 * axis.2).squareRoot()
        let h = degrees * .pi / 360
        self.init(w: cos(h), x: sin(h) * axis.0 / n, y: sin(h) * axis.1 / n, z: sin(h) * axis.2 / n)
    }
    static func * (a: TQ, b: TQ) -> TQ {
        TQ(w: a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z,
           x: a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
           y: a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
           z: a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w)
    }
    var conj: TQ { TQ(w: w, x: -x, y: -y, z: -z) }
    /// Device → reference: q v q*.
    func rotate(_ v: V) -> V {
        let r = self * TQ(w: 0, x: v.x, y: v.y, z: v.z) * conj
        return V(r.x, r.y, r.z)
    }
    /// Reference → device.
    func unrotate(_ v: V) -> V { conj.rotate(v) }
    /// Core Motion Euler angles (radians) from the rotation's matrix columns: pitch = asin(R32),
    /// roll = atan2(−R31, R33), yaw = atan2(−R12, R22) for R = Rz(yaw)Rx(pitch)Ry(roll).
    var euler: (roll: Double, pitch: Double, yaw: Double) {
        let cx = rotate(V(1, 0, 0)), cy = rotate(V(0, 1, 0)), cz = rotate(V(0, 0, 1))
        // Column j is device axis j in the reference frame: R_ij = column j, component i.
        return (atan2(-cx.z, cz.z), asin(max(-1, min(1, cy.z))), atan2(-cy.x, cy.y))
    }
    static func euler(roll: Double, pitch: Double, yaw: Double) -> TQ {
        TQ(axis: (0, 0, 1), degrees: yaw) * TQ(axis: (1, 0, 0), degrees: pitch) * TQ(axis: (0, 1, 0), degrees: roll)
    }
}

struct V {
    var x, y, z: Double
    init(_ x: Double, _ y: Double, _ z: Double) { self.x = x; self.y = y; self.z = z }
    static func + (a: V, b: V) -> V { V(a.x + b.x, a.y + b.y, a.z + b.z) }
    static func - (a: V, b: V) -> V { V(a.x - b.x, a.y - b.y, a.z - b.z) }
    static func * (s: Double, a: V) -> V { V(s * a.x, s * a.y, s * a.z) }
    var length: Double { (x * x + y * y + z * z).squareRoot() }
    func angle(to b: V) -> Double {
        let d = (x * b.x + y * b.y + z * b.z) / (length * b.length)
        return acos(max(-1, min(1, d)))
    }
}

/// Seeded noise (SplitMix64 with Box–Muller normals): deterministic across runs and platforms.
struct Noise {
    var rng: SplitMix64
    init(seed: UInt64) { rng = SplitMix64(seed: seed) }
    mutating func uniform() -> Double { rng.uniform() }
    mutating func normal() -> Double { rng.normal() }
    mutating func vector(_ sigma: Double) -> V { V(sigma * normal(), sigma * normal(), sigma * normal()) }
}

let deg = Double.pi / 180

func wrap(_ a: Double) -> Double {
    var r = a.truncatingRemainder(dividingBy: 2 * .pi)
    if r > .pi { r -= 2 * .pi }
    if r < -.pi { r += 2 * .pi }
    return r
}

/// Datasheet noise and bias, as sensors report them.
struct SensorModel {
    /// µg/√Hz (BMI160: 180).
    var accelNoiseDensity = 180e-6
    /// °/s/√Hz (BMI160: 0.007).
    var gyroNoiseDensity = 0.007
    /// Gyroscope bias, °/s.
    var gyroBias = V(0.3, -0.2, 0.25)
    /// Magnetometer noise, µT RMS (BMM150: about 0.3–0.6).
    var magNoise = 0.4
    static let ideal = SensorModel(accelNoiseDensity: 0, gyroNoiseDensity: 0, gyroBias: V(0, 0, 0), magNoise: 0)
    static let bmi160 = SensorModel()
}

/// A motion: the true attitude (device → reference) and the device's linear acceleration in the
/// reference frame (g) at time t; optionally an extra field (µT, device frame) disturbing the
/// magnetometer.
struct Trajectory {
    var attitude: (Double) -> TQ
    var linearAcceleration: (Double) -> V = { _ in V(0, 0, 0) }
    var disturbance: (Double) -> V = { _ in V(0, 0, 0) }
    /// A gyroscope fault (rad/s, added to its readings), e.g. a glitch.
    var gyroFault: (Double) -> V = { _ in V(0, 0, 0) }

    /// Body rate (rad/s) by a central difference: ω = 2·vec(q(t−h)* q(t+h)) / 2h.
    func rate(_ t: Double) -> V {
        let h = 1e-5
        var d = attitude(t - h).conj * attitude(t + h)
        if d.w < 0 { d = TQ(w: -d.w, x: -d.x, y: -d.y, z: -d.z) }
        return (1 / h) * V(d.x, d.y, d.z)
    }
}

struct Run {
    struct Point {
        var truth: TQ
        var motion: DeviceMotion
        var measured: Acceleration
        var trueUser: V
        /// The gyroscope's reading (rad/s, bias included): less the estimate's rotation rate, the
        /// bias the filter had learned.
        var rawRate: V
    }
    var points: [Point] = []
    /// Truth yaw at the first estimate (the arbitrary frames start with yaw 0 there).
    var yawOffset = 0.0
    var fusion: DeviceMotionFusion

    /// The first sample's timestamp: times below are relative to it.
    var start: Double

    /// The points from `t` to `end` seconds after the start.
    func after(_ t: Double, until end: Double = .infinity) -> [Point] {
        points.filter { $0.motion.timestamp - start >= t && $0.motion.timestamp - start <= end }
    }

    /// RMS over roll and pitch errors, degrees.
    func rollPitchRMS(after t: Double, until end: Double = .infinity) -> Double {
        let p = after(t, until: end)
        var sum = 0.0
        for point in p {
            let e = point.truth.euler
            let dr = wrap(point.motion.attitude.roll - e.roll), dp = wrap(point.motion.attitude.pitch - e.pitch)
            sum += dr * dr + dp * dp
        }
        return (sum / Double(2 * max(p.count, 1))).squareRoot() / deg
    }

    /// Angle between true and estimated gravity, degrees.
    static func tiltError(_ p: Point) -> Double {
        let g = p.truth.unrotate(V(0, 0, -1))
        let e = V(p.motion.gravity.x, p.motion.gravity.y, p.motion.gravity.z)
        return g.angle(to: e) / deg
    }

    func maxTiltError(after t: Double, until end: Double = .infinity) -> Double {
        after(t, until: end).map(Run.tiltError).max() ?? 0
    }

    /// Estimated minus true yaw (true yaw measured from its value at the start), degrees.
    func yawError(_ p: Point) -> Double {
        wrap(p.motion.attitude.yaw - (p.truth.euler.yaw - yawOffset)) / deg
    }

    /// Estimated minus true compass heading, degrees, where the true heading is the bearing of the
    /// device's top edge projected on the horizontal (x north, y west: bearing = atan2(−y, x)).
    static func headingError(_ p: Point, declination: Double = 0) -> Double {
        let top = p.truth.rotate(V(0, 1, 0))
        let trueHeading = atan2(-top.y, top.x) / deg - declination
        var d = (p.motion.heading - trueHeading).truncatingRemainder(dividingBy: 360)
        if d > 180 { d -= 360 }
        if d < -180 { d += 360 }
        return d
    }
}

/// Samples a trajectory at `rate` Hz for `duration` s through a sensor model and fuses it.
/// - Parameters:
///   - field: the Earth's field in the reference frame, µT; nil for no magnetometer.
///   - magRate: magnetometer rate, Hz.
///   - magDelay: seconds each magnetometer sample is handed over after its time (a magnetometer
///     read in slower refills than the gyroscope arrives after the gyroscope samples of its time).
func simulate(
    _ trajectory: Trajectory,
    rate: Double,
    duration: Double,
    frame: AttitudeReferenceFrame = .xArbitraryZVertical,
    model: SensorModel = .bmi160,
    field: V? = nil,
    magRate: Double = 50,
    magDelay: Double = 0,
    configuration: AttitudeFilter.Configuration = .init(),
    seed: UInt64 = 1,
    start: Double = 1000
) -> Run {
    var noise = Noise(seed: seed)
    let n = Int(duration * rate)
    let accelSigma = model.accelNoiseDensity * (rate / 2).squareRoot()
    let gyroSigma = model.gyroNoiseDensity * (rate / 2).squareRoot() * deg
    let bias = deg * model.gyroBias
    var run = Run(fusion: DeviceMotionFusion(referenceFrame: frame, units: .coreMotion, configuration: configuration), start: start)
    var measuredAt: [Double: (Acceleration, V, V)] = [:]
    var nextMag = 0.0
    var first = true
    var late: [MagnetometerData] = []
    for i in 0..<n {
        let t = Double(i) / rate
        let q = trajectory.attitude(t)
        if let field, t >= nextMag {
            nextMag += 1 / magRate
            let m = q.unrotate(field) + trajectory.disturbance(t) + noise.vector(model.magNoise)
            late.append(MagnetometerData(timestamp: start + t, magneticField: MagneticField(x: m.x, y: m.y, z: m.z)))
        }
        while let m = late.first, m.timestamp + magDelay <= start + t + 1e-9 {
            run.fusion.add(magnetometer: m)
            late.removeFirst()
        }
        let user = q.unrotate(-1 * trajectory.linearAcceleration(t))
        let a = q.unrotate(V(0, 0, -1)) + user + noise.vector(accelSigma)
        // The gyroscope reports its rate's mean over the sample period that ends at the sample
        // (Simpson's rule over it), as a sensor's decimation filter does: the BROAD recordings'
        // IMU does so (integrating its rate over the step that ends at it is the most accurate
        // there), not the instantaneous rate.
        let h = 1 / rate
        let meanRate = (1.0 / 6) * (trajectory.rate(t - h) + 4 * trajectory.rate(t - h / 2) + trajectory.rate(t))
        let w = meanRate + trajectory.gyroFault(t) + bias + noise.vector(gyroSigma)
        let acceleration = Acceleration(x: a.x, y: a.y, z: a.z)
        measuredAt[start + t] = (acceleration, user, w)
        var out: [DeviceMotion] = []
        run.fusion.add(accelerometer: AccelerometerData(timestamp: start + t, acceleration: acceleration)) { out.append($0) }
        run.fusion.add(gyro: GyroData(timestamp: start + t, rotationRate: RotationRate(x: w.x, y: w.y, z: w.z))) { out.append($0) }
        for m in out {
            let truthTime = m.timestamp - start
            let truth = trajectory.attitude(truthTime)
            if first {
                run.yawOffset = frame.isDisjoint(with: [.xMagneticNorthZVertical]) ? truth.euler.yaw : 0
                first = false
            }
            let (measured, trueUser, raw) = measuredAt.removeValue(forKey: m.timestamp)!
            run.points.append(Run.Point(truth: truth, motion: m, measured: measured, trueUser: trueUser, rawRate: raw))
        }
    }
    return run
}

/// A smooth step 0 → 1 over [t0, t0 + length].
func smoothStep(_ t: Double, _ t0: Double, _ length: Double) -> Double {
    let u = max(0, min(1, (t - t0) / length))
    return (1 - cos(.pi * u)) / 2
}

/// `v` rounded to `digits` decimals, for the printed figures (no Foundation here).
func fmt(_ v: Double, _ digits: Int) -> String {
    let p = pow(10, Double(digits))
    return "\((v * p).rounded() / p)"
}

func figure(_ text: String) {
    print("fusion figure: \(text)")
}

/// Checks what every estimate must satisfy.
func checkInvariants(_ run: Run, sourceLocation: SourceLocation = #_sourceLocation) {
    var worstNorm = 0.0, worstSum = 0.0, worstGravity = 0.0
    for p in run.points {
        let q = p.motion.attitude.quaternion
        worstNorm = max(worstNorm, abs((q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w).squareRoot() - 1))
        let g = p.motion.gravity, u = p.motion.userAcceleration, m = p.measured
        worstSum = max(worstSum, abs(g.x + u.x - m.x), abs(g.y + u.y - m.y), abs(g.z + u.z - m.z))
        worstGravity = max(worstGravity, abs((g.x * g.x + g.y * g.y + g.z * g.z).squareRoot() - 1))
    }
    #expect(!run.points.isEmpty, sourceLocation: sourceLocation)
    #expect(worstNorm < 1e-9, "quaternion not normalised", sourceLocation: sourceLocation)
    #expect(worstSum < 1e-12, "gravity + userAcceleration != acceleration", sourceLocation: sourceLocation)
    #expect(worstGravity < 1e-9, "gravity is not a unit vector", sourceLocation: sourceLocation)
}
