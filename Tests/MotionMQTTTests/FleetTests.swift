import Foundation
import Testing
@testable import MotionMQTT

/// motion-monitor --mqtt on simulated boards (iio-sim) into a real mosquitto, gathered by
/// motion-collect: the collector's rows are compared with each board's own --csv log (which the
/// motion-monitor suites compare with every sample the simulator streamed).
@Suite("motion-monitor --mqtt and motion-collect: many boards, one collector", .serialized)
struct FleetTests {
    static let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    static func product(_ name: String) -> String { products.appendingPathComponent(name).path }

    /// Whether the products and the simulator's namespaces are there (under CI=true, a failure).
    static func ready() -> Bool {
        guard Broker.available() else { return false }
        var why = ""
        for name in ["iio-sim", "motion-monitor", "motion-collect"] where !FileManager.default.isExecutableFile(atPath: product(name)) {
            why = "\(product(name)) is not built (swift build)"
        }
        if why.isEmpty, (try? Broker.run([product("iio-sim"), "--fixture", "bmi160", "--", "/bin/true"])) != 0 {
            why = "iio-sim cannot create its namespaces on this machine"
        }
        if why.isEmpty, getuid() != 0 || !FileManager.default.isExecutableFile(atPath: "/usr/bin/nsenter")
            || !(FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") || FileManager.default.isExecutableFile(atPath: "/sbin/ip")) {
            why = "a board's network (a veth pair into iio-sim's network namespace) needs root, ip (iproute2) and nsenter"
        }
        guard !why.isEmpty else { return true }
        if ProcessInfo.processInfo.environment["CI"] == "true" { Issue.record("\(why): required under CI=true") } else { print("skipping: \(why)") }
        return false
    }

    static let ip = FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip"
    /// This run's veth names and subnets: two test runs on one machine must not take each other's.
    static let tag = Int(getpid()) % 10_000
    static let octet = 64 + Int(getpid()) % 128
    static func hostAddress(_ n: Int) -> String { "10.\(octet).\(n).1" }

    /// Starts a board: iio-sim (its own network namespace) running motion-monitor, and a veth pair
    /// between that namespace (10.X.N.2) and this one (10.X.N.1, ``hostAddress(_:)``), where the broker listens.
    static func startBoard(_ n: Int, dir: String, port: Int, extra: [String], duration: Int, credentials: String = "") throws -> pid_t {
        let pid = try Broker.spawn([product("iio-sim"), "--fixture", "bmi160", "--motion", "rotate:axis=z,dps=90", "--accel-noise", "0.05",
                                    "--", product("motion-monitor"), "--quiet", "--csv", "\(dir)/log.csv", "--rate", "800",
                                    "--duration", "\(duration)", "--mqtt", "mqtt://\(credentials)\(hostAddress(n)):\(port)/fleet", "--board", "b\(n)",
                                    "--mqtt-spool", "\(dir)/spool"] + extra, stderr: "\(dir)/err")
        // unshare execs in place: the pid enters its network namespace moments after the spawn.
        let mine = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/net")
        let deadline = Date().addingTimeInterval(10)
        func namespace() -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/ns/net") }
        while namespace() == nil || namespace() == mine, Date() < deadline { usleep(5_000) }
        _ = try Broker.run([ip, "link", "del", "mh\(n)x\(tag)"])
        for argv in [[ip, "link", "add", "mh\(n)x\(tag)", "type", "veth", "peer", "name", "mb\(n)x\(tag)", "netns", "\(pid)"],
                     [ip, "addr", "add", "\(hostAddress(n))/24", "dev", "mh\(n)x\(tag)"], [ip, "link", "set", "mh\(n)x\(tag)", "up"],
                     ["/usr/bin/nsenter", "-t", "\(pid)", "-n", ip, "addr", "add", "10.\(octet).\(n).2/24", "dev", "mb\(n)x\(tag)"],
                     ["/usr/bin/nsenter", "-t", "\(pid)", "-n", ip, "link", "set", "mb\(n)x\(tag)", "up"]] {
            let status = try Broker.run(argv)
            if status != 0 { throw Broker.BrokerError.didNotStart("\(argv.joined(separator: " ")): exit \(status)") }
        }
        return pid
    }

