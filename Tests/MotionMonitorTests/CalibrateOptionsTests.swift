import Testing
@testable import motion_monitor

@Suite("motion-monitor calibrate's options and --uncalibrated", .timeLimit(.minutes(3)))
struct CalibrateOptionsTests {
    @Test("Values are read in their units; an unknown option or a bad value is a usage error")
    func parse() throws {
        let o = try Calibrate.Options(arguments: ["--uri", "ip:pi", "--device", "accel-base", "--still", "0.5", "--seconds", "3",
                                                  "--still-limit", "20", "--max-residual", "5", "--no-mount-check", "--dry-run"])
        #expect(o.uri == "ip:pi" && o.device == "accel-base" && o.still == 0.5 && o.seconds == 3)
        #expect(abs(o.accelStillLimit - 20 * 9.80665 / 1000) < 1e-12 && abs(o.maxResidual - 5 * 9.80665 / 1000) < 1e-12)
        #expect(!o.mountCheck && !o.save)
        #expect(throws: UsageError.self) { try Calibrate.Options(arguments: ["--bogus"]) }
        #expect(throws: UsageError.self) { try Calibrate.Options(arguments: ["--seconds", "-1"]) }
        #expect(throws: UsageError.self) { try Calibrate.Options(arguments: ["--still"]) }
        let k = try Calibrate.Options(arguments: ["--write-kernel", "--stored"])
        #expect(k.writeKernel && k.useStored && !k.restoreKernel)
        #expect(try Calibrate.Options(arguments: ["--restore-kernel"]).restoreKernel)
        #expect(throws: UsageError.self) { try Calibrate.Options(arguments: ["--stored"]) }
        #expect(throws: UsageError.self) { try Calibrate.Options(arguments: ["--write-kernel", "--dry-run"]) }
        #expect(throws: UsageError.self) { try Calibrate.Options(arguments: ["--restore-kernel", "--forget"]) }
        #expect(try MonitorOptions(arguments: ["--uncalibrated"]).uncalibrated)
        #expect(try !MonitorOptions(arguments: []).uncalibrated)
    }

    @Test("Figures are printed with fixed decimals, no -0")
    func fixed() {
        #expect(Calibrate.fixed(1.23456, 2) == "1.23")
        #expect(Calibrate.fixed(-0.0001, 1) == "0.0")
        #expect(Calibrate.fixed(-50.04, 1) == "-50.0")
        #expect(Calibrate.fixed(0.99, 0) == "1")
    }
}
