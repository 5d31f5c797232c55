import Testing
@testable import IIOSimKit

@Suite("iio-sim command line", .timeLimit(.minutes(3)))
struct SimCommandLineTests {
    @Test("Every option lands in its field")
    func everyOption() throws {
        let c = try SimCommandLine(arguments: [
            "--fixture", "bmi160", "--fixture", "/tmp/extra.json",
            "--motion", "rotate:axis=x,dps=45",
            "--accel-noise", "0.01", "--gyro-noise", "0.002", "--gyro-bias", "0.1,-0.2,3e-3",
            "--seed", "42", "--fast", "--raw-refresh-max", "50",
            "--unplug", "iio:device0@2.5", "--unplug", "accel-base@0",
            "--no-irq", "bmi160", "--no-irq", "iio:device1",
            "--unreadable", "iio:device0/in_accel_x_raw", "--unreadable", "bmi160/buffer/enable",
            "--set", "bmi160/in_accel_scale=garbage=x", "--set", "iio:device1/trigger/current_trigger=",
            "--iiod", "--iiod-port", "4000", "--stream-log", "/tmp/log",
            "--user", "nobody", "--keep-caps", "-v",
            "--", "iio_info", "-a", "--fixture", "--", "-h",
        ])
        #expect(c.action == .run)
        #expect(c.fixtures == ["bmi160", "/tmp/extra.json"])
        #expect(c.options.motion.description == "rotate:axis=x,dps=45")
        guard case let .rotate(axis, rate) = c.options.motion.kind else { Issue.record("not a rotation"); return }
        #expect(axis == Vec3(1, 0, 0))
        #expect(abs(rate - .pi / 4) < 1e-15)
        #expect(c.options.imperfections == Imperfections(accelNoise: 0.01, gyroNoise: 0.002, gyroBias: Vec3(0.1, -0.2, 0.003)))
        #expect(c.options.seed == 42)
        #expect(c.options.fast)
        #expect(c.options.rawRefreshMax == 50)
        #expect(c.options.unplug.map(\.device) == ["iio:device0", "accel-base"])
        #expect(c.options.unplug.map(\.after) == [2.5, 0])
        #expect(c.options.noIRQ == ["bmi160", "iio:device1"])
        #expect(c.options.unreadable.map(\.device) == ["iio:device0", "bmi160"])
        #expect(c.options.unreadable.map(\.file) == ["in_accel_x_raw", "buffer/enable"])
        // The value is everything after the first `=`, and may be empty.
        #expect(c.options.overrides.map(\.device) == ["bmi160", "iio:device1"])
        #expect(c.options.overrides.map(\.file) == ["in_accel_scale", "trigger/current_trigger"])
        #expect(c.options.overrides.map(\.value) == ["garbage=x", ""])
        #expect(c.iiod)
        #expect(c.iiodPort == 4000)
        #expect(c.options.streamLog == "/tmp/log")
        #expect(c.user == "nobody")
        #expect(c.keepCaps)
        #expect(c.options.verbose)
        // Everything after the first `--` is COMMAND, options and further `--` included.
        #expect(c.command == ["iio_info", "-a", "--fixture", "--", "-h"])
    }

    @Test("Defaults")
    func defaults() throws {
        let c = try SimCommandLine(arguments: ["--fixture", "bmi160", "--", "true"])
        #expect(c.action == .run)
        #expect(c.fixtures == ["bmi160"])
        #expect(c.command == ["true"])
        #expect(c.options.motion.description == "still")
        #expect(c.options.motion.kind == .still)
        #expect(c.options.imperfections.isIdeal)
        #expect(c.options.seed == 1)
        #expect(!c.options.fast)
        #expect(c.options.rawRefreshMax == 200)
        #expect(c.options.unplug.isEmpty && c.options.noIRQ.isEmpty)
        #expect(c.options.unreadable.isEmpty && c.options.overrides.isEmpty)
        #expect(c.options.streamLog == nil)
        #expect(!c.options.verbose)
        #expect(!c.iiod && c.iiodPort == 30431 && !c.keepCaps && c.user == nil)
    }

    @Test("Options may follow or precede each other in any order; -v and --verbose are the same")
    func order() throws {
        let c = try SimCommandLine(arguments: ["--verbose", "--seed", "0", "--fixture", "a", "--fast", "--", "x"])
        #expect(c.options.verbose && c.options.seed == 0 && c.options.fast && c.fixtures == ["a"])
        let big = try SimCommandLine(arguments: ["--seed", "18446744073709551615", "--fixture", "a", "--", "x"])
        #expect(big.options.seed == UInt64.max)
    }

    @Test("--stall DEV@SECONDS[+DURATION]: for good, or for a while; bad forms are usage errors")
    func stall() throws {
        let c = try SimCommandLine(arguments: ["--fixture", "b", "--stall", "iio:device0@0.5", "--stall", "accel_3d@1+1.5", "--", "x"])
        #expect(c.options.stall.map(\.device) == ["iio:device0", "accel_3d"])
        #expect(c.options.stall.map(\.after) == [0.5, 1])
        #expect(c.options.stall.map(\.duration) == [nil, 1.5])
        for bad in ["iio:device0", "iio:device0@", "iio:device0@-1", "iio:device0@1+", "iio:device0@1+0", "iio:device0@1+2+3", "d@x"] {
            let message = try thrownError(SimCommandLine.UsageError.self) {
                try SimCommandLine(arguments: ["--fixture", "b", "--stall", bad, "--", "x"])
            }.description
            #expect(message.contains("--stall expects DEV@SECONDS[+DURATION]"), "\(bad): \(message)")
        }
    }

