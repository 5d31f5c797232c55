import Foundation
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

@Suite("Device motion starts without a usable acceleration", .timeLimit(.minutes(3)))
struct FusionStartTests {
    @Test("An accelerometer reading zero (free fall, a broken sensor): estimates start after 0.5 s, level, following the gyroscope; gravity levels them once measured")
    func startsWithoutGravity() {
        var fusion = DeviceMotionFusion(referenceFrame: .xArbitraryZVertical, units: .coreMotion)
        var estimates: [DeviceMotion] = []
        // 1 s at 100 Hz of zero acceleration and a 0.5 rad/s turn about z.
        for i in 0..<100 {
            let t = Double(i) * 0.01
            fusion.add(accelerometer: AccelerometerData(timestamp: t, acceleration: Acceleration(x: 0, y: 0, z: 0))) { estimates.append($0) }
            fusion.add(gyro: GyroData(timestamp: t, rotationRate: RotationRate(x: 0, y: 0, z: 0.5))) { estimates.append($0) }
        }
        let first = estimates.first
        #expect(first.map { $0.timestamp >= 0.5 && $0.timestamp < 0.55 } == true, "the first estimate after 0.5 s: \(String(describing: first))")
        #expect(estimates.count >= 40 && estimates.count <= 52, "\(estimates.count)")
        if let f = first, let l = estimates.last {
            // Level, and the yaw follows the gyroscope: 0.5 rad/s over the time since the start.
            #expect(abs(f.attitude.roll) < 1e-9 && abs(f.attitude.pitch) < 1e-9)
            #expect(abs((l.attitude.yaw - f.attitude.yaw) - 0.5 * (l.timestamp - f.timestamp)) < 0.01)
        }
        // Gravity appears, the device tilted 20° about x: within a few seconds the estimate follows it.
        let tilt = 20 * Double.pi / 180
        estimates.removeAll()
        for i in 100..<600 {
            let t = Double(i) * 0.01
            fusion.add(accelerometer: AccelerometerData(timestamp: t, acceleration: Acceleration(x: 0, y: sin(tilt), z: -cos(tilt)))) { estimates.append($0) }
            fusion.add(gyro: GyroData(timestamp: t, rotationRate: RotationRate(x: 0, y: 0, z: 0))) { estimates.append($0) }
        }
        if let l = estimates.last {
            #expect(abs(l.attitude.pitch + tilt) < 1 * Double.pi / 180 || abs(l.attitude.pitch - tilt) < 1 * Double.pi / 180,
                    "levelled to the measured gravity: pitch \(l.attitude.pitch * 180 / .pi)°")
        }
    }
}


extension FusionStartTests {
    /// Issue O2 (d): a magnetometer whose samples are stamped 1 s ahead of the gyroscope's (another
    /// clock, or a refill far ahead) no longer keeps the magnetic-north frame from starting: the
    /// field's samples are merged by timestamp, so estimates start when the gyroscope reaches the
    /// first field sample's time (or once ``TimestampMerge/fieldLimit`` samples are waiting).
    @Test("North-frame device motion starts when the newest magnetometer sample is 1 s ahead of the gyroscope", .timeLimit(.minutes(1)))
    func startsWithAFieldAhead() {
        var fusion = DeviceMotionFusion(referenceFrame: .xMagneticNorthZVertical, units: .coreMotion)
        var estimates: [DeviceMotion] = []
        for i in 0..<300 {
            let t = Double(i) * 0.01
            if i % 4 == 0 {
                fusion.add(magnetometer: MagnetometerData(timestamp: t + 1, magneticField: MagneticField(x: 0, y: 20, z: -40)))
            }
            fusion.add(accelerometer: AccelerometerData(timestamp: t, acceleration: Acceleration(x: 0, y: 0, z: -1))) { estimates.append($0) }
            fusion.add(gyro: GyroData(timestamp: t, rotationRate: RotationRate(x: 0, y: 0, z: 0))) { estimates.append($0) }
        }
        #expect(estimates.count >= 190, "\(estimates.count) estimates")
        #expect(estimates.first.map { abs($0.timestamp - 1) < 0.02 } == true, "first at \(String(describing: estimates.first?.timestamp))")
        // Face up, the field along +y: the top edge points north, heading 0 (or 360).
        if let last = estimates.last {
            #expect(min(last.heading, 360 - last.heading) < 1, "heading \(last.heading)")
        }
    }
}

/// What the known regressions of issue O have in common: the filter is now VQF's structure
/// (Laidig & Seel, Information Fusion 91, 2023), chosen on real recordings (BROAD, Laidig et al.,
/// Data 2021; scripts/fusion-broad), where it is ahead of the old filter on every group; these
/// rendered-motion assertions encoded mechanisms or tuning of the old filter that it lacks.
let knownRegressionNote = "the VQF-structured filter, chosen on the BROAD recordings, lacks the old filter's"

extension FusionStartTests {
    /// A broken accelerometer (reading zero) and a magnetometer: the first field's reference follows
    /// the field only for the start's first 3 s (``AttitudeFilter/Configuration/accelerometerTimeConstant``
    /// from the first sample, whether gravity was measured or not), so a magnet held near for 3 s
    /// from 10 s (its 30 µT across the device turn the field's heading 56°) is still rejected.
    @Test("Without an accelerometer, a magnet held near after the start is rejected: the first field's reference stands after the first 3 s", .timeLimit(.minutes(1)))
    func firstFieldReferenceWithoutGravity() {
        var fusion = DeviceMotionFusion(referenceFrame: .xMagneticNorthZVertical, units: .coreMotion)
        var worst = 0.0, last: DeviceMotion?
        for i in 0..<1600 {
            let t = Double(i) * 0.01
            if i % 4 == 0 {
                let magnet = t >= 10 && t < 13 ? 30.0 : 0
                fusion.add(magnetometer: MagnetometerData(timestamp: t, magneticField: MagneticField(x: magnet, y: 20, z: -40)))
            }
            fusion.add(accelerometer: AccelerometerData(timestamp: t, acceleration: Acceleration(x: 0, y: 0, z: 0))) { _ in }
            fusion.add(gyro: GyroData(timestamp: t, rotationRate: RotationRate(x: 0, y: 0, z: 0))) { m in
                last = m
                // Face up (assumed), the field along +y: heading 0 (or 360).
                if m.timestamp >= 5 { worst = max(worst, min(m.heading, 360 - m.heading)) }
            }
        }
        #expect(last.map { $0.timestamp > 15 } == true, "estimates until \(String(describing: last?.timestamp))")
        #expect(worst < 2, "heading up to \(worst)° off with the magnet")
    }
}
