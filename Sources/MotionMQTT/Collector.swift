/// The collector's bookkeeping, without any I/O: turns the messages boards publish (JSON lines,
/// one sample each, as `motion-monitor --json` prints them) into CSV rows or JSON lines with a
/// `board` field, drops QoS 1 redeliveries, and keeps each board's counters for the live table.
///
/// A board publishes each sensor's samples in order, and sends again only what the broker did
/// not acknowledge, so a sample whose timestamp is not after the last one kept for the same
/// board, sensor and device is a redelivery.
public struct Collector: Sendable {
    /// One board as the collector sees it.
    public struct Board: Sendable, Equatable {
        /// `online` or `offline` from the board's status topic (nil before it said).
        public var state: String?
        /// Samples kept.
        public var samples = 0
        /// Redelivered samples dropped.
        public var duplicates = 0
        /// Lines that were not a sample.
        public var malformed = 0
        /// The time the last sample was received (the caller's clock, seconds).
        public var lastReceived: Double?
        /// The status topic's counters, as the board last published them (`spooled`, `resent`,
        /// `dropped`).
        public var reported: [String: Int] = [:]
        /// Receive times of recent samples' messages, for the rate: (time, samples).
        var recent: [(Double, Int)] = []

        /// Samples per second over the last five seconds before `now`.
        public func rate(now: Double) -> Double {
            let window = recent.filter { now - $0.0 <= 5 }
            guard let first = window.first else { return 0 }
            let span = max(now - first.0, 1)
            return Double(window.reduce(0) { $0 + $1.1 }) / span
        }

        public static func == (a: Board, b: Board) -> Bool {
            a.state == b.state && a.samples == b.samples && a.duplicates == b.duplicates && a.malformed == b.malformed
                && a.lastReceived == b.lastReceived && a.reported == b.reported
        }
    }

    /// What the collector writes.
    public enum Output: Sendable {
        /// `board,timestamp,sensor,device,x,y,z` rows (motion-monitor's CSV columns after `board`).
        case csv
        /// motion-monitor's JSON lines with `"board"` first.
        case json
    }

    /// The CSV header line (without its newline).
    public static let csvHeader = "board,timestamp,sensor,device,x,y,z"

    /// The boards seen, by name.
    public private(set) var boards: [String: Board] = [:]
    private var last: [String: Double] = [:]
    /// The output form.
    public let output: Output

    /// - Parameter output: CSV rows or JSON lines.
    public init(output: Output) { self.output = output }

    /// Takes one message and returns the text to write (rows or lines, each ending in a newline).
    /// - Parameters:
    ///   - message: from ``MQTTSubscriber``.
    ///   - now: the receive time, seconds (for the rate and the last sample's age).
    /// - Returns: what to append to the output (empty for a status message or repeats).
    public mutating func take(_ message: MQTTSubscriber.Message, now: Double) -> String {
        var board = boards[message.board] ?? Board()
        defer { boards[message.board] = board }
        if message.level == "status" {
            let text = String(decoding: message.payload, as: UTF8.self)
            let fields = FlatJSON.fields(text) ?? [:]
            board.state = fields["state"].map(FlatJSON.unquoted) ?? text
            for key in ["spooled", "resent", "dropped"] { if let v = fields[key].flatMap({ Int($0) }) { board.reported[key] = v } }
            return ""
        }
        var out = ""
        var kept = 0
        for line in message.payload.split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self)
            guard let fields = FlatJSON.fields(text), let sensorToken = fields["sensor"], let deviceToken = fields["device"],
                  let tsToken = fields["timestamp"], let ts = Double(tsToken) else {
                board.malformed += 1
                continue
            }
            let sensor = FlatJSON.unquoted(sensorToken), device = FlatJSON.unquoted(deviceToken)
            let key = "\(message.board)\u{0}\(sensor)\u{0}\(device)"
            if let previous = last[key], ts <= previous {
                board.duplicates += 1
                continue
            }
            last[key] = ts
            switch output {
            case .json:
                out += "{\"board\":" + FlatJSON.quoted(message.board) + "," + text.dropFirst() + "\n"
            case .csv:
                guard let x = fields["x"], let y = fields["y"], let z = fields["z"] else {
                    // Device motion lines have no x/y/z: they belong in the JSON output only.
                    board.malformed += 1
                    continue
                }
                out += "\(Self.csvField(message.board)),\(Self.csvTimestamp(ts)),\(sensor),\(device),\(x),\(y),\(z)\n"
            }
            kept += 1
        }
        board.samples += kept
        if kept > 0 {
            board.lastReceived = now
            board.recent.append((now, kept))
            if board.recent.count > 4096 { board.recent.removeFirst(board.recent.count - 2048) }
        }
        return out
    }

    /// The live table of boards, one line each after a header line, sorted by name: state, rate
    /// (samples per second over the last five seconds), the last sample's age, samples kept,
    /// repeats dropped, and the counters the board last reported in its status topic (spooled,
    /// resent, dropped past the spool's cap; `-` before it reported them).
    /// - Parameter now: the same clock as ``take(_:now:)``'s, seconds.
    /// - Returns: the lines, each ending in a newline.
    public func table(now: Double) -> String {
        let columns = [("board", 24), ("state", 9), ("rate/s", 10), ("last", 9), ("samples", 12), ("repeats", 9),
                       ("spooled", 10), ("resent", 10), ("dropped", 0)]
        var out = Self.row(columns.map { ($0.0, $0.1) })
        for name in boards.keys.sorted() {
            let b = boards[name]!
            let age = b.lastReceived.map { Self.tenths(now - $0) + " s" } ?? "-"
            let cells = [name, b.state ?? "?", Self.tenths(b.rate(now: now)), age, String(b.samples), String(b.duplicates)]
                + ["spooled", "resent", "dropped"].map { b.reported[$0].map(String.init) ?? "-" }
            out += Self.row(zip(cells, columns).map { ($0, $1.1) })
        }
        return out
    }

    /// Cells padded to their widths (a cell as wide or wider gets one space), the last as it is.
    private static func row(_ cells: [(String, Int)]) -> String {
        var line = ""
        for (i, (text, width)) in cells.enumerated() {
            line += text
            if i < cells.count - 1 { line += String(repeating: " ", count: max(1, width - text.count)) }
        }
        return line + "\n"
    }

    /// `v` with one decimal.
    static func tenths(_ v: Double) -> String {
        let tenths = Int((v * 10).rounded())
        return (tenths < 0 ? "-" : "") + "\(abs(tenths) / 10).\(abs(tenths % 10))"
    }

    /// A board name as a CSV field (quoted when it holds a comma, quote or newline).
    static func csvField(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) else { return s }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Seconds with nine decimals from whole nanoseconds, as motion-monitor's CSV writes them.
    public static func csvTimestamp(_ t: Double) -> String {
        guard t.isFinite, abs(t) < 9e9 else { return t.description }
        let ns = Int64((abs(t) * 1e9).rounded())
        let frac = String(ns % 1_000_000_000)
        return (t < 0 && ns != 0 ? "-" : "") + "\(ns / 1_000_000_000)." + String(repeating: "0", count: 9 - frac.count) + frac
    }
}

