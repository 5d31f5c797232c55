import IIOMotion
import MotionMQTT

// MARK: - The option table

extension MonitorOptions {
    /// What an option does when it is seen.
    enum Effect: Equatable, Sendable {
        case mode(Mode), json, si, uri, device, sensor, referenceFrame
        case interval, rate, count, duration, captureMode, verbose
        case csv, force, append, csvRotate, keep, sighup, waitForDevice, noColor, quiet
        case mqtt, board, mqttFormat, mqttCAFile, mqttCertificate, mqttKey, mqttSpool, mqttRequire
        case uncalibrated
    }

    /// One option: its spellings, its value's name if it takes one, and its help.
    struct Spec: Sendable {
        var names: [String]
        var valueName: String?
        var help: String
        var effect: Effect

        /// Whether the option only makes sense for the continuous view (not with `--once` or `--list`).
        var continuousOnly: Bool {
            switch effect {
            case .interval, .rate, .count, .duration, .captureMode, .csv, .force, .append, .csvRotate, .keep, .sighup, .waitForDevice, .quiet: true
            case .mqtt, .board, .mqttFormat, .mqttCAFile, .mqttCertificate, .mqttKey, .mqttSpool, .mqttRequire: true
            default: false
            }
        }
    }

    /// The program's name in help and messages.
    static let commandName = "motion-monitor"

    /// The version `--version` prints.
    static let version = "0.1.0"

    /// One line on what the program does.
    static let abstract = "Show the Linux IIO motion sensors of this machine (or of a remote iiod) and the device motion fused from them."

