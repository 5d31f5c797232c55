import Foundation
import Glibc
import IIOSimKit
import SystemSupport
import Testing

// The log never waits for the screen (issue 15): motion-monitor at 1.6 kHz inside iio-sim with its
// stdout on a pipe that nobody reads (for 10 s, or ever), on a pipe whose reader goes away, and on
// a pty drained at 115200 baud; ended by --duration, SIGINT, SIGTERM, SIGHUP and a second Ctrl-C.
// Every time, the `--csv` log is compared with every sample the simulator streamed
// (`iio-sim --stream-log`, see LogCheck), and every run is bounded in time.
//
// Timing bounds carry half a second of slack over the promise (the end within 1 s) for a loaded
// machine; under ThreadSanitizer they are relaxed (instrumented code is what that run is for).

/// Motion that makes every sample different.
private let moving = ["--motion", "rotate:axis=z,dps=90", "--accel-noise", "0.05", "--gyro-noise", "0.01"]

@Suite("motion-monitor: the log never waits for stdout", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: Stalls.ready, Comment(rawValue: Stalls.notReadyReason)))
struct MotionMonitorStalledOutputTests {
    @Test("stdout not read for 10 s, then drained: the log grows all along and is complete; stdout gets every line; exit 0",
          .timeLimit(.minutes(10)))
    func stalledThenDrained() throws {
        // The stall is watched from 4 s to 10 s after streaming began (later under TSan, whose
        // start-up takes seconds): the log must grow at the stream's rate all that time. Then stdout
        // is drained for 2 s before --duration ends the run (14 s under TSan, whose instrumented
        // writer and reader move the 12 s backlog several times slower).
        let slack = Stalls.startSlack, duration = 12 + 3 * slack
        let run = try Stalls.Run(["--csv", "LOG", "--interval", "0", "--rate", "1600", "--duration", "\(duration)"])
        defer { run.remove() }
        run.sleep(until: 4 + slack)
        run.expectStalled()
        let (rowsAtStall, stallSeen) = (run.logLines, monotonicNow())
        run.sleep(until: 10 + slack)
        let (grown, span) = (run.logLines - rowsAtStall, monotonicNow() - stallSeen)
        run.expectStalled()
        #expect(Double(grown) > 1600 * 2 * span * 0.8, "the log grew while stdout was stalled: \(grown) rows in \(span) s")
        run.startReading()
        let (status, _) = run.wait(seconds: 20)
        #expect(status == 0, "\(run)")
        #expect(run.elapsed < duration + 3 + slack, "ended \(run.elapsed) s after the start, for --duration \(duration)")
        let log = try run.checkLog()
        let stdout = run.output(seconds: 5).split(separator: UInt8(ascii: "\n"))
        let accel = stdout.filter { $0.starts(with: Array("accelerometer  ".utf8)) }.count
        #expect(accel == log.rows.filter { $0.sensor == "accelerometer" }.count, "every sample reached stdout once it was drained")
    }

    @Test("stdout never read, every sample on it: --duration ends the run on time, the log is complete, stdout's loss counted, exit 74",
          .timeLimit(.minutes(10)))
    func neverDrained() throws {
        let run = try Stalls.Run(["--csv", "LOG", "--interval", "0", "--rate", "1600", "--duration", "5"])
        defer { run.remove() }
        let (status, _) = run.wait(seconds: 20)
        #expect(status == 74, "\(run)")
        #expect(run.elapsed < 5 + 2.5 + Stalls.startSlack, "ended \(run.elapsed) s after the start, for --duration 5")
        #expect(run.stderr.contains("motion-monitor: stdout did not keep up: ") && run.stderr.contains("; the log is not affected."), "\(run)")
        try run.checkLog()
        // What the pipe holds is whole lines: pieces of at most PIPE_BUF bytes, each atomic.
        run.startReading()
        let held = run.output(seconds: 5)
        #expect(!held.isEmpty && held.last == UInt8(ascii: "\n"), "the stalled pipe ends with a whole line")
    }