private extension String {
    func replacingOccurrences(of a: String, with b: String) -> String {
        split(separator: Character(a), omittingEmptySubsequences: false).joined(separator: b)
    }
}

/// The flat JSON objects motion-monitor writes (string and number members, no nesting beyond what
/// is skipped): member name → the value's raw text (strings keep their quotes).
enum FlatJSON {
    /// The members of `text`, or nil when it is not an object.
    static func fields(_ text: String) -> [String: String]? {
        let b = Array(text.utf8)
        var i = 0
        func skipSpace() { while i < b.count, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0D { i += 1 } }
        func string() -> String? {
            guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
            let start = i
            i += 1
            while i < b.count, b[i] != UInt8(ascii: "\"") { i += b[i] == UInt8(ascii: "\\") ? 2 : 1 }
            guard i < b.count else { return nil }
            i += 1
            return String(decoding: b[start..<i], as: UTF8.self)
        }
        func value() -> String? {
            skipSpace()
            guard i < b.count else { return nil }
            if b[i] == UInt8(ascii: "\"") { return string() }
            if b[i] == UInt8(ascii: "{") || b[i] == UInt8(ascii: "[") {
                let start = i
                var depth = 0
                repeat {
                    if b[i] == UInt8(ascii: "\"") { _ = string(); continue }
                    if b[i] == UInt8(ascii: "{") || b[i] == UInt8(ascii: "[") { depth += 1 }
                    if b[i] == UInt8(ascii: "}") || b[i] == UInt8(ascii: "]") { depth -= 1 }
                    i += 1
                } while i < b.count && depth > 0
                return depth == 0 ? String(decoding: b[start..<i], as: UTF8.self) : nil
            }
            let start = i
            while i < b.count, b[i] != UInt8(ascii: ","), b[i] != UInt8(ascii: "}") { i += 1 }
            let token = String(decoding: b[start..<i], as: UTF8.self)
            return token.isEmpty ? nil : token
        }
        skipSpace()
        guard i < b.count, b[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        var out: [String: String] = [:]
        while true {
            skipSpace()
            if i < b.count, b[i] == UInt8(ascii: "}") { return out }
            guard let key = string() else { return nil }
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            guard let v = value() else { return nil }
            out[unquoted(key)] = v
            skipSpace()
            guard i < b.count else { return nil }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "}") { return out }
            return nil
        }
    }

    /// A string token without its quotes (escapes of `"` and `\` undone).
    static func unquoted(_ token: String) -> String {
        guard token.hasPrefix("\""), token.hasSuffix("\""), token.count >= 2 else { return token }
        var out = ""
        var escaped = false
        for c in token.dropFirst().dropLast() {
            if escaped { out.append(c); escaped = false } else if c == "\\" { escaped = true } else { out.append(c) }
        }
        return out
    }

    /// `s` as a JSON string token.
    static func quoted(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where c.value < 0x20: out += "\\u" + String(repeating: "0", count: 4 - String(c.value, radix: 16).count) + String(c.value, radix: 16)
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }
}