    /// Every option, in help order.
    static let specs: [Spec] = [
        Spec(names: ["--list"], help: "List the IIO devices that have motion sensors, and exit.", effect: .mode(.list)),
        Spec(names: ["--once"], help: "Read one sample of each requested sensor, print it, and exit.", effect: .mode(.once)),
        Spec(names: ["--json"], help: "Print JSON: with --list an array of devices; otherwise one object per reading per line.",
             effect: .json),
        Spec(names: ["--si"], help: "Acceleration in m/s² with the kernel's sign (face up: z ≈ +9.81) instead of Core Motion's g (face up: z ≈ −1).",
             effect: .si),
        Spec(names: ["--uri"], valueName: "uri", help: "The libiio context: local: (default), ip:HOST[:PORT] for an iiod, or any URI libiio accepts.",
             effect: .uri),
        Spec(names: ["--device"], valueName: "device",
             help: "Read from this device (an IIO id such as iio:device1, a label such as accel-base, or a driver name) when several offer a sensor. Default: the display's accelerometer before the base's.",
             effect: .device),
        Spec(names: ["--sensor"], valueName: "sensor",
             help: "Which sensors to read: \(SensorChoice.allCases.map(\.rawValue).joined(separator: ", ")). motion is device motion: attitude, gravity, user acceleration and rotation rate fused from the accelerometer and gyroscope (and magnetometer). all is every sensor this machine has, and device motion when it has an accelerometer and a gyroscope (default: all).",
             effect: .sensor),
        Spec(names: ["--reference-frame"], valueName: "frame",
             help: "Device motion's reference frame: arbitrary (z vertical, x where the device pointed at start), corrected (the same, yaw held by the magnetometer) or north (x towards magnetic north, with a heading); corrected and north need a magnetometer (default: arbitrary).",
             effect: .referenceFrame),
        Spec(names: ["--interval"], valueName: "seconds",
             help: "The update interval: at most one reading per interval per sensor, the newest; 0 prints every sample, none skipped (default: 0.1).",
             effect: .interval),
        Spec(names: ["--rate"], valueName: "hz",
             help: "Ask the device for this sampling frequency; it may round to one it supports (default: the lowest that serves the interval, at least 10 Hz).",
             effect: .rate),
        Spec(names: ["--count"], valueName: "n", help: "Stop after n readings of each sensor (default: no limit).", effect: .count),
        Spec(names: ["--duration"], valueName: "seconds", help: "Stop after this many seconds (default: no limit).", effect: .duration),
        Spec(names: ["--mode"], valueName: "mode",
             help: "How sensors are read: buffered (the kernel's buffer, every sample), polled (the raw files, on a timer), or auto: buffered where possible, else polled, with a note on stderr saying why (default: auto).",
             effect: .captureMode),
        Spec(names: ["--csv"], valueName: "file",
             help: "Also log every sample (none skipped, whatever --interval says) to this CSV file, or to stdout with -: a header timestamp,sensor,device,x,y,z, then one row per sample per sensor, in the units of the view. A file that exists is refused unless --force or --append (default: no log).",
             effect: .csv),
        Spec(names: ["--force"], help: "Let --csv replace a file that exists.", effect: .force),
        Spec(names: ["--append"], help: "Add rows to the --csv file if it exists, without a second header.", effect: .append),
        Spec(names: ["--csv-rotate"], valueName: "when",
             help: "Log to a series of files named after --csv and the local time they were started (ride.csv: ride-20261201T134501.csv, ride-20261201T134501_002.csv for a second one in the same second, …), each whole with its own header, none of them split mid-batch: a new one when the next batch would take the file past a size (10M, 512K, 1G or bytes), or at the first batch after midnight with daily.",
             effect: .csvRotate),
        Spec(names: ["--keep"], valueName: "n", help: "With --csv-rotate, keep the n newest files and remove the older ones (default: keep all).", effect: .keep),
        Spec(names: ["--wait-for-device"],
             help: "Wait for the sensors instead of giving up: when none of those asked for is there yet, until one appears; when a sensor's device goes away (unplugged, its driver reloaded), until a device of the same name and label is back, maybe under another iio:deviceN, and go on logging (the gap shows in the timestamps, and stderr says when it went and came back).",
             effect: .waitForDevice),
        Spec(names: ["--sighup"], valueName: "action",
             help: "What SIGHUP does: end (end the run, as a hangup) or reopen (reopen the --csv file, created anew if it was moved away, as logrotate expects; with --csv-rotate, start the next file) (default: end).",
             effect: .sighup),
        Spec(names: ["--mqtt"], valueName: "url",
             help: "Also publish every sample to an MQTT broker, mqtt[s]://[user[:password]@]host[:port]/PREFIX, at QoS 1, one message per sensor per batch on PREFIX/<board>/<sensor>, with a retained PREFIX/<board>/status. While the broker is away samples wait, in order, in memory and then in a spool file, and are sent when it is back (motion-collect gathers every board into one log).",
             effect: .mqtt),
        Spec(names: ["--board"], valueName: "name", help: "The board's name in MQTT topics (default: the host name).", effect: .board),
        Spec(names: ["--mqtt-format"], valueName: "format",
             help: "The MQTT payload: json (the --json objects, one per line) or influx (InfluxDB line protocol, wall-clock time) (default: json).",
             effect: .mqttFormat),
        Spec(names: ["--mqtt-ca-file"], valueName: "file", help: "The CA certificate that vouches for an mqtts:// broker (default: the system's).", effect: .mqttCAFile),
        Spec(names: ["--mqtt-cert"], valueName: "file", help: "A client certificate (PEM) for an mqtts:// broker that asks for one.", effect: .mqttCertificate),
        Spec(names: ["--mqtt-key"], valueName: "file", help: "The client certificate's key (PEM).", effect: .mqttKey),
        Spec(names: ["--mqtt-spool"], valueName: "file",
             help: "Where samples go while the broker is away and 16 MiB of memory are full, up to 1 GiB (default: a file in $XDG_RUNTIME_DIR or /var/tmp, removed at the end).",
             effect: .mqttSpool),
        Spec(names: ["--mqtt-require"], help: "End with status 69 when the broker cannot be reached within 5 s of the start, instead of spooling until it can.",
             effect: .mqttRequire),
        Spec(names: ["--uncalibrated"],
             help: "Readings without the accelerometer and gyroscope calibrations stored by 'motion-monitor calibrate' (as the kernel gives them).",
             effect: .uncalibrated),
        Spec(names: ["-q", "--quiet"], help: "Print no readings on stdout: with --csv FILE the log is the only output.", effect: .quiet),
        Spec(names: ["--no-color"], help: "No colour in the live view (also when NO_COLOR is set or TERM is dumb).", effect: .noColor),
        Spec(names: ["-v", "--verbose"], help: "Say on stderr how each sensor is read (mode, sampling frequency) and, at the end, how many samples it delivered.",
             effect: .verbose),
        Spec(names: ["-h", "--help"], help: "Show help information.", effect: .mode(.help)),
        Spec(names: ["--version"], help: "Show the version.", effect: .mode(.version)),
    ]