    @Test("stdout never read, lines every 10 ms: the newest line wins, the log is complete, exit 0", .timeLimit(.minutes(10)))
    func neverDrainedDisplay() throws {
        let run = try Stalls.Run(["--csv", "LOG", "--interval", "0.01", "--rate", "1600", "--duration", "5", "--verbose"])
        defer { run.remove() }
        let (status, _) = run.wait(seconds: 20)
        #expect(status == 0, "\(run)")
        #expect(run.elapsed < 5 + 2.5 + Stalls.startSlack, "ended \(run.elapsed) s after the start, for --duration 5")
        try run.checkLog()
        let replaced = Stalls.number(in: run.stderr, after: "stdout: ", before: " replaced by a newer one")
        #expect((replaced ?? 0) > 100, "lines replaced while stdout was stalled: \(run.stderr)")
    }

    @Test("A signal while stdout is stalled: the end within a second, the log complete and whole",
          .timeLimit(.minutes(10)), arguments: [(SIGINT, "0.01", Int32(0)), (SIGTERM, "0.01", 0), (SIGHUP, "0.01", 0), (SIGTERM, "0", 74)])
    func signalWhileStalled(signal: Int32, interval: String, expected: Int32) throws {
        let run = try Stalls.Run(["--csv", "LOG", "--interval", interval, "--rate", "1600"])
        defer { run.remove() }
        run.sleep(until: 4 + Stalls.startSlack)
        run.expectStalled()
        let sent = monotonicNow()
        run.signal(signal)
        let (status, at) = run.wait(seconds: 10)
        #expect(status == expected, "\(run)")
        #expect(at - sent < Stalls.endBound, "the end took \(at - sent) s after the signal")
        #expect(run.stderr.contains("motion-monitor: logged "), "the summary reached stderr: \(run)")
        try run.checkLog()
    }

    @Test("A second Ctrl-C ends at once (status 130), leaving a log of whole rows", .timeLimit(.minutes(10)))
    func secondCtrlC() throws {
        let run = try Stalls.Run(["--csv", "LOG", "--interval", "0", "--rate", "1600"])
        defer { run.remove() }
        run.sleep(until: 3 + Stalls.startSlack)
        run.signal(SIGINT)
        usleep(100_000)
        let second = monotonicNow()
        run.signal(SIGINT)
        let (status, at) = run.wait(seconds: 10)
        #expect(status == 130, "\(run)")
        #expect(at - second < Stalls.secondSignalBound, "ended \(at - second) s after the second Ctrl-C")
        try run.checkLog(exact: false)
    }

    @Test("stdout closed with --csv FILE: never SIGPIPE; the log runs to --duration, complete; exit 0", .timeLimit(.minutes(10)))
    func closedWithLog() throws {
        let run = try Stalls.Run(["--csv", "LOG", "--interval", "0", "--rate", "1600", "--duration", "\(4 + Stalls.startSlack)"])
        defer { run.remove() }
        run.startReading()
        run.sleep(until: 1 + Stalls.startSlack)
        run.closeReader()
        let (status, _) = run.wait(seconds: 15)
        #expect(status == 0, "not 141 (SIGPIPE): \(run)")
        #expect(run.elapsed >= 4, "ran to --duration: \(run.elapsed) s")
        #expect(run.stderr.contains("stdout was closed (its reader went away); the log went on."), "\(run)")
        try run.checkLog()
    }

    @Test("stdout closed without a log file: the run ends as after Ctrl-C, exit 0", .timeLimit(.minutes(10)),
          arguments: [["--json", "--interval", "0"], ["--csv", "-"], ["--interval", "0.1"]])
    func closedWithoutLog(arguments: [String]) throws {
        let run = try Stalls.Run(arguments + ["--rate", "1600"])
        defer { run.remove() }
        run.startReading()
        run.sleep(until: 1.5 + Stalls.startSlack)
        let closed = monotonicNow()
        run.closeReader()
        let (status, at) = run.wait(seconds: 10)
        #expect(status == 0, "\(run)")
        #expect(at - closed < Stalls.endBound, "ended \(at - closed) s after stdout closed")
        #expect(run.stderr.contains("stdout was closed (its reader went away); the run ended there."), "\(run)")
    }

