internal import Glibc

/// How long the magnetometer's samples lag the gyroscope's (seconds), learned from the samples.
///
/// A magnetometer's timestamp is often later than the field it measured: a conversion that takes
/// milliseconds before the read (AK8975: about 7 ms), a low-pass filter's group delay, or a
/// sensor hub stamping its samples on arrival. While the device turns, a field sample `τ` late is
/// the field turned back by `τ` of the rotation: at 3 rad/s, 9 ms is 1.5° of heading, and pairs
/// of samples the calibrator relates by the gyroscope's turn are off by as much. The lag is a
/// property of the hardware, so it is measured, not assumed (0 until it is known).
///
/// The measurement: a calibrated field `p` is a fixed vector seen from the turning device, so
/// `ṗ = −ω × p`, and a sample `τ` late is `p(t − τ) ≈ p(t) + τ ω × p(t)`. For a sample and one
/// about ``pairInterval`` before it, with `d` the gyroscope's turn between them (the earlier
/// sample's axes to the later's), `p₂ − dᵀp₁ = τ (ω₂ × p₂ − dᵀ(ω₁ × p₁))` to first order: one
/// unknown, three equations per pair, solved by least squares over the pairs, forgetting them
/// over ``memory`` seconds. A steady turn about a fixed axis does not show a lag (both samples
/// are turned alike); changes of rate and axis do. The estimate is used once its standard error
/// is below ``precision`` and it is within ``maximum``; samples whose strength is more than
/// ``strengthTolerance`` off the calibration's (a disturbance) are not used.
struct MagnetometerLag: Sendable {
    /// Seconds between the samples of a pair: long enough for a turn to show, short enough for
    /// the gyroscope's bias to turn it little (0.1°/s over 0.1 s is 10⁻⁴°).
    static let pairInterval = 0.1
    /// Seconds of the magnetometer's time over which pairs are forgotten: the lag is the
    /// hardware's, so a long memory; a device's pauses add nothing.
    static let memory = 120.0
    /// The standard error (seconds) below which the estimate is used.
    static let precision = 0.001
    /// The largest lag taken as one (seconds); beyond it the samples' clocks differ, which is not
    /// a lag to correct here.
    static let maximum = 0.05
    /// How far (a share) a sample's calibrated strength may be from the calibration's to be used.
    static let strengthTolerance = 0.05
    /// Recent samples kept to pair with (at 1 kHz, 0.13 s of them).
    static let recentLimit = 128

    /// The lag in use (seconds): the latest estimate precise enough, 0 before there is one.
    private(set) var seconds = 0.0
    /// Whether ``seconds`` is a measurement (this run's, or a saved one, ``start(from:)``).
    private(set) var isKnown = false
    /// The least-squares sums: gᵀy, gᵀg, yᵀy, and the equations counted (all forgetting).
    private var gy = 0.0, gg = 0.0, yy = 0.0, equations = 0.0
    /// The recent samples, a ring of `count` from `start` (allocated once).
    private var times: [Double]
    private var fields: [Vector3]
    private var attitudes: [Quaternion]
    private var rates: [Vector3]
    private var start = 0, count = 0

    init() {
        times = [Double](repeating: -.infinity, count: Self.recentLimit)
        fields = [Vector3](repeating: .zero, count: Self.recentLimit)
        attitudes = [Quaternion](repeating: .identity, count: Self.recentLimit)
        rates = [Vector3](repeating: .zero, count: Self.recentLimit)
    }

    /// Notes a calibrated field sample at `time` (its own timestamp), the gyroscope's attitude
    /// then (device to reference) and the rotation rate then (rad/s, bias-corrected);
    /// `strength` is the calibration's field strength.
    mutating func add(time: Double, field p: Vector3, attitude: Quaternion, rate: Vector3, strength: Double) {
        let newest = count == 0 ? -Double.infinity : times[(start + count - 1) % Self.recentLimit]
        guard time > newest, time.isFinite, p.isFinite, rate.isFinite, strength > 0,
              abs(p.length - strength) <= Self.strengthTolerance * strength else { return }
        defer {
            let slot: Int
            if count == Self.recentLimit {
                slot = start
                start = (start + 1) % Self.recentLimit
            } else {
                slot = (start + count) % Self.recentLimit
                count += 1
            }
            times[slot] = time
            fields[slot] = p
            attitudes[slot] = attitude
            rates[slot] = rate
        }
        // The newest kept sample at least a pair's interval older.
        var found: Int?
        var i = count
        while i > 0 {
            i -= 1
            let slot = (start + i) % Self.recentLimit
            if time - times[slot] >= Self.pairInterval {
                found = slot
                break
            }
        }
        guard let e = found, time - times[e] <= 2 * Self.pairInterval else { return }
        let d = attitudes[e].conjugate.multiplied(by: attitude).normalized
        let y = p - d.inverseRotate(fields[e])
        let g = rate.cross(p) - d.inverseRotate(rates[e].cross(fields[e]))
        let keep = exp(-max(time - newest, 0) / Self.memory)
        gy = keep * gy + g.dot(y)
        gg = keep * gg + g.dot(g)
        yy = keep * yy + y.dot(y)
        equations = keep * equations + 3
        guard gg > 0, equations > 30 else { return }
        let tau = gy / gg
        let residual = max(yy - tau * gy, 0) / max(equations - 1, 1)
        if residual / gg <= Self.precision * Self.precision, abs(tau) <= Self.maximum {
            seconds = tau
            isKnown = true
        }
    }

    /// Uses a lag measured before (saved with the calibration) until this run's own estimate is
    /// precise enough to replace it; one outside ``maximum`` is not used.
    mutating func start(from saved: Double) {
        guard saved.isFinite, abs(saved) <= Self.maximum else { return }
        seconds = saved
        isKnown = true
    }

    /// Pairs no sample with one before now (a gap in the estimates: the turn over it is unknown).
    mutating func breakPairs() {
        start = 0
        count = 0
    }
}
