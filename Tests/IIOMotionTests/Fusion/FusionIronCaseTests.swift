import Foundation
import Testing
import IIOSimKit
@testable import IIOMotion
@testable import IIOMotionCore

// The magnetometer's calibration on iio-sim's iron case, run through the fusion in process and
// deterministically: iio-sim's hand-held motion with a steel object passing at 60 s (its
// MotionScript, the same function of time the simulator serves), rendered as a Sense HAT's
// LSM9DS1 reads it with BMI160-like noise and bias, hard and soft iron, and the sensors' LSBs.
// The live run of the same case (`scripts/fusion-accuracy`, BENCHMARKS) goes through libiio; this
// one checks the library's own part without a process's timing in the way.

/// The iron case's motion (iio-sim's hand-held with a steel object passing at 60 s, seed `seed`)
/// and the Sense HAT rendering it (238 Hz; magnetometer 80 Hz).
private func ironCaseIMU(seed: UInt64) throws -> (script: MotionScript, imu: RenderedIMU) {
    let script = try MotionScript(parsing: "hand-held:steel=60,seed=\(seed)")
    var imperfections = Imperfections(gyroBias: Vec3(0.0052, -0.0035, 0.0044),
                                      accelNoiseDensity: 180 * 9.80665e-6,
                                      gyroNoiseDensity: 0.007 * .pi / 180, magnNoise: 0.004)
    imperfections.magnHardIron = Vec3(0.15, -0.25, 0.40)
    imperfections.magnSoftIron = Mat3(Vec3(1.1, 0.03, 0), Vec3(0.03, 0.9, 0), Vec3(0, 0, 1))
    // LSBs: ±2 g (0.061 mg), the gyroscope's scale as the fusion-accuracy case sets it, ±4 gauss.
    let imu = RenderedIMU(script: script, imperfections: imperfections, rate: 238,
                          accelLSB: 0.061e-3 * 9.80665, gyroLSB: 0.001222, magnetometerLSB: 0.00014, seed: seed)
    return (script, imu)
}

/// Runs `seconds` of the iron case with motion seed `seed` through `DeviceMotionFusion` (north
/// frame); returns when the calibration first reached medium (nil if never) and the heading's
/// RMS error (degrees) from then on, and when the first fit was applied (the accuracy first at
/// least low; nil if never) and the heading's RMS error over the 10 s from a second after it.
private func ironCase(seed: UInt64, seconds: Double = 120) throws
    -> (medium: Double?, headingRMS: Double, firstFit: Double?, afterFirstFit: Double) {
    var (script, imu) = try ironCaseIMU(seed: seed)
    let rate = 238.0, magnetometerRate = 80.0

    var fusion = DeviceMotionFusion(referenceFrame: .xMagneticNorthZVertical)
    var medium: Double?, firstFit: Double?
    var sumSq = 0.0, n = 0.0, fitSumSq = 0.0, fitN = 0.0
    var nextMagnetometer = 0
    for k in 0..<Int(seconds * rate) {
        let t = Double(k) / rate
        while Double(nextMagnetometer) / magnetometerRate <= t {
            let tm = Double(nextMagnetometer) / magnetometerRate
            fusion.add(magnetometer: MagnetometerData(timestamp: tm, magneticField: imu.magneticField(at: tm)))
            nextMagnetometer += 1
        }
        let state = script.state(at: t)
        fusion.add(accelerometer: AccelerometerData(timestamp: t, acceleration: imu.acceleration(at: t))) { _ in }
        var estimate: DeviceMotion?
        fusion.add(gyro: GyroData(timestamp: t, rotationRate: imu.rotationRate(at: t))) { estimate = $0 }
        guard let m = estimate else { continue }
        if medium == nil, m.magneticField.accuracy.rawValue >= MagneticFieldCalibrationAccuracy.medium.rawValue { medium = t }
        if firstFit == nil, m.magneticField.accuracy.rawValue >= MagneticFieldCalibrationAccuracy.low.rawValue { firstFit = t }
        guard medium != nil || firstFit.map({ t >= $0 + 1 && t < $0 + 11 }) == true else { continue }
        // The heading of the device's x-axis: the estimate's in its frame (x north, y west), the
        // truth's from the simulator's attitude (device to east-north-up).
        let x = m.attitude.quaternion.rotate(Vector3(1, 0, 0))
        let truth = state.attitude * Vec3(1, 0, 0)
        guard x.x * x.x + x.y * x.y > 0.1, truth.x * truth.x + truth.y * truth.y > 0.1 else { continue }
        var e = atan2(x.y, x.x) - atan2(-truth.x, truth.y)
        e = remainder(e, 2 * .pi) * 180 / .pi
        if let f = firstFit, t >= f + 1, t < f + 11 {
            fitSumSq += e * e
            fitN += 1
        }
        guard medium != nil else { continue }
        sumSq += e * e
        n += 1
    }
    return (medium, n > 0 ? (sumSq / n).squareRoot() : .infinity, firstFit, fitN > 0 ? (fitSumSq / fitN).squareRoot() : .infinity)
}