    @Test("A serial console (a pty read at 115200 baud): the live view keeps redrawing, skipping frames; the log stays complete",
          .timeLimit(.minutes(10)))
    func serialConsole() throws {
        let run = try Stalls.Run(["--csv", "LOG", "--rate", "1600", "--duration", "8", "--verbose"],
                                 pty: (width: 100, height: 40), environment: ["TERM": "xterm-256color", "LANG": "C.UTF-8", "NO_COLOR": ""])
        defer { run.remove() }
        run.startReading(bytesPerSecond: 11_520)
        let (status, _) = run.wait(seconds: 25)
        #expect(status == 0, "\(run)")
        #expect(run.elapsed < 8 + 3 + Stalls.startSlack, "ended \(run.elapsed) s after the start, for --duration 8")
        try run.checkLog()
        // Frames begin with the cursor going home: they arrive throughout the run, not in a burst.
        let starts = run.arrivals(of: Array("\u{1B}[H".utf8))
        #expect(starts.count >= 8, "\(starts.count) frames reached the terminal in 8 s")
        if let first = starts.first {
            for second in 1..<7 {
                #expect(starts.contains { $0 >= first + Double(second) && $0 < first + Double(second) + 1 },
                        "no frame arrived in second \(second) of the run: \(starts.map { ($0 - first).rounded() })")
            }
        }
        let drawn = Stalls.number(in: run.stderr, after: "live view: ", before: " frames drawn of ")
        let due = Stalls.number(in: run.stderr, after: "frames drawn of ", before: " due")
        #expect(drawn != nil && due != nil && drawn! >= 8 && drawn! < due!, "frames skipped, not queued: \(run.stderr)")
    }

    @Test("libiio's 'High-speed mode not enabled' is hidden, and shown with -v", .timeLimit(.minutes(10)))
    func libiioNoise() throws {
        let quiet = try Stalls.Run(["--json", "--duration", "1"])
        defer { quiet.remove() }
        quiet.startReading()
        #expect(quiet.wait(seconds: 10).status == 0, "\(quiet)")
        #expect(!quiet.stderr.contains("High-speed mode"), "\(quiet)")
        let verbose = try Stalls.Run(["--json", "--duration", "1", "-v"])
        defer { verbose.remove() }
        verbose.startReading()
        #expect(verbose.wait(seconds: 10).status == 0, "\(verbose)")
        #expect(verbose.stderr.contains("WARNING: High-speed mode not enabled\n"), "\(verbose)")
    }
}

private func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

// MARK: - Running

private enum Stalls {
    static var notReadyReason: String { SimHarness.monitorNotReadyReason }

    static var ready: Bool { SimHarness.monitorReady("motion-monitor stalled-output tests", extra: notReadyReason) }

    /// The bound on an end (1 s promised, half a second for a loaded machine; relaxed under TSan).
    static var endBound: Double { SimHarness.underThreadSanitizer ? 5 : 1.5 }
    /// Extra seconds a whole run may take under ThreadSanitizer (instrumented start-up and end);
    /// the tests also wait this much longer before acting on a run that should be streaming.
    static var startSlack: Double { SimHarness.underThreadSanitizer ? 6 : 0 }
    /// How soon a second Ctrl-C ends the run (instrumented code is slower to reach `_exit`).
    static var secondSignalBound: Double { SimHarness.underThreadSanitizer ? 3 : 0.4 }

    /// The whole number just before `before`, in the first line of `text` that has `after` then `before`.
    static func number(in text: String, after: String, before: String) -> Int? {
        for line in text.split(separator: "\n") {
            guard let a = line.range(of: after), let b = line.range(of: before, range: a.upperBound..<line.endIndex) else { continue }
            return Int(String(line[a.upperBound..<b.lowerBound].reversed().prefix { $0.isNumber }.reversed()))
        }
        return nil
    }

    /// One run of `iio-sim --fixture bmi160 --stream-log … -- motion-monitor ARGS…`, its stdout on
    /// a pipe or a pty whose other end the test holds (and reads only when told), stderr in a file.
    final class Run: CustomStringConvertible, @unchecked Sendable { // `out` is read by one reader thread, closed once it is done
        let folder: String
        let log: String
        let streamLog: String
        let process = Process()
        let started = monotonicNow()
        /// The pipe's read end or the pty's master.
        private(set) var out: Int32 = -1
        private let arrived = Locked<[(time: Double, bytes: [UInt8])]>([])
        private let readerDone = DispatchSemaphore(value: 0)
        private var reading = false
        private(set) var finishedAt: Double?

