import Dispatch
import Foundation
import Testing
import IIOMotion
@testable import motion_monitor

@Suite("MonitorOptions: the log and live-view options", .timeLimit(.minutes(3)))
struct LoggingOptionsTests {
    @Test("Defaults: no log, colour allowed, readings shown")
    func defaults() throws {
        let o = try MonitorOptions(arguments: [])
        #expect(o.csv == nil && !o.force && !o.append && !o.noColor && !o.quiet && !o.csvToStdout)
    }

    @Test("--csv FILE, --csv=FILE, --csv -, with --force, --append, --quiet, --no-color")
    func accepted() throws {
        let a = try MonitorOptions(arguments: ["--csv", "ride.csv", "--force", "--no-color"])
        #expect(a.csv == "ride.csv" && a.force && !a.append && a.noColor && !a.csvToStdout)
        let b = try MonitorOptions(arguments: ["--csv=ride.csv", "--append", "-q"])
        #expect(b.csv == "ride.csv" && b.append && b.quiet)
        let c = try MonitorOptions(arguments: ["--csv", "-", "--interval", "0"])
        #expect(c.csv == "-" && c.csvToStdout)
        let d = try MonitorOptions(arguments: ["--csv", "log.csv", "--json", "--quiet", "--sensor", "gyroscope"])
        #expect(d.json && d.quiet && d.kinds == [.gyroscope])
        #expect(try MonitorOptions(arguments: ["--once", "--no-color"]).noColor)
        #expect(try MonitorOptions(arguments: ["--csv", "a.csv", "--csv", "b.csv"]).csv == "b.csv")
    }

    @Test("Usage errors of the log options", arguments: [
        (["--csv"], "missing value for '--csv <file>'"),
        (["--csv", "--force"], "missing value for '--csv <file>'"),
        (["--csv="], "'--csv' needs a file name, or - for stdout"),
        (["--force"], "'--force' applies to the log file and needs '--csv <file>'"),
        (["--append"], "'--append' applies to the log file and needs '--csv <file>'"),
        (["--csv", "a.csv", "--force", "--append"], "'--force' and '--append' cannot be used together (--force replaces the file, --append adds to it)"),
        (["--csv", "-", "--append"], "'--append' applies to a log file, not to '--csv -' (stdout)"),
        (["--csv", "-", "--force"], "'--force' applies to a log file, not to '--csv -' (stdout)"),
        (["--csv", "-", "--json"], "'--json' and '--csv -' both write to stdout; give '--csv' a file name"),
        (["--once", "--csv", "a.csv"], "'--csv' applies to the continuous view and cannot be used with '--once'"),
        (["--list", "--quiet"], "'--quiet' applies to the continuous view and cannot be used with '--list'"),
        (["--force=yes"], "'--force' does not take a value"),
        (["--no-color=1"], "'--no-color' does not take a value"),
    ])
    func usageErrors(arguments: [String], message: String) {
        #expect(throws: UsageError(message)) { try MonitorOptions(arguments: arguments) }
    }

    @Test("The help shows the new options, the CSV header and status 73")
    func help() {
        let help = MonitorOptions.helpText
        for text in ["--csv <file>", "--force", "--append", "--quiet", "--no-color", "timestamp,sensor,device,x,y,z", "  73  ", "(default: no log)"] {
            #expect(help.contains(text), "\(text)")
        }
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 120 })
    }
}

@Suite("Which display the continuous view uses", .timeLimit(.minutes(3)))
struct DisplayTests {
    private func choose(_ args: [String], tty: Bool = true, _ env: [String: String] = ["TERM": "xterm-256color", "LANG": "C.UTF-8"]) throws -> Display {
        Display.choose(try MonitorOptions(arguments: args), stdoutIsTerminal: tty, environment: env)
    }

    @Test("A terminal gets the live view, in colour and Unicode")
    func live() throws {
        #expect(try choose([]) == .live(color: true, unicode: true))
        #expect(try choose(["--csv", "ride.csv"]) == .live(color: true, unicode: true))
        #expect(try choose([], ["TERM": "xterm", "LC_ALL": "en_US.utf8"]) == .live(color: true, unicode: true))
        #expect(try choose([], ["TERM": "xterm", "LANG": "C"]) == .live(color: true, unicode: false))
        #expect(try choose([], ["TERM": "xterm", "LC_ALL": "C", "LANG": "C.UTF-8"]) == .live(color: true, unicode: false))
    }

    @Test("No colour with --no-color or a non-empty NO_COLOR")
    func noColor() throws {
        #expect(try choose(["--no-color"]) == .live(color: false, unicode: true))
        #expect(try choose([], ["TERM": "xterm", "LANG": "C.UTF-8", "NO_COLOR": "1"]) == .live(color: false, unicode: true))
        #expect(try choose([], ["TERM": "xterm", "LANG": "C.UTF-8", "NO_COLOR": ""]) == .live(color: true, unicode: true))
    }