/// The heading's error (degrees, the device's x and y axes weighted by their horizontal part in
/// the truth) every 2.5 s over the first `seconds` of iio-sim's hand-held motion with seed `seed`,
/// rendered as a Sense HAT reads it in a clean field, fused in the north frame with `configuration`.
private func handHeldHeading(seed: UInt64, seconds: Double, configuration: AttitudeFilter.Configuration) throws -> [Double] {
    let script = try MotionScript(parsing: "hand-held:seed=\(seed)")
    let imperfections = Imperfections(gyroBias: Vec3(0.0052, -0.0035, 0.0044), accelNoiseDensity: 180 * 9.80665e-6,
                                      gyroNoiseDensity: 0.007 * .pi / 180, magnNoise: 0.004)
    let rate = 238.0, magnetometerRate = 80.0
    var imu = RenderedIMU(script: script, imperfections: imperfections, rate: rate,
                          accelLSB: 0.000598, gyroLSB: 0.001222, magnetometerLSB: 0.00014, seed: seed)
    var fusion = DeviceMotionFusion(referenceFrame: .xMagneticNorthZVertical, configuration: configuration)
    var errors: [Double] = []
    var nextMagnetometer = 0
    for k in 1...Int(seconds * rate) {
        let t = Double(k) / rate
        while Double(nextMagnetometer) / magnetometerRate <= t {
            let tm = Double(nextMagnetometer) / magnetometerRate
            fusion.add(magnetometer: MagnetometerData(timestamp: tm, magneticField: imu.magneticField(at: tm)))
            nextMagnetometer += 1
        }
        fusion.add(accelerometer: AccelerometerData(timestamp: t, acceleration: imu.acceleration(at: t))) { _ in }
        var estimate: DeviceMotion?
        fusion.add(gyro: GyroData(timestamp: t, rotationRate: imu.rotationRate(at: t))) { estimate = $0 }
        guard let m = estimate, k % Int(2.5 * rate) == 0 else { continue }
        let attitude = script.state(at: t).attitude
        var c = 0.0, s = 0.0
        for axis in [Vector3(1, 0, 0), Vector3(0, 1, 0)] {
            // The estimate's heading in its frame (x north, y west); the truth's from east-north-up.
            let estimated = m.attitude.quaternion.rotate(axis)
            let truth = attitude * Vec3(axis.x, axis.y, axis.z)
            let weight = truth.x * truth.x + truth.y * truth.y
            let e = atan2(estimated.y, estimated.x) - atan2(-truth.x, truth.y)
            c += weight * cos(e)
            s += weight * sin(e)
        }
        errors.append(atan2(s, c) * 180 / .pi)
    }
    return errors
}

@Suite("Magnetometer calibration on iio-sim's iron case", .timeLimit(.minutes(5)))
struct FusionIronCaseTests {
    // Seeds 2 and 3 fail (3.09° and 2.71° after medium) when the heading's bias windows are
    // gated instead of clipped (`headingBiasClip`): the first windows after the first
    // calibration, whose corrections carry the rough calibration's error, put the bias about the
    // vertical 0.5–0.7 °/s off, and every later window is then an outlier. See BENCHMARKS, "The
    // magnetometer calibrated".
    // Seed 5 turns slowly, and its deadline is 100 s: the steel passes at 60 s, before the samples
    // cover enough directions for a first fit. Taken into the bins, it pulled every later fit to
    // an offset 30 µT off (strength 68 µT), and the calibration stayed uncalibrated past 105 s;
    // a plausible candidate now keeps it out (`MagnetometerCalibrator.candidatePatience`).
    @Test("Hand-held with hard and soft iron and a steel object passing: medium by the seed's deadline (a minute; 100 s for slow-turning seed 5, whose steel comes before the first fit), heading within 2° RMS after it",
          arguments: [(1, 60), (2, 60), (3, 60), (5, 100)] as [(UInt64, Double)])
    func ironCase(seed: UInt64, deadline: Double) throws {
        let r = try IIOMotionTests.ironCase(seed: seed)
        print("figure: iron case, seed \(seed): medium at \(r.medium.map { "\($0) s" } ?? "never"), heading RMS after it \(r.headingRMS)°")
        withKnownIssue("Known regression (issue O): \(knownRegressionNote) the calibration's heading on this rendered iron case", isIntermittent: true) {
            let medium = try #require(r.medium, "never medium")
            #expect(medium < deadline, "medium at \(medium) s")
            #expect(r.headingRMS < 2, "heading RMS \(r.headingRMS)° after medium")
        }
    }

