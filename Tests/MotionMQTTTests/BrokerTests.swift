import Foundation
import Testing
import SystemSupport
@testable import MotionMQTT

/// The publisher and the subscriber against a real mosquitto on loopback.
@Suite("MQTT against a real mosquitto", .serialized)
struct BrokerTests {
    /// Waits up to `seconds` for `condition`.
    static func eventually(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    static func line(_ i: Int) -> String {
        #"{"sensor":"accelerometer","device":"iio:device0","timestamp":\#(Double(i) / 1000),"x":\#(i),"y":1.5,"z":-1.0}"#
    }

    @Test("every message arrives across a broker stopped for 3 s mid-run, once after dropping repeats, in order",
          .timeLimit(.minutes(10)))
    func brokerRestart() throws {
        guard Broker.available() else { return }
        let broker = try Broker()
        try broker.start()
        let address = try BrokerAddress(parsing: "mqtt://127.0.0.1:\(broker.port)/test")
        let collected = Locked(Collector(output: .csv))
        let rows = Locked([String]())
        let subscriber = try MQTTSubscriber(broker: address, clientID: "collector-\(getpid())") { message in
            let text = collected.withLock { $0.take(message, now: 0) }
            rows.withLock { $0 += text.split(separator: "\n").map(String.init) }
        }
        #expect(Self.eventually(5) { subscriber.state.connected }, "the subscriber did not connect: \(subscriber.state)")
        var config = MQTTPublisher.Configuration(broker: address, board: "b1")
        config.spoolPath = broker.directory.appendingPathComponent("spool").path
        config.memoryLimit = 64 << 10
        let publisher = try MQTTPublisher(config)
        let perMessage = 8, messages = 600
        let start = Date()
        for m in 0..<messages {
            let payload = (0..<perMessage).map { Self.line(m * perMessage + $0) }.joined(separator: "\n")
            publisher.send(OutboundMessage(topic: "test/b1/accelerometer", payload: Array(payload.utf8), samples: perMessage))
            if m == 150 { broker.stop() }
            if m == 450 { try broker.start() }
            // 100 messages a second: the broker is away for 3 s.
            let due = start.addingTimeInterval(Double(m + 1) / 100)
            if due > Date() { usleep(useconds_t(due.timeIntervalSinceNow * 1e6)) }
        }
        let totals = publisher.finish(timeout: 15)
        #expect(totals.pending == 0 && totals.acknowledged == messages * perMessage && totals.dropped == 0, "\(totals)")
        #expect(totals.connections >= 2 && totals.spooled > 0, "the outage should have spooled: \(totals)")
        #expect(Self.eventually(15) { rows.withLock { $0.count } >= messages * perMessage }, "\(rows.withLock { $0.count }) rows")
        // The offline status is published after the last samples: wait for it too.
        _ = Self.eventually(5) { collected.withLock { $0.boards["b1"]?.state } == "offline" }
        subscriber.stop()
        let got = rows.withLock { $0 }
        let expected = (0..<messages * perMessage).map { "b1,\(Collector.csvTimestamp(Double($0) / 1000)),accelerometer,iio:device0,\($0),1.5,-1.0" }
        let firstDifference = got.indices.first { $0 >= expected.count || got[$0] != expected[$0] }
        #expect(got.count == expected.count && firstDifference == nil,
                "\(got.count) rows of \(expected.count); first difference at \(String(describing: firstDifference)): \(firstDifference.map { Array(got[max(0, $0 - 2)..<min(got.count, $0 + 3)]) } ?? [])")
        let board = collected.withLock { $0.boards["b1"] }
        #expect(board?.state == "offline", "the publisher's finish sets the status offline: \(String(describing: board))")
    }

