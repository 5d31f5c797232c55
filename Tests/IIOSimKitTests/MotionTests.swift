import Foundation
import Testing
@testable import IIOSimKit

private let g = 9.80665

private func motion(_ spec: String) throws -> MotionScript { try MotionScript(parsing: spec) }

/// The rows of a matrix, for element-wise comparisons.
private func rows(_ m: Mat3) -> [Vec3] { [m.r0, m.r1, m.r2] }

private func matricesClose(_ a: Mat3, _ b: Mat3, tolerance: Double = 1e-9) -> Bool {
    zip(rows(a), rows(b)).allSatisfy { $0.isClose(to: $1, tolerance: tolerance) }
}

@Suite("Matrices", .timeLimit(.minutes(3)))
struct MatrixTests {
    @Test("Rotations follow the right-hand rule")
    func rotations() {
        let rx = Mat3.rotation(about: Vec3(1, 0, 0), angle: .pi / 2)
        #expect(matricesClose(rx, Mat3(Vec3(1, 0, 0), Vec3(0, 0, -1), Vec3(0, 1, 0))))
        // +90° about x takes y to z and z to -y.
        #expect((rx * Vec3(0, 1, 0)).isClose(to: Vec3(0, 0, 1)))
        #expect((rx * Vec3(0, 0, 1)).isClose(to: Vec3(0, -1, 0)))
        // +90° about y takes z to x; about z takes x to y.
        #expect((Mat3.rotation(about: Vec3(0, 1, 0), angle: .pi / 2) * Vec3(0, 0, 1)).isClose(to: Vec3(1, 0, 0)))
        #expect((Mat3.rotation(about: Vec3(0, 0, 1), angle: .pi / 2) * Vec3(1, 0, 0)).isClose(to: Vec3(0, 1, 0)))
        // 120° about (1,1,1)/√3 cycles x → y → z.
        let u = Vec3(1, 1, 1) / 3.0.squareRoot()
        #expect((Mat3.rotation(about: u, angle: 2 * .pi / 3) * Vec3(1, 0, 0)).isClose(to: Vec3(0, 1, 0)))
    }

    @Test("Products and transpose")
    func products() {
        let m = Mat3(Vec3(1, 2, 3), Vec3(4, 5, 6), Vec3(7, 8, 10))
        #expect(m * Vec3(1, 0, -1) == Vec3(-2, -2, -3))
        #expect(m.transposed == Mat3(Vec3(1, 4, 7), Vec3(2, 5, 8), Vec3(3, 6, 10)))
        let n = Mat3(Vec3(0, 1, 0), Vec3(-1, 0, 0), Vec3(0, 0, 1))
        // m·n: columns of n pick (-col1, col0, col2) of m.
        #expect(m * n == Mat3(Vec3(-2, 1, 3), Vec3(-5, 4, 6), Vec3(-8, 7, 10)))
        #expect(Mat3.identity * m == m)
    }

    @Test("Mount matrix text")
    func mountMatrix() throws {
        let m = try #require(Mat3(mountMatrix: "0, 1, 0; -1, 0, 0; 0, 0, 1\n"))
        #expect(m == Mat3(Vec3(0, 1, 0), Vec3(-1, 0, 0), Vec3(0, 0, 1)))
        #expect(Mat3(mountMatrix: "0.5,-0.5,0;0.5,0.5,0;0,0,1\0") == Mat3(Vec3(0.5, -0.5, 0), Vec3(0.5, 0.5, 0), Vec3(0, 0, 1)))
        #expect(Mat3(mountMatrix: "1, 0, 0; 0, 1, 0") == nil)
        #expect(Mat3(mountMatrix: "1, 0; 0, 1; 0, 0") == nil)
        #expect(Mat3(mountMatrix: "a, b, c; d, e, f; g, h, i") == nil)
        #expect(Mat3(mountMatrix: "") == nil)
    }
}

@Suite("Motion scripts: physics", .timeLimit(.minutes(3)))
struct MotionPhysicsTests {
    static let times: [Double] = [0, 0.01, 0.25, 0.5, 0.999, 1, 1.5, 2.25, 3, 3.7, 4.5, 5.01, 7.99, 10, 33.3, 123.456]

