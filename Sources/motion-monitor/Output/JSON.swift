/// A JSON value that keeps its object keys in the order given: the output forms of
/// `motion-monitor` are pinned down to the key order, which `JSONEncoder` does not promise.
enum JSONValue: Sendable {
    case null
    case bool(Bool)
    /// Written with Swift's shortest round-trip description, so parsing the text gives back the
    /// same `Double` bit for bit. Infinity and NaN, which JSON cannot carry, are written as `null`.
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    /// A string, or `null` for nil.
    static func string(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }

    /// A number, or `null` for nil.
    static func number(_ d: Double?) -> JSONValue { d.map { .number($0) } ?? .null }

    /// The compact text: no spaces, no newline.
    var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let d): out += Self.number(text: d)
        case .string(let s): Self.write(string: s, to: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += "," }
                Self.write(string: member.key, to: &out)
                out += ":"
                member.value.write(to: &out)
            }
            out += "}"
        }
    }

    /// `1.0`, `-0.98`, `1e-07`: Swift's `description` is the shortest text that parses back to the
    /// same value, and is valid JSON for every finite value.
    static func number(text d: Double) -> String {
        d.isFinite ? d.description : "null"
    }

    private static func write(string s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
