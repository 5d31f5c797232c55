import Foundation

/// A 3-vector of doubles (x, y, z).
public typealias Vec3 = SIMD3<Double>

/// A 3×3 matrix, row-major.
public struct Mat3: Sendable, Equatable {
    /// Rows.
    public var r0: Vec3, r1: Vec3, r2: Vec3

    public init(_ r0: Vec3, _ r1: Vec3, _ r2: Vec3) {
        self.r0 = r0
        self.r1 = r1
        self.r2 = r2
    }

    /// The identity.
    public static let identity = Mat3(Vec3(1, 0, 0), Vec3(0, 1, 0), Vec3(0, 0, 1))

    /// M·v.
    public static func * (m: Mat3, v: Vec3) -> Vec3 {
        Vec3((m.r0 * v).sum(), (m.r1 * v).sum(), (m.r2 * v).sum())
    }

    /// A·B.
    public static func * (a: Mat3, b: Mat3) -> Mat3 {
        let t = b.transposed
        return Mat3(Vec3((a.r0 * t.r0).sum(), (a.r0 * t.r1).sum(), (a.r0 * t.r2).sum()),
                    Vec3((a.r1 * t.r0).sum(), (a.r1 * t.r1).sum(), (a.r1 * t.r2).sum()),
                    Vec3((a.r2 * t.r0).sum(), (a.r2 * t.r1).sum(), (a.r2 * t.r2).sum()))
    }

    /// Mᵀ (the inverse of a rotation).
    public var transposed: Mat3 {
        Mat3(Vec3(r0.x, r1.x, r2.x), Vec3(r0.y, r1.y, r2.y), Vec3(r0.z, r1.z, r2.z))
    }

    /// Rotation by `angle` radians about unit vector `u` (right-hand rule; Rodrigues' formula).
    public static func rotation(about u: Vec3, angle: Double) -> Mat3 {
        let c = cos(angle), s = sin(angle), t = 1 - c
        let (x, y, z) = (u.x, u.y, u.z)
        return Mat3(Vec3(t * x * x + c, t * x * y - s * z, t * x * z + s * y),
                    Vec3(t * x * y + s * z, t * y * y + c, t * y * z - s * x),
                    Vec3(t * x * z - s * y, t * y * z + s * x, t * z * z + c))
    }

    /// Parses the kernel's mount-matrix text `"a, b, c; d, e, f; g, h, i"`.
    public init?(mountMatrix text: String) {
        let rows = text.trimmingCharacters(in: .whitespacesAndNewlines.union(CharacterSet(charactersIn: "\0")))
            .split(separator: ";")
        guard rows.count == 3 else { return nil }
        var parsed: [Vec3] = []
        for row in rows {
            let v = row.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard v.count == 3 else { return nil }
            parsed.append(Vec3(v[0], v[1], v[2]))
        }
        self.init(parsed[0], parsed[1], parsed[2])
    }
}

/// What the device feels at one instant, in the device frame, with the kernel's (SI) conventions:
/// proper acceleration in m/s² (lying still face up reads z ≈ +9.81), angular velocity in rad/s
/// (right-hand rule), magnetic field in gauss.
public struct MotionState: Sendable, Equatable {
    /// Proper acceleration, m/s².
    public var acceleration: Vec3
    /// Angular velocity, rad/s.
    public var angularVelocity: Vec3
    /// Magnetic field, gauss.
    public var magneticField: Vec3
    /// Attitude: the rotation taking device coordinates to world coordinates (x east, y north, z up).
    public var attitude: Mat3
}

/// A scripted motion: a pure function of time giving a physically consistent ``MotionState``.
///
/// The world frame is east-north-up; gravity's reaction (proper acceleration of a resting body) is
/// +9.80665 m/s² along world z; the Earth's field is ``earthField``.
public struct MotionScript: Sendable, CustomStringConvertible {
    /// Standard gravity, m/s².
    public static let g = 9.80665
    /// A mid-latitude geomagnetic field in world coordinates (gauss): 0.2 north, 0.45 down.
    public static let earthField = Vec3(0, 0.2, -0.45)

