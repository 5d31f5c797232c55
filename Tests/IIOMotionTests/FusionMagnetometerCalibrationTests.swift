import Testing
@testable import IIOMotion
import Glibc

// The magnetometer's online calibration (MagnetometerCalibrator) and its use by the filter:
// a hard-iron offset and per-axis soft-iron gains like a board's, learned while the device turns.

private let hardIron = Vector3(15, -25, 40)  // µT
private let gains = Vector3(1.1, 0.9, 1.0)
/// The Earth's field in the north frame (x north, y west, z up), µT.
private let earth = Vector3(20, 0, -45)

private func distorted(_ f: Vector3, _ rng: inout SplitMix64) -> Vector3 {
    Vector3(f.x * gains.x, f.y * gains.y, f.z * gains.z) + hardIron
        + Vector3(0.4 * rng.normal(), 0.4 * rng.normal(), 0.4 * rng.normal())
}

/// A device turning every way: yaw 40°/s, pitch and roll swinging (north frame, device → frame).
private func attitude(_ t: Double) -> Quaternion {
    Attitude(roll: 70 * sin(0.45 * t) * .pi / 180, pitch: 50 * sin(0.7 * t) * .pi / 180, yaw: 0.7 * t).quaternion
}

@Suite("Magnetometer calibration")
struct MagnetometerCalibrationTests {
    @Test("Offset and gains are learned as the device turns; accuracy rises with coverage")
    func learns() {
        var rng = SplitMix64(seed: 3)
        var cal = MagnetometerCalibrator()
        var seen: [MagneticFieldCalibrationAccuracy] = []
        for i in 0..<4000 {
            let q = attitude(Double(i) / 50)
            cal.add(distorted(q.inverseRotate(earth), &rng))
            if seen.last != cal.accuracy { seen.append(cal.accuracy) }
        }
        #expect(seen.first == .uncalibrated && seen.last == .high)
        #expect(seen.map(\.rawValue) == seen.map(\.rawValue).sorted())
        #expect((cal.offset - hardIron).length < 1.5, "offset \(cal.offset)")
        // Gains up to a common factor: the calibrated field is a sphere.
        let ratio = Vector3(cal.scale.x * gains.x, cal.scale.y * gains.y, cal.scale.z * gains.z)
        #expect(abs(ratio.x / ratio.z - 1) < 0.02 && abs(ratio.y / ratio.z - 1) < 0.02, "scale \(cal.scale)")
        #expect(abs(cal.strength - earth.length) / earth.length < 0.12)
        #expect(cal.coverage >= 20)
        // A steel object passing adds 30 µT: not learned from.
        let q = attitude(3)
        let taken = cal.add(distorted(q.inverseRotate(earth) + Vector3(30, 0, 0), &rng))
        #expect(!taken)
    }

    @Test("Held one way, it stays uncalibrated")
    func needsCoverage() {
        var rng = SplitMix64(seed: 4)
        var cal = MagnetometerCalibrator()
        let q = Attitude(roll: 0.1, pitch: 0.2, yaw: 1).quaternion
        for _ in 0..<3000 { cal.add(distorted(q.inverseRotate(earth), &rng)) }
        #expect(cal.accuracy == .uncalibrated)
    }

    @Test("Saved and read back as text; a board starts calibrated (at most medium), garbage is refused")
    func persistence() {
        var rng = SplitMix64(seed: 5)
        var cal = MagnetometerCalibrator()
        for i in 0..<4000 { cal.add(distorted(attitude(Double(i) / 50).inverseRotate(earth), &rng)) }
        let back = MagnetometerCalibrator(text: cal.text)
        #expect(back?.offset == cal.offset && back?.scale == cal.scale && back?.accuracy == .medium)
        #expect(MagnetometerCalibrator(text: "") == nil)
        #expect(MagnetometerCalibrator(text: "iiomotion-magnetometer-calibration-1 1 2 3") == nil)
        #expect(MagnetometerCalibrator(text: cal.text.replacingOccurrences(of: "-1 ", with: "-9 ")) == nil)
    }

    @Test("Heading in the north frame within 2° RMS once calibrated, on hard and soft iron")
    func heading() {
        var rng = SplitMix64(seed: 6)
        var filter = AttitudeFilter(referenceFrame: .xMagneticNorthZVertical)
        var sumSq = 0.0, n = 0.0
        let rate = 200.0
        for i in 0..<Int(120 * rate) {
            let t = Double(i) / rate
            let q = attitude(t)
            if i % 4 == 0 { filter.update(magnetometerAt: t, field: distorted(q.inverseRotate(earth), &rng).magneticField) }
            // The body rate from the attitude's derivative: ω = 2·Im(q* ⊗ q̇).
            let h = 1e-5
            let a = attitude(t - h), b = attitude(t + h)
            let dq = Quaternion(x: (b.x - a.x) / (2 * h), y: (b.y - a.y) / (2 * h), z: (b.z - a.z) / (2 * h), w: (b.w - a.w) / (2 * h))
            let w = q.conjugate.multiplied(by: dq)
            let g = q.inverseRotate(Vector3(0, 0, -1))
            guard let m = filter.update(timestamp: t, rotationRate: RotationRate(x: 2 * w.x, y: 2 * w.y, z: 2 * w.z),
                                        acceleration: g.acceleration) else { continue }
            if t >= 60 {
                var e = m.heading - DeviceMotion.heading(yaw: Attitude(quaternion: q).yaw)
                e = (e + 540).truncatingRemainder(dividingBy: 360) - 180
                sumSq += e * e
                n += 1
            }
        }
        let rms = (sumSq / max(n, 1)).squareRoot()
        print("figure: heading RMS from north after 60 s with hard and soft iron learned online: \(rms)°")
        #expect(n > 0 && rms < 2)
        #expect(filter.magnetometerCalibration.accuracy == .high)
    }
}

@Suite("Magnetometer calibration store")
struct MagnetometerCalibrationStoreTests {
    @Test("A file per device under XDG_STATE_HOME; saved, loaded, deleted")
    func roundTrip() throws {
        let root = "/tmp/iiomotion-store-test-\(getpid())"
        let env = ["XDG_STATE_HOME": root, "HOME": "/nonexistent"]
        let path = try #require(MagnetometerCalibrationStore.path(device: "lsm9ds1_magn/label 1", environment: env))
        #expect(path == root + "/iiomotion/magnetometer-lsm9ds1_magn_label_1.txt")
        #expect(MagnetometerCalibrationStore.load(path: path) == nil)
        var rng = SplitMix64(seed: 7)
        var cal = MagnetometerCalibrator()
        #expect(!MagnetometerCalibrationStore.save(cal, path: path))  // nothing learned: nothing saved
        for i in 0..<4000 { cal.add(distorted(attitude(Double(i) / 50).inverseRotate(earth), &rng)) }
        #expect(MagnetometerCalibrationStore.save(cal, path: path))
        let back = try #require(MagnetometerCalibrationStore.load(path: path))
        #expect(back.offset == cal.offset && back.isCalibrated)
        unlink(path)
        #expect(MagnetometerCalibrationStore.load(path: path) == nil)
        rmdir(root + "/iiomotion"); rmdir(root)
        #expect(MagnetometerCalibrationStore.path(device: "x", environment: [:]) == nil)
    }
}