        /// - Parameters:
        ///   - monitor: the arguments; `LOG` is replaced by the log's path.
        ///   - pty: a pty of this size instead of a pipe.
        ///   - environment: added to the test's.
        init(_ monitor: [String], pty: (width: Int, height: Int)? = nil,
             environment: [String: String] = [:]) throws {
            folder = try SimHarness.temporaryDirectory()
            streamLog = try SimHarness.temporaryDirectory()
            let logPath = folder + "/log.csv"
            log = logPath
            let args = monitor.map { $0 == "LOG" ? logPath : $0 }
            process.executableURL = URL(fileURLWithPath: SimHarness.product("iio-sim"))
            process.arguments = ["--fixture", "bmi160", "--stream-log", streamLog] + moving
                + ["--", "/bin/sh", "-c", LogCheck.script([SimHarness.product("motion-monitor")] + args, dump: folder + "/sysfs")]
            var env = ProcessInfo.processInfo.environment
            for (k, v) in environment { env[k] = v }
            process.environment = env
            process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
            _ = FileManager.default.createFile(atPath: folder + "/stderr", contents: nil)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/stderr"))
            Glibc.signal(SIGPIPE, SIG_IGN)
            var writeEnd: Int32 = -1
            if let pty {
                // posix_openpt(3) by hand (Glibc's module does not export it): the multiplexer,
                // unlock the other side (TIOCSPTLCK), ask its number (TIOCGPTN); devpts needs no grantpt.
                let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
                var unlock: Int32 = 0, number: UInt32 = 0
                guard master >= 0, ioctl(master, 0x4004_5431, &unlock) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
                    throw POSIXError(.ENOTTY)
                }
                let name = "/dev/pts/\(number)"
                var size = winsize(ws_row: UInt16(pty.height), ws_col: UInt16(pty.width), ws_xpixel: 0, ws_ypixel: 0)
                _ = ioctl(master, UInt(TIOCSWINSZ), &size)
                writeEnd = open(name, O_RDWR | O_NOCTTY)
                guard writeEnd >= 0 else { throw POSIXError(.ENOTTY) }
                out = master
            } else {
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else { throw POSIXError(.EMFILE) }
                out = ends[0]
                writeEnd = ends[1]
            }
            // Close-on-exec both ends: no other process spawned meanwhile may hold them (the child
            // gets the writing end as its fd 1, which dup2 leaves open).
            _ = fcntl(out, F_SETFD, FD_CLOEXEC)
            _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
            process.standardOutput = FileHandle(fileDescriptor: writeEnd, closeOnDealloc: false)
            try process.run()
            // Only the child holds stdout's writing end now: its reader sees the end when it exits.
            Glibc.close(writeEnd)
        }

        /// Sleeps until `seconds` after the start.
        func sleep(until seconds: Double) {
            let left = started + seconds - monotonicNow()
            if left > 0 { usleep(UInt32(left * 1e6)) }
        }

