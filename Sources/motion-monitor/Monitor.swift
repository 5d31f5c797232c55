@preconcurrency import Glibc // stdout and stderr are C globals
import IIOMotion

/// The program: parses the arguments, runs the chosen mode, returns the exit status.
enum Monitor {
    /// Runs `motion-monitor` with these arguments (without the program name).
    /// - Parameter arguments: the command-line arguments.
    /// - Returns: the exit status (see ``ExitStatus``).
    static func main(arguments: [String]) -> Int32 {
        let options: MonitorOptions
        do {
            options = try MonitorOptions(arguments: arguments)
        } catch {
            Console.error(error.report)
            return ExitStatus.usage
        }
        switch options.mode {
        case .help:
            Console.out(MonitorOptions.helpText)
            return ExitStatus.success
        case .version:
            Console.out("\(MonitorOptions.commandName) \(MonitorOptions.version) (libiio \(libiioVersion))")
            return ExitStatus.success
        case .list:
            return list(options)
        case .once:
            return emit(once(options))
        case .watch:
            return Watch.run(options)
        }
    }

    /// The manager for these options: every sensor kind uses the `--device` selector.
    static func makeManager(_ options: MonitorOptions) -> MotionManager {
        MotionManager(uri: options.uri, units: options.units, accelerometer: options.selector,
                      gyroscope: options.selector, magnetometer: options.selector)
    }

    // MARK: --list

    static func list(_ options: MonitorOptions) -> Int32 {
        let manager = makeManager(options)
        var devices: [DeviceInfo]
        do throws(MotionError) {
            devices = try manager.devices
        } catch {
            if let report = Report.contextFailure(error, uri: options.uri) { return emit(report) }
            devices = [] // no IIO on this machine: an empty list
        }
        if options.sensor != .all {
            devices = devices.filter { $0.sensors.contains { options.kinds.contains($0.kind) } }
        }
        if options.json {
            Console.out(Format.json(devices))
        } else if devices.isEmpty {
            Console.error("No IIO devices with motion sensors at \(options.uri).")
        } else {
            Console.out(Format.table(devices))
        }
        // Sensors discovery could not use: say why, where the user looks for trouble.
        for device in devices {
            for sensor in device.sensors {
                if let problem = sensor.problem {
                    Console.error("note: the \(sensor.kind) of \(sensor.deviceDescription) cannot be used: \(problem)")
                }
            }
        }
        return ExitStatus.success
    }

    // MARK: --once

    /// Reads one sample of each requested sensor.
    static func once(_ options: MonitorOptions) -> Report {
        let manager = makeManager(options)
        do throws(MotionError) {
            _ = try manager.devices
        } catch {
            if let report = Report.contextFailure(error, uri: options.uri) { return report }
        }
        let outcomes = options.kinds.map { kind in (kind: kind, outcome: sample(kind, from: manager)) }
        var report = Report.once(outcomes, json: options.json, units: options.units)
        if options.device != nil, outcomes.allSatisfy({ if case .missing = $0.outcome { true } else { false } }) {
            report.stderr.append(noMatchHint(options, manager))
        }
        return report
    }

    /// One sample of `kind`, or why there is none. A sensor that discovery found but cannot use
    /// (e.g. its scale is garbage) is a failure, not a missing sensor.
    static func sample(_ kind: SensorKind, from manager: MotionManager) -> Outcome {
        guard let info = manager.sensor(kind) else { return .missing }
        do throws(MotionError) {
            let (t, v): (Double, (Double, Double, Double))
            switch kind {
            case .accelerometer:
                let s = try manager.readAccelerometer()
                (t, v) = (s.timestamp, (s.acceleration.x, s.acceleration.y, s.acceleration.z))
            case .gyroscope:
                let s = try manager.readGyro()
                (t, v) = (s.timestamp, (s.rotationRate.x, s.rotationRate.y, s.rotationRate.z))
            case .magnetometer:
                let s = try manager.readMagnetometer()
                (t, v) = (s.timestamp, (s.magneticField.x, s.magneticField.y, s.magneticField.z))
            }
            return .reading(Reading(kind: kind, deviceID: info.deviceID, deviceDescription: info.deviceDescription,
                                    timestamp: t, x: v.0, y: v.1, z: v.2))
        } catch {
            return .failed(error)
        }
    }

    /// When `--device` matched nothing: which devices there are, so a typo is easy to fix.
    static func noMatchHint(_ options: MonitorOptions, _ manager: MotionManager) -> String {
        let devices = (try? manager.devices) ?? []
        let names = devices.map { d in
            let details = [d.name, d.label.map { "label \($0)" }].compactMap { $0 }
            return details.isEmpty ? d.id : "\(d.id) (\(details.joined(separator: ", ")))"
        }
        return "No device matches --device \(options.device ?? ""); devices with motion sensors: "
            + (names.isEmpty ? "none" : names.joined(separator: ", ")) + "."
    }

    /// Prints a report and returns its status.
    static func emit(_ report: Report) -> Int32 {
        for line in report.stdout { Console.out(line) }
        for line in report.stderr { Console.error(line) }
        return report.status
    }
}

/// Data to stdout, everything else to stderr.
enum Console {
    /// Writes a line of data to stdout.
    static func out(_ line: String) {
        fputs(line + "\n", stdout)
    }

    /// Writes a line to stderr, after flushing stdout so the two interleave in order on a terminal.
    static func error(_ line: String) {
        fflush(stdout)
        fputs(line + "\n", stderr)
    }

    /// Pushes buffered data out (the continuous view flushes after every line, so a pipe sees it live).
    static func flush() {
        fflush(stdout)
    }
}
