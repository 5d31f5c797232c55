internal import CMosquitto
internal import Glibc
internal import Dispatch
import SystemSupport

/// Publishes messages to an MQTT broker at QoS 1 without ever blocking the caller, and loses none
/// while the broker is away: what cannot be sent waits in order, in memory up to a bound, then in
/// a spool file up to a cap (past it, the newest are dropped and counted), and is sent when the
/// broker is back.
///
/// ```swift
/// let broker = try BrokerAddress(parsing: "mqtt://collector.local/lab")
/// let publisher = try MQTTPublisher(MQTTPublisher.Configuration(broker: broker, board: "pi-7"))
/// publisher.send(OutboundMessage(topic: "lab/pi-7/accelerometer", payload: bytes, samples: 32))
/// let totals = publisher.finish(timeout: 5)   // flushes, marks the board offline, disconnects
/// ```
///
/// One thread of the publisher's own runs libmosquitto (its external-loop interface: every
/// libmosquitto call happens there), keeps up to ``Configuration/window`` messages in flight and
/// reconnects with a growing delay. A message sent but not acknowledged when the connection drops
/// is sent again after the reconnect (at-least-once: a subscriber drops repeats by their
/// timestamps). The board's retained status topic holds `{"state":"online",…}` while connected,
/// with the counters of ``Statistics``, and the broker sets it to `{"state":"offline"}` (the last
/// will) when the connection dies; ``finish(timeout:)`` sets it to offline itself.
public final class MQTTPublisher: Sendable {
    /// How to reach the broker and how much to keep while it is away.
    public struct Configuration: Sendable {
        /// The broker and topic prefix.
        public var broker: BrokerAddress
        /// The board's name, the topic level after the prefix (`PREFIX/<board>/…`).
        public var board: String
        /// The MQTT client identifier (default: `motion-monitor-<board>-<pid>`).
        public var clientID: String
        /// TLS files for `mqtts://`: the CA certificate file (nil: the system's CA store) and an
        /// optional client certificate and key.
        public var caFile: String?
        /// The client certificate file (PEM), for brokers that require one.
        public var certificateFile: String?
        /// The client certificate's key file (PEM).
        public var keyFile: String?
        /// The keep-alive interval, seconds: a silent dead link is noticed after about 1.5 times it.
        public var keepAlive: Int = 5
        /// Messages sent and not yet acknowledged, at most.
        public var window: Int = 64
        /// Bytes of messages kept in memory while they cannot be sent.
        public var memoryLimit: Int = 16 << 20
        /// Where messages go beyond ``memoryLimit`` (nil: they are dropped, counted).
        public var spoolPath: String?
        /// The spool file's size cap, bytes.
        public var spoolLimit: Int = 256 << 20

        /// The board's status topic, `PREFIX/<board>/status`.
        public var statusTopic: String { "\(broker.prefix)/\(board)/status" }

        /// - Parameters:
        ///   - broker: the broker and topic prefix.
        ///   - board: the board's name in topics.
        public init(broker: BrokerAddress, board: String) {
            self.broker = broker
            self.board = board
            clientID = "motion-monitor-\(board)-\(getpid())"
        }
    }

    /// What the publisher has done, in samples (a message counts the samples it carries).
    public struct Statistics: Sendable, Equatable {
        /// Samples handed to ``send(_:)``.
        public var submitted = 0
        /// Samples the broker acknowledged.
        public var acknowledged = 0
        /// Samples waiting to be sent or acknowledged.
        public var pending = 0
        /// Samples that went to the spool file because memory was full.
        public var spooled = 0
        /// Samples sent again after a connection was lost before the broker acknowledged them.
        public var resent = 0
        /// Samples dropped because memory and spool were full.
        public var dropped = 0
        /// Connections made.
        public var connections = 0
        /// Whether the publisher is connected now.
        public var connected = false
    }

    /// Why the publisher gave up on the broker.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The broker refused the user name or password, or the client is not authorised.
        case notAuthorized(String)
        /// TLS could not be set up or the handshake failed (a certificate problem, usually).
        case tls(String)
        /// The system refused a resource the publisher needs (a thread, a pipe, memory).
        case system(String)

