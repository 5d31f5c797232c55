import Foundation
import Glibc
import Testing

// The live view, driven in a real terminal: tmux runs `iio-sim … -- motion-monitor` in a detached
// session; `capture-pane` reads the screen, `send-keys C-c` is a user's Ctrl-C, `pipe-pane` keeps the
// raw bytes (to check the escapes: one clear at start, none per frame, the cursor hidden then shown),
// and `#{cursor_flag}` is tmux's own view of whether the cursor is visible.

@Suite("motion-monitor's live view in tmux", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: LiveRuns.ready, Comment(rawValue: LiveRuns.notReadyReason)))
struct MotionMonitorLiveViewTests {
    @Test("Panels with values and bars, the log beside them; Ctrl-C restores the terminal and keeps the log whole")
    func panelsAndCtrlC() throws {
        let t = try LiveRuns.Session(width: 100, height: 40,
                                     sim: ["--fixture", "bmi160", "--motion", "tilt:deg=30,move=1,hold=1"],
                                     monitor: ["--csv", "LOG"])
        defer { t.close() }
        // Values and measured rates are there once samples have arrived for a second.
        // Device motion (shown under all) asks for 100 Hz: the sensors run at that rate.
        let screen = try t.waitFor { $0.contains("Gyroscope") && $0.contains("  z   -") && ($0.contains("Hz, measured 9") || $0.contains("Hz, measured 10")) }
        #expect(screen.contains("Accelerometer  iio:device0 (bmi160)  buffered  ±2.00 g"), "\(screen)")
        #expect(screen.contains("Gyroscope  iio:device0 (bmi160)  buffered  ±34.9 rad/s"), "\(screen)")
        for axis in ["x", "y", "z"] { #expect(screen.contains("  \(axis)  "), "\(screen)") }
        #expect(screen.contains(" g     ─") && screen.contains("│"), "bars: \(screen)")
        #expect(screen.contains("█"), "the z bar is filled (−1 g): \(screen)")
        #expect(screen.contains("log \(t.log): "), "\(screen)")
        #expect(screen.contains("  sampling 100 Hz, measured ") && screen.contains("; view every 0.1 s, measured "), "\(screen)")
        #expect(screen.contains("Device motion  xArbitraryZVertical  from accelerometer, gyroscope"), "\(screen)")
        #expect(screen.split(separator: "\n").allSatisfy { $0.count < 100 }, "no line reaches the last column")
        #expect(t.cursorVisible == false, "the cursor is hidden while the view runs")
        let colored = t.colored.contains("\u{1B}[")
        #expect(colored, "colour on a terminal without NO_COLOR")
        usleep(2_000_000)

        t.keys("C-c")
        let end = try t.waitFor { $0.contains("EXIT=") }
        #expect(end.contains("EXIT=0"), "\(end)")
        #expect(end.contains("motion-monitor: logged "), "the summary after the view: \(end)")
        #expect(t.cursorVisible == true, "the cursor is visible again")
        let raw = t.raw
        let clears = raw.components(separatedBy: "\u{1B}[2J").count - 1
        let frames = raw.components(separatedBy: "\u{1B}[H").count - 1
        #expect(clears == 1, "one clear, at the start, not one per frame: \(clears) clears, \(frames) frames")
        #expect(frames > 10, "frames redraw from the top left: \(frames)")
        let hidden = raw.range(of: "\u{1B}[?25l", options: .backwards)
        let shownAfter = hidden.map { raw[$0.upperBound...].contains("\u{1B}[?25h") } ?? false
        #expect(hidden != nil && shownAfter, "the cursor is hidden, then shown after it was last hidden")
        let log = try String(contentsOfFile: t.log, encoding: .utf8)
        #expect(log.hasPrefix("timestamp,sensor,device,x,y,z\n") && log.hasSuffix("\n"))
        #expect(log.split(separator: "\n").count > 80, "about 2 s at 100 Hz × 2 sensors")
        #expect(!log.contains("deviceMotion"), "device motion is shown, not logged")
    }

    @Test("A missing sensor's panel is its availability message; SIGTERM restores the terminal; --no-color has no colour")
    func availabilityAndSIGTERM() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = try SimHarness.accelerometerOnlyFixture(in: dir)
        let t = try LiveRuns.Session(width: 90, height: 30, sim: ["--fixture", fixture], monitor: ["--no-color"])
        defer { t.close() }
        // The note comes with the fallback's notice, which may reach the view a frame or two
        // after the first samples.
        let screen = try t.waitFor { $0.contains("samples") && $0.contains("note: ") }
        #expect(screen.contains("Accelerometer  iio:device0 (acc)  polled"), "\(screen)")
        #expect(screen.contains("This device has no gyroscope."), "\(screen)")
        #expect(screen.contains("note: Polling iio:device0 (acc) instead of streaming its buffer"), "\(screen)")
        let colored = t.colored.contains("\u{1B}[3")
        #expect(!colored, "--no-color")
        #expect(t.cursorVisible == false)
        kill(try t.pid(), SIGTERM)
        let end = try t.waitFor { $0.contains("EXIT=") }
        #expect(end.contains("EXIT=0"), "\(end)")
        #expect(end.contains("This device has no gyroscope."), "repeated on stderr once the view is gone: \(end)")
        #expect(t.cursorVisible == true)
    }

