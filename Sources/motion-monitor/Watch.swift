import Glibc
import IIOMotion

/// The default mode for now: plain lines of polled readings, about ten a second, until SIGINT or
/// SIGTERM, which end it with status 0 (the user asked it to stop; that is success).
///
/// This is a stand-in. The live view (issue D) replaces `run(_:)` wholesale; what it can keep is
/// the availability check at the top and the signal handling: SIGINT and SIGTERM are blocked
/// before libiio starts any thread and then *waited for* with `sigtimedwait` in place of the sleep
/// between polls, so no signal handler runs and nothing calls libiio from one (the approach of
/// libiio's own `iio_readdev`, which gives signals to a `sigwait` thread).
enum Watch {
    /// Time between polls, in seconds.
    static let interval = 0.1

    static func run(_ options: MonitorOptions) -> Int32 {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        let manager = Monitor.makeManager(options)
        var present = Set<SensorKind>()
        do throws(MotionError) {
            _ = try manager.devices
            present = Set(options.kinds.filter { manager.sensor($0) != nil })
        } catch {
            if let report = Report.contextFailure(error, uri: options.uri) { return Monitor.emit(report) }
        }
        let (report, kinds) = Report.availability(requested: options.kinds, present: present)
        if report.status != ExitStatus.success {
            if options.device != nil { Console.error(Monitor.noMatchHint(options, manager)) }
        }
        _ = Monitor.emit(report)
        guard report.status == ExitStatus.success else { return report.status }

        while true {
            var readings: [Reading] = []
            for kind in kinds {
                switch Monitor.sample(kind, from: manager) {
                case .reading(let r): readings.append(r)
                case .missing: return Monitor.emit(Report(stderr: [Report.missingMessage(kind)], status: ExitStatus.unavailable))
                case .failed(let error):
                    return Monitor.emit(Report(stderr: [Report.failureMessage(kind, error)], status: ExitStatus.of(error)))
                }
            }
            if options.json {
                for r in readings { Console.out(Format.json(r)) }
            } else {
                Console.out(Format.watchLine(readings, units: options.units))
            }
            Console.flush()
            if waitForSignal(in: &signals, seconds: interval) { return ExitStatus.success }
        }
    }

    /// Sleeps up to `seconds`, returning early and true if one of `signals` (blocked) arrives.
    private static func waitForSignal(in signals: inout sigset_t, seconds: Double) -> Bool {
        var timeout = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
        while true {
            let signal = sigtimedwait(&signals, nil, &timeout)
            if signal > 0 { return true }
            // EINTR (e.g. SIGCONT after a stop) restarts the wait; a retry from the full interval
            // only stretches one tick. EAGAIN is the timeout.
            if errno != EINTR { return false }
        }
    }
}
