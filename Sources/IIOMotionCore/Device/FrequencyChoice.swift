/// The sampling-frequency rule: the lowest available frequency at or above what the update
/// interval needs, never below 10 Hz (drivers stall at 0 or 1 Hz); an explicit request wins.
enum FrequencyChoice {
    static let floor = 10.0

    /// The frequency to write, or nil to leave the device as it is.
    static func choose(available: SamplingFrequencies?, current: Double?, interval: Double, requested: Double?) -> Double? {
        let target: Double
        if let requested {
            target = requested
        } else if interval > 0 {
            target = max(1 / interval, floor)
        } else {
            // Every sample wanted: keep the device's rate unless it is too slow to be trusted.
            if let current, current >= floor { return nil }
            target = floor
        }
        guard let available else { return writable.contains(target) ? target : nil }
        switch available {
        case .discrete(let values):
            let usable = values.filter { writable.contains($0) }.sorted()
            return usable.first { $0 >= target - 1e-9 } ?? usable.last
        case .range(let lo, let step, let hi):
            guard lo <= writable.upperBound, hi >= writable.lowerBound else { return nil }
            var v = min(max(target, lo), hi)
            if let step, step > 0 { v = min(lo + ((v - lo) / step).rounded(.up) * step, hi) }
            return min(max(v, writable.lowerBound), writable.upperBound)
        }
    }

    /// The frequencies a capture writes (Hz): what `format` prints exactly and drivers parse
    /// (whole hertz and micro-hertz). A garbled `*_available` (`1e300`, `1e-9`) once made
    /// `format` trap converting to `Int`, or write "0"; such values are never chosen now.
    static let writable: ClosedRange<Double> = 0.000001...1e9

    /// A frequency as the kernel parses it: decimal, at most six decimals, no exponent
    /// (clamped to ``writable``).
    static func format(_ f: Double) -> String {
        let micro = Int64((min(max(f, writable.lowerBound), writable.upperBound) * 1e6).rounded())
        let (whole, fraction) = micro.quotientAndRemainder(dividingBy: 1_000_000)
        guard fraction != 0 else { return String(whole) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 6 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}
