import Foundation
import IIOScanFormat
import IIOSimKit
import Testing

/// MotionManager's streaming through the real libiio backends, against iio-sim: the scenarios of
/// `motion-scenarios` run inside the simulator, and what they print is checked against what the
/// simulator says it streamed. Timing bounds are generous: they catch a wrong design, not jitter.
@Suite(.timeLimit(.minutes(10)),
       .enabled(if: SimHarness.underCI || FileManager.default.isExecutableFile(atPath: SimHarness.product("motion-scenarios")),
                "motion-scenarios is not built (swift build)"))
struct LibraryStreamingTests {
    /// Runs a scenario under iio-sim and parses its one JSON line.
    func scenario(_ fixture: String, _ args: [String], sim: [String] = [], env: [String: String] = [:],
                  log: String? = nil) throws -> (fields: [String: Any], result: SimHarness.Result) {
        var simArgs = ["--fixture", fixture] + sim
        if let log { simArgs += ["--stream-log", log] }
        let r = try SimHarness.run(SimHarness.product("iio-sim"), simArgs + ["--", SimHarness.product("motion-scenarios")] + args,
                                   environment: env)
        let line = r.out.split(separator: "\n").last.map(String.init) ?? ""
        let fields = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
        return (fields, r)
    }

    func number(_ f: [String: Any], _ key: String) -> Double { (f[key] as? NSNumber)?.doubleValue ?? .nan }

    /// Timestamps (s) of the first and last scans a session delivered to its reader.
    func deliveredTimestamps(_ log: String, device: String = "iio:device0") throws -> (count: Int, first: Double, last: Double) {
        var all: [Double] = []
        for (rec, bytes) in try SimHarness.sessions(in: log, device: device) {
            guard let ts = rec.elements.first(where: { $0.channel == "timestamp" }) else { continue }
            let type = try ScanFormat(parsing: ts.type)
            let raw = Array(bytes)
            for i in 0..<(raw.count / rec.scanSize) { all.append(Double(type.decode(raw, at: i * rec.scanSize + ts.offset)) * 1e-9) }
        }
        return (all.count, all.first ?? -1, all.last ?? -1)
    }

