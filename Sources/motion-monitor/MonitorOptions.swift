import IIOMotion
import MotionMQTT

/// What the command line asked for. Built by a pure parser, ``init(arguments:)``, so tests can
/// check every option without starting a process.
///
/// The shape follows swift-argument-parser (an `abstract`, and `help:` per option), which this
/// package cannot depend on: ``MonitorOptions/specs`` is the one table both the parser and
/// ``helpText`` are built from, so the help can never disagree with what is accepted.
///
/// ```swift
/// let options = try MonitorOptions(arguments: ["--once", "--json", "--device", "accel-base"])
/// options.mode      // .once
/// options.selector  // DeviceSelector.matching("accel-base")
///
/// let stream = try MonitorOptions(arguments: ["--json", "--interval", "0", "--count", "100"])
/// stream.interval   // 0: every sample the sensor makes, in batches
/// stream.count      // 100 samples of each sensor, then exit
/// ```
struct MonitorOptions: Equatable, Sendable {
    /// What the program does.
    enum Mode: Equatable, Sendable {
        /// Print readings continuously until interrupted (the default).
        case watch
        /// Read one sample of each requested sensor and exit.
        case once
        /// Print the motion sensors found.
        case list
        /// Print the help and exit 0.
        case help
        /// Print the version and exit 0.
        case version
    }

    /// Which sensors `--sensor` asks for; everything else asks ``kinds`` (the IIO sensors read) and
    /// ``includesDeviceMotion``.
    enum SensorChoice: String, CaseIterable, Equatable, Sendable {
        case accelerometer
        case gyroscope
        case magnetometer
        /// Device motion: attitude, gravity, user acceleration and rotation rate, fused by the
        /// library from the accelerometer and gyroscope (and the magnetometer when there is one).
        case motion
        /// Every available sensor and device motion. The accelerometer and gyroscope are expected
        /// (a missing one is named, as before the magnetometer existed); the magnetometer and
        /// device motion are shown when the machine has them and are not mentioned when it has not
        /// (most machines have no magnetometer: saying so on every run would be noise).
        case all

        /// The IIO sensors read, in output order (device motion is not one: see ``includesDeviceMotion``).
        var kinds: [SensorKind] {
            switch self {
            case .accelerometer: [.accelerometer]
            case .gyroscope: [.gyroscope]
            case .magnetometer: [.magnetometer]
            case .motion: []
            case .all: [.accelerometer, .gyroscope, .magnetometer]
            }
        }

        /// Whether device motion is shown (after the sensors).
        var includesDeviceMotion: Bool { self == .motion || self == .all }

        /// Whether a missing `kind` goes unmentioned: the magnetometer under `all`.
        func isOptional(_ kind: SensorKind) -> Bool { self == .all && kind == .magnetometer }
    }

    /// `--reference-frame`: the attitude reference frame of device motion.
    enum ReferenceFrameChoice: String, CaseIterable, Equatable, Sendable {
        /// Z vertical, x arbitrary (where the device pointed at start); yaw drifts slowly.
        case arbitrary
        /// As `arbitrary`, with the magnetometer correcting yaw drift; needs a magnetometer.
        case corrected
        /// Z vertical, x towards magnetic north; gives a heading; needs a magnetometer.
        case north

        /// The library's frame.
        var frame: AttitudeReferenceFrame {
            switch self {
            case .arbitrary: .xArbitraryZVertical
            case .corrected: .xArbitraryCorrectedZVertical
            case .north: .xMagneticNorthZVertical
            }
        }

        /// Core Motion's name of the frame, e.g. `xMagneticNorthZVertical`.
        var frameName: String {
            switch self {
            case .arbitrary: "xArbitraryZVertical"
            case .corrected: "xArbitraryCorrectedZVertical"
            case .north: "xMagneticNorthZVertical"
            }
        }

        /// The choices a machine offers, in this enum's order.
        static func available(_ frames: AttitudeReferenceFrame) -> [ReferenceFrameChoice] {
            allCases.filter { frames.contains($0.frame) }
        }
    }

