internal import Glibc

/// A second-order Butterworth low-pass filter of three channels (VQF's, §3.1: cut-off
/// √2/(2π·τ) for a time constant τ, discretised by the bilinear transform), which until τ has
/// passed outputs the plain mean of its inputs (VQF's) and then starts from that mean in steady
/// state, so that its first outputs are not pulled towards zero. The mean weighs every sample
/// alike, which is what a start in motion needs: the user's acceleration averages out of the
/// start's gravity and of the bias learned from it (BROAD's trials started in motion,
/// BENCHMARKS.md); a mean weighted towards its later samples keeps more of it.
struct LowPass: Sendable {
    /// The filter's coefficients for one step length (recomputed when it changes by more than 1 %).
    struct Coefficients: Sendable {
        var b0 = 0.0, b1 = 0.0, b2 = 0.0, a1 = 0.0, a2 = 0.0
        private var dt = 0.0, tau = 0.0

        mutating func update(timeConstant: Double, dt: Double) {
            guard abs(dt - self.dt) > 0.01 * dt || timeConstant != tau else { return }
            self.dt = dt
            tau = timeConstant
            let fc = 2.0.squareRoot() / (2 * .pi * timeConstant)
            let c = tan(.pi * fc * dt)
            let d = c * c + 2.0.squareRoot() * c + 1
            b0 = c * c / d
            b1 = 2 * b0
            b2 = b0
            a1 = 2 * (c * c - 1) / d
            a2 = (1 - 2.0.squareRoot() * c + c * c) / d
        }
    }

    private var s1 = Vector3.zero, s2 = Vector3.zero
    /// Averaging: the time and the number of samples so far (time < 0 once running).
    private var time = 0.0, count = 0.0
    /// The last output.
    private(set) var value = Vector3.zero

    /// Filters `x` (`dt` 0: the first sample, which is the output).
    mutating func filter(_ x: Vector3, _ c: Coefficients, timeConstant: Double, dt: Double) -> Vector3 {
        if time >= 0 {
            time += dt
            count += 1
            value += (1 / count) * (x - value)
            if time >= timeConstant {
                // Steady state at the mean (direct form II transposed).
                s1 = (1 - c.b0) * value
                s2 = (c.b2 - c.a2) * value
                time = -1
            }
            return value
        }
        value = c.b0 * x + s1
        s1 = c.b1 * x - c.a1 * value + s2
        s2 = c.b2 * x - c.a2 * value
        return value
    }

    /// Moves the filter's output, and its state with it, by `d`.
    mutating func shift(by d: Vector3, _ c: Coefficients) {
        value += d
        if time < 0 {
            // In steady state s1 = (1 − b0)·y and s2 = (b2 − a2)·y: the level's step moves them
            // so; a transient is kept.
            s1 += (1 - c.b0) * d
            s2 += (c.b2 - c.a2) * d
        }
    }
}