    @Test("Lying still face up: +g on z, no rotation, the Earth's field")
    func stillFaceUp() throws {
        for m in [MotionScript.faceUp, try motion("still"), try motion("still:up=+z"), try motion("still:up=face-up")] {
            for t in Self.times {
                let s = m.state(at: t)
                #expect(s.acceleration == Vec3(0, 0, 9.80665))
                #expect(s.angularVelocity == .zero)
                #expect(s.magneticField == Vec3(0, 0.2, -0.45))
                #expect(s.attitude == .identity)
            }
        }
    }

    @Test("Resting poses put +g on the axis that points up", arguments: [
        ("still:up=-z", Vec3(0, 0, -g)), ("still:up=face-down", Vec3(0, 0, -g)), ("still:up=down", Vec3(0, 0, -g)),
        ("still:up=+y", Vec3(0, g, 0)), ("still:up=portrait", Vec3(0, g, 0)), ("still:face=portrait", Vec3(0, g, 0)),
        ("still:up=-y", Vec3(0, -g, 0)), ("still:up=upside-down", Vec3(0, -g, 0)),
        ("still:up=+x", Vec3(g, 0, 0)), ("still:up=x", Vec3(g, 0, 0)), ("still:up=landscape-left", Vec3(g, 0, 0)),
        ("still:up=-x", Vec3(-g, 0, 0)), ("still:up=landscape-right", Vec3(-g, 0, 0)),
    ])
    func poses(spec: String, expected: Vec3) throws {
        let m = try motion(spec)
        for t in [0, 1.5, 60] {
            let s = m.state(at: t)
            #expect(s.acceleration.isClose(to: expected, tolerance: 1e-12))
            #expect(s.angularVelocity == .zero)
            // The attitude takes the up axis to world up.
            #expect((s.attitude * (expected / g)).isClose(to: Vec3(0, 0, 1), tolerance: 1e-12))
            #expect(abs(s.magneticField.length - 0.2425.squareRoot()) < 1e-12)
        }
    }

    @Test("|acceleration| = g whenever nothing accelerates the device linearly", arguments: [
        "still", "still:up=-y", "rotate", "rotate:axis=x", "rotate:axis=y,dps=-45", "rotate:axis=-x,dps=720,up=+y",
        "rotate:axis=z,dps=33,up=-x", "tilt", "tilt:deg=80,move=0.3,hold=0", "tilt:deg=45,up=+y", "tilt:deg=170,move=2,hold=0.5,up=-z",
    ])
    func gravityMagnitude(spec: String) throws {
        let m = try motion(spec)
        for i in 0..<400 {
            let t = Double(i) * 0.037
            let s = m.state(at: t)
            #expect(abs(s.acceleration.length - g) < 1e-9, "\(spec) at t = \(t): |a| = \(s.acceleration.length)")
            #expect(abs(s.magneticField.length - 0.2425.squareRoot()) < 1e-12)
        }
    }

    @Test("Rotating about z at 90 °/s: ω = (0, 0, π/2), gravity stays on z, north turns toward +x")
    func rotateAboutZ() throws {
        let m = try motion("rotate:axis=z,dps=90")
        for t in Self.times {
            let s = m.state(at: t)
            #expect(s.angularVelocity.isClose(to: Vec3(0, 0, .pi / 2), tolerance: 1e-12))
            #expect(s.acceleration.isClose(to: Vec3(0, 0, g), tolerance: 1e-12))
        }
        // After +90° about z the device's x axis points north: the field's 0.2 G north shows on +x.
        #expect(m.state(at: 1).magneticField.isClose(to: Vec3(0.2, 0, -0.45), tolerance: 1e-12))
        // The defaults are the same motion.
        #expect(try motion("rotate").state(at: 0.7).angularVelocity == m.state(at: 0.7).angularVelocity)
    }

