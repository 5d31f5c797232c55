import Foundation

// Motions that look like a user's: a phone turned in a hand while the arm moves, shaken while it
// turns, riding in a vehicle, carried by someone walking. Each is a pure function of time built
// from sums of sinusoids, smooth steps and pulses whose derivatives are known in closed form, so the
// angular velocity is exactly the derivative of the attitude and the ground truth is exact. Every
// random choice (frequencies, phases, amplitudes, the times and sizes of turns) is drawn once, when
// the motion is made, from a generator seeded by the spec's `seed=N`: the same spec gives the same
// motion on every run and every machine.

/// A sum of sinusoids `Σ aᵢ sin(ωᵢ t + φᵢ)` with its first and second derivatives.
struct Wave: Sendable, Equatable {
    /// (amplitude, angular frequency rad/s, phase rad) per term.
    var terms: [SIMD3<Double>] = []

    static let zero = Wave()

    /// One term per band: amplitude `a·(0.6…1)`, frequency uniform in `[f0, f1]` Hz, phase uniform.
    static func random(_ rng: inout NoiseSource, _ bands: [(a: Double, f0: Double, f1: Double)]) -> Wave {
        Wave(terms: bands.map { b in
            let amp = b.a * (0.6 + 0.4 * rng.uniform())
            let f = b.f0 + (b.f1 - b.f0) * rng.uniform()
            return SIMD3(amp, 2 * .pi * f, 2 * .pi * rng.uniform())
        })
    }

    func value(_ t: Double) -> Double { terms.reduce(0) { $0 + $1.x * sin($1.y * t + $1.z) } }
    func rate(_ t: Double) -> Double { terms.reduce(0) { $0 + $1.x * $1.y * cos($1.y * t + $1.z) } }
    func second(_ t: Double) -> Double { terms.reduce(0) { $0 - $1.x * $1.y * $1.y * sin($1.y * t + $1.z) } }
}

/// A sequence of smooth steps (raised-cosine ramps) that do not overlap: the value rises by
/// `sizes[k]` over `[starts[k], starts[k] + lengths[k]]` and holds between steps.
struct Steps: Sendable, Equatable {
    var starts: [Double] = []
    var lengths: [Double] = []
    var sizes: [Double] = []
    /// The value before step k (the sum of the sizes of steps 0..<k).
    var before: [Double] = []

    mutating func add(at start: Double, length: Double, size: Double) {
        before.append((before.last ?? 0) + (sizes.last ?? 0))
        starts.append(start)
        lengths.append(length)
        sizes.append(size)
    }

    /// The last step started at or before `t`, or nil.
    private func index(_ t: Double) -> Int? {
        guard let first = starts.first, t >= first else { return nil }
        var lo = 0, hi = starts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if starts[mid] <= t { lo = mid } else { hi = mid - 1 }
        }
        return lo
    }

    /// (value, first derivative, second derivative) at `t`.
    func evaluate(_ t: Double) -> (Double, Double, Double) {
        guard let k = index(t) else { return (0, 0, 0) }
        let s = (t - starts[k]) / lengths[k]
        if s >= 1 { return (before[k] + sizes[k], 0, 0) }
        let a = sizes[k], T = lengths[k]
        return (before[k] + a * (1 - cos(.pi * s)) / 2,
                a * .pi / (2 * T) * sin(.pi * s),
                a * .pi * .pi / (2 * T * T) * cos(.pi * s))
    }
}

/// A train of Gaussian pulses `Σₖ h·exp(−(t − tₖ)²/2σ²)` at `tₖ = offset + k/rate`, less its mean (so
/// a pulse train of accelerations leaves the velocity bounded), with the derivative.
struct Pulses: Sendable, Equatable {
    var height: Double
    var sigma: Double
    var rate: Double
    var offset: Double

    var mean: Double { height * sigma * (2 * Double.pi).squareRoot() * rate }

