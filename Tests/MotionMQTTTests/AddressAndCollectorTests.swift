import Testing
import Glibc
@testable import MotionMQTT

@Suite("Broker URLs, the outbox and the collector's bookkeeping", .timeLimit(.minutes(10)))
struct AddressAndCollectorTests {
    @Test("mqtt:// and mqtts:// URLs: credentials, ports, IPv6, prefixes of several levels")
    func goodURLs() throws {
        let a = try BrokerAddress(parsing: "mqtt://collector.local/lab")
        #expect(!a.usesTLS && a.host == "collector.local" && a.port == 1883 && a.username == nil && a.password == nil && a.prefix == "lab")
        let b = try BrokerAddress(parsing: "mqtts://logger:s%40cret@10.0.0.2:9883/fleet/vans/")
        #expect(b.usesTLS && b.host == "10.0.0.2" && b.port == 9883 && b.username == "logger" && b.password == "s@cret" && b.prefix == "fleet/vans")
        #expect(try BrokerAddress(parsing: "mqtts://h/p").port == 8883)
        let c = try BrokerAddress(parsing: "mqtt://[::1]:1884/p")
        #expect(c.host == "::1" && c.port == 1884 && c.description == "mqtt://[::1]:1884/p")
        #expect(!b.description.contains("cret"))
    }

    @Test("malformed URLs and wildcard prefixes are refused, naming what is wrong, never echoing the password",
          arguments: [
            ("http://h/p", "mqtt:// or mqtts://"), ("mqtt://h", "no topic prefix"), ("mqtt://h/", "no topic prefix"),
            ("mqtt://h:0/p", "port"), ("mqtt://h:99999/p", "port"), ("mqtt://h:x/p", "port"), ("mqtt:///p", "no host"),
            ("mqtt://h/lab/+", "wildcard +"), ("mqtt://h/#", "wildcard #"), ("mqtt://h/a//b", "empty level"),
            ("mqtt://u:secret@h/a/#", "wildcard #"), ("mqtt://@h/p", "user name"), ("mqtt://[::1/p", "closing ]"),
          ])
    func badURLs(url: String, expected: String) {
        #expect {
            _ = try BrokerAddress(parsing: url)
        } throws: { error in
            let text = "\(error)"
            return text.contains(expected) && !text.contains("secret")
        }
    }

    @Test("the outbox keeps order across memory and spool, reads the spool back, and counts what the cap drops")
    func outboxOrder() throws {
        let path = "/tmp/outbox-test-\(getpid())-\(Int.random(in: 0..<1_000_000)).spool"
        var box = Outbox(memoryLimit: 3 * (10 + 5 + 64), spoolPath: path, spoolLimit: 5 * (12 + 5 + 10))
        func m(_ i: Int) -> OutboundMessage { OutboundMessage(topic: "t/a/b", payload: Array(padded10(i).utf8), samples: 2) }
        for i in 0..<12 { box.append(m(i)) }
        // 3 in memory, 5 in the spool, 4 dropped.
        #expect(box.spooledSamples == 10 && box.droppedSamples == 8 && box.pendingSamples == 16)
        var got: [Int] = []
        // A message taken and put back (a lost connection) comes first again.
        let popped = box.popFirst()
        let first = try #require(popped)
        box.prepend([first])
        while let next = box.popFirst() { got.append(Int(String(decoding: next.payload, as: UTF8.self).trimmingSpaces)!) }
        #expect(got == Array(0..<8))
        #expect(box.isEmpty && box.pendingSamples == 0)
        // Drained, the spool starts over: new messages go to memory first again.
        box.append(m(20))
        let again = box.popFirst()
        #expect(box.spooledSamples == 10 && again == m(20))
        box.close()
        #expect(access(path, F_OK) != 0)
    }

    @Test("the collector writes motion-monitor's columns after board, drops redeliveries, and reads the status topic")
    func collector() {
        var c = Collector(output: .csv)
        let lines = #"{"sensor":"accelerometer","device":"iio:device0","timestamp":12.5,"x":0.0,"y":-0.0302,"z":-0.9996}"# + "\n"
            + #"{"sensor":"accelerometer","device":"iio:device0","timestamp":12.501,"x":1e-07,"y":2.0,"z":-1.0}"#
        let first = c.take(MQTTSubscriber.Message(board: "pi-1", level: "accelerometer", payload: Array(lines.utf8)), now: 100)
        #expect(first == "pi-1,12.500000000,accelerometer,iio:device0,0.0,-0.0302,-0.9996\npi-1,12.501000000,accelerometer,iio:device0,1e-07,2.0,-1.0\n")
        let again = c.take(MQTTSubscriber.Message(board: "pi-1", level: "accelerometer", payload: Array(lines.utf8)), now: 101)
        #expect(again.isEmpty)
        // Another board's same timestamps are not repeats.
        #expect(!c.take(MQTTSubscriber.Message(board: "pi-2", level: "accelerometer", payload: Array(lines.utf8)), now: 101).isEmpty)
        _ = c.take(MQTTSubscriber.Message(board: "pi-1", level: "status", payload: Array(#"{"state":"offline","board":"pi-1","spooled":7,"resent":3,"dropped":0}"#.utf8)), now: 102)
        #expect(c.boards["pi-1"]?.samples == 2 && c.boards["pi-1"]?.duplicates == 2 && c.boards["pi-1"]?.state == "offline")
        #expect(c.boards["pi-1"]?.reported == ["spooled": 7, "resent": 3, "dropped": 0])
        // The table: pi-1 has reported its counters, pi-2 has not said anything yet.
        let table = c.table(now: 103.5).split(separator: "\n").map { $0.split(separator: " ") }
        #expect(table == [["board", "state", "rate/s", "last", "samples", "repeats", "spooled", "resent", "dropped"],
                          ["pi-1", "offline", "0.6", "3.5", "s", "2", "2", "7", "3", "0"],
                          ["pi-2", "?", "0.8", "2.5", "s", "2", "0", "-", "-", "-"]], "\(c.table(now: 103.5))")
        var j = Collector(output: .json)
        #expect(j.take(MQTTSubscriber.Message(board: "a\"b", level: "gyroscope", payload: Array(#"{"sensor":"gyroscope","device":"d","timestamp":1,"x":1,"y":2,"z":3}"#.utf8)), now: 0)
                == #"{"board":"a\"b","sensor":"gyroscope","device":"d","timestamp":1,"x":1,"y":2,"z":3}"# + "\n")
        #expect(j.take(MQTTSubscriber.Message(board: "b", level: "gyroscope", payload: Array("not json\n".utf8)), now: 0).isEmpty)
        #expect(j.boards["b"]?.malformed == 1)
    }

    @Test("motion-collect's command line")
    func options() throws {
        let o = try CollectOptions(arguments: ["mqtt://h/lab", "--csv", "all.csv", "--duration", "3"])
        #expect(o.outputPath == "all.csv" && o.duration == 3 && o.broker.prefix == "lab" && !o.json)
        #expect(throws: CollectOptions.UsageError.self) { try CollectOptions(arguments: ["mqtt://h/lab/#"]) }
        #expect(throws: CollectOptions.UsageError.self) { try CollectOptions(arguments: []) }
        #expect(throws: CollectOptions.UsageError.self) { try CollectOptions(arguments: ["mqtt://h/l", "--bogus"]) }
    }
}

func padded10(_ i: Int) -> String { let digits = "\(i)"; return String(repeating: " ", count: max(0, 10 - digits.count)) + digits }

extension String {
    var trimmingSpaces: String { String(drop { $0 == " " }) }
}