    @Test("Rotating about x: gravity turns in the y–z plane by the right-hand rule")
    func rotateAboutX() throws {
        let m = try motion("rotate:axis=x,dps=90")
        // After +90° about x, the device's +y axis (carried to world +z) points up.
        #expect(m.state(at: 1).acceleration.isClose(to: Vec3(0, g, 0), tolerance: 1e-12))
        #expect(m.state(at: 2).acceleration.isClose(to: Vec3(0, 0, -g), tolerance: 1e-12))
        #expect(m.state(at: 3).acceleration.isClose(to: Vec3(0, -g, 0), tolerance: 1e-12))
        for t in Self.times {
            let theta = Double.pi / 2 * t
            let s = m.state(at: t)
            #expect(s.acceleration.isClose(to: Vec3(0, g * sin(theta), g * cos(theta)), tolerance: 1e-9))
            #expect(s.angularVelocity.isClose(to: Vec3(.pi / 2, 0, 0), tolerance: 1e-12))
        }
        // About y: +90° carries device z to world x and device -x to world up.
        #expect(try motion("rotate:axis=y").state(at: 1).acceleration.isClose(to: Vec3(-g, 0, 0), tolerance: 1e-12))
        // Negative axis or rate turns the other way.
        #expect(try motion("rotate:axis=-x").state(at: 1).acceleration.isClose(to: Vec3(0, -g, 0), tolerance: 1e-12))
        #expect(try motion("rotate:axis=x,dps=-90").state(at: 1).acceleration.isClose(to: Vec3(0, -g, 0), tolerance: 1e-12))
        #expect(try motion("rotate:axis=-x").state(at: 1).angularVelocity.isClose(to: Vec3(-.pi / 2, 0, 0), tolerance: 1e-12))
    }

    /// Integrates the body-frame equation of a world-fixed vector, v' = −ω × v, from v(0) = the
    /// script's vector at t = 0, with RK4 steps. ω is taken at each step's midpoint: the scripts'
    /// rates are piecewise constant and the step divides every corner, so that is the step's rate.
    /// If gyro and attitude agree, this reproduces the accelerometer (gravity) and magnetometer at T.
    private func integrate(_ m: MotionScript, to end: Double, step: Double,
                           _ pick: (MotionState) -> Vec3) -> Vec3 {
        var v = pick(m.state(at: 0))
        let n = Int((end / step).rounded())
        for i in 0..<n {
            let w = m.state(at: (Double(i) + 0.5) * step).angularVelocity
            func f(_ v: Vec3) -> Vec3 { -w.cross(v) }
            let k1 = f(v)
            let k2 = f(v + k1 * (step / 2))
            let k3 = f(v + k2 * (step / 2))
            let k4 = f(v + k3 * step)
            v += (k1 + k2 * 2 + k3 * 2 + k4) * (step / 6)
        }
        return v
    }

    @Test("Integrating the gyro reproduces the accelerometer and magnetometer", arguments: [
        ("rotate:axis=x,dps=90", 3.25), ("rotate:axis=y,dps=-200,up=+y", 2.0), ("rotate:axis=z,dps=45,up=-x", 5.0),
        ("tilt:deg=30,move=1,hold=0.5", 7.25), ("tilt:deg=60,move=0.5,hold=0,up=+y", 3.75),
    ])
    func gyroMatchesAttitude(spec: String, end: Double) throws {
        let m = try motion(spec)
        let step = 1.0 / 1024  // divides every end time and segment corner above exactly
        let accel = integrate(m, to: end, step: step) { $0.acceleration }
        let field = integrate(m, to: end, step: step) { $0.magneticField }
        let s = m.state(at: end)
        #expect(accel.isClose(to: s.acceleration, tolerance: 1e-6), "\(spec): integrated \(accel), scripted \(s.acceleration)")
        #expect(field.isClose(to: s.magneticField, tolerance: 1e-6), "\(spec): integrated \(field), scripted \(s.magneticField)")
    }