    static func wait(_ pid: pid_t, seconds: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        var status: Int32 = 0
        while Date() < deadline {
            if waitpid(pid, &status, WNOHANG) == pid { return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f) }
            usleep(20_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        return nil
    }

    /// The data rows of a CSV file (without its header).
    static func rows(_ path: String) -> [Substring] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").dropFirst().map { $0 }
    }

    @Test("eight boards, two sensors each at 800 Hz, a broker restart mid-run: every sample once, in order, exact",
          .timeLimit(.minutes(10)))
    func eightBoardsAcrossARestart() throws {
        guard Self.ready() else { return }
        let broker = try Broker()
        broker.listenAddresses = [""]
        try broker.start()
        let dir = broker.directory.path
        let url = "mqtt://127.0.0.1:\(broker.port)/fleet"
        let collector = try Broker.spawn([Self.product("motion-collect"), url, "--csv", "\(dir)/all.csv", "--client-id", "fleet-test", "--no-table"],
                                         stderr: "\(dir)/collect.err")
        defer { kill(collector, SIGKILL) }
        usleep(500_000)
        let boards = (1...8).map { "b\($0)" }
        var pids: [String: pid_t] = [:]
        for (i, b) in boards.enumerated() {
            try FileManager.default.createDirectory(atPath: "\(dir)/\(b)", withIntermediateDirectories: true)
            pids[b] = try Self.startBoard(i + 1, dir: "\(dir)/\(b)", port: broker.port, extra: [], duration: 8)
        }
        usleep(3_000_000)
        broker.stop()
        usleep(2_000_000)
        try broker.start()
        for b in boards {
            let status = Self.wait(pids[b]!, seconds: 40)
            let err = (try? String(contentsOfFile: "\(dir)/\(b)/err", encoding: .utf8)) ?? ""
            #expect(status == 0, "\(b): exit \(String(describing: status)): \(err.suffix(600))")
            let summary = err.split(separator: "\n").filter { $0.contains("mqtt: ") }
            #expect(summary.count == 1 && summary[0].contains(" 0 dropped") && !summary[0].contains("not sent"), "\(b): \(summary)")
        }
        let expected = boards.reduce(0) { $0 + Self.rows("\(dir)/\($1)/log.csv").count }
        #expect(expected > 8 * 2 * 800 * 6, "the boards logged \(expected) samples")
        let deadline = Date().addingTimeInterval(30)
        while Self.rows("\(dir)/all.csv").count < expected, Date() < deadline { usleep(200_000) }
        kill(collector, SIGTERM)
        let collectStatus = Self.wait(collector, seconds: 5)
        #expect(collectStatus == 0, "motion-collect: \((try? String(contentsOfFile: "\(dir)/collect.err", encoding: .utf8)) ?? "")")
        let all = Self.rows("\(dir)/all.csv")
        #expect(all.count == expected, "the collector has \(all.count) rows, the boards logged \(expected)")
        for b in boards {
            let mine = all.filter { $0.hasPrefix("\(b),") }.map { $0.dropFirst(b.count + 1) }
            let log = Self.rows("\(dir)/\(b)/log.csv")
            for sensor in ["accelerometer", "gyroscope"] {
                let got = mine.filter { $0.contains(",\(sensor),") }
                let want = log.filter { $0.contains(",\(sensor),") }
                let first = got.indices.first { $0 >= want.count || got[$0] != want[$0] }
                #expect(got.count == want.count && first == nil,
                        "\(b) \(sensor): \(got.count) rows collected, \(want.count) logged; first difference at \(String(describing: first))")
            }
        }
    }

    @Test("a malformed URL or a wildcard prefix: exit 64 before anything starts; wrong credentials: exit 77",
          .timeLimit(.minutes(10)))
    func badInput() throws {
        guard Self.ready() else { return }
        let broker = try Broker()
        let dir = broker.directory.path
        for (url, expected) in [("mqtt://127.0.0.1", "no topic prefix"), ("mqtt://h/a/#", "wildcard #"), ("tcp://h/a", "mqtt://")] {
            let pid = try Broker.spawn([Self.product("motion-monitor"), "--mqtt", url, "--duration", "1"], stderr: "\(dir)/err")
            #expect(Self.wait(pid, seconds: 10) == 64)
            let err = try String(contentsOfFile: "\(dir)/err", encoding: .utf8)
            #expect(err.contains(expected), "\(err)")
        }
        let passwords = "\(dir)/passwd"
        #expect(try Broker.run(["/usr/bin/mosquitto_passwd", "-b", "-c", passwords, "logger", "right"]) == 0)
        broker.extraConfig = "allow_anonymous false\npassword_file \(passwords)"
        broker.listenAddresses = [""]
        try broker.start()
        let pid = try Self.startBoard(9, dir: dir, port: broker.port, extra: [], duration: 20, credentials: "logger:wrong@")
        let status = Self.wait(pid, seconds: 15)
        let err = try String(contentsOfFile: "\(dir)/err", encoding: .utf8)
        #expect(status == 77, "\(err)")
        #expect(err.contains("refused the connection") && !err.contains("wrong"), "\(err)")
        broker.stop()
        try FileManager.default.createDirectory(atPath: "\(dir)/u", withIntermediateDirectories: true)
        let unreachable = try Self.startBoard(9, dir: "\(dir)/u", port: broker.port, extra: ["--mqtt-require"], duration: 20)
        let unreachableStatus = Self.wait(unreachable, seconds: 15)
        var unreachableErr = ""
        for _ in 0..<50 where unreachableErr.isEmpty {
            unreachableErr = (try? String(contentsOfFile: "\(dir)/u/err", encoding: .utf8)) ?? ""
            if unreachableErr.isEmpty { usleep(20_000) }
        }
        #expect(unreachableStatus == 69 && unreachableErr.contains("cannot be reached"), "exit \(String(describing: unreachableStatus)): \(unreachableErr)")
    }
}

