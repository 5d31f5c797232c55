import Testing
@testable import IIOMotion
@testable import IIOMotionCore
import Glibc

// MARK: - Conventions

@Suite("Fusion: Core Motion's attitude conventions", .timeLimit(.minutes(5)))
struct FusionConventionTests {
    /// Face up on a table: no roll, no pitch; gravity straight down the screen's normal, (0, 0, −1),
    /// which is what the accelerometer reads there in Core Motion's sign.
    @Test func faceUp() {
        let a = Attitude.identity
        #expect(a.roll == 0 && a.pitch == 0 && a.yaw == 0)
        let g = a.gravity
        #expect(abs(g.x) < 1e-12 && abs(g.y) < 1e-12 && abs(g.z + 1) < 1e-12)
        #expect(a.rotationMatrix == .identity)
    }

    /// Pitch is about x, positive when the top edge rises: upright in portrait, screen to the
    /// user, is pitch +90°, and gravity then runs down the screen, (0, −1, 0), Core Motion's
    /// reading for a phone held upright.
    @Test func uprightPortraitIsPitchPlus90() {
        let a = Attitude(quaternion: Quaternion(x: sin(.pi / 4), y: 0, z: 0, w: cos(.pi / 4)))
        #expect(abs(a.pitch - .pi / 2) < 1e-6)
        let g = a.gravity
        #expect(abs(g.x) < 1e-9 && abs(g.y + 1) < 1e-9 && abs(g.z) < 1e-9)
    }

    /// Roll is about y, positive when the right edge goes down (+30° about y by the right-hand
    /// rule tips +x downwards): gravity then leans towards +x by sin 30°.
    @Test func rightEdgeDownIsPositiveRoll() {
        let a = Attitude(quaternion: Quaternion(x: 0, y: sin(15 * deg), z: 0, w: cos(15 * deg)))
        #expect(abs(a.roll - 30 * deg) < 1e-9)
        #expect(abs(a.pitch) < 1e-9)
        #expect(abs(a.gravity.x - 0.5) < 1e-9 && abs(a.gravity.z + cos(30 * deg)) < 1e-9)
    }

    /// A device turned so that its x axis points up (landscape, right edge up) reads gravity
    /// (−1, 0, 0): roll −90°.
    @Test func xAxisUpIsRollMinus90() {
        let q = TQ(axis: (0, 1, 0), degrees: -90)
        #expect(abs(q.rotate(V(1, 0, 0)).z - 1) < 1e-12)   // the test's own check that x points up
        let a = Attitude(quaternion: Quaternion(x: q.x, y: q.y, z: q.z, w: q.w))
        #expect(abs(a.roll + .pi / 2) < 1e-9)
        #expect(abs(a.gravity.x + 1) < 1e-9)
    }

    /// Face down is roll ±180° (roll alone spans −π…π), gravity (0, 0, +1).
    @Test func faceDownIsRoll180() {
        let a = Attitude(quaternion: Quaternion(x: 0, y: 1, z: 0, w: 0))
        #expect(abs(abs(a.roll) - .pi) < 1e-9)
        #expect(abs(a.gravity.z - 1) < 1e-9)
    }

    /// Yaw is about the vertical, positive counter-clockwise seen from above: +90° turns the
    /// device's x axis onto the reference y axis.
    @Test func yawIsCounterClockwise() {
        let a = Attitude(roll: 0, pitch: 0, yaw: .pi / 2)
        let x = a.quaternion.rotate(Vector3(1, 0, 0))
        #expect(abs(x.y - 1) < 1e-12)
        #expect(abs(a.yaw - .pi / 2) < 1e-12)
    }

    /// Euler angles, the matrix and the quaternion describe one rotation: the test builds
    /// Rz·Rx·Ry with its own quaternions and reads every element back.
    @Test(arguments: [(10.0, 20.0, 30.0), (-170.0, 45.0, -120.0), (95.0, -80.0, 179.0), (0.0, 0.0, -90.0)])
    func eulerMatrixQuaternionAgree(roll: Double, pitch: Double, yaw: Double) {
        let truth = TQ.euler(roll: roll, pitch: pitch, yaw: yaw)
        let a = Attitude(roll: roll * deg, pitch: pitch * deg, yaw: yaw * deg)
        #expect(abs(a.roll / deg - roll) < 1e-9)
        #expect(abs(a.pitch / deg - pitch) < 1e-9)
        #expect(abs(a.yaw / deg - yaw) < 1e-9)
        let m = a.rotationMatrix
        let c1 = truth.rotate(V(1, 0, 0)), c2 = truth.rotate(V(0, 1, 0)), c3 = truth.rotate(V(0, 0, 1))
        let rows = [[m.m11, m.m12, m.m13], [m.m21, m.m22, m.m23], [m.m31, m.m32, m.m33]]
        let cols = [[c1.x, c2.x, c3.x], [c1.y, c2.y, c3.y], [c1.z, c2.z, c3.z]]
        for i in 0..<3 { for j in 0..<3 { #expect(abs(rows[i][j] - cols[i][j]) < 1e-12) } }
        // Gravity is minus the third row.
        let g = a.gravity
        #expect(abs(g.x + m.m31) < 1e-12 && abs(g.y + m.m32) < 1e-12 && abs(g.z + m.m33) < 1e-12)
    }

    /// `multiply(byInverseOf:)` measures from a saved attitude in the device's own frame: after
    /// turning to yaw 90° and saving, raising the top edge 10° reads pitch 10° (not roll).
    @Test func relativeAttitude() {
        let saved = Attitude(roll: 0, pitch: 0, yaw: .pi / 2)
        var now = Attitude(roll: 0, pitch: 10 * deg, yaw: .pi / 2)
        now.multiply(byInverseOf: saved)
        #expect(abs(now.pitch - 10 * deg) < 1e-12)
        #expect(abs(now.roll) < 1e-12 && abs(now.yaw) < 1e-12)
        let same = saved.relative(to: saved).quaternion
        #expect(abs(same.w - 1) < 1e-12)
    }

    /// Heading is the compass bearing of the top edge (x north, y west): top edge north is 0°,
    /// east 90° (yaw 180° then, x pointing south), west 270° (yaw 0: x along north).
    @Test func headingFromYaw() {
        #expect(abs(DeviceMotion.heading(yaw: -.pi / 2)) < 1e-9)
        #expect(abs(DeviceMotion.heading(yaw: .pi) - 90) < 1e-9)
        #expect(abs(DeviceMotion.heading(yaw: 0) - 270) < 1e-9)
        #expect(abs(DeviceMotion.heading(yaw: .pi / 2) - 180) < 1e-9)
    }

    @Test func referenceFrames() {
        #expect(AttitudeReferenceFrame.xArbitraryZVertical.rawValue == 1)
        #expect(AttitudeReferenceFrame.xTrueNorthZVertical.rawValue == 8)
        #expect(!AttitudeReferenceFrame.xArbitraryZVertical.needsMagnetometer)
        #expect(AttitudeReferenceFrame.xArbitraryCorrectedZVertical.needsMagnetometer)
        #expect(!AttitudeReferenceFrame.xArbitraryCorrectedZVertical.isNorthReferenced)
        #expect(AttitudeReferenceFrame.xMagneticNorthZVertical.isNorthReferenced)
    }
}