    @Test("every sample arrives once, in order (interval 0), for every fixture", arguments: SimHarness.fixtureNames)
    func everySample(_ fixture: String) throws {
        let log = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: log) }
        let (f, r) = try scenario(fixture, ["every-sample", "2"], log: log)
        try #require(r.status == 0, "\(r)")
        #expect(f["mode"] as? String == "buffered", "\(r)")
        #expect(f["error"] is NSNull, "\(r)")
        #expect(number(f, "nonIncreasing") == 0)
        #expect(number(f, "rate") >= 10, "the library raises a rate below 10 Hz (cros-ec idles at 0): \(r)")
        // The accelerometer's device: the first device with accel channels (cros-ec: the display's).
        let device = fixture == "cros-ec" ? "iio:device1" : "iio:device0"
        let streamed = try deliveredTimestamps(log, device: device)
        #expect(Int(number(f, "samples")) == streamed.count, "received \(number(f, "samples")), delivered \(streamed.count)")
        #expect(abs(number(f, "first") - streamed.first) < 1e-6 && abs(number(f, "last") - streamed.last) < 1e-6,
                "first/last timestamps \(number(f, "first"))/\(number(f, "last")) vs the stream's \(streamed.first)/\(streamed.last)")
    }

    @Test("at 1 kHz for 10 s with interval 0, no sample is lost")
    func everySampleAt1kHz() throws {
        let log = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: log) }
        // The HID hub takes any rate: 1000 Hz exactly.
        let (f, r) = try scenario("hid-sensor-hub", ["every-sample", "10", "1000"], log: log)
        try #require(r.status == 0, "\(r)")
        #expect(number(f, "rate") == 1000, "\(r)")
        let stats = try JSONDecoder().decode([String: StreamStats].self, from: Data(contentsOf: URL(fileURLWithPath: log + "/stats.json")))
        let s = try #require(stats["iio:device0"])
        // Nothing the library was handed is lost, ever.
        #expect(Int64(number(f, "samples")) == s.scansWritten - s.scansUnreadAtClose, "\(s) vs \(f)")
        if SimHarness.underThreadSanitizer {
            // Instrumented code runs many times slower on two shared cores: a reader stalled past the
            // kernel buffer's 200 ms cushion is scheduling, not design (the plain run requires 0).
            if s.scansDropped > 0 { print("note: under ThreadSanitizer the kernel buffer overflowed: \(s)") }
            #expect(s.scansDropped < s.scansWritten / 10, "\(s)")
        } else {
            #expect(s.scansDropped == 0, "the kernel buffer overflowed: \(s)")
        }
        #expect(number(f, "samples") > 9000 * (SimHarness.underThreadSanitizer ? 0.9 : 1))
    }

    @Test("push delivery is capped at the interval, with the newest sample")
    func cappedDelivery() throws {
        let (f, r) = try scenario("bmi160", ["capped", "2", "0.05", "1000"])
        try #require(r.status == 0, "\(r)")
        #expect(number(f, "rate") == 1600, "1000 Hz asked: the lowest available at or above is 1600: \(r)")
        let perSecond = number(f, "deliveries") / 2
        #expect(perSecond >= 10 && perSecond <= 30, "\(perSecond) deliveries a second for an interval of 0.05 s")
        #expect(number(f, "coalesced") > number(f, "deliveries"), "most of 1600 samples a second are coalesced")
        #expect(number(f, "medianAge") < 0.05, "the delivered sample is the newest: median age \(number(f, "medianAge")) s")
    }

    @Test("pull reads from a tight loop see whole samples, in order")
    func pullWhole() throws {
        // Turning fast about x: x from one sample with y, z of another would not have |a| = g.
        let (f, r) = try scenario("bmi160", ["pull", "2"], sim: ["--motion", "rotate:axis=x,dps=720"])
        try #require(r.status == 0, "\(r)")
        #expect(number(f, "distinct") > 10, "\(r)")
        #expect(number(f, "badMagnitude") == 0)
        #expect(number(f, "backwards") == 0)
        #expect(number(f, "reads") > number(f, "distinct"))
    }

    @Test("start and stop 1,000 times with handlers running: no descriptor or thread left behind")
    func startStop() throws {
        // 200 cycles under ThreadSanitizer (each is ~10× slower there); races are what that run is for.
        let cycles = SimHarness.underThreadSanitizer ? 200 : 1000
        let (f, r) = try scenario("bmi160", ["start-stop", "\(cycles)"])
        try #require(r.status == 0, "\(r)")
        print("start/stop: \(f)")
        #expect(number(f, "cycles") == Double(cycles))
        #expect(number(f, "stillActive") == 0)
        #expect(number(f, "delivered") > 0)
        #expect(number(f, "fdsAfter") == number(f, "fdsBefore"), "descriptors: \(f)")
        #expect(number(f, "captureThreadsAfter") == 0, "capture threads left: \(f)")
        #expect(number(f, "threadsAfter") <= number(f, "threadsBefore"), "threads: \(f)")
    }

    @Test("handlers that block for a second stall neither the capture nor the other sensor; memory stays bounded")
    func blockingHandlers() throws {
        // 800 Hz; the batched handler may fall 400 samples behind, so its one-second stall overflows.
        let (f, r) = try scenario("bmi160", ["blocking-handler", "800", "400"])
        try #require(r.status == 0, "\(r)")
        print("blocking handlers: \(f)")
        let samples = number(f, "samples")
        #expect(samples > 1500, "the capture went on at 800 Hz for 2.5 s: \(f)")
        #expect(number(f, "gyroCalls") > 150, "the gyroscope's handler (its own queue) was not held up: \(f)")
        #expect(number(f, "pushCalls") < 200 && number(f, "coalesced") > 1000,
                "the blocked push handler got the newest sample afterwards, the rest coalesced: \(f)")
        #expect(number(f, "dropped") > 0, "the batched handler's backlog overflowed and was counted: \(f)")
        #expect(number(f, "batchSamples") + number(f, "dropped") == samples, "every sample delivered or counted: \(f)")
        if !SimHarness.underThreadSanitizer {
            #expect(number(f, "maxPullAge") < 0.1, "pull reads stayed fresh while handlers blocked: \(f)")
        }
    }

    @Test("a device unplugged mid-stream: the handler gets the error within 2 s, stop returns promptly",
          arguments: ["lsm6dsx", "bmi160"])
    func unplug(_ fixture: String) throws {
        let device = fixture == "lsm6dsx" ? "lsm6dso_accel" : "bmi160"
        let (f, r) = try scenario(fixture, ["failure", "6"], sim: ["--unplug", "\(device)@1"])
        try #require(r.status == 0, "\(r)")
        #expect(f["error"] as? Bool == true, "\(r)")
        let after = number(f, "after")
        #expect(after > 0.9 && after < 1 + 2, "error \(after) s after start, unplugged at 1 s")
        #expect(number(f, "stopSeconds") < 1)
        #expect((f["message"] as? String)?.contains(device) == true, "the message names the device: \(r)")
    }

    @Test("batches on the capture thread: every sample, on the device's own thread; a handler stops and starts sensors without a hang")
    func captureThreadBatches() throws {
        let (f, r) = try scenario("bmi160", ["capture-thread", "2", "800"])
        try #require(r.status == 0, "\(r)")
        print("capture-thread batches: \(f)")
        #expect(f["stopped"] as? Bool == true, "the handler's stop returned: \(f)")
        #expect(number(f, "stopSeconds") < 1, "\(f)")
        #expect(number(f, "accel") > 800, "2 s at 800 Hz: \(f)")
        #expect(number(f, "nonIncreasing") == 0)
        #expect(number(f, "maxGap") < 1.5 / number(f, "rate"), "no sample missing between batches: \(f)")
        #expect(f["threads"] as? String == "iio:device0", "both handlers ran on the capture thread: \(f)")
        #expect(number(f, "accelAfterStop") == 0, "no accelerometer batch after its stop returned: \(f)")
        #expect(number(f, "gyroAfterStop") > 0, "the gyroscope went on (its capture restarted): \(f)")
        #expect(f["accelActive"] as? Bool == false && f["gyroActive"] as? Bool == true, "\(f)")
        #expect(f["restarted"] as? Bool == true && number(f, "restartSeconds") < 1,
                "a start from a capture-thread handler returned at once: \(f)")
        #expect(f["accelAfterRestart"] as? Bool == true, "…and took effect just after: \(f)")
        #expect(number(f, "captureThreadsAfter") == 0, "the thread that stopped itself ended too: \(f)")
    }

    @Test("stopping device motion while the gyroscope's own updates start: the gyroscope ends up running, every time")
    func stopWhileStarting() throws {
        let cycles = SimHarness.underThreadSanitizer ? 20 : 50
        let (f, r) = try scenario("bmi160", ["stop-while-starting", "\(cycles)"])
        try #require(r.status == 0, "\(r)")
        #expect(number(f, "cycles") == Double(cycles))
        #expect(number(f, "lost") == 0, "the stop removed the consumer another owner added meanwhile: \(f)")
    }

    @Test("a device unplugged under a capture-thread handler: the error arrives (on the sensor's queue) within 2 s")
    func unplugCaptureThread() throws {
        let (f, r) = try scenario("bmi160", ["failure", "6", "capture-thread"], sim: ["--unplug", "bmi160@1"])
        try #require(r.status == 0, "\(r)")
        #expect(f["error"] as? Bool == true, "\(r)")
        let after = number(f, "after")
        #expect(after > 0.9 && after < 1 + 2, "error \(after) s after start, unplugged at 1 s")
        #expect(number(f, "stopSeconds") < 1)
        #expect((f["message"] as? String)?.contains("bmi160") == true, "the message names the device: \(r)")
    }

    @Test("the same data through iiod", .enabled(if: SimHarness.installed("iiod"), "iiod is not installed"))
    func remote() throws {
        let log = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: log) }
        let (n, r2) = try scenario("bmi160", ["every-sample", "2"], sim: ["--iiod"], env: ["MOTION_URI": "ip:127.0.0.1"], log: log)
        try #require(r2.status == 0, "\(r2)")
        #expect(n["mode"] as? String == "buffered")
        #expect(number(n, "nonIncreasing") == 0)
        // iiod may read ahead of its client: what arrived is a prefix of what was streamed.
        let streamed = try deliveredTimestamps(log)
        #expect(number(n, "samples") > 100 && Int(number(n, "samples")) <= streamed.count, "\(n) vs \(streamed)")
        #expect(abs(number(n, "first") - streamed.first) < 1e-6)
    }

    @Test("the async forms deliver, and ending the iteration stops the sensor")
    func asyncForms() throws {
        let (f, r) = try scenario("bmi160", ["async", "20"])
        try #require(r.status == 0, "\(r)")
        #expect(f["finished"] as? Bool == true, "\(r)")
        #expect(number(f, "updates") >= 20 && number(f, "samples") >= 20)
        #expect(f["ordered"] as? Bool == true)
        #expect(f["stillActive"] as? Bool == false, "\(r)")
    }

    @Test("a manager released while it streams closes its device: a new manager streams it buffered at once",
          arguments: ["main", "capture-thread"])
    func releaseWhileStreaming(_ where: String) throws {
        let (f, r) = try scenario("bmi160", ["release"] + (`where` == "main" ? [] : ["capture-thread"]))
        try #require(r.status == 0, "\(r)")
        #expect(f["firstMode"] as? String == "buffered", "\(r)")
        #expect(number(f, "captureThreadsAfterRelease") == 0, "the released manager's capture thread ended: \(f)")
        #expect(number(f, "nodesWhileStreaming") >= 1 && number(f, "nodesAfterRelease") == 0,
                "and /dev/iio:device0 was closed: \(f)")
        #expect(f["streamed"] as? Bool == true, "\(r)")
        #expect(f["mode"] as? String == "buffered", "not polled (\"held by another process\"): \(r)")
        #expect(f["fallbackReason"] as? String == "", "\(r)")
    }
}