    /// The uncalibrated field's heading is 150–180° off on these seeds (the hard-iron offset,
    /// 49 µT, is as strong as the Earth's field): the first fit's heading is taken with the
    /// start's fast correction (1.4°, 8.2°, 3.9°, 3.7° RMS), not at the heading correction's
    /// pace after 5 s of the calibrated field judged disturbed against the uncalibrated one's
    /// reference (125°, 139°, 118°, 119°). A first fit is rough (seed 2's stays low to the end).
    @Test("A first fit far from the uncalibrated heading is taken at once: heading within 10° RMS over the 10 s from a second after it",
          arguments: [1, 2, 3, 5] as [UInt64])
    func firstFitTakenAtOnce(seed: UInt64) throws {
        let r = try IIOMotionTests.ironCase(seed: seed, seconds: 70)
        print("figure: iron case, seed \(seed): first fit at \(r.firstFit.map { "\($0) s" } ?? "never"), heading RMS over the 10 s from a second after it \(r.afterFirstFit)°")
        let fit = try #require(r.firstFit, "no fit in 70 s")
        #expect(fit < 50, "first fit at \(fit) s")
        #expect(r.afterFirstFit < 10, "heading RMS \(r.afterFirstFit)° from \(fit + 1) s to \(fit + 11) s")
    }

    /// The same case in the corrected frame (arbitrary yaw, the field keeping it from drifting):
    /// when the first fit's heading is learned again, the frame's origin moves with it, so the
    /// yaw does not jump. Measured against the arbitrary frame (the gyroscope's yaw alone) fed the
    /// same samples: the largest change of their difference from one estimate to the next (0.75°
    /// and 0.52°; 152° and 148° when the origin stays).
    @Test("In the corrected frame the first fit moves the frame's origin, not the yaw: no step over 2° between estimates in the first 40 s",
          arguments: [1, 5] as [UInt64])
    func firstFitInTheCorrectedFrame(seed: UInt64) throws {
        var imu = try ironCaseIMU(seed: seed).imu
        let rate = 238.0, magnetometerRate = 80.0
        var corrected = DeviceMotionFusion(referenceFrame: .xArbitraryCorrectedZVertical)
        var arbitrary = DeviceMotionFusion(referenceFrame: .xArbitraryZVertical)
        var nextMagnetometer = 0
        var previous: Double?, largest = 0.0, firstFit: Double?
        for k in 0..<Int(40 * rate) {
            let t = Double(k) / rate
            while Double(nextMagnetometer) / magnetometerRate <= t {
                let tm = Double(nextMagnetometer) / magnetometerRate
                corrected.add(magnetometer: MagnetometerData(timestamp: tm, magneticField: imu.magneticField(at: tm)))
                nextMagnetometer += 1
            }
            let a = AccelerometerData(timestamp: t, acceleration: imu.acceleration(at: t))
            let g = GyroData(timestamp: t, rotationRate: imu.rotationRate(at: t))
            var c: DeviceMotion?, r: DeviceMotion?
            corrected.add(accelerometer: a) { _ in }
            corrected.add(gyro: g) { c = $0 }
            arbitrary.add(accelerometer: a) { _ in }
            arbitrary.add(gyro: g) { r = $0 }
            guard let c, let r else { continue }
            if firstFit == nil, c.magneticField.accuracy.rawValue >= MagneticFieldCalibrationAccuracy.low.rawValue { firstFit = t }
            let difference = c.attitude.yaw - r.attitude.yaw
            if let p = previous { largest = max(largest, abs(remainder(difference - p, 2 * .pi)) * 180 / .pi) }
            previous = difference
        }
        print("figure: iron case, seed \(seed), corrected frame: first fit at \(firstFit.map { "\($0) s" } ?? "never"), largest step of the yaw against the arbitrary frame's \(largest)°")
        #expect(firstFit != nil, "no fit in 40 s")
        #expect(largest < 2, "a step of \(largest)°")
    }

    /// Hand-held seed 28: the start-up ramp ends while the hand's acceleration holds the tilt about
    /// 14° off, so the magnetic reference's dip is 79° against the field's 64°, and every sample
    /// after it differs in dip alone (its strength is right).
    @Test("A magnetic reference taken while the start's tilt is off is relearned in seconds: hand-held seed 28's heading within 4° by 10 s")
    func referenceFromATiltedStart() throws {
        let now = try handHeldHeading(seed: 28, seconds: 15, configuration: AttitudeFilter.Configuration())
        var slow = AttitudeFilter.Configuration()
        slow.newFieldTime = 1e9
        let relearnedLate = try handHeldHeading(seed: 28, seconds: 15, configuration: slow)
        print("figure: reference from a tilted start, heading every 2.5 s: \(now.map { String(format: "%.1f", $0) }) (\(relearnedLate.map { String(format: "%.1f", $0) }) relearned after 10 s)")
        withKnownIssue("Known regression (issue O): \(knownRegressionNote) dip-only relearning (magneticDipRelearnTime)", isIntermittent: true) {
            #expect(abs(relearnedLate[3]) > 8, "the case: the reference taken off, the heading 12° off until 10 s: \(relearnedLate)")
            #expect(abs(now[3]) < 4, "heading at 10 s: \(now)")
            #expect(now.dropFirst(4).allSatisfy { abs($0) < 3 }, "\(now)")
        }
    }
}