    /// (value less the mean, derivative).
    func evaluate(_ t: Double) -> (Double, Double) {
        guard height != 0, rate > 0 else { return (0, 0) }
        let k = ((t - offset) * rate).rounded()
        var v = 0.0, d = 0.0
        for j in -2...2 {
            let tk = offset + (k + Double(j)) / rate
            let u = (t - tk) / sigma
            let e = height * exp(-0.5 * u * u)
            v += e
            d -= e * u / sigma
        }
        return (v - mean, d)
    }
}

/// The attitude `Rz(ψ)·Rx(θ)·Ry(φ)` (Core Motion's yaw, pitch, roll; device to east-north-up) and
/// the body angular velocity from the angles' rates:
/// `ω = Ry(φ)ᵀ·Rx(θ)ᵀ·(0, 0, ψ̇) + Ry(φ)ᵀ·(θ̇, 0, 0) + (0, φ̇, 0)`.
func eulerAttitude(yaw: Double, pitch: Double, roll: Double,
                   yawRate: Double, pitchRate: Double, rollRate: Double) -> (Mat3, Vec3) {
    let rz = Mat3.rotation(about: Vec3(0, 0, 1), angle: yaw)
    let rx = Mat3.rotation(about: Vec3(1, 0, 0), angle: pitch)
    let ry = Mat3.rotation(about: Vec3(0, 1, 0), angle: roll)
    let ryT = ry.transposed
    let omega = ryT * (rx.transposed * Vec3(0, 0, yawRate)) + ryT * Vec3(pitchRate, 0, 0) + Vec3(0, rollRate, 0)
    return (rz * rx * ry, omega)
}

/// A steel object (a car, a trolley, a filing cabinet on wheels) passing the device: a vertical
/// magnetic dipole moving along a straight line at walking speed, closest at `time`, adding about
/// `strength` gauss to the Earth's field at the closest point.
public struct SteelPass: Sendable, Equatable {
    /// Seconds into the motion at which the object is closest.
    public var time: Double
    /// Gauss at the closest point.
    public var strength: Double
    /// Metres at the closest point.
    public var distance = 1.5
    /// Metres per second.
    public var speed = 1.0

    /// The added field in world coordinates (east-north-up), gauss.
    public func field(at t: Double) -> Vec3 {
        let r = Vec3(speed * (t - time), distance, 0)
        let d = (r * r).sum().squareRoot()
        let u = r / d
        let m = Vec3(0, 0, 1)
        // A dipole's field, (3(m·u)u − m)/d³, scaled so that |B| = strength where r ⟂ the path.
        let scale = strength * distance * distance * distance / (d * d * d)
        return (u * (3 * (m * u).sum()) - m) * scale
    }
}

/// One of the motions like a user's, drawn from a seed.
public struct LifeMotion: Sendable, Equatable {
    /// The kinds.
    public enum Style: String, Sendable, Equatable, CaseIterable {
        /// A phone held in front of the user: smooth random rotation, turns of the body now and
        /// then, arm-like translation, physiological tremor.
        case handHeld = "hand-held"
        /// Bursts of vigorous shaking with rotation (0.9 g, ±30°, 2.5–4 Hz) between calmer moments
        /// in the hand.
        case shaking
        /// A phone in a car's dashboard holder: engine vibration at idle and on the move, road
        /// vibration, accelerating, braking, turning, stopping at lights.
        case vibration
        /// Carried in front by someone walking: heel strikes, bounce and sway at the step
        /// frequency, turns at corners.
        case walking
    }

    public var style: Style
    public var seed: UInt64
    /// An optional magnetic disturbance.
    public var steel: SteelPass?

