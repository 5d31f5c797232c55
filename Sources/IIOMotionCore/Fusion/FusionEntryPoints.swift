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

    /// Runs device motion's fusion (aligner and filter, with `configuration`) over `samples`
    /// in their order and hands each estimate to `emit`. `magnetometerDelay` (seconds) hands
    /// each magnetometer sample over that much after its time, as a magnetometer read in slower
    /// refills than the gyroscope arrives live; `refill` (seconds) replays every sensor in
    /// refills of that length, sensor k's refills `phases[k]` refills late (default k/3).
    package static func run(_ samples: [Sample], frame: AttitudeReferenceFrame,
                            configuration c: AttitudeFilter.Configuration = .init(),
                            refill: Double = 0, phases: [Double]? = nil,
                            magnetometerDelay: Double = 0, emit: (DeviceMotion) -> Void) {
        var fusion = DeviceMotionFusion(referenceFrame: frame, units: .coreMotion, configuration: c)
        // The order the samples reach the fusion: each at its release time (its own time, the
        // magnetometer's `magnetometerDelay` later; with refills, the end of the sensor's refill),
        // samples released together in their recorded order.
        func release(_ s: Sample) -> Double {
            let t = s.timestamp + (s.sensor == 2 ? magnetometerDelay : 0)
            guard refill > 0 else { return t }
            // Each sensor read in refills of `refill` seconds, the three capture threads a third
            // of a refill apart unless `phases` says otherwise (in refills).
            let phase = (phases.flatMap { s.sensor < $0.count ? $0[s.sensor] : nil } ?? Double(s.sensor) / 3) * refill
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
            default: fusion.add(magnetometer: MagnetometerData(timestamp: s.timestamp, magneticField: MagneticField(x: s.x, y: s.y, z: s.z)), emit: emit)
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
        let frame: AttitudeReferenceFrame = field == nil ? .xArbitraryZVertical : .xMagneticNorthZVertical
        return timeUpdates(of: { AttitudeFilter(referenceFrame: frame) }, times: times, gyro: gyro, accel: accel,
                           field: field, repeats: repeats, clock: clock)
    }

    /// The attitude filter's own 9-axis update, as ``DeviceMotionFusion`` runs it: applying a
    /// fixed calibration (what device motion learned over `samples`), learning none. Pairs and
    /// fields as for ``cost(times:gyro:accel:field:repeats:clock:)``: nanoseconds per update (per
    /// gyroscope sample, the magnetometer's updates included), the best of `repeats` runs.
    package static func appliedFilterCost(_ samples: [Sample], times: [Double], gyro: [SIMD3<Double>], accel: [SIMD3<Double>],
                                          field: [SIMD3<Double>?], repeats: Int,
                                          clock: () -> Double) -> (nanoseconds: Double, checksum: Double) {
        let calibration = learnedCalibration(samples)
        return timeUpdates(of: {
            var filter = AttitudeFilter(referenceFrame: .xMagneticNorthZVertical)
            filter.magnetometerCalibration = calibration
            return filter
        }, times: times, gyro: gyro, accel: accel, field: field, repeats: repeats, clock: clock)
    }

    /// Times `repeats` runs of a fresh filter from `make` over the aligned pairs (and fields, one
    /// new at an update or nil), the filter made outside the timed loop: nanoseconds per update,
    /// the best run, and a checksum of the attitudes.
    private static func timeUpdates(of make: () -> AttitudeFilter, times: [Double], gyro: [SIMD3<Double>], accel: [SIMD3<Double>],
                                    field: [SIMD3<Double>?]?, repeats: Int, clock: () -> Double) -> (nanoseconds: Double, checksum: Double) {
        var best = Double.infinity
        var checksum = 0.0
        for _ in 0..<max(1, repeats) {
            var filter = make()
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

    /// The calibration device motion (9-axis) has learned at the end of `samples`, as its filter applies it.
    private static func learnedCalibration(_ samples: [Sample]) -> MagnetometerCalibrator {
        var fusion = DeviceMotionFusion(referenceFrame: .xMagneticNorthZVertical, units: .coreMotion)
        for s in samples {
            switch s.sensor {
            case 0: fusion.add(accelerometer: AccelerometerData(timestamp: s.timestamp, acceleration: Acceleration(x: s.x, y: s.y, z: s.z))) { _ in }
            case 1: fusion.add(gyro: GyroData(timestamp: s.timestamp, rotationRate: RotationRate(x: s.x, y: s.y, z: s.z))) { _ in }
            default: fusion.add(magnetometer: MagnetometerData(timestamp: s.timestamp, magneticField: MagneticField(x: s.x, y: s.y, z: s.z))) { _ in }
            }
        }
        fusion.flush { _ in }
        return fusion.magnetometerCalibration
    }

    /// The magnetometer calibrator's ``MagnetometerCalibrator/add(_:gravity:turn:turnRateCovariance:)``
    /// alone, as device motion feeds it: each magnetometer sample of `samples` with gravity (the
    /// newest accelerometer sample's direction) and the gyroscope's attitude at its time
    /// (the rates integrated), the turns' bias covariance `(0.05 °/s)²`. Its refits run as
    /// device motion runs them, off the sample path: the clock stops while one is fitted, and
    /// runs while its result is adopted (``MagnetometerCalibrator/adopt(_:)``, on the sample
    /// path). Nanoseconds per magnetometer sample, the best of `repeats` runs, and the refits.
    package static func calibratorCost(_ samples: [Sample], repeats: Int,
                                       clock: () -> Double) -> (nanoseconds: Double, refits: Int, checksum: Double) {
        // The inputs first, so that the clock sees the calibrator alone.
        var inputs: [(timestamp: Double, field: Vector3, gravity: Vector3, turn: Quaternion)] = []
        var turn = Quaternion.identity, lastGyro: Double?, gravity = Vector3(0, 0, -1)
        for s in samples {
            switch s.sensor {
            case 0: gravity = Vector3(s.x, s.y, s.z)
            case 1:
                if let t = lastGyro {
                    let v = (s.timestamp - t) * Vector3(s.x, s.y, s.z)
                    let angle = v.length
                    if angle > 0 { turn = turn.multiplied(by: Quaternion(axis: (1 / angle) * v, angle: angle)).normalized }
                }
                lastGyro = s.timestamp
            default: inputs.append((s.timestamp, Vector3(s.x, s.y, s.z), gravity, turn))
            }
        }
        // A refit every ``CalibrationFeed/refitPeriod`` of the magnetometer's time, as the feed sets it.
        let interval = inputs.count > 1 ? (inputs[inputs.count - 1].timestamp - inputs[0].timestamp) / Double(inputs.count - 1) : 1
        let refitEvery = max(40, Int(CalibrationFeed.refitPeriod / max(interval, 1e-4)))
        let deviation = 0.05 * Double.pi / 180
        let covariance = Matrix3.diagonal(deviation * deviation)
        var best = Double.infinity, refits = 0, checksum = 0.0
        for _ in 0..<max(1, repeats) {
            var calibrator = MagnetometerCalibrator()
            calibrator.fitsInPlace = false
            calibrator.refitEvery = refitEvery
            var elapsed = 0.0, n = 0
            var start = clock()
            for input in inputs {
                calibrator.add(input.field, gravity: input.gravity, turn: input.turn, turnRateCovariance: covariance)
                if calibrator.isRefitDue {
                    elapsed += clock() - start
                    let refit = calibrator.takeRefit().refitted()
                    n += 1
                    start = clock()
                    calibrator.adopt(refit)
                }
            }
            elapsed += clock() - start
            best = min(best, elapsed / Double(max(inputs.count, 1)) * 1e9)
            refits = n
            checksum += calibrator.offset.x + calibrator.strength
        }
        return (best, refits, checksum)
    }

    /// The whole of device motion (``DeviceMotionFusion``: aligner, magnetometer merge and
    /// calibration feed, filter) over `samples` in their order: nanoseconds per gyroscope sample
    /// (the best of `repeats` runs, timed by `clock`), and the longest single call in that run
    /// (timed by `callClock`, read twice per call: a cheap one, as reading a thread's CPU time is
    /// a system call that would add its own cost to every sample).
    package static func fusionCost(_ samples: [Sample], frame: AttitudeReferenceFrame, repeats: Int,
                                   clock: () -> Double, callClock: () -> Double) -> (nanoseconds: Double, longestCall: Double, checksum: Double) {
        var best = Double.infinity, longest = 0.0, checksum = 0.0
        let gyros = Double(max(1, samples.filter { $0.sensor == 1 }.count))
        for _ in 0..<max(1, repeats) {
            var fusion = DeviceMotionFusion(referenceFrame: frame, units: .coreMotion)
            var worst = 0.0
            var sum = 0.0
            let start = clock()
            for s in samples {
                let t0 = callClock()
                switch s.sensor {
                case 0: fusion.add(accelerometer: AccelerometerData(timestamp: s.timestamp, acceleration: Acceleration(x: s.x, y: s.y, z: s.z))) { sum += $0.attitude.quaternion.w }
                case 1: fusion.add(gyro: GyroData(timestamp: s.timestamp, rotationRate: RotationRate(x: s.x, y: s.y, z: s.z))) { sum += $0.attitude.quaternion.w }
                default:
                    guard frame != .xArbitraryZVertical else { continue }
                    fusion.add(magnetometer: MagnetometerData(timestamp: s.timestamp, magneticField: MagneticField(x: s.x, y: s.y, z: s.z))) { sum += $0.attitude.quaternion.w }
                }
                worst = max(worst, callClock() - t0)
            }
            let elapsed = (clock() - start) / gyros * 1e9
            if elapsed < best { best = elapsed; longest = worst * 1e9 }
            checksum += sum
        }
        return (best, longest, checksum)
    }
}
