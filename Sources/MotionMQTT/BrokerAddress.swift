/// Where an MQTT broker is and under which topic prefix samples go:
/// `mqtt://[user[:password]@]host[:port]/PREFIX`, or `mqtts://…` for TLS.
///
/// ```swift
/// let broker = try BrokerAddress(parsing: "mqtt://logger:secret@collector.local/lab")
/// broker.host      // "collector.local"
/// broker.port      // 1883
/// broker.prefix    // "lab"
/// ```
///
/// The prefix is a topic of one or more levels (`lab`, `fleet/vans`) without wildcards: it is
/// published to, so `+` and `#` are refused. User and password may be percent-encoded
/// (`%40` for `@`).
public struct BrokerAddress: Sendable, Equatable, CustomStringConvertible {
    /// Whether the connection uses TLS (`mqtts://`).
    public var usesTLS: Bool
    /// The broker's host name or address (an IPv6 address without its brackets).
    public var host: String
    /// The broker's TCP port: 1883 for `mqtt://`, 8883 for `mqtts://` unless given.
    public var port: Int
    /// The user name to authenticate with, if any.
    public var username: String?
    /// The password to authenticate with, if any.
    public var password: String?
    /// The topic prefix, without leading or trailing `/`.
    public var prefix: String

    /// Parses a broker URL.
    /// - Parameter text: `mqtt://[user[:password]@]host[:port]/PREFIX` or `mqtts://…`.
    /// - Throws: ``BrokerAddressError`` naming what is wrong with the URL.
    public init(parsing text: String) throws(BrokerAddressError) {
        func fail(_ why: String) -> BrokerAddressError { BrokerAddressError(url: text, reason: why) }
        var rest: Substring
        if text.hasPrefix("mqtt://") {
            usesTLS = false; rest = text.dropFirst(7)
        } else if text.hasPrefix("mqtts://") {
            usesTLS = true; rest = text.dropFirst(8)
        } else {
            throw fail("it must begin with mqtt:// or mqtts://")
        }
        guard let slash = rest.firstIndex(of: "/") else { throw fail("it has no topic prefix (mqtt://host/PREFIX)") }
        var authority = rest[..<slash]
        let path = rest[rest.index(after: slash)...]
        username = nil; password = nil
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at]
            authority = authority[authority.index(after: at)...]
            let parts = credentials.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let user = Self.percentDecoded(parts[0]), !user.isEmpty else { throw fail("its user name is empty or badly percent-encoded") }
            username = user
            if parts.count == 2 {
                guard let pass = Self.percentDecoded(parts[1]) else { throw fail("its password is badly percent-encoded") }
                password = pass
            }
        }
        var hostPart = authority
        var portText: Substring?
        if hostPart.hasPrefix("[") {
            guard let close = hostPart.firstIndex(of: "]") else { throw fail("its IPv6 address has no closing ]") }
            let after = hostPart[hostPart.index(after: close)...]
            hostPart = hostPart[hostPart.index(after: hostPart.startIndex)..<close]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("unexpected text after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = hostPart.lastIndex(of: ":") {
            portText = hostPart[hostPart.index(after: colon)...]
            hostPart = hostPart[..<colon]
        }
        guard !hostPart.isEmpty else { throw fail("it has no host") }
        guard !hostPart.contains(where: { $0 == " " || $0 == "/" || $0 == "@" }) else { throw fail("its host '\(hostPart)' is not a host name or address") }
        host = String(hostPart)
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { throw fail("its port '\(portText)' is not a number from 1 to 65535") }
            port = p
        } else {
            port = usesTLS ? 8883 : 1883
        }
        var prefixText = String(path)
        while prefixText.hasSuffix("/") { prefixText.removeLast() }
        guard !prefixText.isEmpty else { throw fail("it has no topic prefix (mqtt://host/PREFIX)") }
        if let problem = Self.topicProblem(prefixText) { throw fail("its topic prefix '\(prefixText)' \(problem)") }
        prefix = prefixText
    }

    /// Why `topic` cannot be published to (wildcards, empty levels, NUL), or nil when it can.
    /// - Parameter topic: a topic name or prefix.
    /// - Returns: a phrase such as "contains the wildcard +", or nil.
    public static func topicProblem(_ topic: String) -> String? {
        if topic.contains("+") { return "contains the wildcard + (a prefix is published to, so it cannot hold wildcards)" }
        if topic.contains("#") { return "contains the wildcard # (a prefix is published to, so it cannot hold wildcards)" }
        if topic.unicodeScalars.contains(where: { $0.value == 0 }) { return "contains a NUL character" }
        if topic.hasPrefix("/") || topic.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            return "has an empty level"
        }
        if topic.utf8.count > 60000 { return "is too long" }
        return nil
    }

    /// The URL without the password.
    public var description: String {
        let scheme = usesTLS ? "mqtts" : "mqtt"
        let user = username.map { "\($0)@" } ?? ""
        let hostText = host.contains(":") ? "[\(host)]" : host
        return "\(scheme)://\(user)\(hostText):\(port)/\(prefix)"
    }

    private static func percentDecoded(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var it = s.utf8.makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                bytes.append(hv << 4 | lv)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A broker URL that cannot be used, and why.
public struct BrokerAddressError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL as given (its password, if any, is not repeated in ``description``).
    public let url: String
    /// What is wrong with it.
    public let reason: String

    /// `the broker URL 'mqtt://host' cannot be used: it has no topic prefix (mqtt://host/PREFIX)`.
    public var description: String {
        "the broker URL '\(Self.redacted(url))' cannot be used: \(reason)"
    }

    private static func redacted(_ url: String) -> String {
        let schemeEnd = url.hasPrefix("mqtts://") ? 8 : url.hasPrefix("mqtt://") ? 7 : 0
        let authority = url.dropFirst(schemeEnd).prefix { $0 != "/" }
        guard schemeEnd > 0, let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return url }
        return String(url[..<colon]) + ":***" + String(url[at...])
    }
}