    @Test("Shaking adds A·sin(2πft) along the axis to gravity")
    func shake() throws {
        let m = try motion("shake:axis=x,g=0.5,hz=3")
        for t in Self.times {
            let s = m.state(at: t)
            let expected = Vec3(0.5 * g * sin(2 * .pi * 3 * t), 0, g)
            #expect(s.acceleration.isClose(to: expected, tolerance: 1e-9))
            #expect(s.angularVelocity == .zero)
            #expect(s.attitude == .identity)
            #expect(s.magneticField == Vec3(0, 0.2, -0.45))
        }
        #expect(m.state(at: 1.0 / 12).acceleration.isClose(to: Vec3(0.5 * g, 0, g), tolerance: 1e-9))
        #expect(m.state(at: 3.0 / 12).acceleration.isClose(to: Vec3(-0.5 * g, 0, g), tolerance: 1e-9))
        // The defaults are axis x, 0.5 g, 3 Hz.
        #expect(try motion("shake").state(at: 0.1).acceleration == m.state(at: 0.1).acceleration)

        // Along z at 1 g, 2 Hz: 2 g at the crest, free fall (0) at the trough.
        let z = try motion("shake:axis=z,g=1,hz=2")
        #expect(z.state(at: 1.0 / 8).acceleration.isClose(to: Vec3(0, 0, 2 * g), tolerance: 1e-9))
        #expect(z.state(at: 3.0 / 8).acceleration.isClose(to: Vec3(0, 0, 0), tolerance: 1e-9))

        // In portrait, shaking along device x: gravity on y, the shake still on device x.
        let p = try motion("shake:axis=x,g=0.25,hz=1,up=+y")
        #expect(p.state(at: 0.25).acceleration.isClose(to: Vec3(0.25 * g, g, 0), tolerance: 1e-9))
        #expect(p.state(at: 0.75).acceleration.isClose(to: Vec3(-0.25 * g, g, 0), tolerance: 1e-9))
    }

    @Test("Tilt: out about x, hold, back, hold, then the same about y")
    func tiltSequence() throws {
        let m = try motion("tilt:deg=30,move=1,hold=1")
        let rate = Double.pi / 6  // 30° per second
        let s15 = sin(Double.pi / 12), c15 = cos(Double.pi / 12)
        let cases: [(Double, Vec3, Vec3)] = [
            (0.5, Vec3(0, g * s15, g * c15), Vec3(rate, 0, 0)),       // moving out about x
            (1.5, Vec3(0, g / 2, g * 3.0.squareRoot() / 2), .zero),  // holding at 30°
            (2.5, Vec3(0, g * s15, g * c15), Vec3(-rate, 0, 0)),      // moving back
            (3.5, Vec3(0, 0, g), .zero),                              // at rest
            (4.5, Vec3(-g * s15, 0, g * c15), Vec3(0, rate, 0)),      // out about y
            (5.5, Vec3(-g / 2, 0, g * 3.0.squareRoot() / 2), .zero),
            (6.5, Vec3(-g * s15, 0, g * c15), Vec3(0, -rate, 0)),
            (7.5, Vec3(0, 0, g), .zero),
            (8.5, Vec3(0, g * s15, g * c15), Vec3(rate, 0, 0)),       // the cycle repeats every 8 s
        ]
        for (t, a, w) in cases {
            let s = m.state(at: t)
            #expect(s.acceleration.isClose(to: a, tolerance: 1e-9), "t = \(t): \(s.acceleration)")
            #expect(s.angularVelocity.isClose(to: w, tolerance: 1e-12), "t = \(t): \(s.angularVelocity)")
        }
        // Back at rest: the rest attitude, exactly the still pose.
        for t in [3.5, 7.5, 11.5, 15.9] {
            #expect(matricesClose(m.state(at: t).attitude, .identity, tolerance: 1e-12))
        }
        let down = try motion("tilt:up=-z")
        #expect(down.state(at: 7.5).acceleration.isClose(to: Vec3(0, 0, -g), tolerance: 1e-9))
        #expect(matricesClose(down.state(at: 7.5).attitude, try motion("still:up=-z").state(at: 0).attitude))
    }

    @Test("Tilt: ω is the derivative of the attitude (Ȧ = A·[ω]×, row by row ṙ = r × ω)")
    func tiltDerivative() throws {
        let m = try motion("tilt:deg=40,move=0.8,hold=0.4,up=+y")
        let h = 1e-6
        // Sample inside segments, away from the corners where ω jumps.
        for i in 0..<200 {
            let t = 0.013 + Double(i) * 0.047
            let segment = 1.2, inSegment = t.truncatingRemainder(dividingBy: segment)
            if abs(inSegment - 0.8) < 1e-3 || inSegment < 1e-3 || segment - inSegment < 1e-3 { continue }
            let before = rows(m.state(at: t - h).attitude), after = rows(m.state(at: t + h).attitude)
            let s = m.state(at: t)
            for (k, r) in rows(s.attitude).enumerated() {
                let derivative = (after[k] - before[k]) / (2 * h)
                #expect(derivative.isClose(to: r.cross(s.angularVelocity), tolerance: 1e-6), "t = \(t), row \(k)")
            }
            // And the same for what the sensors see: v̇ = −ω × v.
            let dA = (m.state(at: t + h).acceleration - m.state(at: t - h).acceleration) / (2 * h)
            #expect(dA.isClose(to: -s.angularVelocity.cross(s.acceleration), tolerance: 1e-5), "t = \(t)")
        }
    }

