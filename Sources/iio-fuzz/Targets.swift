internal import IIOMotion
internal import IIOSimKit
internal import IIOScanFormat
@preconcurrency internal import Glibc

/// One parser (or the scan decoder) under fuzzing, and the properties every input must keep.
///
/// Each check returns the violated properties (empty when the input is handled correctly): an
/// accepted value must be a valid one (finite, the right arity, equal to what an independent
/// oracle — C's `strtod`/`strtoll`, a bit-level decoder written here — makes of the text, and
/// re-parsing its printed form gives it back); a rejected input must really be invalid. A crash
/// or trap inside the library is a failure by itself.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// ``AttributeText.integer``: `raw` files.
    case integer
    /// ``AttributeText.decimal``: `scale`, `offset`, `sampling_frequency`.
    case decimal
    /// ``AttributeText.decimalList``: the lists in `*_available` files.
    case decimalList = "decimal-list"
    /// ``SamplingFrequencies(parsing:zeroMinMaxIsRange:)`` and the frequency a capture then writes.
    case available
    /// ``MountMatrix(parsing:)``.
    case mountMatrix = "mount-matrix"
    /// The `scan_elements/*_type` parser, ``ScanFormat/init(parsing:)``, and the simulator's encoder.
    case scanType = "scan-type"
    /// The capture's scan decoder, over formats and bytes described by ``DecoderInput``.
    case scanDecoder = "scan-decoder"

    /// The target named by the environment variable `IIO_FUZZ_TARGET`, if any.
    static var fromEnvironment: FuzzTarget? {
        getenv("IIO_FUZZ_TARGET").flatMap { FuzzTarget(rawValue: String(cString: $0)) }
    }

    /// The target and its input: `named` with all of `bytes`, else the target the first byte picks
    /// with the rest (nil for an empty input).
    static func select(_ bytes: [UInt8], named: FuzzTarget?) -> (FuzzTarget?, [UInt8]) {
        if let named { return (named, bytes) }
        guard let first = bytes.first else { return (nil, []) }
        return (allCases[Int(first) % allCases.count], Array(bytes.dropFirst()))
    }

    /// The properties `input` violates (empty if none).
    func check(_ input: [UInt8]) -> [String] {
        let text = String(decoding: input, as: UTF8.self)
        switch self {
        case .integer: return TextChecks.integer(text)
        case .decimal: return TextChecks.decimal(text)
        case .decimalList: return TextChecks.decimalList(text)
        case .available: return TextChecks.available(text)
        case .mountMatrix: return TextChecks.mountMatrix(text)
        case .scanType: return TextChecks.scanType(text, seed: input)
        case .scanDecoder: return DecoderChecks.check(DecoderInput(input))
        }
    }
}

