import Testing
@testable import IIOMotion
@testable import IIOMotionCore
@testable import motion_monitor

// The CLI's side of issue H: `--sensor magnetometer|motion`, `--reference-frame`, the pinned
// deviceMotion JSON line, the plain lines, the availability messages and the motion panel.

/// A device motion estimate: attitude from roll/pitch/yaw (radians), the rest given.
private func motion(roll: Double = 0, pitch: Double = 0, yaw: Double = 0, heading: Double = -1) -> DeviceMotion {
    DeviceMotion(attitude: Attitude(roll: roll, pitch: pitch, yaw: yaw),
                 rotationRate: RotationRate(x: 0.01, y: -0.02, z: 1.5707963267948966),
                 gravity: Acceleration(x: 0, y: -0.5, z: -0.8660254037844386),
                 userAcceleration: Acceleration(x: 0.001, y: 0, z: -0.25),
                 heading: heading, timestamp: 812.25)
}

@Suite("motion-monitor: --sensor magnetometer|motion and --reference-frame", .timeLimit(.minutes(3)))
struct DeviceMotionOptionsTests {
    @Test("--sensor: the sensors read and whether device motion is shown", arguments: [
        ("accelerometer", [SensorKind.accelerometer], false), ("gyroscope", [.gyroscope], false),
        ("magnetometer", [.magnetometer], false), ("motion", [], true), ("all", [.accelerometer, .gyroscope, .magnetometer], true),
    ])
    func sensors(value: String, kinds: [SensorKind], motion: Bool) throws {
        let o = try MonitorOptions(arguments: ["--sensor", value])
        #expect(o.kinds == kinds)
        #expect(o.deviceMotion == motion)
        #expect(o.sensor.isOptional(.magnetometer) == (value == "all"), "only all skips a missing magnetometer silently")
        #expect(!o.sensor.isOptional(.accelerometer) && !o.sensor.isOptional(.gyroscope))
    }

    @Test("--reference-frame: arbitrary, corrected, north; the library's frames", arguments: [
        ("arbitrary", AttitudeReferenceFrame.xArbitraryZVertical, "xArbitraryZVertical"),
        ("corrected", .xArbitraryCorrectedZVertical, "xArbitraryCorrectedZVertical"),
        ("north", .xMagneticNorthZVertical, "xMagneticNorthZVertical"),
    ])
    func frames(value: String, frame: AttitudeReferenceFrame, name: String) throws {
        for args in [["--sensor", "motion", "--reference-frame", value], ["--reference-frame=\(value)"],
                     ["--once", "--sensor", "motion", "--reference-frame", value]] {
            let o = try MonitorOptions(arguments: args)
            #expect(o.referenceFrame.frame == frame && o.referenceFrame.frameName == name, "\(args)")
        }
    }

    @Test("Mistakes with the new options are usage errors", arguments: [
        (["--reference-frame", "south"], "invalid value 'south' for '--reference-frame' (expected one of: arbitrary, corrected, north)"),
        (["--reference-frame"], "missing value for '--reference-frame <frame>'"),
        (["--sensor", "gyroscope", "--reference-frame", "north"], "'--reference-frame' applies to device motion; use it with '--sensor motion' or '--sensor all'"),
        (["--sensor", "magnetometer", "--reference-frame", "arbitrary"], "'--reference-frame' applies to device motion; use it with '--sensor motion' or '--sensor all'"),
        (["--once", "--reference-frame", "north"], "'--once' reads device motion only with '--sensor motion' ('--once --sensor all' reads the sensors), so '--reference-frame' needs it"),
        (["--list", "--reference-frame", "north"], "'--reference-frame' applies to device motion and cannot be used with '--list'"),
        (["--sensor", "motion", "--csv", "x.csv"], "'--csv' logs sensor samples as timestamp,sensor,device,x,y,z, which device motion does not fit; record device motion with '--json'"),
        (["--sensor", "motion", "--csv", "-"], "'--csv' logs sensor samples as timestamp,sensor,device,x,y,z, which device motion does not fit; record device motion with '--json'"),
    ])
    func mistakes(args: [String], message: String) {
        #expect(throws: UsageError(message)) { try MonitorOptions(arguments: args) }
    }

    @Test("--csv with all is accepted (device motion is shown, not logged); the help names every choice")
    func csvAndHelp() throws {
        let o = try MonitorOptions(arguments: ["--csv", "ride.csv", "--sensor", "all", "--reference-frame", "north"])
        #expect(o.csv == "ride.csv" && o.deviceMotion && o.referenceFrame == .north)
        let help = MonitorOptions.helpText
        let words = help.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        #expect(words.contains("Which sensors to read: accelerometer, gyroscope, magnetometer, motion, all."), "\(help)")
        #expect(words.contains("--reference-frame <frame> Device motion's reference frame: arbitrary"), "\(help)")
        #expect(help.contains("--reference-frame <frame>"))
        #expect(help.contains("magnetic field in µT"))
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 120 }, "\(help)")
    }
}