    @Test("Tilt without holds and the attitude is continuous at every corner")
    func tiltContinuity() throws {
        let m = try motion("tilt:deg=30,move=1,hold=0")
        #expect(m.state(at: 1.5).angularVelocity.isClose(to: Vec3(-.pi / 6, 0, 0), tolerance: 1e-12))
        for corner in [1.0, 2.0, 3.0, 4.0, 8.0] {
            let a = m.state(at: corner - 1e-9).acceleration, b = m.state(at: corner + 1e-9).acceleration
            #expect(a.isClose(to: b, tolerance: 1e-6), "jump at \(corner)")
        }
        let held = try motion("tilt:deg=30,move=1,hold=1")
        for corner in [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0] {
            let a = held.state(at: corner - 1e-9).acceleration, b = held.state(at: corner + 1e-9).acceleration
            #expect(a.isClose(to: b, tolerance: 1e-6), "jump at \(corner)")
        }
    }
}

@Suite("Motion scripts: parsing", .timeLimit(.minutes(3)))
struct MotionParsingTests {
    @Test("Options land in the motion")
    func parses() throws {
        let r = try MotionScript(parsing: "rotate:axis=-y,dps=180,up=+x")
        #expect(r.description == "rotate:axis=-y,dps=180,up=+x")
        guard case let .rotate(axis, rate) = r.kind else { Issue.record("not a rotation: \(r.kind)"); return }
        #expect(axis == Vec3(0, -1, 0))
        #expect(abs(rate - .pi) < 1e-15)
        #expect(r.state(at: 0).acceleration.isClose(to: Vec3(g, 0, 0), tolerance: 1e-12))

        let s = try MotionScript(parsing: "shake:axis=y,g=2,hz=5")
        guard case let .shake(sAxis, amplitude, hz) = s.kind else { Issue.record("not a shake"); return }
        #expect(sAxis == Vec3(0, 1, 0) && abs(amplitude - 2 * g) < 1e-12 && hz == 5)

        let t = try MotionScript(parsing: "tilt:deg=45,move=0.5,hold=2")
        guard case let .tilt(angle, move, hold) = t.kind else { Issue.record("not a tilt"); return }
        #expect(abs(angle - .pi / 4) < 1e-15 && move == 0.5 && hold == 2)

        let d = try MotionScript(parsing: "tilt")
        guard case let .tilt(dAngle, dMove, dHold) = d.kind else { Issue.record("not a tilt"); return }
        #expect(abs(dAngle - .pi / 6) < 1e-15 && dMove == 1 && dHold == 1)

        #expect(try MotionScript(parsing: "still").kind == .still)
        #expect(try MotionScript(parsing: "still:").kind == .still)
    }

    @Test("Bad specifications throw MotionScript.ParseError", arguments: [
        "spin", "Still", "rotate:axis=w", "rotate:axis=xy", "rotate:dps=fast", "rotate:dps=inf", "rotate:dps=nan",
        "shake:g=nan", "shake:hz=", "still:up=+w", "still:up=sideways", "still:face=sideways", "tilt:move=0",
        "tilt:move=-1", "tilt:hold=-1", "rotate:speed=3", "rotate:axis", "rotate:axis=x,dps",
        "rotate:face=portrait", "shake:axis=x,up=+q", "tilt:deg=30,foo=1",
    ])
    func rejects(spec: String) {
        #expect(throws: MotionScript.ParseError.self) { try MotionScript(parsing: spec) }
    }

    @Test("Errors name the bad part")
    func messages() throws {
        let unknown = try thrownError(MotionScript.ParseError.self) { try MotionScript(parsing: "spin") }
        #expect(unknown.description.contains("spin"))
        let option = try thrownError(MotionScript.ParseError.self) { try MotionScript(parsing: "rotate:speed=3") }
        #expect(option.description.contains("speed"))
        let number = try thrownError(MotionScript.ParseError.self) { try MotionScript(parsing: "rotate:dps=fast") }
        #expect(number.description.contains("dps=fast"))
    }
}