    /// The kinds of motion.
    public enum Kind: Sendable, Equatable {
        /// Lying still with `up` (a device axis) pointing up.
        case still
        /// Constant rotation at `rate` rad/s about a device axis, starting from the rest pose.
        case rotate(axis: Vec3, rate: Double)
        /// Sinusoidal linear shaking along a device axis: `amplitude` m/s² at `frequency` Hz.
        case shake(axis: Vec3, amplitude: Double, frequency: Double)
        /// A repeating tilt sequence from the rest pose: `angle` radians about x, back, about y, back;
        /// each move takes `moveTime` seconds and each pose is held for `holdTime` seconds.
        case tilt(angle: Double, moveTime: Double, holdTime: Double)
        /// A motion like a user's (see ``LifeMotion``), drawn from a seed.
        case life(LifeMotion)
        /// A recorded motion (see ``Recording``).
        case replay(Recording)
        /// A person calibrating: the device laid with each of `ups` (device axes) up in turn, each
        /// held still for `hold` seconds, turned from one to the next in `move` seconds (a
        /// constant-rate rotation); the last is held for good. `bump` (1-based): the hold of that
        /// face has a 20° knock about the device's x axis for 0.5 s, 45 % of the way into it.
        case faces(ups: [Vec3], hold: Double, move: Double, bump: Int?)
    }

    /// The motion.
    public var kind: Kind
    /// The rest pose: rotation taking device to world coordinates.
    public var rest: Mat3
    /// The text this was parsed from.
    public var description: String

    /// Lying still face up.
    public static let faceUp = MotionScript(kind: .still, rest: .identity, description: "still")

    /// A motion from its parts.
    public init(kind: Kind, rest: Mat3, description: String) {
        self.kind = kind
        self.rest = rest
        self.description = description
    }

    /// Errors in a motion specification.
    public struct ParseError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Parses a motion specification:
    /// - `still[:up=AXIS]` where AXIS is `+z` (face up, default), `-z` (face down), `+y` (portrait),
    ///   `-y`, `+x` (landscape left), `-x`; `face-up`, `face-down`, `portrait`, `upside-down`,
    ///   `landscape-left`, `landscape-right` are accepted too.
    /// - `rotate[:axis=z][,dps=90][,up=+z]`: constant rotation about a device axis.
    /// - `shake[:axis=x][,g=0.5][,hz=3][,up=+z]`: linear shaking (amplitude in g).
    /// - `tilt[:deg=30][,move=1][,hold=1][,up=+z]`: tilt about x, back, about y, back, repeating.
    /// - `hand-held`, `shaking`, `vibration`, `walking` `[:seed=N][,steel=T][,steel-ut=A]`: motions
    ///   like a user's (``LifeMotion``), drawn from seed N (default 1); `steel=T` adds a steel object
    ///   passing the device, closest T seconds in, adding A µT (default 25) to the field.
    /// - `replay:FILE`: a `motion-monitor --csv` log (``Recording``).
    /// - `faces[:order=+z/+y/-z/-y/+x/-x][,hold=5][,move=1.5][,bump=N]`: six-face calibration
    ///   (``Kind/faces(ups:hold:move:bump:)``).
    /// - Throws: ``ParseError`` naming the bad part.
    public init(parsing spec: String) throws {
        description = spec
        if spec.hasPrefix("replay:") {
            let path = String(spec.dropFirst("replay:".count))
            guard !path.isEmpty else { throw ParseError(description: "motion \"replay:\" needs a file: replay:FILE") }
            let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
            do { kind = .replay(try Recording(contentsOf: absolute)) } catch {
                throw ParseError(description: "\(error)")
            }
            rest = .identity
            description = "replay:" + absolute
            return
        }
        let parts = spec.split(separator: ":", maxSplits: 1)
        let name = parts.first.map(String.init) ?? ""
        var opts: [String: String] = [:]
        if parts.count == 2 {
            for kv in parts[1].split(separator: ",") {
                let p = kv.split(separator: "=", maxSplits: 1)
                guard p.count == 2 else { throw ParseError(description: "motion \"\(spec)\": expected key=value, got \"\(kv)\"") }
                opts[String(p[0])] = String(p[1])
            }
        }
        func number(_ key: String, _ def: Double) throws -> Double {
            guard let s = opts.removeValue(forKey: key) else { return def }
            guard let v = Double(s), v.isFinite else { throw ParseError(description: "motion \"\(spec)\": \(key)=\(s) is not a number") }
            return v
        }
        func axis(_ key: String, _ def: String) throws -> Vec3 {
            let s = opts.removeValue(forKey: key) ?? def
            guard let v = Self.axisVector(s) else { throw ParseError(description: "motion \"\(spec)\": \(key)=\(s) is not an axis (x, y, z, -x, …)") }
            return v
        }
        if let style = LifeMotion.Style(rawValue: name) {
            let seedText = opts.removeValue(forKey: "seed") ?? "1"
            guard let seed = UInt64(seedText) else { throw ParseError(description: "motion \"\(spec)\": seed=\(seedText) is not a non-negative integer") }
            var steel: SteelPass?
            if opts["steel"] != nil {
                steel = SteelPass(time: try number("steel", 0), strength: try number("steel-ut", 25) / 100)
            }
            if let extra = opts.keys.sorted().first {
                throw ParseError(description: "motion \"\(spec)\": unknown option \(extra)")
            }
            kind = .life(LifeMotion(style: style, seed: seed, steel: steel))
            rest = .identity
            return
        }
        if name == "faces" {
            let order = (opts.removeValue(forKey: "order") ?? "+z/+y/-z/-y/+x/-x").split(separator: "/").map(String.init)
            var ups: [Vec3] = []
            for face in order {
                guard let v = Self.axisVector(face) else { throw ParseError(description: "motion \"\(spec)\": \(face) is not an axis (+x, -x, …)") }
                ups.append(v)
            }
            let hold = try number("hold", 5), move = try number("move", 1.5)
            var bump: Int?
            if let b = opts.removeValue(forKey: "bump") {
                guard let n = Int(b), (1...ups.count).contains(n) else {
                    throw ParseError(description: "motion \"\(spec)\": bump=\(b) is not a face number from 1 to \(ups.count)")
                }
                bump = n
            }
            guard !ups.isEmpty, hold > 0, move > 0 else { throw ParseError(description: "motion \"\(spec)\": hold and move must be > 0") }
            if let extra = opts.keys.sorted().first { throw ParseError(description: "motion \"\(spec)\": unknown option \(extra)") }
            kind = .faces(ups: ups, hold: hold, move: move, bump: bump)
            rest = Self.pose(up: ups[0])
            return
        }
        var upText = opts.removeValue(forKey: "up") ?? "+z"
        if name == "still", let face = opts.removeValue(forKey: "face") { upText = face }
        guard let up = Self.axisVector(upText) else {
            throw ParseError(description: "motion \"\(spec)\": up=\(upText) is not an axis or a face name")
        }
        rest = Self.pose(up: up)
        switch name {
        case "still", "":
            kind = .still
        case "rotate":
            kind = .rotate(axis: try axis("axis", "z"), rate: try number("dps", 90) * .pi / 180)
        case "shake":
            kind = .shake(axis: try axis("axis", "x"), amplitude: try number("g", 0.5) * Self.g, frequency: try number("hz", 3))
        case "tilt":
            let move = try number("move", 1), hold = try number("hold", 1)
            guard move > 0, hold >= 0 else { throw ParseError(description: "motion \"\(spec)\": move must be > 0 and hold >= 0") }
            kind = .tilt(angle: try number("deg", 30) * .pi / 180, moveTime: move, holdTime: hold)
        default:
            throw ParseError(description: "unknown motion \"\(name)\" (still, rotate, shake, tilt, faces, hand-held, shaking, vibration, walking, replay:FILE)")
        }
        if let extra = opts.keys.sorted().first {
            throw ParseError(description: "motion \"\(spec)\": unknown option \(extra)")
        }
    }

