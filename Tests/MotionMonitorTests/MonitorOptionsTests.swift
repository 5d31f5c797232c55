import Testing
import IIOMotion
@testable import motion_monitor

@Suite("MonitorOptions: the command-line parser", .timeLimit(.minutes(3)))
struct MonitorOptionsTests {
    @Test("No arguments: the continuous view of every sensor on local:, Core Motion units")
    func defaults() throws {
        let o = try MonitorOptions(arguments: [])
        #expect(o.mode == .watch)
        #expect(!o.json)
        #expect(!o.si)
        #expect(o.units == .coreMotion)
        #expect(o.uri == "local:")
        #expect(o.device == nil)
        #expect(o.selector == .automatic)
        #expect(o.sensor == .all)
        #expect(o.kinds == [.accelerometer, .gyroscope, .magnetometer])
        #expect(o.deviceMotion)
        #expect(o.referenceFrame == .arbitrary)
        #expect(o.interval == 0.1)
        #expect(o.rate == nil)
        #expect(o.count == nil)
        #expect(o.duration == nil)
        #expect(o.captureMode == .auto)
        #expect(!o.verbose)
    }

    @Test("Streaming options, spelled `--opt value` and `--opt=value`")
    func streaming() throws {
        let a = try MonitorOptions(arguments: ["--interval", "0.05", "--rate", "1600", "--count", "20", "--duration", "2.5",
                                               "--mode", "buffered", "--verbose"])
        #expect(a.mode == .watch)
        #expect(a.interval == 0.05)
        #expect(a.rate == 1600)
        #expect(a.count == 20)
        #expect(a.duration == 2.5)
        #expect(a.captureMode == .buffered)
        #expect(a.verbose)
        let b = try MonitorOptions(arguments: ["--interval=0", "--rate=12.5", "--count=1", "--duration=1e-3", "--mode=polled", "-v", "--json"])
        #expect(b.interval == 0)
        #expect(b.rate == 12.5)
        #expect(b.count == 1)
        #expect(b.duration == 0.001)
        #expect(b.captureMode == .polled)
        #expect(b.verbose && b.json)
        #expect(try MonitorOptions(arguments: ["--interval", "3600"]).interval == 3600)
        #expect(try MonitorOptions(arguments: ["--interval", ".5", "--interval", "2"]).interval == 2)
    }

    @Test("--mode accepts exactly auto, buffered and polled", arguments: [
        ("auto", SensorMode.Preference.auto), ("buffered", .buffered), ("polled", .polled),
    ])
    func modeValues(text: String, preference: SensorMode.Preference) throws {
        #expect(try MonitorOptions(arguments: ["--mode", text]).captureMode == preference)
    }

    @Test("Plain decimals only: no sign, hexadecimal, inf or nan", arguments: [
        ("0", 0.0), ("10", 10), ("0.25", 0.25), (".5", 0.5), ("1e2", 100), ("2.5E-1", 0.25),
    ])
    func decimals(text: String, value: Double) {
        #expect(MonitorOptions.decimal(text) == value)
    }

    @Test("Not decimals", arguments: ["", "-1", "+1", "0x10", "inf", "nan", "1e", "1..2", "1,5", " 1", "٣"])
    func notDecimals(text: String) {
        #expect(MonitorOptions.decimal(text) == nil)
    }

    @Test("Every flag", arguments: [
        (["--list"], MonitorOptions.Mode.list),
        (["--once"], .once),
        (["--help"], .help),
        (["-h"], .help),
        (["--version"], .version),
    ])
    func modes(arguments: [String], mode: MonitorOptions.Mode) throws {
        #expect(try MonitorOptions(arguments: arguments).mode == mode)
    }

    @Test("--json and --si")
    func jsonAndSI() throws {
        let o = try MonitorOptions(arguments: ["--once", "--json", "--si"])
        #expect(o.mode == .once)
        #expect(o.json)
        #expect(o.si)
        #expect(o.units == .si)
    }

