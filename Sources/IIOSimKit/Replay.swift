import Foundation

/// A recorded motion to stream again: the rows of a `motion-monitor --csv` log
/// (`timestamp,sensor,device,x,y,z`).
///
/// - Rows of the sensors `accelerometer`, `gyroscope` and `magnetometer` are raw samples, streamed
///   as recorded (linearly interpolated at the simulator's sample times; the first device seen for
///   each sensor). Accelerations may be in g with Core Motion's sign (motion-monitor's default) or in
///   m/s² with the kernel's (`--si`): a log whose accelerations are mostly larger than 4 is taken
///   to be m/s². Rotation in rad/s, field in µT.
/// - Rows whose device is `truth` are ground truth, as `motion-truth --record` writes them:
///   `attitude` (the rotation from device to east-north-up coordinates as a rotation vector, axis
///   times angle in radians), `linear-acceleration` (world coordinates, m/s²) and `magnetic-field`
///   (world coordinates, µT). A log with truth but no raw samples is rendered: the gyroscope from
///   the attitude's derivative (constant between rows, so the attitude is exactly the slerp
///   between rows), the accelerometer from gravity and the linear acceleration, the magnetometer
///   from the field (the Earth's when absent). Other rows are ignored.
///
/// Time zero of the motion is the earliest row; after the last row every part holds its last value.
public struct Recording: Sendable, Equatable {
    /// Samples of one quantity: times (seconds from the first row) and values.
    struct Track: Sendable, Equatable {
        var times: [Double] = []
        var values: [Vec3] = []

        var isEmpty: Bool { times.isEmpty }

        /// Linear interpolation (held before the first and after the last sample).
        func at(_ t: Double) -> Vec3 {
            guard let first = times.first else { return .zero }
            if t <= first { return values[0] }
            if t >= times[times.count - 1] { return values[values.count - 1] }
            let i = segment(t)
            let span = times[i + 1] - times[i]
            let f = span > 0 ? (t - times[i]) / span : 0
            return values[i] + (values[i + 1] - values[i]) * f
        }

        /// The index i with times[i] ≤ t < times[i + 1] (for t inside the track).
        func segment(_ t: Double) -> Int {
            var lo = 0, hi = times.count - 1
            while hi - lo > 1 {
                let mid = (lo + hi) / 2
                if times[mid] <= t { lo = mid } else { hi = mid }
            }
            return lo
        }
    }

    /// The file it came from.
    public var path: String
    var accelerometer = Track()  // m/s², kernel sign, device frame
    var gyroscope = Track()  // rad/s
    var magnetometer = Track()  // gauss
    var attitude: [Mat3] = []
    var attitudeTimes: [Double] = []
    var linearAcceleration = Track()  // m/s², world
    var field = Track()  // gauss, world

    /// Whether the log has raw samples (else it is rendered from its truth).
    public var hasSamples: Bool { !accelerometer.isEmpty || !gyroscope.isEmpty }
    /// Whether the log has the attitude's ground truth.
    public var hasTruth: Bool { !attitude.isEmpty }
    /// Seconds from the first row to the last.
    public private(set) var duration = 0.0