    static func axisVector(_ s: String) -> Vec3? {
        switch s {
        case "x", "+x", "landscape-left": return Vec3(1, 0, 0)
        case "-x", "landscape-right": return Vec3(-1, 0, 0)
        case "y", "+y", "portrait": return Vec3(0, 1, 0)
        case "-y", "upside-down": return Vec3(0, -1, 0)
        case "z", "+z", "up", "face-up": return Vec3(0, 0, 1)
        case "-z", "down", "face-down": return Vec3(0, 0, -1)
        default: return nil
        }
    }

    /// The rotation taking device axis `up` to world up (a quarter or half turn about a device axis).
    static func pose(up: Vec3) -> Mat3 {
        // R·up = (0,0,1). For ±x and ±y a quarter turn; for -z a half turn about x.
        switch (up.x, up.y, up.z) {
        case (0, 0, 1): return .identity
        case (0, 0, -1): return .rotation(about: Vec3(1, 0, 0), angle: .pi)
        case (0, 1, 0): return .rotation(about: Vec3(1, 0, 0), angle: .pi / 2)
        case (0, -1, 0): return .rotation(about: Vec3(1, 0, 0), angle: -.pi / 2)
        case (1, 0, 0): return .rotation(about: Vec3(0, 1, 0), angle: -.pi / 2)
        default: return .rotation(about: Vec3(0, 1, 0), angle: .pi / 2)
        }
    }