/// The text parsers' properties.
enum TextChecks {
    static func quoted(_ s: String) -> String {
        "\"" + s.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? String($0) : "\\u{\(String($0.value, radix: 16))}" }.joined() + "\""
    }

    static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    /// `[+-]?[0-9]+`
    static func isIntegerSyntax(_ s: String) -> Bool {
        var u = Array(s.utf8)[...]
        if let c = u.first, c == UInt8(ascii: "+") || c == UInt8(ascii: "-") { u = u.dropFirst() }
        return !u.isEmpty && u.allSatisfy(isDigit)
    }

    /// `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`, written again here so that
    /// the library's grammar is checked against a second reading of the ABI, and whether the
    /// mantissa has a non-zero digit.
    static func decimalSyntax(_ s: String) -> (valid: Bool, nonZeroMantissa: Bool) {
        let u = Array(s.utf8)
        var i = 0
        if i < u.count, u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-") { i += 1 }
        var digits = 0
        var nonZero = false
        while i < u.count, isDigit(u[i]) { nonZero = nonZero || u[i] != UInt8(ascii: "0"); digits += 1; i += 1 }
        if i < u.count, u[i] == UInt8(ascii: ".") {
            i += 1
            while i < u.count, isDigit(u[i]) { nonZero = nonZero || u[i] != UInt8(ascii: "0"); digits += 1; i += 1 }
        }
        guard digits > 0 else { return (false, false) }
        if i < u.count, u[i] == UInt8(ascii: "e") || u[i] == UInt8(ascii: "E") {
            i += 1
            if i < u.count, u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-") { i += 1 }
            var e = 0
            while i < u.count, isDigit(u[i]) { e += 1; i += 1 }
            guard e > 0 else { return (false, false) }
        }
        return (i == u.count, nonZero)
    }

    /// C's reading of a number the grammar accepted: value and whether it was out of range.
    static func strtodOracle(_ s: String) -> (value: Double, outOfRange: Bool) {
        errno = 0
        let v = strtod(s, nil)
        return (v, errno == ERANGE)
    }

    static func integer(_ text: String) -> [String] {
        var v: [String] = []
        let t = FuzzingEntryPoints.trimmed(text)
        let parsed = FuzzingEntryPoints.integer(text)
        let syntax = isIntegerSyntax(t)
        if let parsed {
            if !syntax { v.append("accepted \(quoted(text)) as \(parsed), but it is not a decimal integer") }
            if FuzzingEntryPoints.integer(String(parsed)) != parsed { v.append("\(parsed) does not re-parse to itself") }
            if syntax {
                errno = 0
                let c = strtoll(t, nil, 10)
                if errno == ERANGE || c != parsed { v.append("\(quoted(text)) read as \(parsed), C reads \(c)") }
            }
        } else if syntax {
            errno = 0
            _ = strtoll(t, nil, 10)
            if errno != ERANGE { v.append("rejected the integer \(quoted(text))") }
        }
        return v
    }

    static func decimal(_ text: String) -> [String] {
        var v: [String] = []
        let t = FuzzingEntryPoints.trimmed(text)
        let parsed = FuzzingEntryPoints.decimal(text)
        let syntax = decimalSyntax(t)
        if let parsed {
            if !parsed.isFinite { v.append("accepted \(quoted(text)) as \(parsed)") }
            if !syntax.valid { v.append("accepted \(quoted(text)) as \(parsed), but it is not a decimal number") }
            if parsed == 0 && syntax.nonZeroMantissa {
                v.append("read \(quoted(text)) as 0: a non-zero number too small for a Double must be rejected, not read as 0")
            }
            if FuzzingEntryPoints.decimal(String(parsed)) != parsed { v.append("\(parsed) does not re-parse to itself") }
            if syntax.valid {
                let c = strtodOracle(t)
                if c.value != parsed { v.append("\(quoted(text)) read as \(parsed), C reads \(c.value)") }
            }
        } else if syntax.valid {
            let c = strtodOracle(t)
            // Rejected rightly only when C overflows, or underflows a non-zero number to 0.
            if c.value.isFinite && !(c.value == 0 && syntax.nonZeroMantissa) {
                v.append("rejected the number \(quoted(text)) (C reads \(c.value))")
            }
        }
        if t.isEmpty && parsed != nil { v.append("accepted an empty text") }
        return v
    }

    /// The tokens of a whitespace-separated list, as the ABI defines `*_available`.
    static func tokens(_ text: String) -> [String] {
        text.split(whereSeparator: { $0.isWhitespace || $0 == "\0" }).map(String.init)
    }

    static func decimalList(_ text: String) -> [String] {
        var v: [String] = []
        let parsed = FuzzingEntryPoints.decimalList(text)
        let items = tokens(FuzzingEntryPoints.trimmed(text))
        let each = items.map { FuzzingEntryPoints.decimal($0) }
        if let parsed {
            if parsed.count != items.count { v.append("\(quoted(text)): \(parsed.count) values from \(items.count) tokens") }
            if parsed.contains(where: { !$0.isFinite }) { v.append("\(quoted(text)): a non-finite value \(parsed)") }
            if each.contains(where: { $0 == nil }) { v.append("\(quoted(text)): accepted a list with a token that is not a number") }
            else if parsed != each.map({ $0! }) { v.append("\(quoted(text)): list \(parsed) differs from its tokens \(each)") }
        } else if !each.contains(where: { $0 == nil }) {
            v.append("rejected the list \(quoted(text)) of numbers \(each)")
        }
        return v
    }

    static func available(_ text: String) -> [String] {
        var v: [String] = []
        for cros in [false, true] {
            let parsed = SamplingFrequencies(parsing: text, zeroMinMaxIsRange: cros)
            let body = FuzzingEntryPoints.trimmed(text)
            switch parsed {
            case nil:
                if !body.hasPrefix("["), let list = FuzzingEntryPoints.decimalList(text), !list.isEmpty {
                    v.append("rejected the list \(quoted(text))")
                }
            case .discrete(let values)?:
                if values.isEmpty || values.contains(where: { !$0.isFinite }) { v.append("\(quoted(text)): bad list \(values)") }
                if body.hasPrefix("[") { v.append("\(quoted(text)): a bracketed text read as a list") }
                if values != FuzzingEntryPoints.decimalList(text) { v.append("\(quoted(text)): list \(values) is not the text's") }
            case .range(let lo, let step, let hi)?:
                if !lo.isFinite || !hi.isFinite || !(step ?? 0).isFinite { v.append("\(quoted(text)): non-finite range") }
                if !(lo <= hi) || (step ?? 0) < 0 { v.append("\(quoted(text)): range \(lo) \(String(describing: step)) \(hi) out of order") }
                if step == nil && !(cros && lo > 0) { v.append("\(quoted(text)): a range without step outside the cros-ec form") }
                if !parsed!.contains(lo) || !parsed!.contains(hi) { v.append("\(quoted(text)): range excludes its ends") }
            }
            guard let parsed else { continue }
            if parsed.description.isEmpty { v.append("empty description") }
            if let m = parsed.minimum, !m.isFinite { v.append("minimum \(m)") }
            if let m = parsed.maximum, !m.isFinite { v.append("maximum \(m)") }
            v += frequencyWrites(parsed, text: text)
        }
        return v
    }

    /// What a capture would write for `available` under a spread of update intervals and
    /// requests: a positive, finite frequency the device lists, as plain decimal text (no
    /// exponent, no `inf`) that reads back as that frequency and never as 0.
    static func frequencyWrites(_ available: SamplingFrequencies, text: String) -> [String] {
        var v: [String] = []
        for interval in [0, 0.0001, 0.02, 0.1, 1, 1000.0] {
            for requested in [nil, 0.5, 100, 1e5] as [Double?] {
                for current in [nil, 0, 100] as [Double?] {
                    guard let (f, written) = FuzzingEntryPoints.frequencyToWrite(
                        available: available, current: current, interval: interval, requested: requested) else { continue }
                    let context = "\(quoted(text)), interval \(interval), request \(String(describing: requested))"
                    if !f.isFinite || f <= 0 { v.append("\(context): would write \(f) Hz"); continue }
                    let u = Array(written.utf8)
                    let plain = !u.isEmpty && u.allSatisfy { isDigit($0) || $0 == UInt8(ascii: ".") } && u.filter { $0 == UInt8(ascii: ".") }.count <= 1
                        && isDigit(u.first!) && isDigit(u.last!)
                    if !plain { v.append("\(context): writes \(quoted(written)) for \(f) Hz, not plain decimal text"); continue }
                    guard let back = FuzzingEntryPoints.decimal(written), back > 0, abs(back - f) <= max(1e-6, 1e-9 * f) else {
                        v.append("\(context): writes \(quoted(written)) for \(f) Hz"); continue
                    }
                    if requested == nil && !available.contains(f) { v.append("\(context): \(f) Hz is not available") }
                }
            }
        }
        return v
    }

    static func mountMatrix(_ text: String) -> [String] {
        var v: [String] = []
        let body = FuzzingEntryPoints.trimmed(text)
        // An independent reading: three `;` rows of three `,` cells, each a number; no zero row.
        let rows = body.split(separator: ";", omittingEmptySubsequences: false).map {
            $0.split(separator: ",", omittingEmptySubsequences: false).map { FuzzingEntryPoints.decimal(FuzzingEntryPoints.trimmed(String($0))) }
        }
        let shapeOK = rows.count == 3 && rows.allSatisfy { $0.count == 3 && !$0.contains(where: { $0 == nil }) }
        let expected = shapeOK ? rows.map { $0.map { $0! } } : nil
        // Valid: no zero row, no value over 1e100 in magnitude (readings would overflow).
        let valid = expected.map { $0.allSatisfy { !$0.allSatisfy { $0 == 0 } && $0.allSatisfy { abs($0) <= 1e100 } } } ?? false
        do throws(MotionError) {
            let m = try MountMatrix(parsing: text)
            if m.rows.count != 3 || m.rows.contains(where: { $0.count != 3 }) { v.append("\(quoted(text)): shape \(m.rows)") }
            if m.rows.joined().contains(where: { !$0.isFinite }) { v.append("\(quoted(text)): non-finite \(m.rows)") }
            if m.rows.contains(where: { $0.allSatisfy { $0 == 0 } }) { v.append("\(quoted(text)): a zero row accepted") }
            if !valid || expected != m.rows { v.append("\(quoted(text)) read as \(m.rows), expected \(String(describing: expected))") }
            do throws(MotionError) {
                let again = try MountMatrix(parsing: m.description)
                if again != m { v.append("\(quoted(text)): printed as \(quoted(m.description)), which reads back as \(again.rows)") }
            } catch {
                v.append("\(quoted(text)): its printed form \(quoted(m.description)) is rejected: \(error)")
            }
            let out = m.apply((x: 1e19, y: -2, z: 3))
            if ![out.x, out.y, out.z].allSatisfy(\.isFinite) { v.append("\(quoted(text)): applied gives \(out)") }
        } catch {
            if valid { v.append("rejected the mount matrix \(quoted(text)): \(error)") }
            if error.code != .invalidAttribute || error.description.isEmpty { v.append("\(quoted(text)): unclear error \(error)") }
        }
        return v
    }

    static func scanType(_ text: String, seed: [UInt8]) -> [String] {
        var v: [String] = []
        let t: ScanFormat
        do {
            t = try ScanFormat(parsing: text)
        } catch let e as ScanFormat.ParseError {
            if e.reason.isEmpty { v.append("\(quoted(text)): an error without a reason") }
            return v
        } catch {
            return ["\(quoted(text)): unexpected error type \(error)"]
        }
        // What the parser accepts, the library's decoder must be able to read.
        if !t.isDecodable {
            v.append("\(quoted(text)) accepted as inconsistent \(t.description)")
            return v
        }
        do {
            let again = try ScanFormat(parsing: t.description)
            if again != t { v.append("\(quoted(text)): printed \(t.description) reads back as \(again.description)") }
        } catch {
            v.append("\(quoted(text)): printed \(t.description) is rejected: \(error)")
        }
        _ = t.byteCount
        // Every value of the range survives encoding and the ABI's reading, whatever fills the upper bits.
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in seed { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        let range = t.valueRange
        for raw in [range.lowerBound, range.upperBound, 0, -1, 1, Int64(bitPattern: h)] {
            let value = t.saturate(raw)
            for upper in [ScanFormat.UpperBits.sign, .zero, .pattern] {
                var buffer = [UInt8](repeating: 0, count: t.storageBits / 8 + 1)
                t.encode(value, into: &buffer, at: 1, upperBits: upper)
                let back = t.decode(buffer, at: 1)
                if back != value { v.append("\(t.description): \(value) encoded (\(upper)) reads back as \(back)") }
            }
        }
        return v
    }
}