    @Test("Plain lines without a terminal, with TERM=dumb or no TERM; JSON with --json; nothing with --quiet or --csv -")
    func others() throws {
        #expect(try choose([], tty: false) == .lines)
        #expect(try choose(["--csv", "ride.csv"], tty: false) == .lines)
        #expect(try choose([], ["TERM": "dumb"]) == .lines)
        #expect(try choose([], [:]) == .lines)
        #expect(try choose(["--json"]) == .json)
        #expect(try choose(["--json", "--csv", "f.csv"], tty: false) == .json)
        #expect(try choose(["--csv", "-"]) == .none)
        #expect(try choose(["--csv", "f.csv", "--quiet"]) == .none)
    }
}

@Suite("The CSV log", .timeLimit(.minutes(3)))
struct CSVTests {
    @Test("The pinned header and row: nine-decimal timestamps, round-trip values")
    func row() {
        #expect(CSVFormat.header == "timestamp,sensor,device,x,y,z")
        #expect(CSVFormat.row(AccelerometerData(timestamp: 812.999438968, acceleration: Acceleration(x: 0.5, y: -0.25, z: -1)), device: "iio:device0")
            == "812.999438968,accelerometer,iio:device0,0.5,-0.25,-1.0\n")
        #expect(CSVFormat.row(GyroData(timestamp: 1, rotationRate: RotationRate(x: 0, y: 1.0 / 3, z: -3e-7)), device: "iio:device2")
            == "1.000000000,gyroscope,iio:device2,0.0,0.3333333333333333,-3e-07\n")
    }

    @Test("Timestamps print the kernel's nanoseconds exactly", arguments: [
        Int64(0), 1, 999_999_999, 1_000_000_000, 3_615_331_022_123, 86_400_123_456_789, 999_999_999_999_999, // exact while seconds fit 2^22 (48 days): Double
    ])
    func timestamps(ns: Int64) {
        let t = Double(ns) * 1e-9
        let text = CSVFormat.timestamp(t)
        let parts = text.split(separator: ".")
        #expect(parts.count == 2 && parts[1].count == 9, "\(text)")
        #expect(Int64(parts[0])! * 1_000_000_000 + Int64(parts[1])! == ns, "\(text) for \(ns) ns")
    }

    @Test("Negative and odd timestamps")
    func oddTimestamps() {
        #expect(CSVFormat.timestamp(-1.5) == "-1.500000000")
        #expect(CSVFormat.timestamp(-0.0) == "0.000000000")
        #expect(CSVFormat.timestamp(.nan) == "nan")
    }

    @Test("Values round-trip", arguments: [-0.9999951053621777, 0.1, 1.0 / 3.0, 9.80665, 1e-300, -2.5e-8, 123456.789012345])
    func roundTrip(value: Double) throws {
        let row = CSVFormat.row(AccelerometerData(timestamp: 1, acceleration: Acceleration(x: value, y: value, z: value)), device: "d")
        let fields = row.dropLast().split(separator: ",")
        #expect(fields.count == 6)
        #expect(Double(String(fields[3])) == value)
    }

    @Test("Gaps: steps of k periods are k − 1 missing samples; jitter is not")
    func gaps() {
        var g = GapCounter(period: 0.01)
        for t in [0.0, 0.01, 0.0212, 0.03, 0.06, 0.07, 0.1205] { g.add(t) }
        #expect(g.missing == 2 + 4)
        var unknown = GapCounter(period: nil)
        for t in [0.0, 1, 5] { unknown.add(t) }
        #expect(unknown.missing == 0 && unknown.period == nil)
        var later = GapCounter(period: nil)
        later.add(0)
        later.setPeriod(0.5)
        later.add(2)
        #expect(later.missing == 3)
    }

    private func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("mm-csv-\(UUID().uuidString).csv").path
    }

    private let queue = DispatchQueue(label: "test.csv")

    private func log(_ path: String, force: Bool = false, append: Bool = false) throws(CSVLog.OpenError) -> CSVLog {
        try CSVLog(path: path, force: force, append: append, queue: queue)
    }

    @Test("A new file gets the header and the rows; an existing one is refused (73) unless --force or --append")
    func files() throws {
        let path = temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let first = try log(path)
        queue.sync {
            #expect(first.append([AccelerometerData(timestamp: 1, acceleration: Acceleration(x: 1, y: 2, z: 3))], device: "iio:device0", period: nil))
            #expect(first.rowsWritten(.accelerometer) == 1 && first.totalRows == 1)
            first.close()
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "timestamp,sensor,device,x,y,z\n1.000000000,accelerometer,iio:device0,1.0,2.0,3.0\n")

        #expect(throws: CSVLog.OpenError.self) { try log(path) }
        do { _ = try log(path) } catch {
            #expect(error.status == 73)
            #expect(error.message == "motion-monitor: \(path) exists; pass --force to replace it or --append to add to it, or choose another name.")
        }

        let appended = try log(path, append: true)
        queue.sync {
            appended.append([GyroData(timestamp: 2, rotationRate: RotationRate(x: 0, y: 0, z: 0))], device: "iio:device1", period: nil)
            appended.close()
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.components(separatedBy: "timestamp,").count == 2, "one header only: \(text)")
        #expect(text.hasSuffix("\n2.000000000,gyroscope,iio:device1,0.0,0.0,0.0\n"))

        let replaced = try log(path, force: true)
        queue.sync { replaced.close() }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "timestamp,sensor,device,x,y,z\n")
    }

    @Test("--append to a new file writes the header; to a file that is not a log, refuses")
    func appendChecks() throws {
        let path = temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fresh = try log(path, append: true)
        queue.sync { fresh.close() }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "timestamp,sensor,device,x,y,z\n")
        try "name,age\nx,1\n".write(toFile: path, atomically: false, encoding: .utf8)
        do {
            _ = try log(path, append: true)
            Issue.record("appended to a file that is not a log")
        } catch {
            #expect(error.status == 73 && error.message.contains("does not begin with the header"), "\(error.message)")
        }
    }

    @Test("A folder that does not exist: 73 and what to check")
    func cannotCreate() {
        do {
            _ = try log("/nonexistent-folder-\(UUID().uuidString)/x.csv")
            Issue.record("created a file in a missing folder")
        } catch {
            #expect(error.status == 73 && error.message.contains("cannot create") && error.message.contains("ENOENT"), "\(error.message)")
        }
    }

    @Test("A log that cannot take even its header: 74 and why", .enabled(if: FileManager.default.fileExists(atPath: "/dev/full")))
    func writeError() {
        do {
            _ = try log("/dev/full", force: true)
            Issue.record("/dev/full took the header")
        } catch {
            #expect(error.status == 74 && error.message.contains("ENOSPC") && error.message.contains("/dev/full"), "\(error.message)")
        }
    }
}