        /// What happened, naming the broker.
        public var description: String {
            switch self {
            case .notAuthorized(let s), .tls(let s), .system(let s): s
            }
        }
    }

    private let configuration: Configuration
    private let shared: Locked<Shared>
    /// The wake-up pipe: `send` and `finish` write a byte, the network thread polls the read end.
    private let wakeFD: Int32
    private let wakeWriteFD: Int32
    private let done = DispatchSemaphore(value: 0)

    private struct Shared: Sendable {
        var outbox: Outbox
        var inFlight: [(mid: Int32, message: OutboundMessage)] = []
        var statistics = Statistics()
        var finishing = false
        var stopNow = false
        var failure: Failure?
        var lastError: String?
        var ended = false
    }

    /// Starts the publisher's thread, which connects in the background (the first messages wait
    /// for it like any others).
    /// - Parameter configuration: the broker and limits.
    /// - Throws: ``Failure/tls(_:)`` when a TLS file cannot be read.
    public init(_ configuration: Configuration) throws(Failure) {
        Self.libraryReady
        for file in [configuration.caFile, configuration.certificateFile, configuration.keyFile].compactMap({ $0 }) where access(file, R_OK) != 0 {
            throw .tls("cannot read the TLS file \(file): \(errnoText(errno))")
        }
        self.configuration = configuration
        shared = Locked(Shared(outbox: Outbox(memoryLimit: configuration.memoryLimit, spoolPath: configuration.spoolPath,
                                              spoolLimit: configuration.spoolLimit)))
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) != 0 { throw .system("cannot make the MQTT publisher's wake-up pipe: \(errnoText(errno))") }
        for fd in ends { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        wakeFD = ends[0]
        wakeWriteFD = ends[1]
        let loop = NetworkLoop(publisher: self)
        do {
            // A broker that closes the connection must not kill the process with SIGPIPE.
            try OSThread.detached(name: "mqtt-publisher") { blockSIGPIPEOnThisThread(); loop.run() }
        } catch {
            shared.withLock { $0.ended = true }
            done.signal()
            throw .system("cannot start the MQTT publisher's thread: \(errnoText(error.code))")
        }
    }

    deinit {
        close(wakeFD)
        close(wakeWriteFD)
    }

    private static let libraryReady: Void = { _ = mosquitto_lib_init() }()

    /// Queues `message` behind every message not yet sent. Never blocks on the network.
    /// - Parameter message: the topic, payload and the number of samples it carries.
    public func send(_ message: OutboundMessage) {
        shared.withLock {
            $0.statistics.submitted += message.samples
            $0.outbox.append(message)
        }
        wake()
    }

    /// The counters now.
    public var statistics: Statistics { shared.withLock { Self.totals($0) } }

    /// Why the publisher gave up, if it did (it then stops trying, and keeps what it was sent).
    public var failure: Failure? { shared.withLock { $0.failure } }

    /// The last connection error, for a status line (nil while connected).
    public var lastError: String? { shared.withLock { $0.lastError } }

    /// Sends what is waiting, for at most `timeout` seconds, then marks the board offline,
    /// disconnects and ends the thread.
    /// - Parameter timeout: how long to wait for the broker to take what is waiting.
    /// - Returns: the final counters; `pending` is what could not be sent in time.
    @discardableResult
    public func finish(timeout: Double) -> Statistics {
        shared.withLock { $0.finishing = true }
        wake()
        if done.wait(timeout: .now() + max(0, timeout)) == .timedOut {
            shared.withLock { $0.stopNow = true }
            wake()
            _ = done.wait(timeout: .now() + 2)
        }
        return statistics
    }

    private func wake() {
        var one: UInt8 = 1
        _ = write(wakeWriteFD, &one, 1)
    }

    private func drainWake() {
        var bytes = [UInt8](repeating: 0, count: 256)
        while read(wakeFD, &bytes, bytes.count) > 0 {}
    }

    private static func totals(_ s: Shared) -> Statistics {
        var t = s.statistics
        t.pending = s.outbox.pendingSamples + s.inFlight.reduce(0) { $0 + $1.message.samples }
        t.spooled = s.outbox.spooledSamples
        t.dropped = s.outbox.droppedSamples
        return t
    }

    /// The retained status payload: `{"state":"online","spooled":N,"resent":N,"dropped":N}`.
    private func statusPayload(_ state: String) -> [UInt8] {
        let t = statistics
        return Array(#"{"state":"\#(state)","board":"\#(configuration.board)","spooled":\#(t.spooled),"resent":\#(t.resent),"dropped":\#(t.dropped)}"#.utf8)
    }

    // MARK: The network thread

    /// Everything that runs on the publisher's thread; libmosquitto is called from nowhere else.
    private final class NetworkLoop: @unchecked Sendable { // its mutable fields are used on the publisher's thread only (run and libmosquitto's callbacks, which run inside loop calls there)
        let publisher: MQTTPublisher
        var mosq: OpaquePointer?
        var connected = false
        var lost = false
        var refused: Int32?
        var lastLog: String?
        var statusMid: Int32 = -1
        var statusAcknowledged = false
        var backoff = 0.25

        init(publisher: MQTTPublisher) { self.publisher = publisher }

        func run() {
            defer {
                tearDown()
                publisher.shared.withLock { $0.ended = true; $0.outbox.close() }
                publisher.done.signal()
            }
            var offlineSent = false
            var offlineDeadline = 0.0
            while true {
                let (finishing, stopNow, idle) = publisher.shared.withLock { ($0.finishing, $0.stopNow, $0.outbox.isEmpty && $0.inFlight.isEmpty) }
                if stopNow || publisher.failure != nil { return }
                if finishing && idle {
                    // Everything acknowledged: mark the board offline, wait for that too, disconnect.
                    guard let mosq, connected else { return }
                    if !offlineSent {
                        offlineSent = true
                        statusAcknowledged = false
                        var mid: Int32 = 0
                        let payload = publisher.statusPayload("offline")
                        _ = mosquitto_publish(mosq, &mid, publisher.configuration.statusTopic, Int32(payload.count), payload, 1, true)
                        statusMid = mid
                        offlineDeadline = monotonicSeconds() + 2
                    } else if statusAcknowledged || monotonicSeconds() > offlineDeadline {
                        mosquitto_disconnect(mosq)
                        _ = mosquitto_loop_write(mosq, 1)
                        return
                    }
                }
                if mosq == nil {
                    if !connect() {
                        waitForWake(seconds: backoff)
                        backoff = min(backoff * 2, 2)
                        continue
                    }
                }
                if connected { pump() }
                service()
                if let rc = refused {
                    let c = publisher.configuration
                    let text = String(cString: mosquitto_connack_string(rc))
                    if rc == 4 || rc == 5 || rc == 134 || rc == 135 {
                        fail(.notAuthorized("the broker \(c.broker) refused the connection: \(text)"))
                        return
                    }
                    publisher.shared.withLock { $0.lastError = "the broker \(c.broker) refused the connection: \(text)" }
                }
                if lost { connectionLost() }
            }
        }

        /// Creates a client and connects it (the TCP and TLS part blocks; CONNACK comes later).
        func connect() -> Bool {
            let c = publisher.configuration
            let obj = Unmanaged.passUnretained(self).toOpaque()
            guard let m = mosquitto_new(c.clientID, true, obj) else {
                publisher.shared.withLock { $0.lastError = "cannot create an MQTT client: \(errnoText(errno))" }
                return false
            }
            mosq = m
            connected = false; lost = false; refused = nil; lastLog = nil
            mosquitto_connect_callback_set(m) { _, obj, rc in
                let loop = Unmanaged<NetworkLoop>.fromOpaque(obj!).takeUnretainedValue()
                loop.onConnect(rc)
            }
            mosquitto_disconnect_callback_set(m) { _, obj, _ in
                Unmanaged<NetworkLoop>.fromOpaque(obj!).takeUnretainedValue().lost = true
            }
            mosquitto_publish_callback_set(m) { _, obj, mid in
                Unmanaged<NetworkLoop>.fromOpaque(obj!).takeUnretainedValue().onPublish(mid)
            }
            mosquitto_log_callback_set(m) { _, obj, level, text in
                guard level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0, let text else { return }
                Unmanaged<NetworkLoop>.fromOpaque(obj!).takeUnretainedValue().lastLog = String(cString: text)
            }
            if let user = c.broker.username { mosquitto_username_pw_set(m, user, c.broker.password) }
            let will = Array(#"{"state":"offline","board":"\#(c.board)"}"#.utf8)
            mosquitto_will_set(m, c.statusTopic, Int32(will.count), will, 1, true)
            if c.broker.usesTLS {
                let rc = mosquitto_tls_set(m, c.caFile ?? Self.systemCAFile, c.caFile == nil ? "/etc/ssl/certs" : nil,
                                           c.certificateFile, c.keyFile, nil)
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    fail(.tls("TLS setup for \(c.broker) failed: \(String(cString: mosquitto_strerror(rc)))\(lastLog.map { " (\($0))" } ?? "")"))
                    return false
                }
            }
            let rc = mosquitto_connect(m, c.broker.host, Int32(c.broker.port), Int32(c.keepAlive))
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                let why = rc == MOSQ_ERR_ERRNO.rawValue ? errnoText(errno) : String(cString: mosquitto_strerror(rc))
                if rc == MOSQ_ERR_TLS.rawValue || rc == MOSQ_ERR_TLS_HANDSHAKE.rawValue {
                    let detail = lastLog ?? why
                    fail(.tls("the TLS handshake with \(c.broker) failed: \(detail)"))
                } else {
                    publisher.shared.withLock { $0.lastError = "cannot connect to the broker \(c.broker): \(why)" }
                }
                tearDown()
                return false
            }
            return true
        }

        static let systemCAFile = "/etc/ssl/certs/ca-certificates.crt"

        func fail(_ failure: Failure) {
            publisher.shared.withLock { $0.failure = failure; $0.lastError = failure.description }
            tearDown()
        }

        /// CONNACK arrived (inside a libmosquitto call: nothing here may destroy the client).
        func onConnect(_ rc: Int32) {
            guard rc == 0 else {
                refused = rc
                lost = true
                return
            }
            connected = true
            backoff = 0.25
            publisher.shared.withLock { $0.statistics.connections += 1; $0.statistics.connected = true; $0.lastError = nil }
            let payload = publisher.statusPayload("online")
            var mid: Int32 = 0
            _ = mosquitto_publish(mosq, &mid, publisher.configuration.statusTopic, Int32(payload.count), payload, 1, true)
        }

        func onPublish(_ mid: Int32) {
            if mid == statusMid { statusAcknowledged = true }
            publisher.shared.withLock { s in
                if let i = s.inFlight.firstIndex(where: { $0.mid == mid }) {
                    s.statistics.acknowledged += s.inFlight[i].message.samples
                    s.inFlight.remove(at: i)
                }
            }
        }

        /// Hands waiting messages to libmosquitto while the window has room.
        func pump() {
            guard let mosq else { return }
            let window = publisher.configuration.window
            while true {
                let next: OutboundMessage? = publisher.shared.withLock { s in
                    s.inFlight.count < window ? s.outbox.popFirst() : nil
                }
                guard let message = next else { return }
                var mid: Int32 = 0
                let rc = message.payload.withUnsafeBytes { buf in
                    mosquitto_publish(mosq, &mid, message.topic, Int32(buf.count), buf.baseAddress, 1, false)
                }
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    publisher.shared.withLock { $0.outbox.prepend([message]) }
                    lost = true
                    return
                }
                publisher.shared.withLock { $0.inFlight.append((mid, message)) }
            }
        }

        /// Waits for the socket or a wake-up (at most 0.5 s), then lets libmosquitto read, write and
        /// keep the connection alive.
        func service() {
            guard let mosq else { return }
            let sock = mosquitto_socket(mosq)
            guard sock >= 0 else { lost = true; return }
            var fds = [pollfd(fd: sock, events: Int16(POLLIN | (mosquitto_want_write(mosq) ? POLLOUT : 0)), revents: 0),
                       pollfd(fd: publisher.wakeFD, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, 500)
            if n > 0 {
                if fds[1].revents != 0 { publisher.drainWake() }
                if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, mosquitto_loop_read(mosq, 1) != MOSQ_ERR_SUCCESS.rawValue { lost = true }
                if !lost, self.mosq != nil, fds[0].revents & Int16(POLLOUT) != 0, mosquitto_loop_write(mosq, 1) != MOSQ_ERR_SUCCESS.rawValue { lost = true }
            }
            if let m = self.mosq, !lost, mosquitto_loop_misc(m) != MOSQ_ERR_SUCCESS.rawValue { lost = true }
        }

        /// The connection is gone: what was in flight goes back to the front, to be sent again.
        func connectionLost() {
            let why = lastLog
            publisher.shared.withLock { s in
                let unacknowledged = s.inFlight.map(\.message)
                s.statistics.resent += unacknowledged.reduce(0) { $0 + $1.samples }
                s.outbox.prepend(unacknowledged)
                s.inFlight.removeAll()
                s.statistics.connected = false
                if s.lastError == nil { s.lastError = "lost the connection to the broker \(publisher.configuration.broker)\(why.map { ": \($0)" } ?? "")" }
            }
            tearDown()
        }

        func tearDown() {
            if let m = mosq { mosquitto_destroy(m) }
            mosq = nil
            connected = false
            lost = false
            publisher.shared.withLock { $0.statistics.connected = false }
        }

        func waitForWake(seconds: Double) {
            var fd = pollfd(fd: publisher.wakeFD, events: Int16(POLLIN), revents: 0)
            if poll(&fd, 1, Int32(seconds * 1000)) > 0 { publisher.drainWake() }
        }
    }
}
