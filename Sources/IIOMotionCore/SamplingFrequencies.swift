/// The sampling frequencies a sensor accepts, from its `*sampling_frequency_available` file, in Hz.
///
/// The IIO ABI allows a discrete list (`"12.5 26 52 104"`) or a range (`"[min step max]"`).
/// ChromeOS EC sensors print a three-value list `"0 min max"` that means "off, or anything from
/// min to max" (the EC rounds up); it is reported as a ``range(minimum:step:maximum:)`` with no
/// step.
public enum SamplingFrequencies: Sendable, Hashable, CustomStringConvertible {
    /// Exactly these values, in the order the driver lists them.
    case discrete([Double])
    /// Any value from `minimum` to `maximum`, in increments of `step` when it is known.
    case range(minimum: Double, step: Double?, maximum: Double)

    /// Parses an `*_available` file.
    /// - Parameters:
    ///   - text: the file's contents.
    ///   - zeroMinMaxIsRange: treat a three-value list `0 a b` with `0 < a ≤ b` as the range
    ///     `a…b` (the ChromeOS EC convention). Discovery sets this for `cros-ec-*` devices.
    /// - Returns: nil if the text is neither a list of numbers nor a `[min step max]` range.
    public init?(parsing text: String, zeroMinMaxIsRange: Bool = false) {
        let body = AttributeText.trimmed(text)
        if body.hasPrefix("[") {
            guard body.hasSuffix("]"),
                  let values = AttributeText.decimalList(body.dropFirst().dropLast()),
                  values.count == 3, values[0] <= values[2], values[1] >= 0
            else { return nil }
            self = .range(minimum: values[0], step: values[1], maximum: values[2])
            return
        }
        guard let values = AttributeText.decimalList(body), !values.isEmpty else { return nil }
        if zeroMinMaxIsRange, values.count == 3, values[0] == 0, values[1] > 0, values[1] <= values[2] {
            self = .range(minimum: values[1], step: nil, maximum: values[2])
            return
        }
        self = .discrete(values)
    }

    /// Whether `frequency` (Hz) is one of the accepted values (or inside the range).
    /// - Parameter frequency: a frequency in Hz.
    /// - Returns: true if the sensor accepts it as is.
    public func contains(_ frequency: Double) -> Bool {
        switch self {
        case .discrete(let values):
            return values.contains { abs($0 - frequency) <= 1e-9 * max(1, abs($0)) }
        case .range(let lo, _, let hi):
            return frequency >= lo && frequency <= hi
        }
    }

    /// The lowest accepted non-zero frequency in Hz.
    public var minimum: Double? {
        switch self {
        case .discrete(let values): values.filter { $0 > 0 }.min()
        case .range(let lo, _, _): lo
        }
    }

    /// The highest accepted frequency in Hz.
    public var maximum: Double? {
        switch self {
        case .discrete(let values): values.max()
        case .range(_, _, let hi): hi
        }
    }

    /// `"12.5, 26, 52 Hz"` or `"12.5–100 Hz"`.
    public var description: String {
        func f(_ v: Double) -> String { v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v) }
        switch self {
        case .discrete(let values):
            return values.map(f).joined(separator: ", ") + " Hz"
        case .range(let lo, let step, let hi):
            return "\(f(lo))–\(f(hi)) Hz" + (step.map { $0 > 0 ? " in steps of \(f($0))" : "" } ?? "")
        }
    }
}