    var mode: Mode = .watch
    /// `--json`: machine-readable output.
    var json = false
    /// `--si`: m/s² with the kernel's sign instead of Core Motion's g.
    var si = false
    /// `--uri`: the libiio context.
    var uri = "local:"
    /// `--device`: an IIO id, driver name or label; nil for automatic selection.
    var device: String?
    /// `--sensor`.
    var sensor: SensorChoice = .all
    /// `--reference-frame`: device motion's attitude reference frame.
    var referenceFrame: ReferenceFrameChoice = .arbitrary
    /// `--interval`: the update interval of the continuous view, in seconds; a cap, as in Core
    /// Motion (at most one reading per interval per sensor, the newest). `0` prints every sample
    /// the sensor makes, none coalesced.
    var interval = 0.1
    /// `--rate`: the sampling frequency to ask the device for, in Hz; nil lets the library pick the
    /// lowest one that serves ``interval``.
    var rate: Double?
    /// `--count`: stop after this many readings of each sensor; nil for no limit.
    var count: Int?
    /// `--duration`: stop after this many seconds of streaming; nil for no limit.
    var duration: Double?
    /// `--mode`: buffered capture, polled reads, or buffered with a polled fallback.
    var captureMode: SensorMode.Preference = .auto
    /// `--verbose`: say on stderr how each sensor is read and, at the end, what it delivered.
    var verbose = false
    /// `--csv`: log every sample to this file (`-` for stdout); nil for no log.
    var csv: String?
    /// `--force`: let `--csv` replace a file that exists.
    var force = false
    /// `--append`: add rows to a `--csv` file that exists, without a second header.
    var append = false
    /// `--csv-rotate`: start a new log file, named by the time, at a size or at midnight.
    var csvRotate: CSVLog.Rotation?
    /// `--keep`: with `--csv-rotate`, how many log files to keep (the oldest are removed).
    var keep: Int?
    /// `--sighup reopen`: SIGHUP reopens the log file (logrotate's convention) instead of ending the run.
    var sighupReopens = false
    /// `--wait-for-device`: wait for a sensor that is not there yet, or whose device went away.
    var waitForDevice = false
    /// `--no-color`: no colour in the live view (as `NO_COLOR` in the environment).
    var noColor = false
    /// `--quiet`: no readings on stdout (with `--csv FILE`, the log is the only output).
    var quiet = false
    /// `--uncalibrated`: readings without the stored accelerometer and gyroscope calibrations.
    var uncalibrated = false

    /// `--mqtt`: publish every sample to this broker (`mqtt[s]://[user[:password]@]host[:port]/PREFIX`).
    var mqtt: BrokerAddress?
    /// `--board`: the board's name in MQTT topics (default: the host name).
    var board: String?
    /// `--mqtt-format`: the payload form.
    var mqttFormat: MQTTFormat = .json
    /// `--mqtt-ca-file`, `--mqtt-cert`, `--mqtt-key`: TLS files for `mqtts://`.
    var mqttCAFile: String?
    var mqttCertificate: String?
    var mqttKey: String?
    /// `--mqtt-spool`: the file samples go to while the broker is away and memory is full.
    var mqttSpool: String?
    /// `--mqtt-require`: end (exit 69) when the broker cannot be reached at start, instead of
    /// spooling until it can.
    var mqttRequire = false

    /// The payload of `--mqtt` messages.
    enum MQTTFormat: String, Sendable, CaseIterable {
        /// The `--json` objects, one per line.
        case json
        /// InfluxDB line protocol, one point per sample.
        case influx
    }

    /// True when `--csv -` sends the log to stdout.
    var csvToStdout: Bool { csv == "-" }

    /// The longest `--interval` accepted, in seconds: an update interval sizes the kernel buffer
    /// (one wake-up per interval), so an hour at a high rate is already millions of scans.
    static let maximumInterval = 3600.0

    /// The IIO sensors to read, in output order (under `all` including the magnetometer, which
    /// callers skip when it is missing: ``SensorChoice/isOptional(_:)``).
    var kinds: [SensorKind] { sensor.kinds }

    /// Whether device motion is requested (`--sensor motion` or `all`).
    var deviceMotion: Bool { sensor.includesDeviceMotion }

    /// The units readings are printed in.
    var units: MotionUnits { si ? .si : .coreMotion }

    /// The device selector every sensor uses: `--device`'s text matched against id, then label,
    /// then name (libiio's order), or automatic.
    var selector: DeviceSelector { device.map { .matching($0) } ?? .automatic }

