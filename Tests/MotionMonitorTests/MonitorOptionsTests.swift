import Testing
import IIOMotion
@testable import motion_monitor

@Suite("MonitorOptions: the command-line parser")
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
        #expect(o.kinds == [.accelerometer, .gyroscope])
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
        (["--sensor", "compass"], "invalid value 'compass' for '--sensor' (expected one of: accelerometer, gyroscope, all)"),
        (["--json=yes"], "'--json' does not take a value"),
        (["--once", "--list"], "'--once' and '--list' cannot be used together"),
        (["--list", "--json", "--once"], "'--list' and '--once' cannot be used together"),
    ])
    func usageErrors(arguments: [String], message: String) {
        #expect(throws: UsageError(message)) { try MonitorOptions(arguments: arguments) }
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
    func help() {
        let help = MonitorOptions.helpText
        #expect(help.hasPrefix("OVERVIEW: \(MonitorOptions.abstract)"))
        for spec in MonitorOptions.specs {
            for name in spec.names { #expect(help.contains(name)) }
            if let v = spec.valueName { #expect(help.contains("<\(v)>")) }
        }
        for status in ["64", "69", "74", "77"] { #expect(help.contains("  \(status)  ")) }
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 120 })
    }
}
