import Dispatch
@preconcurrency import Glibc // stdout and stderr are C globals
import IIOMotion
import SystemSupport

/// The program: parses the arguments, runs the chosen mode, returns the exit status.
enum Monitor {
    /// Runs `motion-monitor` with these arguments (without the program name).
    /// - Parameter arguments: the command-line arguments.
    /// - Returns: the exit status (see ``ExitStatus``).
    static func main(arguments: [String]) -> Int32 {
        if arguments.first == "plot" { return Plot.main(arguments: Array(arguments.dropFirst())) }
        if arguments.first == "calibrate" { return Calibrate.main(arguments: Array(arguments.dropFirst())) }
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
                      gyroscope: options.selector, magnetometer: options.selector,
                      calibration: options.uncalibrated ? .uncalibrated : .stored)
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
            // Device motion comes from the accelerometer and gyroscope: the devices with either.
            let kinds: [SensorKind] = options.sensor == .motion ? [.accelerometer, .gyroscope] : options.kinds
            devices = devices.filter { $0.sensors.contains { kinds.contains($0.kind) } }
        }
        if options.json {
            Console.out(Format.json(devices) { CalibrationNotes.json($0, uri: options.uri, uncalibrated: options.uncalibrated) })
        } else if devices.isEmpty {
            Console.error("No IIO devices with motion sensors at \(options.uri).")
        } else {
            Console.out(Format.table(devices))
            for line in CalibrationNotes.list(devices, uri: options.uri, uncalibrated: options.uncalibrated) { Console.out(line) }
        }
        // Mount matrices udev gave but that could not be used; with -v, or for a remote context,
        // that udev was not asked.
        let sayNoUdev = options.verbose || !options.uri.hasPrefix("local:")
        for line in MountMatrixText.notes(devices.flatMap(\.sensors), sayNoUdev: sayNoUdev) { Console.error(line) }
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

    /// Reads one sample of each requested sensor. Under `all` that is the accelerometer, the
    /// gyroscope and, when there is one, the magnetometer: device motion is an estimate made from
    /// a stream, so `--once` gives it only when asked for by name (``onceMotion(_:_:)``).
    static func once(_ options: MonitorOptions) -> Report {
        let manager = makeManager(options)
        do throws(MotionError) {
            _ = try manager.devices
        } catch {
            if let report = Report.contextFailure(error, uri: options.uri) { return report }
        }
        if options.sensor == .motion { return onceMotion(options, manager) }
        let kinds = options.kinds.filter { !options.sensor.isOptional($0) || manager.sensor($0) != nil }
        let outcomes = kinds.map { kind in (kind: kind, outcome: sample(kind, from: manager)) }
        var report = Report.once(outcomes, json: options.json, units: options.units)
        if options.json, let record = CalibrationNotes.jsonRecord(manager, kinds: kinds, uncalibrated: options.uncalibrated) {
            report.stdout.insert(record, at: 0)
        }
        report.stderr = MountMatrixText.notes(kinds.compactMap { manager.sensor($0) }, sayNoUdev: false) + report.stderr
        if options.device != nil, outcomes.allSatisfy({ if case .missing = $0.outcome { true } else { false } }) {
            report.stderr.append(noMatchHint(options, manager))
        }
        return report
    }

    /// How long `--once --sensor motion` waits for the first estimate.
    static let motionTimeout = 5.0

    /// `--once --sensor motion`: starts device motion, waits (up to ``motionTimeout``) for the
    /// filter's first estimate (its attitude is initialised from gravity, and from the magnetic
    /// field in a north-referenced frame), prints it, and stops.
    static func onceMotion(_ options: MonitorOptions, _ manager: MotionManager) -> Report {
        let present = Set(SensorKind.allCases.filter { manager.sensor($0) != nil })
        // By presence: a sensor that is there but cannot be used makes device motion fail with
        // that sensor's cause (below), which is what the user needs to hear.
        guard present.contains(.accelerometer), present.contains(.gyroscope) else {
            var report = Report(stderr: [Report.motionMissingMessage(present: present)], status: ExitStatus.unavailable)
            if options.device != nil, present.isEmpty { report.stderr.append(noMatchHint(options, manager)) }
            return report
        }
        let frames = Report.frames(present: present)
        guard frames.contains(options.referenceFrame.frame) else {
            return Report.frameUnavailable(options.referenceFrame, available: frames)
        }
        let first = Locked<(motion: DeviceMotion?, error: MotionError?)?>(nil)
        let arrived = DispatchSemaphore(value: 0)
        manager.deviceMotionUpdateInterval = 0
        manager.startDeviceMotionUpdates(using: options.referenceFrame.frame, to: DispatchQueue(label: "motion-monitor.once")) { m, e in
            let isFirst = first.withLock { f -> Bool in
                guard f == nil else { return false }
                f = (m, e)
                return true
            }
            if isFirst { arrived.signal() }
        }
        let timedOut = arrived.wait(timeout: .now() + motionTimeout) == .timedOut
        manager.stopAllUpdates()
        let outcome = first.withLock { $0 }
        if let m = outcome?.motion {
            return Report(stdout: [options.json ? Format.json(m) : Format.line(m)])
        }
        if let error = outcome?.error {
            return Report(stderr: [Report.motionFailureMessage(error)], status: ExitStatus.of(error))
        }
        _ = timedOut
        return Report(stderr: ["Device motion gave no estimate within \(Format.shortest(motionTimeout)) s: the accelerometer and gyroscope delivered no samples it could pair. Run without --once to watch them (--verbose says how each is read)."],
                      status: ExitStatus.ioError)
    }

    /// One sample of `kind`, or why there is none. A sensor that discovery found but cannot use
    /// (e.g. its scale is garbage) is a failure, not a missing sensor.
    static func sample(_ kind: SensorKind, from manager: MotionManager) -> Outcome {
        guard let info = manager.sensor(kind) else { return .missing }
        do throws(MotionError) {
            let (id, description) = (info.deviceID, info.deviceDescription)
            switch kind {
            case .accelerometer: return .reading(Reading(try manager.readAccelerometer(), deviceID: id, deviceDescription: description))
            case .gyroscope: return .reading(Reading(try manager.readGyro(), deviceID: id, deviceDescription: description))
            case .magnetometer: return .reading(Reading(try manager.readMagnetometer(), deviceID: id, deviceDescription: description))
            }
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