    @Test("The Sense HAT with --reference-frame north: magnetometer panel (±100 µT) and device motion panel with degrees, gravity and heading")
    func motionPanels() throws {
        let t = try LiveRuns.Session(width: 100, height: 60, sim: ["--fixture", "sense-hat"],
                                     monitor: ["--reference-frame", "north"])
        defer { t.close() }
        let screen = try t.waitFor { $0.contains("Device motion") && $0.contains("estimates, view every 0.1 s, measured ") && $0.contains("heading  ") && !$0.contains("heading  —") }
        #expect(screen.contains("Magnetometer  iio:device2 ("), "\(screen)")
        #expect(screen.contains("±100 µT"), "\(screen)")
        #expect(screen.contains("Device motion  xMagneticNorthZVertical  from accelerometer, gyroscope, magnetometer"), "\(screen)")
        let rows = screen.split(separator: "\n").map(String.init)
        #expect(rows.contains { $0.hasPrefix("  roll     +0.00° ±180  ") || $0.hasPrefix("  roll     -0.00° ±180  ") }, "\(screen)")
        #expect(rows.contains { $0.hasPrefix("  pitch    +0.00° ±90   ") || $0.hasPrefix("  pitch    -0.00° ±90   ") }, "\(screen)")
        #expect(rows.contains { $0.hasPrefix("  yaw    ") }, "\(screen)")
        #expect(rows.contains("  gravity   x +0.0000 y +0.0000 z -1.0000 g"), "\(screen)")
        #expect(rows.contains { $0.hasPrefix("  user      x ") && $0.hasSuffix(" g") }, "\(screen)")
        #expect(rows.contains { $0.hasPrefix("  heading  ") && $0.contains("° from magnetic north (N)") }, "\(screen)")
        #expect(rows.allSatisfy { $0.count < 100 }, "no line reaches the last column")
        t.keys("C-c")
        let end = try t.waitFor { $0.contains("EXIT=") }
        #expect(end.contains("EXIT=0"), "\(end)")
        #expect(t.cursorVisible == true)
    }

