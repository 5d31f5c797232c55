import Glibc
import IIOMotion

/// Exit statuses, from BSD's sysexits.h (the values scripts can rely on).
enum ExitStatus {
    static let success: Int32 = 0
    /// EX_USAGE: the command line was wrong.
    static let usage: Int32 = 64
    /// EX_UNAVAILABLE: none of the requested sensors exists, or the IIO context cannot be opened.
    static let unavailable: Int32 = 69
    /// EX_CANTCREAT: the `--csv` file exists (without `--force` or `--append`) or cannot be created.
    static let cannotCreate: Int32 = 73
    /// EX_IOERR: a sensor exists but reading it failed or gave unusable contents.
    static let ioError: Int32 = 74
    /// EX_NOPERM: the operating system refused access.
    static let permissionDenied: Int32 = 77

    /// The status for a library error.
    static func of(_ error: MotionError) -> Int32 {
        switch error.code {
        case .permissionDenied: permissionDenied
        case .notAvailable, .contextUnavailable: unavailable
        default: ioError
        }
    }
}

/// What happened to one requested sensor.
enum Outcome: Sendable {
    case reading(Reading)
    /// Discovery found no such sensor (on the selected device).
    case missing
    /// The sensor exists but could not be read.
    case failed(MotionError)
}

/// What a run prints and how it ends, decided without doing any I/O (the tests check it directly).
struct Report: Equatable, Sendable {
    var stdout: [String] = []
    var stderr: [String] = []
    var status: Int32 = ExitStatus.success

    /// `This device has no accelerometer.` — pinned; scripts match it.
    static func missingMessage(_ kind: SensorKind) -> String {
        "This device has no \(kind.rawValue)."
    }

    /// `Accelerometer encountered error: …` followed by the error's full sentence and its remedy.
    static func failureMessage(_ kind: SensorKind, _ error: MotionError) -> String {
        let name = kind.rawValue.prefix(1).uppercased() + kind.rawValue.dropFirst()
        return "\(name) encountered error: \(Advice.text(error))"
    }

    /// `Device motion encountered error: …` followed by the error's full sentence and its remedy.
    static func motionFailureMessage(_ error: MotionError) -> String {
        "Device motion encountered error: \(Advice.text(error))"
    }

    /// The report of `--once`: a line per reading on stdout, a message per missing or failed
    /// sensor on stderr, in the order requested.
    ///
    /// Status: the first failure's status (74, or 77 for permission denied); otherwise 69 when
    /// every requested sensor is missing; otherwise 0 (a missing sensor among present ones is
    /// reported but is not a failure).
    static func once(_ outcomes: [(kind: SensorKind, outcome: Outcome)], json: Bool, units: MotionUnits) -> Report {
        var report = Report()
        var failure: Int32?
        for (kind, outcome) in outcomes {
            switch outcome {
            case .reading(let r):
                report.stdout.append(json ? Format.json(r) : Format.line(r, units: units))
            case .missing:
                report.stderr.append(missingMessage(kind))
            case .failed(let error):
                report.stderr.append(failureMessage(kind, error))
                failure = failure ?? ExitStatus.of(error)
            }
        }
        if let failure {
            report.status = failure
        } else if !outcomes.contains(where: { if case .missing = $0.outcome { false } else { true } }) {
            report.status = ExitStatus.unavailable
        }
        return report
    }

    /// Before a continuous view: which requested sensors exist, and the messages for the missing
    /// ones. The status is 69 when none exists (and the view must not start), else 0.
    /// - Parameters:
    ///   - requested: the IIO sensors asked for.
    ///   - present: those the machine has.
    ///   - optional: sensors whose absence is not mentioned (the magnetometer under `all`).
    ///   - motion: device motion: nil when not requested, else whether it can run, and whether it
    ///     was asked for by name (`--sensor motion`: its absence is then reported).
    static func availability(requested: [SensorKind], present: Set<SensorKind>, optional: Set<SensorKind> = [],
                             motion: (available: Bool, explicit: Bool)? = nil) -> (report: Report, readable: [SensorKind]) {
        var report = Report()
        let readable = requested.filter { present.contains($0) }
        for kind in requested where !present.contains(kind) && !optional.contains(kind) {
            report.stderr.append(missingMessage(kind))
        }
        if let motion, !motion.available, motion.explicit {
            report.stderr.append(motionMissingMessage(present: present))
        }
        if readable.isEmpty && !(motion?.available ?? false) { report.status = ExitStatus.unavailable }
        return (report, readable)
    }

    /// `This device has no device motion: it needs an accelerometer and a gyroscope, and has no gyroscope.`
    /// - Parameter present: the IIO sensors the machine has.
    static func motionMissingMessage(present: Set<SensorKind>) -> String {
        let missing = [SensorKind.accelerometer, .gyroscope].filter { !present.contains($0) }.map(\.rawValue)
        let lacking = missing.isEmpty ? "" : ", and has no " + missing.joined(separator: " and no ")
        return "This device has no device motion: it needs an accelerometer and a gyroscope\(lacking)."
    }

    /// The reference frames a machine with these sensors offers: arbitrary with an accelerometer
    /// and a gyroscope, corrected and north with a magnetometer as well. By presence, not by
    /// usability: a sensor that is there but cannot be used is no reason to refuse a frame (device
    /// motion then fails with that sensor's cause, where its estimates would be shown).
    static func frames(present: Set<SensorKind>) -> AttitudeReferenceFrame {
        guard present.contains(.accelerometer), present.contains(.gyroscope) else { return [] }
        return present.contains(.magnetometer) ? [.xArbitraryZVertical, .xArbitraryCorrectedZVertical, .xMagneticNorthZVertical]
            : .xArbitraryZVertical
    }

    /// Why a `--reference-frame` cannot be used here, with the frames that can (exit 69).
    /// - Parameters:
    ///   - choice: the frame asked for.
    ///   - available: the frames this machine offers (the library's `availableAttitudeReferenceFrames()`).
    static func frameUnavailable(_ choice: MonitorOptions.ReferenceFrameChoice, available: AttitudeReferenceFrame) -> Report {
        let offered = MonitorOptions.ReferenceFrameChoice.available(available)
        let list = offered.isEmpty ? "none (device motion needs an accelerometer and a gyroscope)"
            : offered.map { "\($0.rawValue) (\($0.frameName))" }.joined(separator: ", ")
        return Report(stderr: [
            "\(MonitorOptions.commandName): the reference frame \(choice.rawValue) (\(choice.frameName)) needs a magnetometer, and this device has none. Frames available here: \(list)."
        ], status: ExitStatus.unavailable)
    }

    /// When the IIO context cannot be opened: a local machine without IIO has no sensors (the
    /// availability messages, as for any missing sensor); anything else (an unreachable iiod,
    /// permission denied) is reported as the error it is.
    /// - Returns: nil when the failure means "no IIO here", else the report of the error.
    static func contextFailure(_ error: MotionError, uri: String) -> Report? {
        if error.code == .contextUnavailable, error.underlyingErrno == ENOENT, uri.hasPrefix("local:") {
            return nil
        }
        return Report(stderr: ["\(MonitorOptions.commandName): \(Advice.text(error))"], status: ExitStatus.of(error))
    }
}