    @Test("--help, --version and --list-fixtures need neither a fixture nor a COMMAND")
    func actions() throws {
        #expect(try SimCommandLine(arguments: ["--help"]).action == .help)
        #expect(try SimCommandLine(arguments: ["-h"]).action == .help)
        #expect(try SimCommandLine(arguments: ["--version"]).action == .version)
        #expect(try SimCommandLine(arguments: ["--list-fixtures"]).action == .listFixtures)
        #expect(try SimCommandLine(arguments: ["--fixture", "x", "--help"]).action == .help)
        // After `--`, --help belongs to COMMAND.
        let c = try SimCommandLine(arguments: ["--fixture", "x", "--", "--help"])
        #expect(c.action == .run && c.command == ["--help"])
        #expect(SimCommandLine.help.contains("USAGE: iio-sim --fixture NAME|PATH"))
    }

    @Test("Usage errors", arguments: [
        // no fixture / no COMMAND
        [], ["--", "iio_info"], ["--fixture", "bmi160"], ["--fixture", "bmi160", "--"], ["--motion", "still", "--", "x"],
        // a positional argument before `--` is not a COMMAND
        ["--fixture", "bmi160", "iio_info"],
        // options missing their value
        ["--fixture"], ["--fixture", "b", "--motion"], ["--fixture", "b", "--seed"],
        // unknown options
        ["--frobnicate", "--fixture", "b", "--", "x"], ["-x", "--fixture", "b", "--", "x"], ["--Fixture", "b", "--", "x"],
        ["--fixture=bmi160", "--", "x"],
        // bad --unplug
        ["--fixture", "b", "--unplug", "iio:device0", "--", "x"], ["--fixture", "b", "--unplug", "iio:device0@", "--", "x"],
        ["--fixture", "b", "--unplug", "iio:device0@-1", "--", "x"], ["--fixture", "b", "--unplug", "iio:device0@soon", "--", "x"],
        // bad --set
        ["--fixture", "b", "--set", "bmi160/in_accel_scale", "--", "x"], ["--fixture", "b", "--set", "in_accel_scale=1", "--", "x"],
        ["--fixture", "b", "--set", "/in_accel_scale=1", "--", "x"], ["--fixture", "b", "--set", "bmi160/=1", "--", "x"],
        ["--fixture", "b", "--set", "=1", "--", "x"],
        // bad --unreadable
        ["--fixture", "b", "--unreadable", "bmi160", "--", "x"], ["--fixture", "b", "--unreadable", "bmi160/", "--", "x"],
        ["--fixture", "b", "--unreadable", "/in_accel_x_raw", "--", "x"],
        // bad numbers
        ["--fixture", "b", "--motion", "spin", "--", "x"], ["--fixture", "b", "--accel-noise", "abc", "--", "x"],
        ["--fixture", "b", "--gyro-noise", "inf", "--", "x"], ["--fixture", "b", "--gyro-bias", "1,2", "--", "x"],
        ["--fixture", "b", "--gyro-bias", "1,2,z", "--", "x"], ["--fixture", "b", "--seed", "-1", "--", "x"],
        ["--fixture", "b", "--seed", "1.5", "--", "x"], ["--fixture", "b", "--raw-refresh-max", "0", "--", "x"],
        ["--fixture", "b", "--raw-refresh-max", "-5", "--", "x"], ["--fixture", "b", "--iiod-port", "0", "--", "x"],
        ["--fixture", "b", "--iiod-port", "70000", "--", "x"], ["--fixture", "b", "--iiod-port", "http", "--", "x"],
    ] as [[String]])
    func usageErrors(arguments: [String]) {
        #expect(throws: SimCommandLine.UsageError.self) { try SimCommandLine(arguments: arguments) }
    }

    @Test("Usage errors say what is wrong")
    func messages() throws {
        func error(_ args: [String]) throws -> String {
            try thrownError(SimCommandLine.UsageError.self) { try SimCommandLine(arguments: args) }.description
        }
        #expect(try error(["--", "x"]) == "--fixture NAME|PATH is required (see --list-fixtures)")
        #expect(try error(["--fixture", "b"]).hasPrefix("no COMMAND"))
        #expect(try error(["--fixture", "b", "--bogus"]) == "unknown option --bogus")
        #expect(try error(["--fixture"]) == "--fixture needs a value")
        #expect(try error(["--fixture", "b", "--unplug", "d", "--", "x"]).contains("--unplug expects DEV@SECONDS"))
        #expect(try error(["--fixture", "b", "--set", "d/f", "--", "x"]) == "--set expects DEV/FILE=VALUE")
        #expect(try error(["--fixture", "b", "--set", "f=1", "--", "x"]).contains("--set expects DEV/FILE"))
        #expect(try error(["--fixture", "b", "--unreadable", "d", "--", "x"]).contains("--unreadable expects DEV/FILE"))
        #expect(try error(["--fixture", "b", "--motion", "spin", "--", "x"]).contains("spin"))
        #expect(try error(["--fixture", "b", "--seed", "-1", "--", "x"]).contains("--seed"))
    }

    @Test("loadFixture merges the named fixtures in order")
    func loadFixture() throws {
        let c = try SimCommandLine(arguments: [
            "--fixture", TestSupport.fixturePath("bmi160"), "--fixture", TestSupport.fixturePath("cros-ec"), "--", "x",
        ])
        let f = try c.loadFixture()
        #expect(f.devices.map(\.name) == ["bmi160", "cros-ec-accel", "cros-ec-accel", "cros-ec-gyro"])
        #expect(f.triggers.map(\.name) == ["bmi160-dev0"])
        #expect(f.description.contains(" + "))

        let missing = try SimCommandLine(arguments: ["--fixture", "/nonexistent/nope.json", "--", "x"])
        #expect(throws: Fixture.LoadError.self) { try missing.loadFixture() }
    }
}