    /// Errors reading a log.
    public struct ReadError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Reads a log.
    /// - Throws: ``ReadError`` when the file cannot be read or has no usable row.
    public init(contentsOf path: String) throws {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ReadError(description: "replay: cannot read \(path)")
        }
        try self.init(text: text, path: path)
    }

    /// Parses a log's text.
    public init(text: String, path: String = "-") throws {
        self.path = path
        struct Row { var t: Double; var v: Vec3 }
        var rows: [String: [Row]] = [:]
        var devices: [String: String] = [:]  // the first device seen per raw sensor
        var start = Double.infinity
        for line in text.split(whereSeparator: \.isNewline) {
            let f = line.split(separator: ",", omittingEmptySubsequences: false)
            guard f.count == 6, let t = Double(f[0]), let x = Double(f[3]), let y = Double(f[4]), let z = Double(f[5]),
                  t.isFinite, x.isFinite, y.isFinite, z.isFinite else { continue }
            let sensor = String(f[1]), device = String(f[2])
            let key: String
            if device == "truth" {
                key = "truth/" + sensor
            } else {
                guard ["accelerometer", "gyroscope", "magnetometer"].contains(sensor) else { continue }
                if let d = devices[sensor], d != device { continue }
                devices[sensor] = device
                key = sensor
            }
            rows[key, default: []].append(Row(t: t, v: Vec3(x, y, z)))
            start = min(start, t)
        }
        guard start.isFinite else {
            throw ReadError(description: "replay: \(path) has no timestamp,sensor,device,x,y,z row of a sensor or of truth")
        }
        func track(_ key: String, _ convert: (Vec3) -> Vec3) -> Track {
            var tr = Track()
            for r in (rows[key] ?? []).sorted(by: { $0.t < $1.t }) where r.t - start > (tr.times.last ?? -1) {
                tr.times.append(r.t - start)
                tr.values.append(convert(r.v))
            }
            return tr
        }
        let accel = rows["accelerometer"] ?? []
        let magnitudes = accel.map { ($0.v * $0.v).sum().squareRoot() }.sorted()
        let si = !magnitudes.isEmpty && magnitudes[magnitudes.count / 2] > 4
        accelerometer = track("accelerometer") { si ? $0 : $0 * -MotionScript.g }
        gyroscope = track("gyroscope") { $0 }
        magnetometer = track("magnetometer") { $0 / 100 }
        linearAcceleration = track("truth/linear-acceleration") { $0 }
        field = track("truth/magnetic-field") { $0 / 100 }
        let att = track("truth/attitude") { $0 }
        attitudeTimes = att.times
        attitude = att.values.map(Self.rotation(vector:))
        let last = [accelerometer, gyroscope, magnetometer, linearAcceleration, field, att].compactMap(\.times.last).max() ?? 0
        duration = last
        guard hasSamples || hasTruth else {
            throw ReadError(description: "replay: \(path) has neither accelerometer/gyroscope rows nor truth attitude rows")
        }
    }

    /// The rotation `exp([v]×)` of a rotation vector.
    public static func rotation(vector v: Vec3) -> Mat3 {
        let angle = (v * v).sum().squareRoot()
        return angle > 0 ? Mat3.rotation(about: v / angle, angle: angle) : .identity
    }

    /// The rotation vector of a rotation matrix (angle in [0, π]).
    public static func rotationVector(_ m: Mat3) -> Vec3 {
        let trace = m.r0.x + m.r1.y + m.r2.z
        let c = max(-1, min(1, (trace - 1) / 2))
        let angle = acos(c)
        let w = Vec3(m.r2.y - m.r1.z, m.r0.z - m.r2.x, m.r1.x - m.r0.y)  // 2 sin(angle)·axis
        if angle < 1e-9 { return w / 2 }
        if angle > .pi - 1e-6 {
            // Near a half turn: the axis from the symmetric part, R + I = 2uuᵀ (its sign from w).
            let diag = Vec3(m.r0.x, m.r1.y, m.r2.z)
            var u = Vec3((max(0, (diag.x + 1) / 2)).squareRoot(), (max(0, (diag.y + 1) / 2)).squareRoot(),
                         (max(0, (diag.z + 1) / 2)).squareRoot())
            if u.x >= u.y && u.x >= u.z {
                u.y = (m.r0.y + m.r1.x) >= 0 ? u.y : -u.y
                u.z = (m.r0.z + m.r2.x) >= 0 ? u.z : -u.z
            } else if u.y >= u.z {
                u.x = (m.r0.y + m.r1.x) >= 0 ? u.x : -u.x
                u.z = (m.r1.z + m.r2.y) >= 0 ? u.z : -u.z
            } else {
                u.x = (m.r0.z + m.r2.x) >= 0 ? u.x : -u.x
                u.y = (m.r1.z + m.r2.y) >= 0 ? u.y : -u.y
            }
            if (u * w).sum() < 0 { u = -u }
            return u * angle
        }
        return w * (angle / (2 * sin(angle)))
    }

    /// The true attitude at `t` and the body rate that turns one truth row into the next.
    func truth(at t: Double) -> (Mat3, Vec3) {
        guard let first = attitudeTimes.first else { return (.identity, .zero) }
        if t <= first || attitude.count == 1 { return (attitude[0], .zero) }
        if t >= attitudeTimes[attitudeTimes.count - 1] { return (attitude[attitude.count - 1], .zero) }
        var lo = 0, hi = attitudeTimes.count - 1
        while hi - lo > 1 {
            let mid = (lo + hi) / 2
            if attitudeTimes[mid] <= t { lo = mid } else { hi = mid }
        }
        let span = attitudeTimes[lo + 1] - attitudeTimes[lo]
        guard span > 0 else { return (attitude[lo], .zero) }
        let omega = Self.rotationVector(attitude[lo].transposed * attitude[lo + 1]) / span
        return (attitude[lo] * Self.rotation(vector: omega * (t - attitudeTimes[lo])), omega)
    }

    /// The state at `t` seconds after the first row.
    func state(at t: Double) -> MotionState {
        let (att, omega) = truth(at: t)
        let worldToDevice = att.transposed
        let worldField = field.isEmpty ? MotionScript.earthField : field.at(t)
        if hasSamples {
            return MotionState(
                acceleration: accelerometer.isEmpty ? worldToDevice * Vec3(0, 0, MotionScript.g) : accelerometer.at(t),
                angularVelocity: gyroscope.isEmpty ? omega : gyroscope.at(t),
                magneticField: magnetometer.isEmpty ? worldToDevice * worldField : magnetometer.at(t),
                attitude: att)
        }
        return MotionState(
            acceleration: worldToDevice * (linearAcceleration.at(t) + Vec3(0, 0, MotionScript.g)),
            angularVelocity: omega,
            magneticField: worldToDevice * worldField,
            attitude: att)
    }
}
