import Foundation
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// Real recordings guard the filter: an excerpt of BROAD trial 08 (fast rotations and a still
/// break; D. Laidig, M. Caruso, A. Cereatti, T. Seel, "BROAD — A Benchmark for Robust Inertial
/// Orientation Estimation", Data 6(7):72, 2021, CC BY 4.0), fixtures/broad/08-excerpt.csv, made
/// by `scripts/fusion-broad --fixture` (64 s, every 4 samples averaged: 71.4 Hz), and excerpts
/// of trials 30 and 34 started in motion, made the same way. Device motion
/// replays it 6-axis (arbitrary frame) and 9-axis (magnetic north); the errors are the BROAD
/// paper's (RMS over the movement samples) and may not grow by more than 10 % over the figures
/// committed here, measured on this fixture when they were set.
@Suite("Fusion on real recordings (BROAD trials 08, 30, 34)", .timeLimit(.minutes(2)))
struct FusionBroadGuardTests {
    /// The committed figures (degrees) and the allowed growth.
    static let inclination6 = 1.79
    static let total9 = 3.30
    /// Started 5 s into the movement (``startedInMotion()``).
    static let movingInclination6 = 1.93
    static let movingTotal9 = 3.41
    /// Trial 30 started in motion (``startedInMotionNearAMagnet()``).
    static let magnetMovingInclination6 = 8.50
    static let magnetMovingTotal9 = 12.93
    /// Trial 34 started in motion (``startedInMotionWithAnAttachedMagnet()``).
    static let attachedMovingInclination6 = 2.51
    static let attachedMovingTotal9 = 24.22
    static let allowedGrowth = 1.10

    struct Row {
        var t: Double
        var gyro: Vector3
        var accel: Vector3  // m/s², specific force (face up +z)
        var field: Vector3  // µT
        var truth: Quaternion?  // device → east-north-up
        var moving: Bool
    }

    static func rows(_ file: String = "08-excerpt.csv") throws -> [Row] {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("fixtures/broad/\(file)").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var rows: [Row] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.hasPrefix("t,") {
            let f = line.split(separator: ",").map { Double($0) ?? .nan }
            guard f.count == 15 else { continue }
            let q = Quaternion(x: f[11], y: f[12], z: f[13], w: f[10])
            rows.append(Row(t: f[0], gyro: Vector3(f[1], f[2], f[3]), accel: Vector3(f[4], f[5], f[6]),
                            field: Vector3(f[7], f[8], f[9]), truth: q.w.isFinite ? q : nil, moving: f[14] != 0))
        }
        return rows
    }

    /// Estimates at each row's time, fed in the given order of (row, sensor) events.
    static func replay(_ rows: [Row], frame: AttitudeReferenceFrame, magnetometerLag: Int = 0) -> [Double: Quaternion] {
        var fusion = DeviceMotionFusion(referenceFrame: frame, units: .coreMotion)
        var out: [Double: Quaternion] = [:]
        func feed(_ i: Int, magnetometer: Bool) {
            let r = rows[i]
            if magnetometer {
                fusion.add(magnetometer: MagnetometerData(timestamp: r.t, magneticField: r.field.magneticField))
                return
            }
            let a = (-1 / standardGravity) * r.accel  // Core Motion's sign, g
            fusion.add(accelerometer: AccelerometerData(timestamp: r.t, acceleration: a.acceleration)) { out[$0.timestamp] = $0.attitude.quaternion }
            fusion.add(gyro: GyroData(timestamp: r.t, rotationRate: r.gyro.rotationRate)) { out[$0.timestamp] = $0.attitude.quaternion }
        }
        let usesField = frame != .xArbitraryZVertical
        for i in rows.indices {
            // The magnetometer's samples handed over `magnetometerLag` rows late (another refill).
            if usesField, i - magnetometerLag >= 0 { feed(i - magnetometerLag, magnetometer: true) }
            feed(i, magnetometer: false)
        }
        if usesField {
            for i in max(0, rows.count - magnetometerLag)..<rows.count where magnetometerLag > 0 { feed(i, magnetometer: true) }
        }
        fusion.flush { out[$0.timestamp] = $0.attitude.quaternion }
        return out
    }

    /// RMS inclination and total errors (degrees) over the movement rows, the BROAD paper's: with
    /// q_e = q_est ⊗ q_opt⁻¹ (both device → east-north-up; ours is north-west-up, turned a quarter
    /// turn about up), 2·acos(√(w² + z²)) and 2·acos(|w|).
    static func errors(_ rows: [Row], _ estimates: [Double: Quaternion]) -> (inclination: Double, total: Double) {
        let toENU = Quaternion(axis: Vector3(0, 0, 1), angle: .pi / 2)
        var si = 0.0, st = 0.0, n = 0.0
        for r in rows where r.moving {
            guard let truth = r.truth, let q = estimates[r.t] else { continue }
            let e = toENU.multiplied(by: q).multiplied(by: truth.conjugate).normalized
            let incl = 2 * acos(min(1, (e.w * e.w + e.z * e.z).squareRoot()))
            let total = 2 * acos(min(1, abs(e.w)))
            si += incl * incl
            st += total * total
            n += 1
        }
        return ((si / n).squareRoot() * 180 / .pi, (st / n).squareRoot() * 180 / .pi)
    }