@Suite("Noise", .timeLimit(.minutes(3)))
struct NoiseTests {
    @Test("The same seed gives the same sequence; another seed another")
    func deterministic() {
        var a = NoiseSource(seed: 42), b = NoiseSource(seed: 42), c = NoiseSource(seed: 43)
        let sa = (0..<1000).map { _ in a.gaussian() }
        let sb = (0..<1000).map { _ in b.gaussian() }
        let sc = (0..<1000).map { _ in c.gaussian() }
        #expect(sa == sb)
        #expect(sa != sc)
        #expect(Set(sa).count > 990)  // not stuck
    }

    @Test("uniform() lies in (0, 1] with mean 1/2")
    func uniform() {
        var n = NoiseSource(seed: 7)
        var sum = 0.0
        let count = 100_000
        for _ in 0..<count {
            let u = n.uniform()
            #expect(u > 0 && u <= 1)
            sum += u
        }
        #expect(abs(sum / Double(count) - 0.5) < 0.01)
    }

    @Test("gaussian() is roughly N(0, 1) over 100 000 samples")
    func normal() {
        var n = NoiseSource(seed: 1)
        let count = 100_000
        var sum = 0.0, sumSquares = 0.0, withinOne = 0, withinTwo = 0
        for _ in 0..<count {
            let x = n.gaussian()
            #expect(x.isFinite)
            sum += x
            sumSquares += x * x
            if abs(x) < 1 { withinOne += 1 }
            if abs(x) < 2 { withinTwo += 1 }
        }
        let mean = sum / Double(count)
        let variance = sumSquares / Double(count) - mean * mean
        // Standard errors: mean 0.0032, variance 0.0045; the bounds are several times wider.
        #expect(abs(mean) < 0.02)
        #expect(abs(variance - 1) < 0.03)
        #expect(abs(Double(withinOne) / Double(count) - 0.6827) < 0.01)
        #expect(abs(Double(withinTwo) / Double(count) - 0.9545) < 0.01)
    }

    @Test("Imperfections: ideal only when nothing is added")
    func imperfections() {
        #expect(Imperfections().isIdeal)
        #expect(!Imperfections(accelNoise: 0.01).isIdeal)
        #expect(!Imperfections(gyroNoise: 0.01).isIdeal)
        #expect(!Imperfections(gyroBias: Vec3(0, 0, 0.001)).isIdeal)
    }
}

@Suite("Motions like a user's", .timeLimit(.minutes(3)))
struct LifeMotionTests {
    static let specs = ["hand-held", "shaking", "vibration", "walking", "hand-held:seed=7,steel=5", "walking:seed=3"]

    @Test("ω is the derivative of the attitude (Ȧ = A·[ω]×), everywhere", arguments: specs)
    func derivative(spec: String) throws {
        let m = try motion(spec)
        let h = 1e-6
        for i in 0..<400 {
            let t = 0.0137 + Double(i) * 0.1491
            let before = rows(m.state(at: t - h).attitude), after = rows(m.state(at: t + h).attitude)
            let s = m.state(at: t)
            for (k, r) in rows(s.attitude).enumerated() {
                let d = (after[k] - before[k]) / (2 * h)
                #expect(d.isClose(to: r.cross(s.angularVelocity), tolerance: 1e-5), "\(spec) t = \(t), row \(k)")
            }
        }
    }

    @Test("Integrating the gyro over a minute keeps gravity and north where the script has them", arguments: specs)
    func integrates(spec: String) throws {
        let m = try motion(spec)
        // RK4 on the attitude itself: Ȧ = A·[ω]×, row by row ṙ = r × ω.
        var a = m.state(at: 0).attitude
        let step = 1.0 / 2000, n = 60 * 2000
        for i in 0..<n {
            let t = Double(i) * step
            let w1 = m.state(at: t).angularVelocity, w2 = m.state(at: t + step / 2).angularVelocity
            let w3 = m.state(at: t + step).angularVelocity
            func f(_ r: Vec3, _ w: Vec3) -> Vec3 { r.cross(w) }
            func rk(_ r: Vec3) -> Vec3 {
                let k1 = f(r, w1), k2 = f(r + k1 * (step / 2), w2), k3 = f(r + k2 * (step / 2), w2), k4 = f(r + k3 * step, w3)
                return r + (k1 + k2 * 2 + k3 * 2 + k4) * (step / 6)
            }
            a = Mat3(rk(a.r0), rk(a.r1), rk(a.r2))
        }
        #expect(matricesClose(a, m.state(at: 60).attitude, tolerance: 1e-6), "\(spec)")
    }

