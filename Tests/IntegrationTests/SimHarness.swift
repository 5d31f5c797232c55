import Foundation
import IIOSimKit
import Testing

/// Runs the package's built executables (`iio-sim`, `motion-monitor`) and libiio's tools, for the
/// integration tests. Products are found next to the test bundle (`.build/<config>/`).
///
/// Every integration test is limited to 10 minutes (`.timeLimit(.minutes(10))`): Swift Testing starts
/// the tests together, and a test's clock runs while it waits for one of the runner's threads (two on
/// a 2-core machine), which other tests hold while they wait for their processes. A hang still fails
/// with the test's name, and ``run(_:_:environment:)`` kills a process that outlives 180 s.
enum SimHarness {
    /// The result of a finished process.
    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: Data
        var stderr: String
        var out: String { String(decoding: stdout, as: UTF8.self) }
        var description: String { "exit \(status)\n--- stdout\n\(out.prefix(4000))\n--- stderr\n\(stderr.prefix(4000))" }
    }

    /// The folder holding the built products.
    static let productsDirectory: URL = {
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.isExecutableFile(atPath: url.appendingPathComponent("iio-sim").path) { return url }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug")
    }()

    /// Why motion-monitor cannot be run under iio-sim here, or "" when it can: the binaries must be
    /// built and iio-sim must be able to create its namespaces (some containers forbid them).
    static let monitorNotReadyReason: String = {
        for binary in ["motion-monitor", "iio-sim"] where !FileManager.default.isExecutableFile(atPath: product(binary)) {
            return "\(binary) is not built (swift build)"
        }
        guard let probe = try? run(product("iio-sim"), ["--fixture", "bmi160", "--", "true"]), probe.status == 0 else {
            return "iio-sim cannot create its namespaces on this machine"
        }
        return ""
    }()

    /// True under continuous integration (`CI=true`): a suite that cannot run there is a failure,
    /// not a skip.
    static var underCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    /// Whether a suite that runs motion-monitor under iio-sim can run; says why not, once per suite.
    /// Under `CI=true` it always runs (its tests then fail with the cause), and
    /// ``IntegrationEnvironmentTests`` fails with the reason.
    static func monitorReady(_ suite: String, extra: String = "") -> Bool {
        let reason = extra.isEmpty ? monitorNotReadyReason : extra
        if reason.isEmpty { return true }
        if underCI {
            print("CI=true: running \(suite) although \(reason)")
            return true
        }
        print("skipping \(suite): \(reason)")
        return false
    }

    /// How long a process the tests run may take before it is killed (and its test fails with
    /// "timed out"): the longest scenario takes about a minute; instrumented builds, five times that.
    static var processTimeLimit: Double { underThreadSanitizer ? 600 : 180 }

    /// True when the suite runs under ThreadSanitizer (`scripts/test --tsan` sets IIOMOTION_TSAN):
    /// real-time bounds do not hold for instrumented code, races are what that run is for.
    static var underThreadSanitizer: Bool { ProcessInfo.processInfo.environment["IIOMOTION_TSAN"] == "1" }

    /// Path of a built product.
    static func product(_ name: String) -> String { productsDirectory.appendingPathComponent(name).path }

    /// The shipped fixtures folder.
    static let fixturesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../fixtures").standardized.path

    /// Names of every shipped fixture.
    static var fixtureNames: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: fixturesDirectory)) ?? [])
            .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }

    /// A shipped fixture, parsed.
    static func fixture(_ name: String) throws -> Fixture {
        try Fixture.load(path: fixturesDirectory + "/" + name + ".json")
    }

    /// Whether a program is installed (PATH, /usr/sbin).
    static func installed(_ name: String) -> Bool {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "") + ":/usr/sbin:/sbin"
        return path.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(name)") }
    }

    /// Writes a fixture with one device that has an accelerometer only (lying face up) into
    /// `dir`; returns its path.
    static func accelerometerOnlyFixture(in dir: String) throws -> String {
        let fixture = dir + "/accel-only.json"
        try Data(#"""
            { "description": "an accelerometer only",
              "devices": [ { "name": "acc", "attributes": { "in_accel_scale": "0.01" },
                             "channels": [ { "id": "accel_x", "value": 0 }, { "id": "accel_y", "value": 0 },
                                           { "id": "accel_z", "value": 981 } ] } ] }
            """#.utf8).write(to: URL(fileURLWithPath: fixture))
        return fixture
    }

    /// A fresh temporary folder.
    static func temporaryDirectory() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("iio-sim-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Runs `executable arguments…` to completion with stdin from /dev/null; output goes through
    /// files so that a large output can never dead-lock the pipe.
    /// A process that outlives `timeout` seconds (default ``processTimeLimit``) is terminated (then
    /// killed) and the result says so on stderr, with status 124 as timeout(1) gives.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                    timeout: Double? = nil) throws -> Result {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outURL = URL(fileURLWithPath: dir + "/stdout"), errURL = URL(fileURLWithPath: dir + "/stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = productsDirectory.path + ":" + (env["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        // Nothing the tests run keeps state in the real home (MotionManager's magnetometer
        // calibrations): XDG_STATE_HOME is this run's own folder unless the caller gives one.
        env["XDG_STATE_HOME"] = dir + "/state"
        for (k, v) in environment { env[k] = v }
        p.environment = env
        p.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        p.standardOutput = try FileHandle(forWritingTo: outURL)
        p.standardError = try FileHandle(forWritingTo: errURL)
        let ended = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in ended.signal() }
        try p.run()
        let limit = timeout ?? processTimeLimit
        var timedOut = false
        if ended.wait(timeout: .now() + limit) == .timedOut {
            timedOut = true
            p.terminate()
            if ended.wait(timeout: .now() + 5) == .timedOut {
                kill(p.processIdentifier, SIGKILL)
                ended.wait()
            }
        }
        p.waitUntilExit()
        // A process ended by a signal reports 128 + the signal, as a shell does.
        let status = timedOut ? 124 : p.terminationReason == .exit ? p.terminationStatus : 128 + p.terminationStatus
        var stderr = String(decoding: try Data(contentsOf: errURL), as: UTF8.self)
        if timedOut {
            stderr += "\n[SimHarness] \((executable as NSString).lastPathComponent) \(arguments.prefix(6).joined(separator: " ")) timed out after \(Int(limit)) s and was killed\n"
        }
        return Result(status: status, stdout: try Data(contentsOf: outURL), stderr: stderr)
    }

    /// Runs `iio-sim <simArguments> -- sh -c <script>`.
    static func sim(_ simArguments: [String], script: String) throws -> Result {
        try run(product("iio-sim"), simArguments + ["--", "/bin/sh", "-c", script])
    }

    /// The stream sessions recorded in a `--stream-log` folder for `device`, in order, with the
    /// bytes each delivered to its reader (written minus what was never read).
    static func sessions(in dir: String, device: String) throws -> [(record: SessionRecord, delivered: Data)] {
        var out: [(SessionRecord, Data)] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        let numbers = names.compactMap { name -> Int? in
            guard name.hasPrefix(device + "-session"), name.hasSuffix(".json") else { return nil }
            return Int(name.dropFirst(device.count + 8).dropLast(5))
        }.sorted()
        for n in numbers {
            let rec = try JSONDecoder().decode(SessionRecord.self, from: Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(device)-session\(n).json")))
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(device)-session\(n).bin"))) ?? Data()
            let keep = Int(rec.scansWritten - rec.scansUnreadAtClose) * rec.scanSize
            out.append((rec, bytes.prefix(max(0, keep))))
        }
        return out
    }
}