    /// Attitude and angular velocity (device frame) of ``Kind/faces(ups:hold:move:bump:)`` at `t`.
    static func faces(_ ups: [Vec3], hold: Double, move: Double, bump: Int?, at t: Double) -> (Mat3, Vec3) {
        let period = hold + move
        let i = min(Int(max(t, 0) / period), ups.count - 1)
        let tau = max(t, 0) - Double(i) * period
        let here = pose(up: ups[i])
        if tau < hold || i == ups.count - 1 {
            let knock = 0.5, angle = 20 * Double.pi / 180
            let start = 0.45 * hold
            if let bump, bump - 1 == i, tau >= start, tau < start + knock {
                // Out and back: φ = A·sin²(π s / knock), φ' = A·π/knock·sin(2π s / knock).
                let s = tau - start
                let phi = angle * pow(sin(Double.pi * s / knock), 2)
                let rate = angle * Double.pi / knock * sin(2 * Double.pi * s / knock)
                return (here * Mat3.rotation(about: Vec3(1, 0, 0), angle: phi), Vec3(rate, 0, 0))
            }
            return (here, .zero)
        }
        // Turning to the next face: here · rot(u, θ·s) reaches next = here · rel at s = 1.
        let rel = here.transposed * pose(up: ups[i + 1])
        let (u, theta) = axisAngle(rel)
        let s = (tau - hold) / move
        return (here * Mat3.rotation(about: u, angle: theta * s), u * (theta / move))
    }

    /// The axis (unit) and angle (0…π) of a rotation matrix.
    static func axisAngle(_ r: Mat3) -> (Vec3, Double) {
        let trace = r.r0.x + r.r1.y + r.r2.z
        let theta = acos(max(-1, min(1, (trace - 1) / 2)))
        if theta < 1e-9 { return (Vec3(0, 0, 1), 0) }
        if sin(theta) > 1e-6 {
            let v = Vec3(r.r2.y - r.r1.z, r.r0.z - r.r2.x, r.r1.x - r.r0.y) / (2 * sin(theta))
            return (v / (v * v).sum().squareRoot(), theta)
        }
        // A half turn: R = 2uuᵀ − I.
        let d = Vec3(r.r0.x, r.r1.y, r.r2.z)
        var u = Vec3((max(0, (d.x + 1) / 2)).squareRoot(), (max(0, (d.y + 1) / 2)).squareRoot(), (max(0, (d.z + 1) / 2)).squareRoot())
        if u.x >= u.y && u.x >= u.z {
            u.y = r.r0.y < 0 ? -u.y : u.y
            u.z = r.r0.z < 0 ? -u.z : u.z
        } else if u.y >= u.z {
            u.x = r.r0.y < 0 ? -u.x : u.x
            u.z = r.r1.z < 0 ? -u.z : u.z
        } else {
            u.x = r.r0.z < 0 ? -u.x : u.x
            u.y = r.r1.z < 0 ? -u.y : u.y
        }
        return (u, .pi)
    }

    /// The state at `t` seconds after the motion started.
    public func state(at t: Double) -> MotionState {
        var attitude = rest
        var omega = Vec3.zero
        var linearWorld = Vec3.zero
        var field = Self.earthField
        switch kind {
        case let .replay(recording):
            return recording.state(at: t)
        case let .life(m):
            (attitude, omega, linearWorld) = m.evaluate(at: t)
            if let steel = m.steel { field += steel.field(at: t) }
        case .still:
            break
        case let .faces(ups, hold, move, bump):
            (attitude, omega) = Self.faces(ups, hold: hold, move: move, bump: bump, at: t)
        case let .rotate(axis, rate):
            attitude = rest * Mat3.rotation(about: axis, angle: rate * t)
            omega = axis * rate
        case let .shake(axis, amplitude, frequency):
            linearWorld = rest * axis * (amplitude * sin(2 * .pi * frequency * t))
        case let .tilt(angle, move, hold):
            // Four moves (out about x, back, out about y, back), each followed by a hold.
            let segment = move + hold
            let cycle = 4 * segment
            let tc = t.truncatingRemainder(dividingBy: cycle)
            let i = Int(tc / segment)
            let ts = tc - Double(i) * segment
            let axis = i < 2 ? Vec3(1, 0, 0) : Vec3(0, 1, 0)
            let outward = i % 2 == 0
            let rate = angle / move
            let theta: Double
            if ts < move {
                theta = outward ? rate * ts : angle - rate * ts
                omega = axis * (outward ? rate : -rate)
            } else {
                theta = outward ? angle : 0
            }
            attitude = rest * Mat3.rotation(about: axis, angle: theta)
        }
        let worldToDevice = attitude.transposed
        return MotionState(
            acceleration: worldToDevice * (linearWorld + Vec3(0, 0, Self.g)),
            angularVelocity: omega,
            magneticField: worldToDevice * field,
            attitude: attitude)
    }
}