        /// Starts reading stdout (at most `bytesPerSecond`, in 10 ms steps), until its end.
        func startReading(bytesPerSecond: Int? = nil) {
            guard !reading else { return }
            reading = true
            let fd = out
            let chunk = bytesPerSecond.map { max(1, $0 / 100) } ?? 65536
            Thread.detachNewThread { [self] in
                var buffer = [UInt8](repeating: 0, count: chunk)
                var next = monotonicNow()
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break } // EOF, or EIO: the pty's other side is closed everywhere
                    let now = monotonicNow()
                    arrived.withLock { $0.append((now, Array(buffer[0..<n]))) }
                    if bytesPerSecond != nil {
                        next += 0.01
                        let wait = next - monotonicNow()
                        if wait > 0 { usleep(UInt32(wait * 1e6)) } else { next = monotonicNow() }
                    }
                }
                readerDone.signal()
            }
        }

        /// Closes the reading end (a `head` that has had enough); the reader thread, if any, stops.
        func closeReader() {
            let fd = out
            out = -1
            Glibc.close(fd)
        }

        /// Waits up to `seconds` for the reader to reach stdout's end; true once it has.
        @discardableResult
        private func waitForReader(seconds: Double) -> Bool {
            guard reading, readerDone.wait(timeout: .now() + seconds) == .success else { return false }
            readerDone.signal() // for the next caller
            return true
        }

        /// What stdout delivered, once its reader has reached the end (waiting up to `seconds`).
        func output(seconds: Double) -> [UInt8] {
            waitForReader(seconds: seconds)
            return arrived.withLock { $0.flatMap(\.bytes) }
        }

        /// When each occurrence of `pattern` in stdout arrived.
        func arrivals(of pattern: [UInt8]) -> [Double] {
            waitForReader(seconds: 5)
            var all: [UInt8] = []
            var times: [Double] = []
            var found: [Double] = []
            for (time, bytes) in arrived.withLock({ $0 }) {
                all += bytes
                times += Array(repeating: time, count: bytes.count)
            }
            var i = 0
            while i + pattern.count <= all.count {
                if all[i] == pattern[0], all[i..<(i + pattern.count)].elementsEqual(pattern) {
                    found.append(times[i + pattern.count - 1])
                    i += pattern.count
                } else {
                    i += 1
                }
            }
            return found
        }

        /// Expects stdout to be stalled: the pipe holds more than 16 KiB and nothing more gets in over half
        /// a second while the program runs. A full pipe holds less than 64 KiB when its writes do not
        /// fill whole pages (16 slots of one 3,420-byte write each is 54,720 bytes), but more than 32 KiB:
        /// a write opens a new slot only when it does not fit in the last one, so two neighbouring slots
        /// hold more than a page between them.
        func expectStalled(sourceLocation: SourceLocation = #_sourceLocation) {
            let before = pipeHolds
            usleep(500_000)
            let after = pipeHolds
            #expect(process.isRunning, "motion-monitor is still running", sourceLocation: sourceLocation)
            #expect(before > 16 * 1024 && after == before,
                    "stdout is stalled: the pipe is full (\(before) bytes, then \(after) half a second later)",
                    sourceLocation: sourceLocation)
        }

        /// Bytes waiting in the stdout pipe.
        var pipeHolds: Int {
            var n: Int32 = 0
            return ioctl(out, UInt(FIONREAD), &n) == 0 ? Int(n) : -1
        }

        /// Lines in the log now.
        var logLines: Int {
            ((try? Data(contentsOf: URL(fileURLWithPath: log))) ?? Data()).count(where: { $0 == UInt8(ascii: "\n") })
        }

        /// Sends a signal to iio-sim, which forwards it to motion-monitor.
        func signal(_ s: Int32) { kill(process.processIdentifier, s) }

        /// Waits up to `seconds` for the end; kills the run (and records it) if it does not come.
        /// - Returns: the status (128 + the signal if killed by one) and when it ended.
        @discardableResult
        func wait(seconds: Double) -> (status: Int32, at: Double) {
            let deadline = monotonicNow() + seconds
            while process.isRunning && monotonicNow() < deadline { usleep(5_000) }
            let at = monotonicNow()
            if process.isRunning {
                Issue.record("still running after \(seconds) s: killed")
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            process.waitUntilExit()
            finishedAt = finishedAt ?? at
            return (process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus, at)
        }

        /// Seconds from the start to the end.
        var elapsed: Double { (finishedAt ?? monotonicNow()) - started }

        var stderr: String { (try? String(contentsOfFile: folder + "/stderr", encoding: .utf8)) ?? "" }

        /// The log is whole (header, strict rows, a final newline) and holds every sample streamed
        /// of both sensors (the first ones with `exact` false), in order, with their values.
        @discardableResult
        func checkLog(exact: Bool = true) throws -> CSVLogFile {
            let log = CSVLogFile(text: (try? String(contentsOfFile: self.log, encoding: .utf8)) ?? "")
            #expect(log.headerOK && log.bad.isEmpty && log.endsWithNewline, "\(log.bad.prefix(3))")
            let dump = (try? String(contentsOfFile: folder + "/sysfs", encoding: .utf8)) ?? ""
            for sensor in ["accelerometer", "gyroscope"] {
                let rows = log.rows.filter { $0.sensor == sensor }
                #expect(rows.count > 1000, "\(sensor): \(rows.count) rows")
                try LogCheck.compare(rows, streamLog: streamLog, sysfs: SimHarness.sysfsFiles(dump: dump), sensor: sensor, exact: exact)
            }
            return log
        }

        var description: String {
            "exit after \(elapsed) s\n--- stderr\n\(stderr.prefix(3000))"
        }

        func remove() {
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            if out >= 0 {
                waitForReader(seconds: 5)
                Glibc.close(out)
            }
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: streamLog)
        }
    }
}