    @Test("A resize redraws at the new width; an unplugged sensor shows its error in its panel and the run ends with 74")
    func resizeAndError() throws {
        let t = try LiveRuns.Session(width: 120, height: 40, sim: ["--fixture", "lsm6dsx", "--unplug", "iio:device0@3"], monitor: [])
        defer { t.close() }
        let wide = try t.waitFor { $0.contains("Gyroscope") && $0.contains("samples") }
        let wideBar = wide.split(separator: "\n").first { $0.hasPrefix("  z ") }.map(\.count) ?? 0
        #expect(wideBar > 100, "\(wide)")
        t.tmux(["resize-window", "-t", t.name, "-x", "60", "-y", "40"])
        let narrow = try t.waitFor { s in
            s.split(separator: "\n").first { $0.hasPrefix("  z ") }.map { $0.count < 60 } ?? false
        }
        #expect(narrow.split(separator: "\n").allSatisfy { $0.count < 60 }, "\(narrow)")
        #expect(narrow.contains("─│─"), "bars still fit: \(narrow)")
        let failed = try t.waitFor { $0.contains("Accelerometer encountered error:") }
        #expect(failed.contains("iio:device0 (lsm6dso_accel)"), "\(failed)")
        t.keys("C-c")
        let end = try t.waitFor { $0.contains("EXIT=") }
        #expect(end.contains("EXIT=74"), "\(end)")
        #expect(t.cursorVisible == true)
    }