/// Not under ThreadSanitizer (`scripts/test --tsan`): it checks what arrives across two 30-second
/// outages at 1.6 kHz, which instrumented code adds nothing to; the other MQTT suites run there.
@Suite("motion-monitor --mqtt: 30 s outages at 1.6 kHz", .serialized,
       .disabled(if: ProcessInfo.processInfo.environment["IIOMOTION_TSAN"] == "1", "a 75 s functional run; its races are the other MQTT suites' part"))
struct OutageTests {
    @Test("the broker stopped for 30 s, and one board's network cut for 30 s: nothing lost, nothing repeated",
          .timeLimit(.minutes(10)))
    func thirtySecondOutages() throws {
        guard FleetTests.ready() else { return }
        let broker = try Broker()
        broker.listenAddresses = [""]
        try broker.start()
        let dir = broker.directory.path
        let collector = try Broker.spawn([FleetTests.product("motion-collect"), "mqtt://127.0.0.1:\(broker.port)/fleet", "--csv", "\(dir)/all.csv",
                                          "--client-id", "outage-test", "--no-table"], stderr: "\(dir)/collect.err")
        defer { kill(collector, SIGKILL) }
        usleep(500_000)
        var pids: [pid_t] = []
        for n in 11...12 {
            try FileManager.default.createDirectory(atPath: "\(dir)/b\(n)", withIntermediateDirectories: true)
            pids.append(try FleetTests.startBoard(n, dir: "\(dir)/b\(n)", port: broker.port, extra: ["--rate", "1600"], duration: 75))
        }
        // Board 12's link down (boards 11 and 12: FleetTests' 1–9 run in this process too) from 4 s to 34 s; the broker away from 38 s to 68 s.
        usleep(4_000_000)
        _ = try Broker.run([FleetTests.ip, "link", "set", "mh12x\(FleetTests.tag)", "down"])
        usleep(30_000_000)
        _ = try Broker.run([FleetTests.ip, "link", "set", "mh12x\(FleetTests.tag)", "up"])
        usleep(4_000_000)
        broker.stop()
        usleep(30_000_000)
        try broker.start()
        var expected = 0
        for (i, pid) in pids.enumerated() {
            let status = FleetTests.wait(pid, seconds: 60)
            let err = (try? String(contentsOfFile: "\(dir)/b\(i + 11)/err", encoding: .utf8)) ?? ""
            #expect(status == 0, "b\(i + 11): exit \(String(describing: status)): \(err.suffix(600))")
            let summary = err.split(separator: "\n").filter { $0.contains("mqtt: ") }
            #expect(summary.count == 1 && summary[0].contains(" 0 dropped") && !summary[0].contains("not sent"), "b\(i + 11): \(summary)")
            expected += FleetTests.rows("\(dir)/b\(i + 11)/log.csv").count
        }
        #expect(expected > 2 * 2 * 1600 * 70, "the boards logged \(expected) samples")
        let deadline = Date().addingTimeInterval(40)
        while FleetTests.rows("\(dir)/all.csv").count < expected, Date() < deadline { usleep(200_000) }
        kill(collector, SIGTERM)
        _ = FleetTests.wait(collector, seconds: 5)
        let all = FleetTests.rows("\(dir)/all.csv")
        #expect(all.count == expected, "the collector has \(all.count) rows, the boards logged \(expected)")
        if all.count != expected {
            // What the broker and the collector said about the collector's connection.
            let brokerLog = broker.log.split(separator: "\n").filter { $0.contains("outage-test") || $0.contains("rror") }.suffix(30)
            let collectErr = (try? String(contentsOfFile: "\(dir)/collect.err", encoding: .utf8)) ?? ""
            Issue.record("broker log (collector lines):\n\(brokerLog.joined(separator: "\n"))\nmotion-collect stderr:\n\(collectErr.suffix(1500))")
        }
        for n in 11...12 {
            let mine = all.filter { $0.hasPrefix("b\(n),") }.map { $0.dropFirst(4) }
            let log = FleetTests.rows("\(dir)/b\(n)/log.csv")
            let first = mine.indices.first { $0 >= log.count || mine[$0] != log[$0] }
            // Rows of one board interleave its two sensors as they arrived; compare sensor by sensor.
            for sensor in ["accelerometer", "gyroscope"] {
                let got = mine.filter { $0.contains(",\(sensor),") }, want = log.filter { $0.contains(",\(sensor),") }
                let same = got == want
                #expect(same, "b\(n) \(sensor): \(got.count) collected, \(want.count) logged (first row difference at \(String(describing: first)))")
            }
        }
    }
}