    // Euler angles of the device (or, for the vehicle, of the vehicle; `mount` then takes device
    // to vehicle) and the linear acceleration's parts.
    var yaw = Wave.zero, pitch = Wave.zero, roll = Wave.zero
    var pitchBase = 0.0
    var turns = Steps()
    /// Shaking: the amplitude envelope of the vigorous part (0 calm … 1 shaking).
    var envelope = Steps()
    var shakeYaw = Wave.zero, shakePitch = Wave.zero, shakeRoll = Wave.zero
    var shakeMove = [Wave.zero, .zero, .zero]
    /// Displacement per world axis (m): acceleration is its second derivative.
    var move = [Wave.zero, .zero, .zero]
    /// Vehicle: speed (m/s) as steps from 0; mount rotation device → vehicle.
    var speed = Steps()
    var mount = Mat3.identity
    /// Walking.
    var stepRate = 0.0
    var walkSpeed = 0.0
    var vertical = Wave.zero, forward = Wave.zero, lateral = Wave.zero
    var heelStrike = Pulses(height: 0, sigma: 0.02, rate: 0, offset: 0)
    var braking = Pulses(height: 0, sigma: 0.03, rate: 0, offset: 0)
    var jolt = Pulses(height: 0, sigma: 0.03, rate: 0, offset: 0)

    /// The motion is drawn for this long; after it every part holds still where it ended (the
    /// waves go on).
    static let horizon = 3600.0
    private static let deg = Double.pi / 180

