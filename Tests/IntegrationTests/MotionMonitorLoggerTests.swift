import Foundation
import Glibc
import IIOSimKit
import Testing

// motion-monitor as a long-running logger, inside iio-sim at 1.6 kHz: `--csv-rotate` at a small
// size, `--keep`, and `--sighup reopen` after the file was moved away (logrotate's way). Every time
// the files, read in order, are compared with every sample the simulator streamed
// (`iio-sim --stream-log`, see LogCheck): none lost or repeated at a switch, each file whole.

/// Motion that makes every sample different.
private let moving = ["--motion", "rotate:axis=z,dps=90", "--accel-noise", "0.05", "--gyro-noise", "0.01"]

@Suite("motion-monitor as a logger: --csv-rotate, --keep, --sighup reopen", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: SimHarness.monitorReady("logger tests")))
struct MotionMonitorLoggerTests {
    static let monitor = SimHarness.product("motion-monitor")

    /// One run: `inner` (shell text, `$MM` is motion-monitor, `$DIR` the log folder) inside iio-sim.
    struct Run {
        var result: SimHarness.Result
        var sysfs: [String: [String: String]]
        var streamLog: String
        var folder: String

        /// The files in the folder, by name (the rotated names sort by their time).
        var files: [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".csv") || $0.contains(".csv.") }
        }

        func log(_ name: String) -> CSVLogFile {
            CSVLogFile(text: (try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)) ?? "")
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: streamLog)
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    static func run(_ inner: String, sim: [String] = ["--fixture", "bmi160"]) throws -> Run {
        let folder = try SimHarness.temporaryDirectory()
        let streamLog = try SimHarness.temporaryDirectory()
        let script = LogCheck.script(["/bin/sh", "-c", "MM='\(monitor)'; DIR='\(folder)'; " + inner])
        let r = try SimHarness.sim(sim + ["--stream-log", streamLog] + moving, script: script)
        let dump = r.out.components(separatedBy: LogCheck.marker + "\n").first ?? ""
        return Run(result: r, sysfs: SimHarness.sysfsFiles(dump: dump), streamLog: streamLog, folder: folder)
    }

    /// The rows of `files`, in that order, equal the stream (with `tail`, its last samples),
    /// sensor by sensor; each file is whole.
    static func checkSeries(_ run: Run, _ files: [String], tail: Bool = false, atLeast: Int = 1600) throws {
        var rows: [CSVRow] = []
        for name in files {
            let log = run.log(name)
            #expect(log.headerOK && log.bad.isEmpty && log.endsWithNewline, "\(name): header \(log.headerOK), bad rows \(log.bad.prefix(2))")
            rows += log.rows
        }
        for sensor in ["accelerometer", "gyroscope"] {
            let mine = rows.filter { $0.sensor == sensor }
            #expect(mine.count > atLeast, "\(sensor): \(mine.count) rows")
            try LogCheck.compare(mine, streamLog: run.streamLog, sysfs: run.sysfs, sensor: sensor, tail: tail)
        }
    }

    /// `ride-20261201T134501.csv`, `ride-20261201T134501_002.csv`, …: the names, in name order, are
    /// the order the files were started in.
    static func series(_ names: [String]) -> [String] {
        names.filter { name in
            let middle = name.dropFirst("ride-".count).dropLast(".csv".count)
            return name.hasPrefix("ride-") && name.hasSuffix(".csv") && (middle.count == 15 || middle.count == 19 && middle.dropFirst(15).first == "_")
        }.sorted()
    }

    @Test("--csv-rotate 64K at 1.6 kHz: a series of whole files named by the time, each with its header, together the stream exactly")
    func rotateBySize() throws {
        let r = try Self.run(#""$MM" --csv "$DIR/ride.csv" --csv-rotate 64K --interval 0 --rate 1600 --duration 3 --quiet"#)
        defer { r.remove() }
        #expect(r.result.status == 0, "\(r.result)")
        let files = Self.series(r.files)
        #expect(files.count >= 5 && files.count == r.files.count, "files: \(r.files)")
        #expect(!FileManager.default.fileExists(atPath: r.folder + "/ride.csv"), "the base name itself is not written")
        for name in files.dropLast() {
            let size = (try? FileManager.default.attributesOfItem(atPath: r.folder + "/" + name)[.size] as? Int) ?? 0
            #expect(size <= 64 * 1024 && size > 32 * 1024, "\(name): \(size) bytes")
        }
        try Self.checkSeries(r, files)
        #expect(r.result.stderr.contains("logged ") && r.result.stderr.contains(" samples to \(files.count) files, \(r.folder)/\(files[0]) to \(r.folder)/\(files.last!)"),
                "\(r.result.stderr)")
    }

    @Test("--keep 3: the three newest files remain, whole, holding the last samples streamed")
    func keepNewest() throws {
        let r = try Self.run(#""$MM" --csv "$DIR/ride.csv" --csv-rotate 64K --keep 3 --interval 0 --rate 1600 --duration 3 --quiet"#)
        defer { r.remove() }
        #expect(r.result.status == 0, "\(r.result)")
        let files = Self.series(r.files)
        #expect(files.count == 3 && r.files.count == 3, "files: \(r.files)")
        let summary = r.result.stderr.split(separator: "\n").first { $0.contains("samples to ") && $0.contains(" files, ") } ?? ""
        #expect(summary.hasSuffix(" to \(r.folder)/\(files.last ?? "?")"), "\(r.result.stderr)")
        // The files kept are whole and hold the last samples streamed, in order, none missing.
        try Self.checkSeries(r, files, tail: true, atLeast: 500)
    }

    @Test("--csv-rotate daily across a real local midnight (a time zone that puts it 2 s into the run): two whole files, the second named 00:00 of the next day, together the stream exactly")
    func rotateDaily() throws {
        // The clock is the real one: TZ (POSIX form, offset to the second) is chosen so that local
        // midnight comes 2 s after motion-monitor starts, whatever the time of day.
        let r = try Self.run(#"""
            s=$(( $(date -u +%s) % 86400 )); east=$(( (86400 - 2 - s) % 86400 ))
            if [ $east -gt 43200 ]; then sign=+; off=$(( 86400 - east )); else sign=-; off=$east; fi
            TZ=$(printf 'LOC%s%02d:%02d:%02d' $sign $((off / 3600)) $((off / 60 % 60)) $((off % 60)))
            export TZ; echo "$TZ" > "$DIR/tz"
            "$MM" --csv "$DIR/ride.csv" --csv-rotate daily --interval 0 --rate 1600 --duration 5 --quiet
            """#)
        defer { r.remove() }
        #expect(r.result.status == 0, "\(r.result)")
        let files = Self.series(r.files)
        let tz = (try? String(contentsOfFile: r.folder + "/tz", encoding: .utf8)) ?? "?"
        try #require(files.count == 2 && r.files.count == 2, "TZ \(tz): files \(r.files)")
        // ride-YYYYMMDDTHHMMSS.csv: the first started before midnight, the second in its first seconds
        // on the next day.
        let stamps = files.map { String($0.dropFirst("ride-".count).prefix(15)) }
        #expect(stamps[0].dropFirst(9).hasPrefix("2359"), "TZ \(tz): \(files)")
        #expect(stamps[1].dropFirst(9).hasPrefix("00000"), "TZ \(tz): \(files)")
        let day = DateComponents(year: Int(stamps[0].prefix(4)), month: Int(stamps[0].dropFirst(4).prefix(2)), day: Int(stamps[0].dropFirst(6).prefix(2)))
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let next = utc.date(byAdding: .day, value: 1, to: utc.date(from: day)!)!
        let nextDay = utc.dateComponents([.year, .month, .day], from: next)
        #expect(stamps[1].prefix(8) == String(format: "%04d%02d%02d", nextDay.year!, nextDay.month!, nextDay.day!), "TZ \(tz): \(files)")
        #expect(r.log(files[0]).rows.count > 2000 && r.log(files[1]).rows.count > 2000, "TZ \(tz): rows \(r.log(files[0]).rows.count), \(r.log(files[1]).rows.count)")
        try Self.checkSeries(r, files)
    }

    @Test("--sighup reopen after the file was moved away: a new file with its header; the two together hold the stream exactly; exit 0")
    func reopenOnSighup() throws {
        let r = try Self.run(#"""
            "$MM" --csv "$DIR/ride.csv" --sighup reopen --interval 0 --rate 1600 --duration 4 --quiet --verbose & pid=$!
            sleep 1.5; mv "$DIR/ride.csv" "$DIR/ride.csv.1"; kill -HUP $pid
            wait $pid
            """#)
        defer { r.remove() }
        #expect(r.result.status == 0, "\(r.result)")
        #expect(r.result.stderr.contains("SIGHUP: logging to \(r.folder)/ride.csv"), "\(r.result.stderr)")
        let before = r.log("ride.csv.1"), after = r.log("ride.csv")
        #expect(before.rows.count > 1000 && after.rows.count > 1000, "\(before.rows.count) rows before, \(after.rows.count) after")
        try Self.checkSeries(r, ["ride.csv.1", "ride.csv"])
    }

    @Test("SIGHUP without --sighup reopen still ends the run (a hangup): exit 0, one whole file")
    func sighupEnds() throws {
        let r = try Self.run(#"""
            "$MM" --csv "$DIR/ride.csv" --interval 0 --rate 1600 --quiet & pid=$!
            sleep 1.5; kill -HUP $pid; wait $pid
            """#)
        defer { r.remove() }
        #expect(r.result.status == 0, "\(r.result)")
        #expect(r.files == ["ride.csv"], "\(r.files)")
        try Self.checkSeries(r, ["ride.csv"])
    }

    /// Shell text that appends the device files as they are now to `$DIR/dump` (a device plugged
    /// in later is not in the dump made at the start).
    static let dumpLater = #"for f in /sys/bus/iio/devices/*/*; do [ -f "$f" ] && [ -r "$f" ] && printf '%s=%s\n' "$f" "$(cat "$f" 2>/dev/null)"; done >> "$DIR/dump""#

    /// The run's device files: those at the start, and those dumped later into `$DIR/dump`.
    static func allFiles(_ r: Run) -> [String: [String: String]] {
        let later = SimHarness.sysfsFiles(dump: (try? String(contentsOfFile: r.folder + "/dump", encoding: .utf8)) ?? "")
        return r.sysfs.merging(later) { first, _ in first }
    }

    /// A fixture of two bmi160s (the second one to be plugged in when the first is unplugged: the
    /// same sensor back under a new index, as the kernel gives it), written to `folder`.
    static func twins(in folder: String) throws -> String {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let data = try Data(contentsOf: repo.appendingPathComponent("fixtures/bmi160.json"))
        var fixture = try #require(JSONSerialization.jsonObject(with: data) as? [String: Any])
        let devices = try #require(fixture["devices"] as? [Any])
        fixture["devices"] = devices + devices
        fixture["triggers"] = [["name": "bmi160-dev0", "owner": "bmi160"], ["name": "bmi160-dev1", "owner": "bmi160"]]
        let path = folder + "/twins.json"
        try JSONSerialization.data(withJSONObject: fixture).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("--wait-for-device: a sensor unplugged and plugged in again (a new index) is waited for and logged again; every row of both devices is the stream; exit 0")
    func replugged() throws {
        let fixtureDir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: fixtureDir) }
        let r = try Self.run(#""$MM" --csv "$DIR/ride.csv" --wait-for-device --interval 0 --rate 400 --duration 5 --quiet & pid=$!; sleep 3.5; "# + Self.dumpLater + "; wait $pid",
                             sim: ["--fixture", try Self.twins(in: fixtureDir), "--unplug", "iio:device0@1.5", "--plug", "iio:device1@3", "--verbose"])
        let files = Self.allFiles(r)
        defer { r.remove() }
        #expect(r.result.status == 0, "\(r.result)")
        for sensor in ["accelerometer", "gyroscope"] {
            #expect(r.result.stderr.contains("the \(sensor) (iio:device0 (bmi160)) is gone (") && r.result.stderr.contains("waiting for it to come back."), "\(r.result.stderr)")
            #expect(r.result.stderr.contains("the \(sensor) is back as iio:device1 (bmi160) after "), "\(r.result.stderr)")
        }
        let log = r.log("ride.csv")
        #expect(log.headerOK && log.bad.isEmpty && log.endsWithNewline, "\(log.bad.prefix(2))")
        for sensor in ["accelerometer", "gyroscope"] {
            for device in ["iio:device0", "iio:device1"] {
                let rows = log.rows.filter { $0.sensor == sensor && $0.device == device }
                #expect(rows.count > 300, "\(sensor) on \(device): \(rows.count) rows")
                try LogCheck.compare(rows, streamLog: r.streamLog, sysfs: files, sensor: sensor)
            }
            // The gap: from the unplug (1.5 s) to the plug (3 s), no rows.
            let times = log.rows.filter { $0.sensor == sensor }.map { Double($0.nanoseconds) / 1e9 }
            let gap = zip(times.dropFirst(), times).map { $0 - $1 }.max() ?? 0
            #expect(gap > 1.2 && gap < 2.5, "\(sensor): the longest step between rows is \(gap) s")
        }
        #expect(r.result.stderr.contains("0 dropped by the kernel"), "the gap is not counted as samples the kernel dropped: \(r.result.stderr)")
    }

    @Test("--wait-for-device with no sensor at start: waits, says so, then logs every sample once the device appears")
    func appearsLater() throws {
        let r = try Self.run(#""$MM" --csv "$DIR/ride.csv" --wait-for-device --interval 0 --rate 400 --duration 4 --quiet & pid=$!; sleep 2; "# + Self.dumpLater + "; wait $pid",
                             sim: ["--fixture", "bmi160", "--plug", "iio:device0@1.5"])
        defer { r.remove() }
        #expect(r.result.status == 0, "\(r.result)")
        #expect(r.result.stderr.contains("motion-monitor: waiting for ") && r.result.stderr.contains("(none is there yet)")
                && r.result.stderr.contains("motion-monitor: found accelerometer and gyroscope"), "\(r.result.stderr)")
        let log = r.log("ride.csv")
        #expect(log.headerOK && log.bad.isEmpty && log.endsWithNewline)
        for sensor in ["accelerometer", "gyroscope"] {
            let rows = log.rows.filter { $0.sensor == sensor }
            #expect(rows.count > 300, "\(sensor): \(rows.count) rows")
            try LogCheck.compare(rows, streamLog: r.streamLog, sysfs: Self.allFiles(r), sensor: sensor)
        }
    }

    @Test("Usage: --keep needs --csv-rotate; sizes and actions are checked; rotation excludes --append, --force and --csv -")
    func usage() throws {
        for args in [["--csv", "x.csv", "--keep", "2"], ["--csv", "x.csv", "--csv-rotate", "10Q"], ["--csv", "x.csv", "--csv-rotate", "0"],
                     ["--csv", "x.csv", "--csv-rotate", "1M", "--append"], ["--csv", "-", "--csv-rotate", "1M"],
                     ["--csv", "x.csv", "--sighup", "later"], ["--sighup", "reopen"]] {
            let r = try SimHarness.run(Self.monitor, args)
            #expect(r.status == 64, "\(args): \(r)")
        }
    }
}