    @Test("Options with values, spelled `--opt value` and `--opt=value`; the last one wins")
    func values() throws {
        let a = try MonitorOptions(arguments: ["--uri", "ip:127.0.0.1", "--device", "accel-base", "--sensor", "gyroscope"])
        #expect(a.uri == "ip:127.0.0.1")
        #expect(a.device == "accel-base")
        #expect(a.selector == .matching("accel-base"))
        #expect(a.sensor == .gyroscope)
        #expect(a.kinds == [.gyroscope])
        let b = try MonitorOptions(arguments: ["--uri=ip:host:30431", "--device=iio:device2", "--sensor=accelerometer"])
        #expect(b.uri == "ip:host:30431")
        #expect(b.device == "iio:device2")
        #expect(b.kinds == [.accelerometer])
        let c = try MonitorOptions(arguments: ["--sensor", "gyroscope", "--sensor", "all", "--uri", "a:", "--uri", "local:"])
        #expect(c.sensor == .all)
        #expect(c.uri == "local:")
    }

    @Test("--sensor accepts exactly its documented values", arguments: MonitorOptions.SensorChoice.allCases)
    func sensorValues(choice: MonitorOptions.SensorChoice) throws {
        #expect(try MonitorOptions(arguments: ["--sensor", choice.rawValue]).sensor == choice)
    }

    @Test("--help and --version win wherever they are, even next to mistakes")
    func helpWins() throws {
        #expect(try MonitorOptions(arguments: ["--bogus", "--help"]).mode == .help)
        #expect(try MonitorOptions(arguments: ["--once", "--list", "-h"]).mode == .help)
        #expect(try MonitorOptions(arguments: ["--sensor", "nope", "--version"]).mode == .version)
    }

    @Test("Usage errors", arguments: [
        (["--bogus"], "unknown option '--bogus'"),
        (["-x"], "unknown option '-x'"),
        (["stray"], "unexpected argument 'stray'"),
        (["--once", "extra"], "unexpected argument 'extra'"),
        (["-"], "unexpected argument '-'"),
        (["--uri"], "missing value for '--uri <uri>'"),
        (["--uri", "--once"], "missing value for '--uri <uri>'"),
        (["--device"], "missing value for '--device <device>'"),
        (["--sensor"], "missing value for '--sensor <sensor>'"),
        (["--uri="], "'--uri' needs a non-empty URI such as local: or ip:HOST"),
        (["--device="], "'--device' needs a device id, name or label"),
        (["--sensor", "compass"], "invalid value 'compass' for '--sensor' (expected one of: accelerometer, gyroscope, magnetometer, motion, all)"),
        (["--json=yes"], "'--json' does not take a value"),
        (["--once", "--list"], "'--once' and '--list' cannot be used together"),
        (["--list", "--json", "--once"], "'--list' and '--once' cannot be used together"),
        // Streaming options.
        (["--interval"], "missing value for '--interval <seconds>'"),
        (["--interval", "--json"], "missing value for '--interval <seconds>'"),
        (["--interval", "-1"], Self.intervalError("-1")),
        (["--interval", "fast"], Self.intervalError("fast")),
        (["--interval", "inf"], Self.intervalError("inf")),
        (["--interval", "nan"], Self.intervalError("nan")),
        (["--interval", "3600.5"], Self.intervalError("3600.5")),
        (["--interval="], Self.intervalError("")),
        (["--rate"], "missing value for '--rate <hz>'"),
        (["--rate", "0"], "invalid value '0' for '--rate' (expected a frequency in Hz above 0, e.g. 100)"),
        (["--rate", "-100"], "invalid value '-100' for '--rate' (expected a frequency in Hz above 0, e.g. 100)"),
        (["--rate", "0x10"], "invalid value '0x10' for '--rate' (expected a frequency in Hz above 0, e.g. 100)"),
        (["--count"], "missing value for '--count <n>'"),
        (["--count", "0"], Self.countError("0")),
        (["--count", "-3"], Self.countError("-3")),
        (["--count", "2.5"], Self.countError("2.5")),
        (["--count", "ten"], Self.countError("ten")),
        (["--count", "+5"], Self.countError("+5")),
        (["--count", "99999999999999999999"], Self.countError("99999999999999999999")),
        (["--duration"], "missing value for '--duration <seconds>'"),
        (["--duration", "0"], "invalid value '0' for '--duration' (expected seconds above 0, e.g. 10 or 0.5)"),
        (["--duration", "1h"], "invalid value '1h' for '--duration' (expected seconds above 0, e.g. 10 or 0.5)"),
        (["--mode"], "missing value for '--mode <mode>'"),
        (["--mode", "fast"], "invalid value 'fast' for '--mode' (expected one of: auto, buffered, polled)"),
        (["--mode", "Polled"], "invalid value 'Polled' for '--mode' (expected one of: auto, buffered, polled)"),
        (["--verbose=1"], "'--verbose' does not take a value"),
        // They apply to the continuous view only.
        (["--once", "--count", "3"], "'--count' applies to the continuous view and cannot be used with '--once'"),
        (["--interval", "0", "--once"], "'--interval' applies to the continuous view and cannot be used with '--once'"),
        (["--list", "--mode", "polled"], "'--mode' applies to the continuous view and cannot be used with '--list'"),
        (["--rate", "100", "--duration", "1", "--list"], "'--rate' applies to the continuous view and cannot be used with '--list'"),
    ])
    func usageErrors(arguments: [String], message: String) {
        #expect(throws: UsageError(message)) { try MonitorOptions(arguments: arguments) }
    }