@Suite("motion-monitor: device motion and magnetometer output forms", .timeLimit(.minutes(3)))
struct DeviceMotionFormatTests {
    @Test("The pinned deviceMotion JSON line: every key, in order, radians, shortest round-trip numbers")
    func json() {
        let m = motion(roll: 0.1, pitch: -0.2, yaw: 1.5)
        let q = m.attitude.quaternion
        let line = Format.json(m)
        let expected = #"{"sensor":"deviceMotion","timestamp":812.25,"attitude":{"roll":"# + "\(m.attitude.roll)"
            + #","pitch":"# + "\(m.attitude.pitch)" + #","yaw":"# + "\(m.attitude.yaw)"
            + #","quaternion":{"x":"# + "\(q.x)" + #","y":"# + "\(q.y)" + #","z":"# + "\(q.z)" + #","w":"# + "\(q.w)" + "}}"
            + #","gravity":{"x":0.0,"y":-0.5,"z":-0.8660254037844386}"#
            + #","userAcceleration":{"x":0.001,"y":0.0,"z":-0.25}"#
            + #","rotationRate":{"x":0.01,"y":-0.02,"z":1.5707963267948966}}"#
        #expect(line == expected)
        #expect(abs(m.attitude.roll - 0.1) < 1e-12 && abs(m.attitude.yaw - 1.5) < 1e-12, "radians, not degrees")
        #expect(!line.contains(" ") && !line.contains("\n"))
    }

    @Test("Not finite values are null, as in the other JSON lines")
    func nonFinite() {
        var m = motion()
        m.userAcceleration.x = .nan
        #expect(Format.json(m).contains(#""userAcceleration":{"x":null,"y":0.0,"z":-0.25}"#))
    }

    @Test("The plain line: degrees, gravity and user acceleration in g; the heading only when north-referenced")
    func line() {
        let m = motion(roll: .pi / 6, pitch: 0, yaw: -.pi / 2)
        #expect(Format.line(m) == "deviceMotion   roll +30.00°  pitch +0.00°  yaw -90.00°  gravity x +0.0000  y -0.5000  z -0.8660 g"
            + "  user x +0.0010  y +0.0000  z -0.2500 g  at 812.250000 s")
        #expect(Format.line(motion(heading: 123.456)).contains("  heading 123.46°  at 812.250000 s"))
    }

    @Test("The magnetometer uses the pinned per-sensor forms, in µT")
    func magnetometer() {
        let r = Reading(kind: .magnetometer, deviceID: "iio:device2", deviceDescription: "iio:device2 (lsm9ds1_magn)",
                        timestamp: 5.5, x: 0, y: 20.006, z: -44.996)
        #expect(Format.json(r) == #"{"sensor":"magnetometer","device":"iio:device2","timestamp":5.5,"x":0.0,"y":20.006,"z":-44.996}"#)
        #expect(Format.line(r, units: .coreMotion) == "magnetometer   iio:device2 (lsm9ds1_magn)  x +0.0000  y +20.0060  z -44.9960 µT  at 5.500000 s")
        #expect(Format.line(r, units: .si).contains(" µT  at "), "--si leaves µT alone")
        #expect(CSVFormat.row(MagnetometerData(timestamp: 5.5, magneticField: MagneticField(x: 0, y: 20.006, z: -44.996)), device: "iio:device2")
            == "5.500000000,magnetometer,iio:device2,0.0,20.006,-44.996\n")
    }
}

@Suite("motion-monitor: availability of the magnetometer, device motion and reference frames", .timeLimit(.minutes(3)))
struct DeviceMotionReportTests {
    @Test("Under all, a missing magnetometer goes unmentioned and device motion counts as something to show")
    func all() {
        let r = Report.availability(requested: [.accelerometer, .gyroscope, .magnetometer], present: [.accelerometer, .gyroscope],
                                    optional: [.magnetometer], motion: (true, false))
        #expect(r.report == Report() && r.readable == [.accelerometer, .gyroscope])
        let none = Report.availability(requested: [.accelerometer, .gyroscope, .magnetometer], present: [],
                                       optional: [.magnetometer], motion: (false, false))
        #expect(none.report.stderr == ["This device has no accelerometer.", "This device has no gyroscope."])
        #expect(none.report.status == 69)
    }

