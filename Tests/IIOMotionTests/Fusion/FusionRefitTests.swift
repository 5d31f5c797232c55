import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// Issue O2 (c): the magnetometer calibration's refits run off the sample path, and what the
/// sample path does for them is bounded. Counted in work (refits, stored samples visited), not
/// wall time, on the BROAD trial 08 excerpt (FusionBroadGuardTests, 64 s at 71.4 Hz, 9-axis).
@Suite("Fusion: the magnetometer's refits off the sample path", .timeLimit(.minutes(1)))
struct FusionRefitTests {
    @Test("No refit runs on the sample path; each sample-path call visits at most two passes over the stored samples")
    func refitsOffTheSamplePath() throws {
        let rows = try FusionBroadGuardTests.rows()
        try #require(rows.count > 4000)
        var fusion = DeviceMotionFusion(referenceFrame: .xMagneticNorthZVertical, units: .coreMotion)
        // Stored samples at most: 216 direction bins of 16.
        let capacity = MagnetometerCalibrator.binCount * MagnetometerCalibrator().samplesPerBin
        var estimates = 0, calls = 0, mostInOneCall = 0
        var previous = fusion.calibrationWork
        func measure() {
            let now = fusion.calibrationWork
            mostInOneCall = max(mostInOneCall, now.samplesRevisited - previous.samplesRevisited)
            #expect(now.refitsTaken - previous.refitsTaken <= 1, "more than one refit taken in one call")
            previous = now
            calls += 1
        }
        for r in rows {
            fusion.add(magnetometer: MagnetometerData(timestamp: r.t, magneticField: r.field.magneticField)) { _ in estimates += 1 }
            measure()
            let a = (-1 / standardGravity) * r.accel
            fusion.add(accelerometer: AccelerometerData(timestamp: r.t, acceleration: a.acceleration)) { _ in estimates += 1 }
            measure()
            fusion.add(gyro: GyroData(timestamp: r.t, rotationRate: r.gyro.rotationRate)) { _ in estimates += 1 }
            measure()
        }
        let work = fusion.calibrationWork
        print("figure: BROAD trial 08 excerpt, 9-axis: \(work.refitsStarted) refits started off the sample path, \(work.refitsTaken) taken, \(work.refitsInPlace) in place; \(work.samplesRevisited) stored samples visited on the sample path over \(calls) calls (\(Double(work.samplesRevisited) / Double(calls)) per call, at most \(mostInOneCall) in one; \(capacity) stored at most)")
        #expect(estimates > 4000)
        #expect(work.refitsInPlace == 0)
        // 64 s, a refit every 2 s of the magnetometer's time.
        #expect(work.refitsStarted >= 20)
        #expect(work.refitsTaken >= work.refitsStarted - 1)
        #expect(mostInOneCall <= 2 * capacity)
        #expect(work.samplesRevisited <= 2 * capacity * work.refitsTaken)
    }

    @Test("A refit fitted on a copy and adopted later gives what the same refit in place gives when nothing came between")
    func adoptedEqualsInPlace() throws {
        let rows = try FusionBroadGuardTests.rows()
        var inPlace = MagnetometerCalibrator(), deferred = MagnetometerCalibrator()
        deferred.fitsInPlace = false
        var adopted = 0
        for r in rows.prefix(3000) {
            let g = (1 / r.accel.length) * r.accel
            let a = inPlace.add(r.field, gravity: g), b = deferred.add(r.field, gravity: g)
            #expect(a == b)
            if deferred.isRefitDue {
                deferred.adopt(deferred.takeRefit().refitted())
                adopted += 1
            }
            #expect(deferred.offset == inPlace.offset && deferred.softIron == inPlace.softIron
                    && deferred.accuracy == inPlace.accuracy && deferred.coverage == inPlace.coverage)
        }
        #expect(adopted > 10)
        #expect(inPlace.refitsInPlace == adopted && deferred.refitsInPlace == 0)
        #expect(inPlace.accuracy != .uncalibrated)
    }
}