    public init(style: Style, seed: UInt64, steel: SteelPass? = nil) {
        self.style = style
        self.seed = seed
        self.steel = steel
        var rng = NoiseSource(seed: seed &* 0x2545_F491_4F6C_DD1D &+ UInt64(Style.allCases.firstIndex(of: style)!))
        let deg = Self.deg
        func uniform(_ a: Double, _ b: Double) -> Double { a + (b - a) * rng.uniform() }
        func sign() -> Double { rng.uniform() < 0.5 ? -1 : 1 }
        switch style {
        case .handHeld:
            pitchBase = uniform(25, 45) * deg
            pitch = .random(&rng, [(12 * deg, 0.05, 0.15), (6 * deg, 0.2, 0.5), (3 * deg, 0.6, 1.2), (0.1 * deg, 8, 12)])
            roll = .random(&rng, [(15 * deg, 0.04, 0.12), (6 * deg, 0.2, 0.5), (3 * deg, 0.6, 1.2), (0.1 * deg, 8, 12)])
            yaw = .random(&rng, [(25 * deg, 0.03, 0.08), (8 * deg, 0.1, 0.3), (3 * deg, 0.5, 1.0), (0.1 * deg, 8, 12)])
            var t = uniform(6, 14)
            while t < Self.horizon {
                let length = uniform(1.5, 3)
                turns.add(at: t, length: length, size: sign() * uniform(30, 120) * deg)
                t += length + uniform(8, 20)
            }
            move = (0..<3).map { axis in
                Wave.random(&rng, [(axis == 2 ? 0.05 : 0.08, 0.2, 0.4), (0.03, 0.8, 1.5), (0.005, 2, 4)])
            }
        case .shaking:
            pitchBase = uniform(20, 40) * deg
            pitch = .random(&rng, [(8 * deg, 0.05, 0.15), (4 * deg, 0.2, 0.5)])
            roll = .random(&rng, [(10 * deg, 0.04, 0.12), (4 * deg, 0.2, 0.5)])
            yaw = .random(&rng, [(20 * deg, 0.03, 0.08), (5 * deg, 0.1, 0.3)])
            move = (0..<3).map { _ in Wave.random(&rng, [(0.05, 0.2, 0.4), (0.02, 0.8, 1.5)]) }
            let f0 = uniform(2.5, 4)
            func shake(_ a: Double) -> Wave {
                // The fundamental and its second harmonic, each with a random phase.
                Wave(terms: [SIMD3(a * uniform(0.7, 1), 2 * .pi * f0, 2 * .pi * rng.uniform()),
                             SIMD3(0.3 * a * uniform(0.5, 1), 4 * .pi * f0, 2 * .pi * rng.uniform())])
            }
            shakeRoll = shake(30 * deg)
            shakePitch = shake(20 * deg)
            shakeYaw = shake(25 * deg)
            // Displacements giving about 0.9 g along one horizontal direction, 0.3 g on the others.
            let w2 = pow(2 * .pi * f0, 2)
            let main = Int(rng.uniform() * 2) % 2
            shakeMove = (0..<3).map { axis in shake((axis == main ? 0.9 : 0.3) * MotionScript.g / w2) }
            var t = uniform(2.5, 3.5)
            while t < Self.horizon {
                let ramp = uniform(0.3, 0.6)
                let hold = uniform(4, 8)
                envelope.add(at: t, length: ramp, size: 1)
                envelope.add(at: t + ramp + hold, length: ramp, size: -1)
                t += 2 * ramp + hold + uniform(2, 5)
            }
        case .vibration:
            // The holder: upright-ish, screen towards the driver, slightly turned.
            mount = Mat3.rotation(about: Vec3(0, 0, 1), angle: uniform(-15, 15) * deg)
                * Mat3.rotation(about: Vec3(1, 0, 0), angle: uniform(55, 75) * deg)
            yaw = .random(&rng, [(0.03 * deg, 20, 35), (0.02 * deg, 8, 15)])
            pitch = .random(&rng, [(1.5 * deg, 0.02, 0.08), (0.05 * deg, 20, 35), (0.04 * deg, 8, 15)])
            roll = .random(&rng, [(1.5 * deg, 0.02, 0.08), (0.05 * deg, 20, 35), (0.04 * deg, 8, 15)])
            // Engine (25–35 Hz, 2nd order of a four-cylinder at 750–1050 rpm idle… 2100 rpm) and
            // road (8–15 Hz) vibration, mostly vertical: about 0.15–0.25 g.
            move = (0..<3).map { axis in
                let s = axis == 2 ? 1.0 : 0.4
                return Wave.random(&rng, [(s * 5e-5, 25, 35), (s * 3e-4, 8, 15), (s * 2e-3, 1.5, 3)])
            }
            var t = uniform(4, 8)  // idling at first
            var v = 0.0
            while t < Self.horizon {
                // Pull away, cruise (with turns and speed changes), brake to a stop, wait.
                let pullAway = uniform(4, 7)
                let cruise = uniform(10, 16)
                speed.add(at: t, length: pullAway, size: cruise - v)
                v = cruise
                t += pullAway
                for _ in 0..<Int(uniform(1, 4)) {
                    t += uniform(2, 6)
                    if rng.uniform() < 0.6 {
                        let length = uniform(4, 8)
                        turns.add(at: t, length: length, size: sign() * uniform(45, 100) * deg)
                        t += length
                    } else {
                        let length = uniform(3, 6)
                        let target = uniform(8, 16)
                        speed.add(at: t, length: length, size: target - v)
                        v = target
                        t += length
                    }
                }
                t += uniform(2, 6)
                let stop = uniform(4, 7)
                speed.add(at: t, length: stop, size: -v)
                v = 0
                t += stop + uniform(4, 12)
            }
        case .walking:
            stepRate = uniform(1.7, 2.0)
            walkSpeed = uniform(1.2, 1.5)
            let phase = rng.uniform() / stepRate
            func stride(_ a: Double, _ f: Double) -> SIMD3<Double> { SIMD3(a * uniform(0.8, 1), 2 * .pi * f, 2 * .pi * rng.uniform()) }
            vertical = Wave(terms: [stride(1.5, stepRate), stride(0.8, 2 * stepRate)])
            forward = Wave(terms: [stride(1.0, stepRate), stride(0.4, 2 * stepRate)])
            lateral = Wave(terms: [stride(0.6, stepRate / 2)])
            heelStrike = Pulses(height: uniform(3, 5), sigma: 0.02, rate: stepRate, offset: phase)
            braking = Pulses(height: -uniform(1.5, 2.5), sigma: 0.03, rate: stepRate, offset: phase)
            jolt = Pulses(height: uniform(0.3, 0.6) * deg, sigma: 0.03, rate: stepRate, offset: phase + 0.01)
            pitchBase = uniform(30, 45) * deg
            pitch = Wave(terms: Wave.random(&rng, [(5 * deg, 0.05, 0.15)]).terms + [stride(1.5 * deg, stepRate)])
            roll = Wave(terms: Wave.random(&rng, [(5 * deg, 0.05, 0.15)]).terms + [stride(2 * deg, stepRate / 2)])
            yaw = Wave(terms: Wave.random(&rng, [(5 * deg, 0.03, 0.1)]).terms + [stride(2 * deg, stepRate / 2)])
            var t = uniform(6, 12)
            while t < Self.horizon {
                let length = uniform(1.0, 2.5)
                turns.add(at: t, length: length, size: sign() * uniform(45, 180) * deg)
                t += length + uniform(8, 20)
            }
        }
    }