    @Test("Asked for by name: a missing magnetometer or device motion is said, exit 69")
    func explicit() {
        let magnetometer = Report.availability(requested: [.magnetometer], present: [.accelerometer, .gyroscope])
        #expect(magnetometer.report.stderr == ["This device has no magnetometer."] && magnetometer.report.status == 69)
        let motion = Report.availability(requested: [], present: [.accelerometer], motion: (false, true))
        #expect(motion.report.stderr == ["This device has no device motion: it needs an accelerometer and a gyroscope, and has no gyroscope."])
        #expect(motion.report.status == 69)
        #expect(Report.motionMissingMessage(present: [])
            == "This device has no device motion: it needs an accelerometer and a gyroscope, and has no accelerometer and no gyroscope.")
        let ok = Report.availability(requested: [], present: [.accelerometer, .gyroscope], motion: (true, true))
        #expect(ok.report.status == 0 && ok.report.stderr.isEmpty)
    }

    @Test("A frame that needs a magnetometer is refused with the frames there are, exit 69")
    func frameRefused() {
        let r = Report.frameUnavailable(.north, available: .xArbitraryZVertical)
        #expect(r.status == 69 && r.stdout.isEmpty)
        #expect(r.stderr == ["motion-monitor: the reference frame north (xMagneticNorthZVertical) needs a magnetometer, and this device has none. Frames available here: arbitrary (xArbitraryZVertical)."])
    }
}

@Suite("motion-monitor: the live view's magnetometer and device motion panels", .timeLimit(.minutes(3)))
struct DeviceMotionPanelTests {
    private let plain = ScreenStyle(color: false, unicode: true)

    @Test("The device motion panel: frame, sources, roll/pitch/yaw in degrees with bars, gravity, user acceleration, rotation")
    func motionPanel() {
        var p = MotionPanelModel(frame: .arbitrary, interval: 0.1)
        p.sources = [.accelerometer, .gyroscope]
        p.latest = motion(roll: .pi / 2, pitch: 0, yaw: -.pi / 4)
        p.estimates = 42
        p.measuredRate = 10
        let lines = LiveScreen.lines(ScreenModel(uri: "local:", elapsed: 0, log: nil, panels: [], motion: p),
                                     width: 80, height: 24, style: plain)
        #expect(lines[2] == "Device motion  xArbitraryZVertical  from accelerometer, gyroscope")
        #expect(lines[3].hasPrefix("  roll    +90.00° ±180  ") && lines[3].contains("│███"), "\(lines[3])")
        #expect(lines[4].hasPrefix("  pitch    +0.00° ±90   "), "\(lines[4])")
        #expect(lines[5].hasPrefix("  yaw     -45.00° ±180  ") && lines[5].contains("█│"), "\(lines[5])")
        #expect(lines[6] == "  gravity   x +0.0000 y -0.5000 z -0.8660 g")
        #expect(lines[7] == "  user      x +0.0010 y +0.0000 z -0.2500 g")
        #expect(lines[8] == "  rotation  x +0.0100 y -0.0200 z +1.5708 rad/s")
        #expect(lines[9] == "  42 estimates, view every 0.1 s, measured 10.0/s")
        #expect(!lines.joined().contains("heading"), "no heading in an arbitrary frame")
        #expect(lines.allSatisfy { $0.count <= 79 })
    }

    @Test("North-referenced: the heading and its compass point; before the first estimate, dashes; an error in the panel")
    func northAndStates() {
        var p = MotionPanelModel(frame: .north, interval: 0)
        p.latest = motion(heading: 92)
        let lines = LiveScreen.motionPanel(p, width: 79, style: plain).map(\.plain)
        #expect(lines[0] == "Device motion  xMagneticNorthZVertical  starting…")
        #expect(lines.contains("  heading  92.0° from magnetic north (E)"), "\(lines)")
        #expect(lines.last == "  0 estimates, view every estimate, measured –")
        let empty = LiveScreen.motionPanel(MotionPanelModel(frame: .north, interval: 0.1), width: 79, style: plain).map(\.plain)
        #expect(empty[1].hasPrefix("  roll         —"), "\(empty)")
        #expect(empty.contains("  heading  —"))
        var failed = MotionPanelModel(frame: .arbitrary, interval: 0.1)
        failed.error = "Device motion encountered error: boom"
        let f = LiveScreen.motionPanel(failed, width: 79, style: plain).map(\.plain)
        #expect(f[0] == "Device motion  xArbitraryZVertical" && f[1] == "  Device motion encountered error: boom")
        #expect(LiveScreen.compassPoint(359) == "N" && LiveScreen.compassPoint(180) == "S" && LiveScreen.compassPoint(300) == "NW")
    }

    @Test("The magnetometer's bars span ±100 µT")
    func magnetometerRange() {
        let info = SensorInfo(kind: .magnetometer, deviceID: "iio:device2", deviceName: "lsm9ds1_magn", label: nil, location: nil,
                              scale: AxisValues(all: 0.000122), scaleFile: nil, offset: AxisValues(all: 0), offsetFile: nil,
                              mountMatrix: .identity, mountMatrixSource: .identity, samplingFrequency: nil, samplingFrequencyFile: nil,
                              availableSamplingFrequencies: nil, isPollable: true, problem: nil, canBuffer: true, triggerName: nil,
                              hasTimestampChannel: true)
        #expect(LiveScreen.range(of: info, units: .coreMotion) == 100)
    }
}