    @Test("The same seed gives the same motion, another seed another", arguments: ["hand-held", "shaking", "vibration", "walking"])
    func seeded(name: String) throws {
        let a = try motion(name + ":seed=4"), b = try motion(name + ":seed=4"), c = try motion(name + ":seed=5")
        let ts = stride(from: 0.0, to: 60, by: 0.37)
        #expect(ts.allSatisfy { a.state(at: $0) == b.state(at: $0) })
        #expect(!ts.allSatisfy { a.state(at: $0).attitude == c.state(at: $0).attitude })
        #expect(try motion(name).kind == motion(name + ":seed=1").kind)
    }

    @Test("Accelerations look like the motion's: bounded, and moving", arguments: [
        ("hand-held", 0.05, 0.6), ("shaking", 0.3, 2.2), ("vibration", 0.05, 1.0), ("walking", 0.15, 1.2),
    ])
    func accelerations(name: String, minRMS: Double, maxPeak: Double) throws {
        let m = try motion(name)
        var sumSq = 0.0, peak = 0.0, n = 0.0, maxRate = 0.0
        for i in 0..<12000 {
            let t = Double(i) / 200
            let s = m.state(at: t)
            let gravity = s.attitude.transposed * Vec3(0, 0, g)
            let linear = s.acceleration - gravity
            let l = (linear * linear).sum().squareRoot() / g
            sumSq += l * l; n += 1
            peak = max(peak, ((s.acceleration * s.acceleration).sum()).squareRoot() / g - 1)
            maxRate = max(maxRate, (s.angularVelocity * s.angularVelocity).sum().squareRoot())
        }
        let rms = (sumSq / n).squareRoot()
        #expect(rms > minRMS && rms < 1, "\(name): linear RMS \(rms) g")
        #expect(peak < maxPeak, "\(name): |a| peaks \(peak) g above 1 g")
        #expect(maxRate < 2000 * .pi / 180, "\(name): \(maxRate) rad/s beyond a BMI160's ±2000 °/s")
    }

    @Test("A passing steel object adds to the field only around its time")
    func steel() throws {
        let m = try motion("hand-held:steel=20,steel-ut=30"), plain = try motion("hand-held")
        func added(_ t: Double) -> Double {
            let d = m.state(at: t).magneticField - plain.state(at: t).magneticField
            return (d * d).sum().squareRoot() * 100
        }
        #expect(abs(added(20) - 30) < 1e-9)
        #expect(added(5) < 0.5 && added(40) < 0.5)
        #expect(m.state(at: 13).attitude == plain.state(at: 13).attitude)
    }

    @Test("Parsing: names, options, errors")
    func parsing() throws {
        guard case let .life(h) = try motion("walking:seed=9,steel=12,steel-ut=40").kind else { Issue.record("not a life motion"); return }
        #expect(h.style == .walking && h.seed == 9 && h.steel?.time == 12 && h.steel?.strength == 0.4)
        #expect(throws: MotionScript.ParseError.self) { try motion("walking:up=+x") }
        #expect(throws: MotionScript.ParseError.self) { try motion("hand-held:seed=-1") }
        #expect(throws: MotionScript.ParseError.self) { try motion("replay:") }
        #expect(throws: MotionScript.ParseError.self) { try motion("replay:/nonexistent/file.csv") }
    }

    @Test("Hard and soft iron distort the magnetometer: M·field + offset")
    func distortion() {
        var imp = Imperfections()
        imp.magnHardIron = Vec3(0.1, -0.2, 0.3)
        imp.magnSoftIron = Mat3(Vec3(1.1, 0.05, 0), Vec3(0.05, 0.9, 0), Vec3(0, 0, 1))
        #expect(!imp.isIdeal)
        #expect(imp.distortedField(Vec3(0, 0.2, -0.45)).isClose(to: Vec3(0.11, -0.02, -0.15), tolerance: 1e-12))
    }
}

