@preconcurrency import Glibc
import IIOMotion
import SystemSupport
import MotionMQTT

/// `--mqtt`: every sample the session takes, published per batch on `PREFIX/<board>/<sensor>`
/// through an ``MQTTPublisher`` (which never blocks: the session's queue hands a message over and
/// goes on; the publisher's thread talks to the broker, and keeps what it cannot send yet).
final class MQTTSink: Sendable {
    let publisher: MQTTPublisher
    let broker: BrokerAddress
    let board: String
    let format: MonitorOptions.MQTTFormat
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at the start, for InfluxDB's wall-clock timestamps.
    private let wallClockOffset: Double

    /// Why the sink could not start: a message and the exit status.
    struct StartError: Error {
        var message: String
        var status: Int32
    }

    /// The exit status for a TLS problem (sysexits' EX_CONFIG: the CA or certificate files do not
    /// fit the broker).
    static let tlsStatus: Int32 = 78
    /// How long the end waits for the broker to take what is still waiting (a second Ctrl-C
    /// ends at once).
    static let flushSeconds = 10.0
    /// The exit status when samples were still unsent at the end (sysexits' EX_TEMPFAIL).
    static let unsentStatus: Int32 = 75

    /// Starts the publisher; with `--mqtt-require`, waits up to 5 s for the broker.
    init(options: MonitorOptions, broker: BrokerAddress) throws(StartError) {
        self.broker = broker
        board = options.board ?? Self.hostName()
        format = options.mqttFormat
        var config = MQTTPublisher.Configuration(broker: broker, board: board)
        config.caFile = options.mqttCAFile
        config.certificateFile = options.mqttCertificate
        config.keyFile = options.mqttKey
        config.spoolLimit = 1 << 30
        config.spoolPath = options.mqttSpool ?? Self.defaultSpool(board: board)
        do {
            publisher = try MQTTPublisher(config)
        } catch {
            throw StartError(message: "\(MonitorOptions.commandName): \(error)", status: Self.tlsStatus)
        }
        var real = timespec(), mono = timespec()
        clock_gettime(CLOCK_REALTIME, &real)
        clock_gettime(CLOCK_MONOTONIC, &mono)
        wallClockOffset = Double(real.tv_sec - mono.tv_sec) + Double(real.tv_nsec - mono.tv_nsec) / 1e9
        if options.mqttRequire {
            let deadline = monotonicSeconds() + 5
            while !publisher.statistics.connected, publisher.failure == nil, monotonicSeconds() < deadline { usleep(20_000) }
            if let problem = startProblem() { publisher.finish(timeout: 0); throw problem }
            if !publisher.statistics.connected {
                let why = publisher.lastError ?? "no answer"
                publisher.finish(timeout: 0)
                throw StartError(message: "\(MonitorOptions.commandName): the broker \(broker) cannot be reached (\(why)); without --mqtt-require the samples would wait for it", status: ExitStatus.unavailable)
            }
        }
    }

    /// A failure the run must end on (credentials, TLS), as a message and status.
    func startProblem() -> StartError? {
        switch publisher.failure {
        case .notAuthorized(let why)?:
            StartError(message: "\(MonitorOptions.commandName): \(why)", status: ExitStatus.permissionDenied)
        case .tls(let why)?, .system(let why)?:
            StartError(message: "\(MonitorOptions.commandName): \(why)", status: Self.tlsStatus)
        case nil: nil
        }
    }

    /// Publishes one batch of `kind`'s samples as one message.
    func append<S: SensorSample>(_ samples: ArraySlice<S>, device: String) {
        guard !samples.isEmpty else { return }
        let kind = S.sensorKind
        var text = ""
        text.reserveCapacity(samples.count * 96)
        for s in samples {
            let v = s.axes
            switch format {
            case .json:
                text += "{\"sensor\":\"\(kind.rawValue)\",\"device\":\"\(device)\",\"timestamp\":\(JSONValue.number(text: s.timestamp)),"
                    + "\"x\":\(JSONValue.number(text: v.x)),\"y\":\(JSONValue.number(text: v.y)),\"z\":\(JSONValue.number(text: v.z))}\n"
            case .influx:
                guard v.x.isFinite, v.y.isFinite, v.z.isFinite else { continue }
                let ns = Int64(((s.timestamp + wallClockOffset) * 1e9).rounded())
                text += "\(kind.rawValue),board=\(Self.influxTag(board)),device=\(Self.influxTag(device)) "
                    + "x=\(v.x),y=\(v.y),z=\(v.z),monotonic=\(s.timestamp) \(ns)\n"
            }
        }
        if text.hasSuffix("\n") { text.removeLast() }
        publisher.send(OutboundMessage(topic: "\(broker.prefix)/\(board)/\(kind.rawValue)", payload: Array(text.utf8), samples: samples.count))
    }

    /// Sends what is waiting (for at most `seconds`), marks the board offline and disconnects.
    /// - Returns: the summary line and the exit status it asks for (0, 75 unsent, 77, 78).
    func finish(seconds: Double) -> (line: String, status: Int32) {
        let t = publisher.finish(timeout: seconds)
        if let problem = startProblem() { return (problem.message, problem.status) }
        var line = "\(MonitorOptions.commandName): mqtt: \(t.acknowledged) of \(t.submitted) samples published to \(broker) as \(board)"
        line += "; \(t.spooled) spooled, \(t.resent) resent, \(t.dropped) dropped"
        if t.pending > 0 {
            line += "; \(t.pending) not sent (\(publisher.lastError ?? "the broker did not take them in time"))"
        }
        return (line + ".", t.pending > 0 || t.dropped > 0 ? Self.unsentStatus : ExitStatus.success)
    }

    /// A tag value of InfluxDB line protocol (commas, spaces and = escaped).
    static func influxTag(_ s: String) -> String {
        var out = ""
        for c in s {
            if c == "," || c == " " || c == "=" { out.append("\\") }
            out.append(c)
        }
        return out
    }

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "board" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let clean = name.filter { $0 != "/" && $0 != "+" && $0 != "#" }
        return clean.isEmpty ? "board" : clean
    }

    static func defaultSpool(board: String) -> String {
        let folder = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) } ?? "/var/tmp"
        return "\(folder)/motion-monitor-\(board)-\(getpid()).spool"
    }
}