/// Sensor imperfections added to the true motion, in SI units.
public struct Imperfections: Sendable, Equatable {
    /// Standard deviation of white noise on each accelerometer axis, m/s².
    public var accelNoise: Double = 0
    /// Standard deviation of white noise on each gyroscope axis, rad/s.
    public var gyroNoise: Double = 0
    /// Constant gyroscope bias, rad/s.
    public var gyroBias: Vec3 = .zero
    /// Accelerometer noise density, m/s²/√Hz (a datasheet's µg/√Hz × 9.80665e-6): white noise of
    /// σ = density · √(rate / 2) per sample at the sampling frequency in force (bandwidth ODR/2).
    public var accelNoiseDensity: Double = 0
    /// Gyroscope noise density, rad/s/√Hz (a datasheet's °/s/√Hz × π/180), likewise.
    public var gyroNoiseDensity: Double = 0
    /// Standard deviation of white noise on each magnetometer axis, gauss.
    public var magnNoise: Double = 0
    /// The magnetometer's hard-iron offset (the board's own field: magnetised parts, currents),
    /// gauss, device frame.
    public var magnHardIron: Vec3 = .zero
    /// The magnetometer's soft-iron matrix (nearby iron bending the field; the sensor's gains and
    /// axis misalignment): the magnetometer reads `magnSoftIron · field + magnHardIron`.
    public var magnSoftIron: Mat3 = .identity
    /// The accelerometer's offset, m/s², in the chip's axes (what it reads in free fall).
    public var accelOffset: Vec3 = .zero
    /// Each accelerometer axis's gain (1.01: reads 1 % too much), chip axes.
    public var accelScale: Vec3 = Vec3(1, 1, 1)
    /// The accelerometer's axis misalignment (cross-axis sensitivity), chip axes: it reads
    /// `diag(accelScale) · accelMisalignment · a + accelOffset` for a true `a`.
    public var accelMisalignment: Mat3 = .identity

    public init(accelNoise: Double = 0, gyroNoise: Double = 0, gyroBias: Vec3 = .zero,
                accelNoiseDensity: Double = 0, gyroNoiseDensity: Double = 0, magnNoise: Double = 0) {
        self.accelNoise = accelNoise
        self.gyroNoise = gyroNoise
        self.gyroBias = gyroBias
        self.accelNoiseDensity = accelNoiseDensity
        self.gyroNoiseDensity = gyroNoiseDensity
        self.magnNoise = magnNoise
    }

    /// True when nothing is added.
    public var isIdeal: Bool {
        accelNoise == 0 && gyroNoise == 0 && gyroBias == .zero && accelNoiseDensity == 0 && gyroNoiseDensity == 0 && magnNoise == 0
            && magnHardIron == .zero && magnSoftIron == .identity
            && accelOffset == .zero && accelScale == Vec3(1, 1, 1) && accelMisalignment == .identity
    }

    /// What the accelerometer reads (before noise) for a true acceleration, both in the chip's axes.
    public func distortedAcceleration(_ a: Vec3) -> Vec3 { accelScale * (accelMisalignment * a) + accelOffset }

    /// What the magnetometer reads (before noise) in a field, both in the device frame.
    public func distortedField(_ field: Vec3) -> Vec3 { magnSoftIron * field + magnHardIron }

    /// Per-sample σ of the accelerometer's noise at `rate` Hz.
    public func accelSigma(rate: Double) -> Double {
        (accelNoise * accelNoise + accelNoiseDensity * accelNoiseDensity * max(rate, 0) / 2).squareRoot()
    }

    /// Per-sample σ of the gyroscope's noise at `rate` Hz.
    public func gyroSigma(rate: Double) -> Double {
        (gyroNoise * gyroNoise + gyroNoiseDensity * gyroNoiseDensity * max(rate, 0) / 2).squareRoot()
    }
}

/// A small deterministic generator (SplitMix64) with Gaussian samples (Box–Muller), so that a run
/// with a given `--seed` is repeatable.
public struct NoiseSource: Sendable {
    var state: UInt64

    public init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    /// A uniform value in (0, 1].
    public mutating func uniform() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return (Double(z >> 11) + 1) / 9_007_199_254_740_992.0
    }

    /// A standard normal value.
    public mutating func gaussian() -> Double {
        sqrt(-2 * log(uniform())) * cos(2 * .pi * uniform())
    }
}
