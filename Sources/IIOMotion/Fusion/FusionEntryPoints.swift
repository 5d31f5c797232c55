/// Device motion's filter on recorded samples, for `motion-truth --offline` (the filter re-run on
/// a `motion-truth --record` file, to compare with the open filters on the same samples) and
/// `motion-truth --cost` (its time per update): thin `package` wrappers over exactly the code
/// the library runs. Nothing here is used by the library itself.
package enum FusionEntryPoints {
    /// One recorded sample: seconds, the sensor (0 accelerometer in g with Core Motion's sign,
    /// 1 gyroscope in rad/s, 2 magnetometer in µT), and x, y, z.
    package struct Sample: Sendable {
        package var timestamp: Double
        package var sensor: Int
        package var x: Double
        package var y: Double
        package var z: Double

        package init(timestamp: Double, sensor: Int, x: Double, y: Double, z: Double) {
            self.timestamp = timestamp
            self.sensor = sensor
            self.x = x
            self.y = y
            self.z = z
        }
    }

    /// Runs device motion's fusion (aligner and filter, default configuration) over `samples`
    /// in their order and hands each estimate to `emit`. `magnetometerDelay` (seconds) hands
    /// each magnetometer sample over that much after its time, as a magnetometer read in slower
    /// refills than the gyroscope arrives live; `overrides["refill"]` (seconds) replays every
    /// sensor in refills of that length.
    package static func run(_ samples: [Sample], frame: AttitudeReferenceFrame, overrides: [String: Double] = [:],
                            magnetometerDelay: Double = 0, emit: (DeviceMotion) -> Void) {
        var c = AttitudeFilter.Configuration()
        for (k, v) in overrides {
            switch k {
            case "tau": c.accelerometerTimeConstant = v
            case "taumax": c.maximumAccelerometerTimeConstant = v
            case "resid": c.accelerationResidual = v * .pi / 180
            case "gate": c.biasGate = v
            case "b0": c.initialBiasDeviation = v * .pi / 180
            case "walk": c.biasRandomWalk = v * .pi / 180
            case "win": c.biasWindow = v
            case "mn": c.biasMotionNoise = v * .pi / 180
            case "qn": c.quietMotionNoise = v * .pi / 180
            case "linsat": c.linearNoiseSaturation = v
            case "rdev": c.restGyroDeviation = v * .pi / 180
            case "rwin": c.restWindow = v
            case "rtau": c.restFilterTimeConstant = v
            case "rn": c.restNoise = v * .pi / 180
            case "learn": c.learnsBias = v != 0
            case "remove": c.removesBiasResponse = v != 0
            case "rectime": c.accelerationRecoveryTime = v
            case "cap0": c.correctionRateLimit = v * .pi / 180
            case "capk": c.correctionRateLimitPerBiasDeviation = v
            case "capshare": c.limitedShare = v
            case "reclen": c.recoveryLengthShare = v
            case "cone": c.conesRotation = v != 0
            case "held": c.heldWeight = v
            case "held6": c.heldWeightWithoutMagnetometer = v
            case "rangle": c.restAngleDeviation = v * .pi / 180
            case "tilt0": c.initialTiltDeviation = v * .pi / 180
            case "recangle": c.recoveryAngle = v * .pi / 180
            case "mag": c.magnetometerGain = v
            case "hres": c.headingResidual = v * .pi / 180
            case "taum": c.maximumMagnetometerTimeConstant = v
            case "hn": c.headingBiasNoise = v * .pi / 180
            case "hclip": c.headingBiasClip = v
            case "magcal": c.calibratesMagnetometer = v != 0
            case "rcap": c.restTurnDeviation = v * .pi / 180
            case "turn": c.turnNoise = v
            case "leak": c.tiltLeak = v
            default: break
            }
        }
        var fusion = DeviceMotionFusion(referenceFrame: frame, units: .coreMotion, configuration: c)
        // The order the samples reach the fusion: each at its release time (its own time, the
        // magnetometer's `magnetometerDelay` later; with refills, the end of the sensor's refill),
        // samples released together in their recorded order.
        let refill = overrides["refill"] ?? 0
        func release(_ s: Sample) -> Double {
            let t = s.timestamp + (s.sensor == 2 ? magnetometerDelay : 0)
            guard refill > 0 else { return t }
            // Each sensor read in refills of `refill` seconds, the three capture threads a third
            // of a refill apart (phases: overrides "phase0", "phase1", "phase2", in refills).
            let phase = (overrides["phase\(s.sensor)"] ?? Double(s.sensor) / 3) * refill
            return ((t - phase) / refill).rounded(.up) * refill + phase
        }
        let ordered = refill > 0 || magnetometerDelay > 0
            ? samples.enumerated().sorted { a, b in
                let ra = release(a.element), rb = release(b.element)
                return ra != rb ? ra < rb : a.offset < b.offset
            }.map(\.element)
            : samples
        for s in ordered {
            switch s.sensor {
            case 0: fusion.add(accelerometer: AccelerometerData(timestamp: s.timestamp, acceleration: Acceleration(x: s.x, y: s.y, z: s.z)), emit: emit)
            case 1: fusion.add(gyro: GyroData(timestamp: s.timestamp, rotationRate: RotationRate(x: s.x, y: s.y, z: s.z)), emit: emit)
            default: fusion.add(magnetometer: MagnetometerData(timestamp: s.timestamp, magneticField: MagneticField(x: s.x, y: s.y, z: s.z)))
            }
        }
        fusion.flush(emit: emit)
    }

    /// The filter alone (no aligner) over pairs already aligned: `gyro[i]` with `accel[i]` at
    /// `times[i]`, and with a field, `field[i]` (µT) a magnetometer sample new at that update
    /// (nil: none since the last; the filter learns its calibration from each, as the library
    /// does at the magnetometer's rate): nanoseconds per update, the best of `repeats` runs, and
    /// a checksum of the attitudes (so the work cannot be optimised away).
    package static func cost(times: [Double], gyro: [SIMD3<Double>], accel: [SIMD3<Double>], field: [SIMD3<Double>?]?,
                             repeats: Int, clock: () -> Double) -> (nanoseconds: Double, checksum: Double) {
        var best = Double.infinity
        var checksum = 0.0
        let frame: AttitudeReferenceFrame = field == nil ? .xArbitraryZVertical : .xMagneticNorthZVertical
        for _ in 0..<max(1, repeats) {
            var filter = AttitudeFilter(referenceFrame: frame)
            let start = clock()
            for i in times.indices {
                if let f = field?[i] {
                    filter.update(magnetometerAt: times[i], field: MagneticField(x: f.x, y: f.y, z: f.z))
                }
                let g = gyro[i], a = accel[i]
                if let m = filter.update(timestamp: times[i], rotationRate: RotationRate(x: g.x, y: g.y, z: g.z),
                                         acceleration: Acceleration(x: a.x, y: a.y, z: a.z)) {
                    checksum += m.attitude.quaternion.w
                }
            }
            best = min(best, (clock() - start) / Double(max(times.count, 1)) * 1e9)
        }
        return (best, checksum)
    }
}