    @Test("h shows history charts in 80×24 drawn from every sample (their scale is the --csv log's extremes), space pauses and goes on")
    func historyAndPause() throws {
        let t = try LiveRuns.Session(width: 80, height: 24, sim: ["--fixture", "bmi160", "--motion", "shake:axis=x,g=0.5,hz=3", "--accel-noise", "0.2"],
                                     monitor: ["--csv", "LOG", "--rate", "100", "--duration", "7"])
        defer { t.close() }
        _ = try t.waitFor { $0.contains("h: history") && $0.contains("Gyroscope") && $0.contains(" samples") }
        t.keys("h")
        let charts = try t.waitFor { $0.contains("h: bars") && $0.components(separatedBy: "┤").count > 4 }
        #expect(charts.split(separator: "\n").count <= 24 && charts.split(separator: "\n").allSatisfy { $0.count < 80 }, "fits 80×24:\n\(charts)")
        #expect(charts.contains("└-10 s") && charts.contains("now"), "a time axis: \(charts)")
        // Paused: the frame stays as it is (the clock too) until space again.
        t.keys("Space")
        let paused = try t.waitFor { $0.contains("PAUSED") }
        usleep(1_200_000)
        #expect(t.screen == paused, "nothing moves while paused")
        t.keys("Space")
        let going = try t.waitFor { !$0.contains("PAUSED") && $0 != paused }
        #expect(going.contains("h: bars"))
        let end = try t.waitFor { $0.contains("EXIT=") }
        #expect(end.contains("EXIT=0"), "\(end)")
        #expect(t.cursorVisible == true)
        // The final frame (scrolled up by the summary): the accelerometer's chart.
        let all = t.tmux(["capture-pane", "-p", "-S", "-200", "-t", t.name])
        let frame = all.components(separatedBy: "Accelerometer  iio:device0").last ?? ""
        let rows = frame.split(separator: "\n").prefix { !$0.contains("└") }.filter { $0.contains("┤") }
        let labels: [Double] = rows.compactMap { row -> Double? in
            let label = String(row.split(separator: "┤", omittingEmptySubsequences: false)[0])
            return Double(label.trimmingCharacters(in: .whitespaces))
        }
        // The log: 7 s, less than the chart's 10 s, so the chart holds every sample of it.
        let text = try String(contentsOfFile: t.log, encoding: .utf8)
        var log: [[Substring]] = []
        var values: [Double] = []
        for line in text.split(separator: "\n").dropFirst() {
            let fields: [Substring] = line.split(separator: ",")
            guard fields.count == 6, fields[1] == "accelerometer" else { continue }
            log.append(fields)
            for field in fields[3...5] {
                if let v = Double(String(field)) { values.append(v) }
            }
        }
        #expect(log.count > 500, "\(log.count) rows")
        guard labels.count == 2, let high = values.max(), let low = values.min() else {
            Issue.record("no chart scale in the final frame:\n\(all)")
            return
        }
        #expect(abs(labels[0] - high) <= 0.00005 + 1e-12 && abs(labels[1] - low) <= 0.00005 + 1e-12,
                "the chart's scale \(labels) against the log's extremes \(low)…\(high)")
        // The line reaches both: the top and bottom rows of the chart have dots.
        let dots = rows.map { $0.unicodeScalars.contains { $0.value > 0x2800 && $0.value <= 0x28FF } }
        #expect(dots.first == true && dots.last == true, "\(rows.joined(separator: "\n"))")
    }

    @Test("q ends the run as Ctrl-C does; the keys were read without echo, and line mode and echo are back after")
    func quitKey() throws {
        let t = try LiveRuns.Session(width: 80, height: 24, sim: ["--fixture", "bmi160"], monitor: ["--sensor", "accelerometer"])
        defer { t.close() }
        _ = try t.waitFor { $0.contains("h: history") && $0.contains(" samples") }
        let tty = t.tmux(["display", "-p", "-t", t.name, "#{pane_tty}"]).trimmingCharacters(in: .whitespacesAndNewlines)
        func modes() throws -> Set<Substring> {
            Set(try SimHarness.run("/bin/stty", ["-a", "-F", tty], timeout: 10).out.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == ";" }))
        }
        let during = try modes()
        #expect(during.isSuperset(of: ["-icanon", "-echo", "isig"]), "keys one by one, no echo, Ctrl-C still a signal: \(during)")
        t.keys("q")
        let end = try t.waitFor { $0.contains("EXIT=") }
        #expect(end.contains("EXIT=0"), "\(end)")
        let after = try modes()
        #expect(after.isSuperset(of: ["icanon", "echo", "isig"]), "\(after)")
        #expect(t.cursorVisible == true)
    }

    @Test("A garbage accelerometer scale: its panel and device motion's show the library's cause, the gyroscope streams, the run ends with 74")
    func brokenAttribute() throws {
        let t = try LiveRuns.Session(width: 100, height: 45, sim: ["--fixture", "bmi160", "--set", "iio:device0/in_accel_scale=garbage"],
                                     monitor: [])
        defer { t.close() }
        let screen = try t.waitFor { $0.contains("Device motion encountered error:") && $0.contains("Gyroscope") && $0.contains("samples") && !$0.contains(" 0 samples, 0 coalesced, ? lost\n\nDevice") }
        #expect(screen.contains("Accelerometer encountered error: iio:device0 (bmi160): in_accel_scale"), "\(screen)")
        #expect(!screen.contains("needs a magnetometer"), "\(screen)")
        let gyro = screen.components(separatedBy: "Gyroscope  iio:device0 (bmi160)  buffered").dropFirst().first ?? ""
        #expect(gyro.contains("  x   +0.0000 rad/s") || gyro.contains("  x   -0.0000 rad/s"), "the gyroscope's values: \(screen)")
        t.keys("C-c")
        let end = try t.waitFor { $0.contains("EXIT=") }
        #expect(end.contains("EXIT=74"), "\(end)")
        #expect(t.cursorVisible == true)
    }
}

// MARK: - tmux

private enum LiveRuns {
    static let notReadyReason: String = SimHarness.installed("tmux") ? SimHarness.monitorNotReadyReason
        : "tmux is not installed (apt-get install tmux; scripts/install-deps does)"

    static var ready: Bool { SimHarness.monitorReady("the live-view tests", extra: notReadyReason) }

    /// A detached tmux session on a private server running `iio-sim SIM -- motion-monitor ARGS`,
    /// then `echo EXIT=$?` and a sleep, so the last screen can be read.
    final class Session {
        let name = "mm"
        let socket = "mm-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let folder: String
        /// The `--csv` file when the arguments say `LOG`.
        let log: String

