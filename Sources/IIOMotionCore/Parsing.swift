/// Strict, locale-independent parsers for the text in IIO sysfs attributes.
///
/// The kernel prints numbers in the C locale ("0.000598", "-1", "100.000000"). These parsers
/// accept exactly that: optional surrounding whitespace (and the trailing NUL that libiio writes),
/// an optional sign, decimal digits, an optional fraction and an optional exponent. Anything else
/// (hex, "nan", "inf", a comma decimal separator, trailing garbage, an empty string) is rejected,
/// so a bad file becomes an error instead of a silent 0.
enum AttributeText {
    /// The attribute text without surrounding whitespace and NUL bytes.
    static func trimmed(_ text: String) -> Substring {
        let isJunk: (Character) -> Bool = { $0.isWhitespace || $0 == "\0" }
        guard let first = text.firstIndex(where: { !isJunk($0) }) else { return "" }
        let last = text.lastIndex(where: { !isJunk($0) })!
        return text[first...last]
    }

    /// Parses a decimal integer such as `"-12"` or `"+16384"`. Returns nil for anything else,
    /// including values that do not fit in 64 bits.
    static func integer(_ text: String) -> Int64? {
        integer(trimmed(text))
    }

    static func integer(_ text: Substring) -> Int64? {
        var body = text
        var negative = false
        if let sign = body.first, sign == "-" || sign == "+" {
            negative = sign == "-"
            body = body.dropFirst()
        }
        guard !body.isEmpty, body.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return Int64(negative ? "-" + body : String(body), radix: 10)
    }

    /// Parses a decimal number such as `"0.000598"`, `"-1"`, `"1e-3"`. Returns nil for anything
    /// else.
    static func decimal(_ text: String) -> Double? {
        decimal(trimmed(text))
    }

    static func decimal(_ text: Substring) -> Double? {
        guard isDecimalSyntax(text) else { return nil }
        // The grammar is checked above, so Swift's parser (locale-independent) only sees
        // plain decimal text.
        guard let value = Double(text), value.isFinite else { return nil }
        // A non-zero number too small for a Double ("1e-400") is out of range like one too large,
        // not a silent 0 (found by scripts/fuzz).
        if value == 0, text.utf8.prefix(while: { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") })
            .contains(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") }) {
            return nil
        }
        return value
    }

    /// `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`
    private static func isDecimalSyntax(_ text: Substring) -> Bool {
        var it = Array(text.utf8)[...]
        func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
        func skipDigits() -> Int {
            var n = 0
            while let c = it.first, isDigit(c) { it = it.dropFirst(); n += 1 }
            return n
        }
        if let c = it.first, c == UInt8(ascii: "+") || c == UInt8(ascii: "-") { it = it.dropFirst() }
        var mantissa = skipDigits()
        if it.first == UInt8(ascii: ".") {
            it = it.dropFirst()
            mantissa += skipDigits()
        }
        guard mantissa > 0 else { return false }
        if let c = it.first, c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
            it = it.dropFirst()
            if let s = it.first, s == UInt8(ascii: "+") || s == UInt8(ascii: "-") { it = it.dropFirst() }
            guard skipDigits() > 0 else { return false }
        }
        return it.isEmpty
    }

    /// Splits a whitespace-separated list (IIO `*_available` files) into numbers; nil if any
    /// element is not a number.
    static func decimalList(_ text: Substring) -> [Double]? {
        var values: [Double] = []
        for token in text.split(whereSeparator: { $0.isWhitespace || $0 == "\0" }) {
            guard let v = decimal(token) else { return nil }
            values.append(v)
        }
        return values
    }
}