    /// Replays `rows` 6-axis and 9-axis, prints the figures, and expects the 6-axis inclination
    /// and the 9-axis total within ``allowedGrowth`` of the committed ones.
    static func check(_ rows: [Row], _ what: String, inclination6: Double, total9: Double) {
        let six = errors(rows, replay(rows, frame: .xArbitraryZVertical))
        let nine = errors(rows, replay(rows, frame: .xMagneticNorthZVertical))
        print("figure: \(what): 6-axis inclination \(six.inclination)° (committed \(inclination6)), 9-axis inclination \(nine.inclination)°, total \(nine.total)° (committed \(total9))")
        #expect(six.inclination <= inclination6 * allowedGrowth)
        #expect(nine.total <= total9 * allowedGrowth)
    }

    @Test("6-axis inclination and 9-axis total error on BROAD trial 08 within 10 % of the committed figures")
    func realRecording() throws {
        let rows = try Self.rows()
        try #require(rows.count > 4000)
        Self.check(rows, "BROAD trial 08 excerpt (Laidig et al., Data 2021)", inclination6: Self.inclination6, total9: Self.total9)
    }

    /// The same excerpt started 5 s into its movement, as when a program starts with the device
    /// already turning in a hand: no rest to learn the gyroscope's bias from, and the start's
    /// gravity averaged from samples in motion (the plain mean of ``LowPass``; a start mean
    /// weighted towards its later samples, gain 3/n, gives 2.14° and 4.66° here).
    @Test("Started 5 s into the movement: 6-axis inclination and 9-axis total error within 10 % of the committed figures")
    func startedInMotion() throws {
        let rows = try Self.rows()
        let first = try #require(rows.firstIndex { $0.moving })
        let start = try #require(rows.firstIndex { $0.t >= rows[first].t + 5 })
        let moving = Array(rows[start...])
        try #require(moving.count > 2000)
        Self.check(moving, "BROAD trial 08 excerpt started in motion (\(moving[0].t) s)",
                   inclination6: Self.movingInclination6, total9: Self.movingTotal9)
    }

    /// Trial 30 (a magnet fixed near the path) from 5 s into its movement, fixtures/broad/30-moving.csv:
    /// the first estimate, from one accelerometer sample in motion, is tilted by tens of degrees,
    /// and with it the first field's dip, so the first field's reference follows the field for
    /// the start's first 3 s, while gravity is averaged (a reference fixed on the first field judged the
    /// later, rightly levelled, fields disturbed and held the heading off: 58.1° total here).
    @Test("Trial 30 started 5 s into the movement: 6-axis inclination and 9-axis total error within 10 % of the committed figures")
    func startedInMotionNearAMagnet() throws {
        let rows = try Self.rows("30-moving.csv")
        try #require(rows.count > 2000)
        Self.check(rows, "BROAD trial 30 excerpt started in motion",
                   inclination6: Self.magnetMovingInclination6, total9: Self.magnetMovingTotal9)
    }

    /// Trial 34 (a magnet attached 3 cm from the sensor) from 5 s into its movement,
    /// fixtures/broad/34-moving.csv (70 s): the heading follows the magnet's field until the
    /// calibration's first fit, whose heading is then far (tens of degrees) from the estimate,
    /// and is learned again as at the start (``AttitudeFilter``'s `firstFitRestartAngle`;
    /// corrected at the heading correction's pace instead: 27.95° total here).
    @Test("Trial 34 (attached magnet) started 5 s into the movement: 6-axis inclination and 9-axis total error within 10 % of the committed figures")
    func startedInMotionWithAnAttachedMagnet() throws {
        let rows = try Self.rows("34-moving.csv")
        try #require(rows.count > 4000)
        Self.check(rows, "BROAD trial 34 excerpt started in motion",
                   inclination6: Self.attachedMovingInclination6, total9: Self.attachedMovingTotal9)
    }

    /// Issue O2 (b): device motion is a function of the samples and their timestamps
    /// (``TimestampMerge``), bit for bit, however the magnetometer's refills interleave.
    @Test("The same recording with the magnetometer's samples handed over late (another refill interleaving) gives the same estimates")
    func interleavingDoesNotMatter() throws {
        let rows = try Self.rows()
        let inOrder = Self.replay(rows, frame: .xMagneticNorthZVertical)
        for lag in [1, 7] {
            let late = Self.replay(rows, frame: .xMagneticNorthZVertical, magnetometerLag: lag)
            var differing = 0
            for (t, q) in inOrder where late[t] != q { differing += 1 }
            print("figure: BROAD trial 08 excerpt, magnetometer \(lag) samples late: \(differing) of \(inOrder.count) estimates differ")
            #expect(late.count == inOrder.count)
            #expect(differing == 0)
        }
    }
}