    @Test("a broker that is down at start: the publisher keeps trying and spools, then sends everything",
          .timeLimit(.minutes(10)))
    func brokerLate() throws {
        guard Broker.available() else { return }
        let broker = try Broker()
        let address = try BrokerAddress(parsing: "mqtt://127.0.0.1:\(broker.port)/late")
        var config = MQTTPublisher.Configuration(broker: address, board: "b2")
        config.memoryLimit = 1 << 10
        config.spoolPath = broker.directory.appendingPathComponent("spool").path
        let publisher = try MQTTPublisher(config)
        for i in 0..<500 { publisher.send(OutboundMessage(topic: "late/b2/gyroscope", payload: Array(Self.line(i).utf8), samples: 1)) }
        usleep(1_000_000)
        #expect(publisher.statistics.connected == false && publisher.lastError?.contains("cannot connect") == true, "\(String(describing: publisher.lastError))")
        #expect(publisher.statistics.spooled > 0)
        try broker.start()
        let totals = publisher.finish(timeout: 15)
        #expect(totals.acknowledged == 500 && totals.pending == 0 && totals.dropped == 0, "\(totals)")
    }

    @Test("motion-collect's table shows each board's state, samples and the spooled, resent and dropped counts of its status topic",
          .timeLimit(.minutes(10)))
    func collectorTable() throws {
        guard Broker.available() else { return }
        let collect = FleetTests.product("motion-collect")
        guard FileManager.default.isExecutableFile(atPath: collect) else {
            let why = "\(collect) is not built (swift build)"
            if ProcessInfo.processInfo.environment["CI"] == "true" { Issue.record("\(why): required under CI=true") } else { print("skipping: \(why)") }
            return
        }
        let broker = try Broker()
        try broker.start()
        let dir = broker.directory.path
        let collector = try Broker.spawn([collect, "mqtt://127.0.0.1:\(broker.port)/table", "--csv", "\(dir)/all.csv", "--client-id", "table-test",
                                          "--table"], stderr: "\(dir)/collect.err")
        defer { kill(collector, SIGKILL); waitpid(collector, nil, 0) }
        /// The board rows of the last table drawn, by board: their cells split at spaces.
        func lastTable() -> [String: [Substring]] {
            let text = (try? String(contentsOfFile: "\(dir)/collect.err", encoding: .utf8)) ?? ""
            guard let last = text.split(separator: "\u{1B}[H\u{1B}[2J").last, last.contains("connected\n") else { return [:] }
            var rows: [String: [Substring]] = [:]
            for line in last.split(separator: "\n").dropFirst(2) {
                let cells = line.split(separator: " ")
                if let name = cells.first { rows[String(name)] = cells }
            }
            return rows
        }
        func drawn() -> String { (try? String(contentsOfFile: "\(dir)/collect.err", encoding: .utf8)) ?? "" }
        #expect(Self.eventually(10) { drawn().split(separator: "\u{1B}[H\u{1B}[2J").last.map { $0.contains("  connected\nboard ") } == true },
                "the collector's table: \(drawn())")
        let header = drawn().split(separator: "\u{1B}[H\u{1B}[2J").last?.split(separator: "\n").dropFirst().first?.split(separator: " ")
        #expect(header == ["board", "state", "rate/s", "last", "samples", "repeats", "spooled", "resent", "dropped"], "\(drawn())")
        // The collector's session outlives the broker: what is published while the broker is down,
        // then sent, reaches it. Memory and spool hold fewer messages than are sent: some are dropped.
        broker.stop()
        let address = try BrokerAddress(parsing: "mqtt://127.0.0.1:\(broker.port)/table")
        var config = MQTTPublisher.Configuration(broker: address, board: "b5")
        config.memoryLimit = 48 << 10
        config.spoolPath = "\(dir)/spool"
        config.spoolLimit = 48 << 10
        let publisher = try MQTTPublisher(config)
        let perMessage = 8
        for m in 0..<300 {
            let payload = (0..<perMessage).map { Self.line(m * perMessage + $0) }.joined(separator: "\n")
            publisher.send(OutboundMessage(topic: "table/b5/accelerometer", payload: Array(payload.utf8), samples: perMessage))
        }
        let early = publisher.statistics
        #expect(early.spooled > 0 && early.dropped > 0, "\(early)")
        try broker.start()
        let totals = publisher.finish(timeout: 15)
        #expect(totals.pending == 0 && totals.acknowledged == totals.submitted - totals.dropped, "\(totals)")
        let want = ["offline", "\(totals.acknowledged)", "0", "\(totals.spooled)", "\(totals.resent)", "\(totals.dropped)"]
        func got() -> [Substring] {
            guard let cells = lastTable()["b5"], cells.count >= 6 else { return [] }
            return [cells[1]] + cells.suffix(5)
        }
        #expect(Self.eventually(20) { got().map(String.init) == want }, "the table's row for b5 \(lastTable()["b5"] ?? []) should show \(want)")
        kill(collector, SIGTERM)
        #expect(FleetTests.wait(collector, seconds: 5) == 0)
        #expect(FleetTests.rows("\(dir)/all.csv").count == totals.acknowledged)
    }

    @Test("wrong credentials: the publisher gives up with notAuthorized naming the broker", .timeLimit(.minutes(10)))
    func wrongCredentials() throws {
        guard Broker.available() else { return }
        let broker = try Broker()
        let passwords = broker.directory.appendingPathComponent("passwd").path
        #expect(try Broker.run(["/usr/bin/mosquitto_passwd", "-b", "-c", passwords, "logger", "right"]) == 0)
        broker.extraConfig = "allow_anonymous false\npassword_file \(passwords)"
        try broker.start()
        let bad = try MQTTPublisher(MQTTPublisher.Configuration(broker: try BrokerAddress(parsing: "mqtt://logger:wrong@127.0.0.1:\(broker.port)/auth"), board: "b3"))
        #expect(Self.eventually(10) { bad.failure != nil })
        guard case .notAuthorized(let why)? = bad.failure else { Issue.record("expected notAuthorized, got \(String(describing: bad.failure))"); return }
        #expect(why.contains("127.0.0.1:\(broker.port)") && !why.contains("wrong"), "\(why)")
        bad.finish(timeout: 1)
        let good = try MQTTPublisher(MQTTPublisher.Configuration(broker: try BrokerAddress(parsing: "mqtt://logger:right@127.0.0.1:\(broker.port)/auth"), board: "b3"))
        good.send(OutboundMessage(topic: "auth/b3/gyroscope", payload: Array(Self.line(1).utf8), samples: 1))
        #expect(good.finish(timeout: 10).acknowledged == 1)
    }

    @Test("TLS: a broker certificate the CA file does not vouch for is a TLS failure naming the problem", .timeLimit(.minutes(10)))
    func tlsCertificateProblem() throws {
        guard Broker.available() else { return }
        let broker = try Broker()
        let dir = broker.directory.path
        for (name, cn) in [("server", "127.0.0.1"), ("other", "someone-else")] {
            let status = try Broker.run(["/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/\(name).key",
                                         "-out", "\(dir)/\(name).crt", "-days", "2", "-subj", "/CN=\(cn)", "-addext", "subjectAltName=IP:127.0.0.1"])
            try #require(status == 0)
        }
        broker.extraConfig = "allow_anonymous true\ncertfile \(dir)/server.crt\nkeyfile \(dir)/server.key"
        try broker.start()
        var config = MQTTPublisher.Configuration(broker: try BrokerAddress(parsing: "mqtts://127.0.0.1:\(broker.port)/tls"), board: "b4")
        config.caFile = "\(dir)/other.crt"
        let wrongCA = try MQTTPublisher(config)
        #expect(Self.eventually(10) { wrongCA.failure != nil })
        guard case .tls(let why)? = wrongCA.failure else { Issue.record("expected a TLS failure, got \(String(describing: wrongCA.failure))"); return }
        #expect(why.contains("certificate"), "\(why)")
        wrongCA.finish(timeout: 1)
        config.caFile = "\(dir)/server.crt"
        let rightCA = try MQTTPublisher(config)
        rightCA.send(OutboundMessage(topic: "tls/b4/gyroscope", payload: Array(Self.line(1).utf8), samples: 1))
        let totals = rightCA.finish(timeout: 10)
        #expect(totals.acknowledged == 1, "\(totals) \(String(describing: rightCA.lastError))")
    }
}
