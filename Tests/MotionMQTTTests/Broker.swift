import Foundation
import Synchronization
import Testing

/// A real mosquitto broker on a loopback port of its own, with a config and a persistence folder
/// in a temporary directory; killed when released.
final class Broker: @unchecked Sendable { // used by one test at a time; `process` is replaced only by start/stop on the test's thread
    /// Chosen by `freePort()`; replaced by a new one only when the first start finds it taken.
    private(set) var port: Int
    let directory: URL
    var extraConfig: String
    /// The addresses it listens on (the same port on each; "" for every address).
    var listenAddresses = ["127.0.0.1"]
    private var pid: pid_t?

    static let binary = "/usr/sbin/mosquitto"

    /// Whether mosquitto is installed; under CI=true its absence fails the test instead.
    static func available() -> Bool {
        if FileManager.default.isExecutableFile(atPath: binary) { return true }
        let why = "mosquitto is not installed (apt-get install mosquitto; scripts/install-deps does it)"
        if ProcessInfo.processInfo.environment["CI"] == "true" { Issue.record("\(why): required under CI=true") } else { print("skipping: \(why)") }
        return false
    }

    init(extraConfig: String = "") throws {
        port = try Self.freePort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-test-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.extraConfig = extraConfig
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Whether mosquitto has run on `port` (a restart must keep it: its clients reconnect there).
    private var started = false

    /// Starts mosquitto and waits until it accepts connections. When the first start finds the
    /// port taken (bound by a process outside this test between `freePort()` and mosquitto's
    /// bind), it starts again on another port, up to three times.
    func start() throws {
        for attempt in 1...3 {
            do {
                try startOnce()
                started = true
                return
            } catch BrokerError.didNotStart(let log) where !started && attempt < 3 && log.contains("Address already in use") {
                port = try Self.freePort()
            }
        }
    }

    private func startOnce() throws {
        let config = """
            user \(getuid() == 0 ? "root" : String(cString: getpwuid(getuid())!.pointee.pw_name))
            \(listenAddresses.map { "listener \(port) \($0)" }.joined(separator: "\n"))
            persistence true
            persistence_location \(directory.path)/
            autosave_interval 1
            max_queued_messages 0
            max_inflight_messages 0
            log_dest file \(directory.path)/mosquitto.log
            \(extraConfig.isEmpty ? "allow_anonymous true" : extraConfig)

            """
        try config.write(to: directory.appendingPathComponent("mosquitto.conf"), atomically: true, encoding: .utf8)
        let logStart = log.utf8.count
        pid = try Self.spawn([Self.binary, "-c", directory.appendingPathComponent("mosquitto.conf").path])
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if Self.canConnect(port) { return }
            usleep(20_000)
        }
        stop()
        throw BrokerError.didNotStart(String(decoding: log.utf8.dropFirst(logStart), as: UTF8.self))
    }

    /// Stops mosquitto with SIGTERM (it saves its persistence file) and waits for it to end.
    func stop() {
        guard let p = pid else { return }
        pid = nil
        kill(p, SIGTERM)
        var status: Int32 = 0
        // Bounded: SIGKILL after 5 s.
        for _ in 0..<250 {
            if waitpid(p, &status, WNOHANG) == p { return }
            usleep(20_000)
        }
        kill(p, SIGKILL)
        waitpid(p, &status, 0)
    }

    var log: String { (try? String(contentsOf: directory.appendingPathComponent("mosquitto.log"), encoding: .utf8)) ?? "" }

    enum BrokerError: Error { case didNotStart(String), cannotSpawn(Int32), noFreePort(Range<Int>) }

    /// Starts `argv` with default signal handling and an empty signal mask (a test process's
    /// threads may block or ignore signals, and exec would pass that on), output to /dev/null.
    static func spawn(_ argv: [String], stdout: String = "/dev/null", stderr: String = "/dev/null") throws -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none); sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for a in cArgs { free(a) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, argv[0], &actions, &attributes, &cArgs, environ)
        guard rc == 0 else { throw BrokerError.cannotSpawn(rc) }
        return child
    }

    /// Runs `argv` to its end; its exit status.
    static func run(_ argv: [String]) throws -> Int32 {
        let child = try spawn(argv)
        var status: Int32 = 0
        waitpid(child, &status, 0)
        return (status >> 8) & 0xff
    }

    static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
    }

    /// Ports this process has handed out: two brokers of concurrent tests never share one.
    private static let handedOut = Mutex<Set<Int>>([])

    /// A port nothing listens on, below the kernel's ephemeral range
    /// (`/proc/sys/net/ipv4/ip_local_port_range`). A port from that range can be taken by any
    /// outgoing connection's local end while the broker is down (or before it starts), and
    /// mosquitto's bind then fails with "Address already in use"; ports below it are only ever
    /// taken by an explicit bind.
    static func freePort() throws -> Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) } ?? []
        let ephemeralLow = range.first ?? 32768
        let pool = 10_000..<max(10_001, min(ephemeralLow, 65_536))
        for _ in 0..<200 {
            let port = Int.random(in: pool)
            guard canBind(port) else { continue }
            let fresh = handedOut.withLock { $0.insert(port).inserted }
            if fresh { return port }
        }
        throw BrokerError.noFreePort(pool)
    }

    /// Whether a listening socket could bind `port` on every address now. Its socket is
    /// close-on-exec: a child spawned by another test while it is open must not inherit it, or
    /// the port stays bound for that child's lifetime and mosquitto's bind fails.
    static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = INADDR_ANY
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
    }
}