    /// Parses the arguments after the program name.
    /// - Parameter arguments: e.g. `["--once", "--json"]`; `--opt=value` and `--opt value` are
    ///   both accepted, and a repeated option keeps its last value.
    /// - Throws: ``UsageError`` for an unknown option, a missing or invalid value, a stray
    ///   argument, or options that contradict each other.
    init(arguments: [String]) throws(UsageError) {
        // As with swift-argument-parser, --help (then --version) anywhere wins over everything else,
        // even over mistakes elsewhere on the line: someone who asks for help should get it.
        if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) {
            mode = .help
            return
        }
        if arguments.contains("--version") {
            mode = .version
            return
        }
        var explicitMode: (mode: Mode, flag: String)?
        var referenceFrameGiven = false
        var streamingFlag: String?  // the first option that only the continuous view uses
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("-"), argument != "-" else {
                throw UsageError("unexpected argument '\(argument)'")
            }
            let (name, inline) = Self.split(argument)
            guard let spec = Self.specs.first(where: { $0.names.contains(name) }) else {
                throw UsageError("unknown option '\(name)'")
            }
            var value: String?
            if let valueName = spec.valueName {
                if let inline {
                    value = inline
                } else if index < arguments.count, !arguments[index].hasPrefix("--") {
                    value = arguments[index]
                    index += 1
                } else {
                    throw UsageError("missing value for '\(name) <\(valueName)>'")
                }
            } else if inline != nil {
                throw UsageError("'\(name)' does not take a value")
            }
            switch spec.effect {
            case .mode(let m):
                if let previous = explicitMode, previous.mode != m {
                    throw UsageError("'\(previous.flag)' and '\(name)' cannot be used together")
                }
                explicitMode = (m, name)
                mode = m
            case .json: json = true
            case .si: si = true
            case .uri:
                guard let value, !value.isEmpty else { throw UsageError("'--uri' needs a non-empty URI such as local: or ip:HOST") }
                uri = value
            case .device:
                guard let value, !value.isEmpty else { throw UsageError("'--device' needs a device id, name or label") }
                device = value
            case .sensor:
                guard let value, let choice = SensorChoice(rawValue: value) else {
                    let values = SensorChoice.allCases.map(\.rawValue).joined(separator: ", ")
                    throw UsageError("invalid value '\(value ?? "")' for '--sensor' (expected one of: \(values))")
                }
                sensor = choice
            case .referenceFrame:
                guard let value, let choice = ReferenceFrameChoice(rawValue: value) else {
                    let values = ReferenceFrameChoice.allCases.map(\.rawValue).joined(separator: ", ")
                    throw UsageError("invalid value '\(value ?? "")' for '--reference-frame' (expected one of: \(values))")
                }
                referenceFrame = choice
                referenceFrameGiven = true
            case .interval:
                guard let seconds = value.flatMap(Self.decimal), seconds <= Self.maximumInterval else {
                    throw UsageError("invalid value '\(value ?? "")' for '--interval' (expected seconds from 0 to \(Int(Self.maximumInterval)), e.g. 0.1; 0 for every sample)")
                }
                interval = seconds
            case .rate:
                guard let hz = value.flatMap(Self.decimal), hz > 0 else {
                    throw UsageError("invalid value '\(value ?? "")' for '--rate' (expected a frequency in Hz above 0, e.g. 100)")
                }
                rate = hz
            case .count: count = try Self.wholeNumber(value, for: name)
            case .duration:
                guard let seconds = value.flatMap(Self.decimal), seconds > 0 else {
                    throw UsageError("invalid value '\(value ?? "")' for '--duration' (expected seconds above 0, e.g. 10 or 0.5)")
                }
                duration = seconds
            case .captureMode:
                guard let value, let preference = SensorMode.Preference(rawValue: value) else {
                    throw UsageError("invalid value '\(value ?? "")' for '--mode' (expected one of: auto, buffered, polled)")
                }
                captureMode = preference
            case .verbose: verbose = true
            case .csv:
                guard let value, !value.isEmpty else { throw UsageError("'--csv' needs a file name, or - for stdout") }
                csv = value
            case .force: force = true
            case .append: append = true
            case .waitForDevice: waitForDevice = true
            case .csvRotate:
                guard let value, let rotation = CSVLog.Rotation(parsing: value) else {
                    throw UsageError("invalid value '\(value ?? "")' for '--csv-rotate' (expected daily, or a size such as 10M, 512K or 1G)")
                }
                csvRotate = rotation
            case .keep: keep = try Self.wholeNumber(value, for: name)
            case .sighup:
                switch value {
                case "end": sighupReopens = false
                case "reopen": sighupReopens = true
                default: throw UsageError("invalid value '\(value ?? "")' for '--sighup' (expected one of: end, reopen)")
                }
            case .noColor: noColor = true
            case .quiet: quiet = true
            case .uncalibrated: uncalibrated = true
            case .mqtt:
                guard let value else { throw UsageError("'--mqtt' needs a broker URL such as mqtt://host/PREFIX") }
                do throws(BrokerAddressError) { mqtt = try BrokerAddress(parsing: value) } catch { throw UsageError("\(error)") }
            case .board:
                guard let value, !value.isEmpty, BrokerAddress.topicProblem(value) == nil, !value.contains("/") else {
                    throw UsageError("invalid value '\(value ?? "")' for '--board' (a name for one topic level: no /, + or #)")
                }
                board = value
            case .mqttFormat:
                guard let value, let format = MQTTFormat(rawValue: value) else {
                    throw UsageError("invalid value '\(value ?? "")' for '--mqtt-format' (expected one of: json, influx)")
                }
                mqttFormat = format
            case .mqttCAFile, .mqttCertificate, .mqttKey, .mqttSpool:
                guard let value, !value.isEmpty else { throw UsageError("'\(name)' needs a file name") }
                switch spec.effect {
                case .mqttCAFile: mqttCAFile = value
                case .mqttCertificate: mqttCertificate = value
                case .mqttKey: mqttKey = value
                default: mqttSpool = value
                }
            case .mqttRequire: mqttRequire = true
            }
            if spec.continuousOnly, streamingFlag == nil { streamingFlag = name }
        }
        if let streamingFlag, let explicitMode, explicitMode.mode != .watch {
            throw UsageError("'\(streamingFlag)' applies to the continuous view and cannot be used with '\(explicitMode.flag)'")
        }
        if referenceFrameGiven {
            if mode == .list { throw UsageError("'--reference-frame' applies to device motion and cannot be used with '--list'") }
            if !deviceMotion {
                throw UsageError("'--reference-frame' applies to device motion; use it with '--sensor motion' or '--sensor all'")
            }
            if mode == .once && sensor != .motion {
                throw UsageError("'--once' reads device motion only with '--sensor motion' ('--once --sensor all' reads the sensors), so '--reference-frame' needs it")
            }
        }
        try checkLogging()
    }

    /// A whole number of at least 1 (`--count`, `--keep`), digits only.
    private static func wholeNumber(_ value: String?, for flag: String) throws(UsageError) -> Int {
        guard let value, value.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(value), n >= 1 else {
            throw UsageError("invalid value '\(value ?? "")' for '\(flag)' (expected a whole number of at least 1)")
        }
        return n
    }

    /// The rules between `--csv`, `--force`, `--append` and `--json`.
    private func checkLogging() throws(UsageError) {
        if force && append {
            throw UsageError("'--force' and '--append' cannot be used together (--force replaces the file, --append adds to it)")
        }
        for (flag, set) in [("--force", force), ("--append", append), ("--csv-rotate", csvRotate != nil),
                            ("--keep", keep != nil), ("--sighup reopen", sighupReopens)] where set {
            guard let csv else { throw UsageError("'\(flag)' applies to the log file and needs '--csv <file>'") }
            if csv == "-" { throw UsageError("'\(flag)' applies to a log file, not to '--csv -' (stdout)") }
        }
        if keep != nil && csvRotate == nil {
            throw UsageError("'--keep' counts the files of '--csv-rotate', and needs it")
        }
        if csvRotate != nil && (force || append) {
            throw UsageError("'--csv-rotate' starts new files named by the time, so '\(force ? "--force" : "--append")' does not apply")
        }
        if csv != nil && sensor == .motion {
            throw UsageError("'--csv' logs sensor samples as timestamp,sensor,device,x,y,z, which device motion does not fit; record device motion with '--json'")
        }
        if csvToStdout && json {
            throw UsageError("'--json' and '--csv -' both write to stdout; give '--csv' a file name")
        }
        if mqtt == nil {
            for (flag, set) in [("--board", board != nil), ("--mqtt-format", mqttFormat != .json), ("--mqtt-ca-file", mqttCAFile != nil),
                                ("--mqtt-cert", mqttCertificate != nil), ("--mqtt-key", mqttKey != nil),
                                ("--mqtt-spool", mqttSpool != nil), ("--mqtt-require", mqttRequire)] where set {
                throw UsageError("'\(flag)' applies to publishing and needs '--mqtt <url>'")
            }
        } else if sensor == .motion {
            throw UsageError("'--mqtt' publishes sensor samples; device motion alone ('--sensor motion') has none to publish")
        }
        if (mqttCertificate == nil) != (mqttKey == nil) {
            throw UsageError("'--mqtt-cert' and '--mqtt-key' go together (a client certificate and its key)")
        }
    }

    /// A plain decimal number such as `0.05`, `10` or `1e-3`: no sign, no hexadecimal, no `inf` or
    /// `nan` (which `Double.init` would accept).
    static func decimal(_ text: String) -> Double? {
        guard let first = text.first, first.isASCII, first.isNumber || first == ".",
              text.allSatisfy({ "0123456789.eE+-".contains($0) }),
              let d = Double(text), d.isFinite else { return nil }
        return d
    }

    /// The defaults: the continuous view of all sensors on `local:`.
    init() {}

    /// `--uri=ip:x` → (`--uri`, `ip:x`); `--once` → (`--once`, nil).
    private static func split(_ argument: String) -> (name: String, value: String?) {
        guard argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<eq]), String(argument[argument.index(after: eq)...]))
    }
}

/// A mistake on the command line: reported as one line on stderr plus a hint, exit status 64.
struct UsageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong, e.g. `unknown option '--foo'`.
    var message: String

    init(_ message: String) { self.message = message }

    var description: String { message }

    /// The two lines printed on stderr.
    var report: String {
        "\(MonitorOptions.commandName): error: \(message)\nRun '\(MonitorOptions.commandName) --help' for usage."
    }
}

extension String {
    /// Pads with spaces on the right to `width` characters (never truncates).
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