/// scripts/bench-mqtt in its smallest form, so the benchmark does not rot: one board for 2 s, ours
/// and the peer once each; it must print every figure (their values are not judged here).
@Suite("scripts/bench-mqtt runs", .serialized,
       .disabled(if: ProcessInfo.processInfo.environment["IIOMOTION_TSAN"] == "1", "a benchmark's smoke run: nothing of ours to race"))
struct BenchScriptTests {
    @Test("one board for 2 s: every figure is printed for ours and for the peer", .timeLimit(.minutes(10)))
    func smallRun() throws {
        guard FleetTests.ready() else { return }
        for tool in ["/usr/bin/mosquitto_pub", "/usr/bin/mosquitto_sub", "/usr/bin/python3"] where !FileManager.default.isExecutableFile(atPath: tool) {
            let why = "\(tool) is missing (scripts/install-deps installs mosquitto-clients)"
            if ProcessInfo.processInfo.environment["CI"] == "true" { Issue.record("\(why): required under CI=true") } else { print("skipping: \(why)") }
            return
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("bench-mqtt-test-\(getpid()).out").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let pid = try Broker.spawn(["/usr/bin/python3", root.appendingPathComponent("scripts/bench-mqtt").path, "--products", FleetTests.products.path,
                                    "--boards", "1", "--seconds", "2", "--runs", "1"], stdout: out, stderr: out)
        let status = FleetTests.wait(pid, seconds: 120)
        let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        #expect(status == 0, "exit \(String(describing: status)): \(text)")
        let figures = ["samples/s arriving at the collector", "samples lost", "publisher CPU per sample", "publisher CPU: motion-monitor --mqtt vs mosquitto_pub",
                       "the peer's feeder:", "feeder and mosquitto_pub together", "collector CPU", "broker CPU"]
        for figure in figures {
            let line = text.split(separator: "\n").first { $0.contains(figure) }
            let numbers = line.map { l in ["ours ", "peer "].map { l.range(of: $0).map { l[$0.upperBound...].first?.isNumber ?? false } ?? false } }
            #expect(numbers == [true, true], "\(figure): \(String(describing: line))\n\(text)")
        }
    }
}