        init(width: Int, height: Int, sim: [String], monitor: [String]) throws {
            folder = try SimHarness.temporaryDirectory()
            log = folder + "/live.csv"
            let args = [SimHarness.product("iio-sim")] + sim + ["--", SimHarness.product("motion-monitor")]
                + monitor.map { $0 == "LOG" ? log : $0 }
            let quoted = args.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
            // The view's pid is written first, so a test can signal iio-sim (which forwards it). The
            // command waits for the file `go`, made once `pipe-pane` records the pane, so that the raw
            // bytes hold the view's first ones (its clear and the hidden cursor) however slowly
            // tmux's commands run.
            let command = "while [ ! -e \(folder)/go ]; do sleep 0.02; done; "
                + "sh -c 'echo $$ > \(folder)/pid; exec \"$0\" \"$@\"' \(quoted) 2>&1; echo EXIT=$?; sleep 60"
            tmux(["-f", "/dev/null", "new-session", "-d", "-s", name, "-x", "\(width)", "-y", "\(height)",
                  "-e", "LANG=C.UTF-8", "-e", "NO_COLOR=", command])
            tmux(["set-option", "-t", name, "remain-on-exit", "on"])
            tmux(["pipe-pane", "-t", name, "-o", "cat >> \(folder)/raw"])
            _ = FileManager.default.createFile(atPath: folder + "/go", contents: nil)
        }

        /// Runs `tmux -L SOCKET ARGS…` and returns its stdout. Spawned directly with an empty
        /// signal mask and default dispositions: tmux lives on SIGCHLD and SIGTERM, which the test
        /// process's threads may have blocked (a child inherits the mask), and then hangs.
        @discardableResult
        func tmux(_ args: [String]) -> String {
            let out = folder + "/tmux.out"
            let argv = ["tmux", "-L", socket] + args
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var none = sigset_t(), all = sigset_t()
            sigemptyset(&none)
            sigfillset(&all)
            posix_spawnattr_setsigmask(&attributes, &none)
            posix_spawnattr_setsigdefault(&attributes, &all)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            var cArgs = argv.map { strdup($0) } + [nil]
            defer { for p in cArgs { free(p) } }
            var pid: pid_t = 0
            guard posix_spawnp(&pid, "tmux", &actions, &attributes, &cArgs, environ) == 0 else { return "" }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        }

        /// The screen as text.
        var screen: String { tmux(["capture-pane", "-p", "-t", name]) }

        /// The screen with its colours as escapes.
        var colored: String { tmux(["capture-pane", "-p", "-e", "-t", name]) }

        /// The raw bytes the pane received.
        var raw: String { (try? String(contentsOfFile: folder + "/raw", encoding: .utf8)) ?? "" }

        /// tmux's cursor_flag: is the cursor visible?
        var cursorVisible: Bool? {
            switch tmux(["display", "-p", "-t", name, "#{cursor_flag}"]).trimmingCharacters(in: .whitespacesAndNewlines) {
            case "1": true
            case "0": false
            default: nil
            }
        }

        func keys(_ keys: String) { tmux(["send-keys", "-t", name, keys]) }

        /// iio-sim's pid.
        func pid() throws -> pid_t {
            let text = try String(contentsOfFile: folder + "/pid", encoding: .utf8)
            return try #require(pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)))
        }

        /// Waits up to 20 s for the screen to satisfy `condition`; returns it.
        func waitFor(_ condition: (String) -> Bool) throws -> String {
            let deadline = Date().addingTimeInterval(20)
            var last = ""
            while Date() < deadline {
                last = screen
                if condition(last) { return last }
                usleep(100_000)
            }
            Issue.record("timed out; the screen:\n\(last)")
            return last
        }

        func close() {
            tmux(["kill-server"])
            try? FileManager.default.removeItem(atPath: folder)
        }
    }
}