    /// (attitude device → world, body angular velocity, linear acceleration in world coordinates).
    func evaluate(at t: Double) -> (Mat3, Vec3, Vec3) {
        let (turn, turnRate, _) = turns.evaluate(t)
        switch style {
        case .handHeld, .shaking:
            var y = yaw.value(t) + turn, yr = yaw.rate(t) + turnRate
            var p = pitchBase + pitch.value(t), pr = pitch.rate(t)
            var r = roll.value(t), rr = roll.rate(t)
            var linear = Vec3(move[0].second(t), move[1].second(t), move[2].second(t))
            if style == .shaking {
                let (e, e1, e2) = envelope.evaluate(t)
                if e > 0 || e1 != 0 {
                    y += e * shakeYaw.value(t); yr += e1 * shakeYaw.value(t) + e * shakeYaw.rate(t)
                    p += e * shakePitch.value(t); pr += e1 * shakePitch.value(t) + e * shakePitch.rate(t)
                    r += e * shakeRoll.value(t); rr += e1 * shakeRoll.value(t) + e * shakeRoll.rate(t)
                    // (e·x)'' = e''x + 2e'x' + e x''.
                    for axis in 0..<3 {
                        let w = shakeMove[axis]
                        linear[axis] += e2 * w.value(t) + 2 * e1 * w.rate(t) + e * w.second(t)
                    }
                }
            }
            let (attitude, omega) = eulerAttitude(yaw: y, pitch: p, roll: r, yawRate: yr, pitchRate: pr, rollRate: rr)
            return (attitude, omega, linear)
        case .vibration:
            let (v, dv, _) = speed.evaluate(t)
            let heading = turn, headingRate = turnRate
            let (vehicle, omegaVehicle) = eulerAttitude(
                yaw: heading + yaw.value(t), pitch: pitch.value(t), roll: roll.value(t),
                yawRate: headingRate + yaw.rate(t), pitchRate: pitch.rate(t), rollRate: roll.rate(t))
            let ahead = Vec3(-sin(heading), cos(heading), 0), left = Vec3(-cos(heading), -sin(heading), 0)
            // Along the road: dv/dt; across it, towards the inside of the turn: v·ψ̇.
            var linear = ahead * dv + left * (v * headingRate)
            linear += Vec3(move[0].second(t), move[1].second(t), move[2].second(t))
            return (vehicle * mount, mount.transposed * omegaVehicle, linear)
        case .walking:
            let (strike, _) = heelStrike.evaluate(t)
            let (brake, _) = braking.evaluate(t)
            let (j, jr) = jolt.evaluate(t)
            let heading = turn
            let ahead = Vec3(-sin(heading), cos(heading), 0), left = Vec3(-cos(heading), -sin(heading), 0)
            let linear = ahead * (forward.value(t) + brake) + left * (lateral.value(t) + walkSpeed * turnRate)
                + Vec3(0, 0, vertical.value(t) + strike)
            let (attitude, omega) = eulerAttitude(
                yaw: heading + yaw.value(t), pitch: pitchBase + pitch.value(t) + j, roll: roll.value(t),
                yawRate: turnRate + yaw.rate(t), pitchRate: pitch.rate(t) + jr, rollRate: roll.rate(t))
            return (attitude, omega, linear)
        }
    }
}