@Suite("Replaying a recording", .timeLimit(.minutes(3)))
struct ReplayTests {
    @Test("Raw samples stream as recorded (interpolated), in g or in m/s²")
    func raw() throws {
        let text = """
        timestamp,sensor,device,x,y,z
        100.000000000,accelerometer,iio:device0,0.0,0.0,-1.0
        100.000000000,gyroscope,iio:device0,0.1,0.2,0.3
        100.010000000,accelerometer,iio:device0,0.5,0.0,-1.0
        100.010000000,gyroscope,iio:device0,0.3,0.2,0.1
        100.005000000,magnetometer,iio:device1,20,0,-40
        100.010000000,accelerometer,iio:device9,7,7,7
        """
        let r = try Recording(text: text)
        #expect(r.hasSamples && !r.hasTruth)
        let s = r.state(at: 0.005)
        #expect(s.acceleration.isClose(to: Vec3(-0.25 * g, 0, g), tolerance: 1e-9))
        #expect(s.angularVelocity.isClose(to: Vec3(0.2, 0.2, 0.2), tolerance: 1e-12))
        #expect(s.magneticField.isClose(to: Vec3(0.2, 0, -0.4), tolerance: 1e-12))
        #expect(r.state(at: 5).angularVelocity.isClose(to: Vec3(0.3, 0.2, 0.1), tolerance: 1e-12))
        let si = try Recording(text: "1.0,accelerometer,a,0,0,9.8\n1.01,accelerometer,a,0,9.8,0\n")
        #expect(si.state(at: 0).acceleration == Vec3(0, 0, 9.8))
    }

    @Test("Truth rows render the sensors: the rate of the slerp between rows, gravity, the field")
    func truth() throws {
        // A quarter turn about z over one second in 100 rows, with a linear acceleration east.
        var text = "timestamp,sensor,device,x,y,z\n"
        for i in 0...100 {
            let t = 5 + Double(i) / 100
            text += "\(t),attitude,truth,0,0,\(Double(i) / 100 * .pi / 2)\n"
            text += "\(t),linear-acceleration,truth,1,0,0\n"
        }
        let r = try Recording(text: text)
        #expect(!r.hasSamples && r.hasTruth)
        let s = r.state(at: 0.5)
        #expect(s.angularVelocity.isClose(to: Vec3(0, 0, .pi / 2), tolerance: 1e-9))
        #expect(matricesClose(s.attitude, Mat3.rotation(about: Vec3(0, 0, 1), angle: .pi / 4)))
        #expect(s.acceleration.isClose(to: s.attitude.transposed * Vec3(1, 0, g), tolerance: 1e-9))
        #expect(s.magneticField.isClose(to: s.attitude.transposed * MotionScript.earthField, tolerance: 1e-9))
    }

    @Test("Rotation vectors round-trip, half turns included", arguments: [
        Vec3(0, 0, 0), Vec3(0.3, -0.2, 0.1), Vec3(0, 0, .pi), Vec3(-.pi, 0, 0), Vec3(1, 1, 1) / 3.0.squareRoot() * 3.1, Vec3(0, 2, -1),
    ])
    func rotationVectors(v: Vec3) {
        let m = Recording.rotation(vector: v)
        #expect(matricesClose(Recording.rotation(vector: Recording.rotationVector(m)), m, tolerance: 1e-6))
    }

    @Test("A life motion written as truth and replayed is the same motion")
    func roundTrip() throws {
        let m = try motion("walking:seed=2")
        var text = ""
        for i in 0...2000 {
            let t = Double(i) / 400
            let s = m.state(at: t)
            let v = Recording.rotationVector(s.attitude)
            let linear = s.attitude * s.acceleration - Vec3(0, 0, g)
            text += "\(t),attitude,truth,\(v.x),\(v.y),\(v.z)\n\(t),linear-acceleration,truth,\(linear.x),\(linear.y),\(linear.z)\n"
        }
        let r = try Recording(text: text)
        for t in stride(from: 0.1, to: 4.9, by: 0.31) {
            let a = r.state(at: t), b = m.state(at: t)
            #expect(matricesClose(a.attitude, b.attitude, tolerance: 1e-4), "t = \(t)")
            #expect(a.acceleration.isClose(to: b.acceleration, tolerance: 0.2), "t = \(t)")
        }
    }
}