    private static func intervalError(_ value: String) -> String {
        "invalid value '\(value)' for '--interval' (expected seconds from 0 to 3600, e.g. 0.1; 0 for every sample)"
    }

    private static func countError(_ value: String) -> String {
        "invalid value '\(value)' for '--count' (expected a whole number of at least 1)"
    }

    @Test("--verbose is accepted with --once and --list (it has nothing more to say there)")
    func verboseAnywhere() throws {
        #expect(try MonitorOptions(arguments: ["--once", "-v"]).mode == .once)
        #expect(try MonitorOptions(arguments: ["--list", "--verbose"]).mode == .list)
    }

    @Test("A repeated mode flag is not a conflict")
    func repeatedMode() throws {
        #expect(try MonitorOptions(arguments: ["--once", "--once"]).mode == .once)
    }

    @Test("A usage error is one line, then a hint to --help")
    func usageReport() {
        let lines = UsageError("unknown option '--bogus'").report.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines == ["motion-monitor: error: unknown option '--bogus'", "Run 'motion-monitor --help' for usage."])
    }

    @Test("The help names every option, with its value, and the exit statuses")
    func help() throws {
        let help = MonitorOptions.helpText
        #expect(help.hasPrefix("OVERVIEW: \(MonitorOptions.abstract)"))
        for spec in MonitorOptions.specs {
            for name in spec.names { #expect(help.contains(name)) }
            if let v = spec.valueName { #expect(help.contains("<\(v)>")) }
        }
        for status in ["64", "69", "74", "77"] { #expect(help.contains("  \(status)  ")) }
        // Every option with a default says it.
        for option in ["--interval", "--rate", "--count", "--duration", "--mode", "--sensor"] {
            let spec = try #require(MonitorOptions.specs.first { $0.names.contains(option) })
            #expect(spec.help.contains("(default: "), "\(option)")
        }
        let interval = try #require(MonitorOptions.specs.first { $0.names == ["--interval"] })
        #expect(interval.help.contains("(default: 0.1)"))
        #expect(help.contains("(default: 0.1)") && help.contains("(default: auto)"))
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 120 })
    }
}