@Suite("--csv-rotate, --keep, --sighup", .timeLimit(.minutes(3)))
struct RotationOptionsTests {
    @Test("Sizes and daily parse; nonsense does not")
    func parsing() {
        #expect(CSVLog.Rotation(parsing: "daily") == .daily)
        #expect(CSVLog.Rotation(parsing: "100000") == .size(100_000))
        #expect(CSVLog.Rotation(parsing: "512K") == .size(512 << 10) && CSVLog.Rotation(parsing: "10m") == .size(10 << 20))
        #expect(CSVLog.Rotation(parsing: "1G") == .size(1 << 30))
        for bad in ["", "0", "K", "-5M", "1.5M", "10Q", "weekly", "99999999999999999999G"] {
            #expect(CSVLog.Rotation(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test("The options and their rules")
    func options() throws {
        let o = try MonitorOptions(arguments: ["--csv", "ride.csv", "--csv-rotate", "daily", "--keep", "14", "--sighup", "reopen"])
        #expect(o.csvRotate == .daily && o.keep == 14 && o.sighupReopens)
        #expect(try !MonitorOptions(arguments: ["--csv", "ride.csv", "--sighup", "end"]).sighupReopens)
        for args in [["--keep", "3", "--csv", "a.csv"], ["--csv", "a.csv", "--csv-rotate", "1M", "--force"],
                     ["--csv", "-", "--sighup", "reopen"], ["--csv-rotate", "1M"], ["--csv", "a.csv", "--keep", "0", "--csv-rotate", "1M"]] {
            #expect(throws: UsageError.self, "\(args)") { try MonitorOptions(arguments: args) }
        }
    }

    @Test("Rotated names: stem, local time, a counter that sorts, the extension; only ours are recognised")
    func names() {
        var parts = tm()
        parts.tm_year = 2026 - 1900; parts.tm_mon = 11; parts.tm_mday = 1; parts.tm_hour = 9; parts.tm_min = 5; parts.tm_sec = 7
        parts.tm_isdst = -1
        let t = mktime(&parts)
        #expect(CSVLog.rotatedName(base: "/var/log/ride.csv", time: t, attempt: 1) == "/var/log/ride-20261201T090507.csv")
        #expect(CSVLog.rotatedName(base: "ride.csv", time: t, attempt: 2) == "ride-20261201T090507_002.csv")
        #expect(CSVLog.rotatedName(base: "logs/motion", time: t, attempt: 1) == "logs/motion-20261201T090507")
        #expect(CSVLog.rotatedName(base: ".hidden", time: t, attempt: 1) == ".hidden-20261201T090507")
        let names = (1...12).map { CSVLog.rotatedName(base: "ride.csv", time: t, attempt: $0) }
        #expect(names.sorted() == names, "name order is start order within one second")
        #expect(CSVLog.rotatedKey("ride-20261201T090507_012.csv", base: "/x/ride.csv")! == ("20261201T090507", 12))
        #expect(CSVLog.rotatedKey("ride-20261201T090507.csv", base: "ride.csv")! == ("20261201T090507", 1))
        for other in ["ride.csv", "ride-2026.csv", "ride-20261201T090507.csv.1", "ride-20261201T090507-2.csv", "rides-20261201T090507.csv",
                      "ride-20261201X090507.csv", "ride-20261201T090507_1.csv"] {
            #expect(CSVLog.rotatedKey(other, base: "ride.csv") == nil, "\(other)")
        }
    }
}