    /// The text `--help` prints.
    static var helpText: String {
        var lines = [
            "OVERVIEW: \(abstract)",
            "",
            "Readings use Core Motion's conventions: acceleration in g (a device lying face up reads z ≈ −1),",
            "rotation rate in rad/s (right-hand rule), magnetic field in µT, timestamps in seconds on",
            "CLOCK_MONOTONIC, axes after the sensor's mount matrix. Device motion's angles are shown in degrees",
            "and written in radians in JSON. Data goes to stdout; messages go to stderr.",
            "",
            "USAGE: \(commandName) [--list | --once] [--json] [--si] [--uri <uri>] [--device <device>] [--sensor <sensor>]",
            "                      [--reference-frame <frame>] [--interval <seconds>] [--rate <hz>] [--count <n>]",
            "                      [--duration <seconds>] [--mode <mode>] [--csv <file> [--force | --append]]",
            "                      [--csv-rotate <when> [--keep <n>]] [--sighup end|reopen] [--quiet] [--no-color] [--verbose]",
            "       \(commandName) plot <log.csv>... [-o <file.svg>]   (draws a --csv log; see plot --help)",
            "",
            "  Without --list or --once, streams readings (by default the newest, ten times a second) until",
            "  --count or --duration is reached or it is interrupted (Ctrl-C or SIGTERM end it with status 0).",
            "  On a terminal it draws a live view, one panel per sensor; otherwise one line per reading, or with",
            "  --json one object per reading per line. --csv logs every sample as well; Ctrl-C loses none, and",
            "  a stdout that does not keep up (a pipe nobody reads, a slow terminal) never holds the log: the",
            "  display skips, the log stays complete (see the man page: SLOW AND CLOSED OUTPUT).",
            "  Device motion is shown and printed but not logged: its values do not fit the CSV's columns.",
            "",
            "       \(commandName) calibrate [--uri <uri>] [--device <device>]   (see \(commandName) calibrate --help)",
            "",
            "  Calibrates the accelerometer and gyroscope: the board laid on its six faces in turn. Every",
            "  reading is calibrated from then on; --uncalibrated reads without it.",
            "",
            "OPTIONS:",
        ]
        for spec in specs {
            var left = "  " + spec.names.joined(separator: ", ")
            if let v = spec.valueName { left += " <\(v)>" }
            let words = spec.help.split(separator: " ").map(String.init)
            let wrapped = wrap(words, width: 100 - 26)
            for (i, line) in wrapped.enumerated() {
                let prefix = i == 0 ? left : ""
                if i == 0, prefix.count >= 25 {
                    lines.append(prefix)
                    lines.append(String(repeating: " ", count: 26) + line)
                } else {
                    lines.append(prefix.padding(to: 26) + line)
                }
            }
        }
        lines += [
            "",
            "EXIT STATUS:",
            "  0   success (also after Ctrl-C, --count or --duration in the continuous view, and when stdout",
            "      was closed: with --csv FILE the log goes on, otherwise the run ends as after Ctrl-C)",
            "  64  usage error",
            "  69  none of the requested sensors exists (each missing one is named on stderr), or the",
            "      --reference-frame needs a magnetometer this machine does not have",
            "  73  the --csv file exists (use --force or --append) or cannot be created",
            "  74  a sensor exists but could not be read (I/O error or unreadable contents; in the continuous",
            "      view the failed sensor stops, the others go on, and the run ends with this status), or",
            "      writing the --csv log failed (disk full): the rows written before stay, whole, or stdout,",
            "      carrying every sample (--csv -, --interval 0), could not take them all (the summary counts them)",
            "  77  permission denied (see udev/ and scripts/install-udev)",
            "  130 a second Ctrl-C while the run was ending (it ends within a second; the second ends it at once)",
            "",
            "EXAMPLES:",
            "  \(commandName) --list",
            "  \(commandName) --once --json",
            "  \(commandName) --uri ip:raspberrypi.local --sensor gyroscope",
            "  \(commandName) --sensor motion --reference-frame north",
            "  \(commandName) --json --interval 0 --rate 400 --duration 10 > motion.jsonl",
            "  \(commandName) --csv ride.csv                 # live view, and every sample logged",
            "  \(commandName) --csv - --rate 200 | head",
        ]
        return lines.joined(separator: "\n")
    }

    private static func wrap(_ words: [String], width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in words {
            if current.isEmpty {
                current = word
            } else if current.count + 1 + word.count <= width {
                current += " " + word
            } else {
                lines.append(current)
                current = word
            }
        }
        if !current.isEmpty { lines.append(current) }
        return lines
    }
}
