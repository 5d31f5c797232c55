internal import CMosquitto
internal import Glibc
internal import Dispatch
import SystemSupport

/// Subscribes to every board under a prefix (`PREFIX/+/+`, QoS 1) in a persistent session, so
/// that what the boards publish while the subscriber is away, or while the broker restarts with
/// persistence on, is delivered when it is back.
///
/// ```swift
/// let subscriber = try MQTTSubscriber(broker: broker, clientID: "collector-lab") { message in
///     print(message.board, message.level, message.payload.count)
/// }
/// …
/// subscriber.stop()
/// ```
///
/// `handler` runs on libmosquitto's network thread, one message at a time, in the order the broker
/// delivered them. QoS 1 is at least once: the same message can arrive again after a reconnect,
/// and the caller drops repeats.
public final class MQTTSubscriber: @unchecked Sendable { // `mosq` is set once in init; afterwards only libmosquitto's thread-safe loop_stop and disconnect are called on it, and destroy in deinit
    /// One message from a board: `PREFIX/<board>/<level>`.
    public struct Message: Sendable {
        /// The board (the topic level after the prefix).
        public var board: String
        /// The last topic level: a sensor, or `status`.
        public var level: String
        /// The payload bytes.
        public var payload: [UInt8]
    }

    /// The connection's state as the subscriber last saw it.
    public struct State: Sendable, Equatable {
        /// Whether it is connected and subscribed.
        public var connected = false
        /// The last error (nil while connected).
        public var lastError: String?
        /// Why it gave up (bad credentials, TLS), if it did.
        public var failure: MQTTPublisher.Failure?
    }

    private let mosq: OpaquePointer
    private let context: Context

    private final class Context: Sendable {
        let prefix: String
        let handler: @Sendable (Message) -> Void
        let state = Locked(State())
        init(prefix: String, handler: @escaping @Sendable (Message) -> Void) { self.prefix = prefix; self.handler = handler }
    }

    /// Connects and subscribes in the background; reconnects by itself.
    /// - Parameters:
    ///   - broker: the broker and the prefix to collect.
    ///   - clientID: a stable identifier: the broker keeps the session (and what arrives while the
    ///     subscriber is away) under it.
    ///   - caFile: the CA certificate for `mqtts://` (nil: the system's store).
    ///   - handler: called with every message, on the network thread.
    /// - Throws: ``MQTTPublisher/Failure`` when the client cannot be set up.
    public init(broker: BrokerAddress, clientID: String, caFile: String? = nil,
                handler: @escaping @Sendable (Message) -> Void) throws(MQTTPublisher.Failure) {
        _ = mosquitto_lib_init()
        context = Context(prefix: broker.prefix, handler: handler)
        guard let m = mosquitto_new(clientID, false, Unmanaged.passUnretained(context).toOpaque()) else {
            throw .system("cannot create an MQTT client: \(errnoText(errno))")
        }
        mosq = m
        if let user = broker.username { mosquitto_username_pw_set(m, user, broker.password) }
        if broker.usesTLS {
            let rc = mosquitto_tls_set(m, caFile ?? "/etc/ssl/certs/ca-certificates.crt", caFile == nil ? "/etc/ssl/certs" : nil, nil, nil, nil)
            if rc != MOSQ_ERR_SUCCESS.rawValue { mosquitto_destroy(m); throw .tls("TLS setup for \(broker) failed: \(String(cString: mosquitto_strerror(rc)))") }
        }
        mosquitto_reconnect_delay_set(m, 1, 4, false)
        mosquitto_connect_callback_set(m) { mosq, obj, rc in
            let context = Unmanaged<Context>.fromOpaque(obj!).takeUnretainedValue()
            guard rc == 0 else {
                let text = String(cString: mosquitto_connack_string(rc))
                context.state.withLock {
                    $0.lastError = "the broker refused the connection: \(text)"
                    if rc == 4 || rc == 5 || rc == 134 || rc == 135 { $0.failure = .notAuthorized($0.lastError!) }
                }
                if rc == 4 || rc == 5 || rc == 134 || rc == 135 { mosquitto_disconnect(mosq) }
                return
            }
            var mid: Int32 = 0
            mosquitto_subscribe(mosq, &mid, "\(context.prefix)/+/+", 1)
            context.state.withLock { $0.connected = true; $0.lastError = nil }
        }
        mosquitto_disconnect_callback_set(m) { _, obj, rc in
            let context = Unmanaged<Context>.fromOpaque(obj!).takeUnretainedValue()
            context.state.withLock { $0.connected = false; if rc != 0 && $0.lastError == nil { $0.lastError = "lost the connection to the broker" } }
        }
        mosquitto_message_callback_set(m) { _, obj, message in
            guard let message, let topicPointer = message.pointee.topic else { return }
            let context = Unmanaged<Context>.fromOpaque(obj!).takeUnretainedValue()
            let topic = String(cString: topicPointer)
            guard topic.hasPrefix(context.prefix + "/") else { return }
            let levels = topic.dropFirst(context.prefix.count + 1).split(separator: "/", omittingEmptySubsequences: false)
            guard levels.count == 2 else { return }
            let count = Int(message.pointee.payloadlen)
            let payload = count > 0 ? Array(UnsafeRawBufferPointer(start: message.pointee.payload, count: count)) : []
            context.handler(Message(board: String(levels[0]), level: String(levels[1]), payload: payload))
        }
        let rc = mosquitto_connect_async(m, broker.host, Int32(broker.port), 5)
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            context.state.withLock { $0.lastError = "cannot connect to the broker \(broker): \(String(cString: mosquitto_strerror(rc)))" }
        }
        _ = mosquitto_loop_start(m)
    }

    /// The connection's state now.
    public var state: State { context.state.withLock { $0 } }

    /// Disconnects and ends the network thread; the handler is not called after it returns.
    public func stop() {
        mosquitto_disconnect(mosq)
        mosquitto_loop_stop(mosq, false)
    }

    deinit {
        mosquitto_loop_stop(mosq, true)
        mosquitto_destroy(mosq)
    }
}
