import Dispatch
@preconcurrency import Glibc // stdout and stderr are C globals
import IIOMotion
import SystemSupport
import Synchronization

/// The continuous mode: streams each requested sensor through the library's streaming API into a
/// ``WatchSession`` (the live view, lines or JSON, and the `--csv` log), until `--count` readings of
/// every sensor, `--duration`, SIGINT, SIGTERM or SIGHUP, until every sensor has failed, until the
/// log cannot be written, or until stdout closes when there is no log file to keep going for.
///
/// - Lines and JSON with `--interval S` > 0: push handlers, at most one reading per interval per
///   sensor, the newest (Core Motion's `startAccelerometerUpdates(to:withHandler:)`).
/// - The log, the live view, and lines with `--interval 0`: batched handlers with every sample
///   the sensor makes, none coalesced (the live view draws the newest of them each frame).
///
/// Handlers run in one serial queue, ``WatchSession/queue``, which writes the log file and hands
/// everything for stdout and stderr to their ``OutputChannel``s: only their threads ever wait for
/// a terminal or a pipe. Without a log file or a broker the handlers enter that queue from the
/// capture thread itself (``WatchSession/inline``): a refill wakes one thread, as libiio's own
/// reader does. libiio's stderr goes through a ``StderrFilter``.
///
/// Signals: SIGINT, SIGTERM, SIGHUP (and for the live view SIGWINCH, SIGTSTP and SIGCONT) are
/// blocked before libiio or Dispatch start any thread (threads inherit the mask) and then *waited
/// for* with `sigtimedwait` on the main thread, so no signal handler runs and nothing calls libiio
/// or touches the terminal from one (the approach of libiio's own `iio_readdev`). SIGPIPE is
/// ignored: a closed stdout is an `EPIPE` its channel reports. The session wakes the main thread
/// the same way, with a SIGUSR1 sent to it, when the run is done; the main thread otherwise
/// sleeps, so an idle monitor costs no wake-ups.
///
/// The end is bounded: every way out (the end, a signal, an error) goes through the same stop
/// (the library's updates first, so it can restore what it changed on the device), flush of the
/// log, restore of the terminal and summary, on a thread of its own, done within one second
/// whatever stdout and stderr do. A second SIGINT, SIGTERM or SIGHUP meanwhile ends at once.
enum Watch {
    /// How long after the end is decided the run exits at the latest, whatever stdout does.
    static let endBudget = 0.9

    static func run(_ options: MonitorOptions) -> Int32 {
        let display = Display.choose(options, stdoutIsTerminal: isatty(STDOUT_FILENO) == 1,
                                     environment: environmentVariables())
        var live = false
        if case .live = display { live = true }
        var signals = sigset_t()
        sigemptyset(&signals)
        var waited = [SIGINT, SIGTERM, SIGHUP, WatchSession.wakeSignal]
        if live { waited += [SIGWINCH, SIGTSTP, SIGCONT] }
        for s in waited { sigaddset(&signals, s) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)

        let io = WatchIO(verbose: options.verbose)
        let manager = Monitor.makeManager(options)
        var present = Set<SensorKind>()
        var announced = false
        while true {
            do throws(MotionError) {
                _ = try manager.devices
                present = Set(SensorKind.allCases.filter { manager.sensor($0) != nil })
            } catch {
                if !options.waitForDevice, let report = Report.contextFailure(error, uri: options.uri) { return io.end(io.emit(report)) }
            }
            // --wait-for-device: none of the sensors asked for is there yet; look again twice a second.
            guard options.waitForDevice, options.kinds.allSatisfy({ !present.contains($0) }) else { break }
            if !announced {
                announced = true
                io.error("\(MonitorOptions.commandName): waiting for \(options.kinds.map { "a \($0)" }.joined(separator: " or ")) (none is there yet).")
            }
            let (signal, _) = waitForSignal(in: &signals, seconds: 0.5)
            if signal == SIGINT || signal == SIGTERM || signal == SIGHUP { return io.end(ExitStatus.success) }
            manager.rediscover()
        }
        if announced { io.error("\(MonitorOptions.commandName): found \(options.kinds.filter { present.contains($0) }.map(\.rawValue).joined(separator: " and ")).") }
        // Device motion runs when asked for and possible, and when something shows it: under `all`
        // with nothing on stdout (--quiet, --csv -) it would only cost the 100 Hz it needs.
        // "Possible" is by presence: a sensor that is there but cannot be used (a garbage scale)
        // makes device motion fail with that sensor's cause, shown where its estimates would be,
        // while the sensors that work stream.
        let motionAvailable = present.contains(.accelerometer) && present.contains(.gyroscope)
        let motionExplicit = options.sensor == .motion || options.referenceFrame != .arbitrary
        let motion = options.deviceMotion && motionAvailable && (display != .none || options.sensor == .motion)
        let optional = Set(options.kinds.filter { options.sensor.isOptional($0) })
        let (report, kinds) = Report.availability(requested: options.kinds, present: present, optional: optional,
                                                  motion: options.deviceMotion ? (motionAvailable, motionExplicit) : nil)
        if report.status != ExitStatus.success {
            _ = io.emit(report)
            if options.device != nil { io.error(Monitor.noMatchHint(options, manager)) }
            return io.end(report.status)
        }
        let frames = Report.frames(present: present)
        if options.deviceMotion, motionAvailable, !frames.contains(options.referenceFrame.frame) {
            return io.end(io.emit(Report.frameUnavailable(options.referenceFrame, available: frames)))
        }
        // In the live view the availability messages are shown in place of the panels, and
        // repeated on stderr once the terminal is given back.
        if !live { _ = io.emit(report) }
        if display == .json, let record = CalibrationNotes.jsonRecord(manager, kinds: kinds, uncalibrated: options.uncalibrated) {
            _ = io.stdout.control(record + "\n")
        }

        let queue = DispatchQueue(label: "motion-monitor.session")
        var log: CSVLog?
        if let path = options.csv {
            do throws(CSVLog.OpenError) {
                log = try CSVLog(path: path, force: options.force, append: options.append, queue: queue, stdout: io.stdout,
                                 rotation: options.csvRotate, keep: options.keep, note: { [io] in io.error($0) },
                                 comment: CalibrationNotes.csvComment(manager, kinds: kinds, uncalibrated: options.uncalibrated,
                                                                     appending: options.append))
            } catch {
                io.error(error.message)
                return io.end(error.status)
            }
        }
        var mqtt: MQTTSink?
        if let broker = options.mqtt {
            do throws(MQTTSink.StartError) {
                mqtt = try MQTTSink(options: options, broker: broker)
            } catch {
                queue.sync { log?.close() }
                io.error(error.message)
                return io.end(error.status)
            }
        }
        let session = WatchSession(
            options: options, queue: queue, display: display, stdout: io.stdout, stderr: io.stderr, log: log, mqtt: mqtt,
            sensors: kinds.compactMap { manager.sensor($0) },
            period: { [manager] kind in
                guard manager.mode(of: kind) == .buffered, let hz = manager.samplingFrequency(of: kind), hz > 0 else { return nil }
                return 1 / hz
            },
            mainThread: pthread_self(), motion: motion,
            makeLive: { queue in
                guard case .live(let color, let unicode) = display else { return nil }
                let shown = options.kinds.filter { present.contains($0) || !optional.contains($0) }
                return LiveView(queue: queue, out: io.stdout, style: ScreenStyle(color: color, unicode: unicode), options: options,
                                sensors: shown.map { ($0, present.contains($0) ? manager.sensor($0) : nil) },
                                motion: motion ? options.referenceFrame : nil, log: log)
            })
        io.stdout.onEnd { [session] outcome in session.stdoutEnded(outcome) }
        for line in report.stderr where live { session.report(line) }
        Terminal.restoreOnCrash(terminal: live)
        start(kinds, of: manager, options: options, session: session)
        if let view = session.live {
            queue.sync { view.start() }
        }

        let deadline = options.duration.map { monotonicSeconds() + $0 }
        var first: (signal: Int32, sender: pid_t, time: Double)?
        waiting: while !session.isFinished {
            var timeout = 3600.0
            if let deadline {
                timeout = deadline - monotonicSeconds()
                if timeout <= 0 {
                    session.durationElapsed()
                    break
                }
            }
            if options.waitForDevice {
                timeout = min(timeout, 0.5)
                replug(manager: manager, options: options, session: session)
            }
            let (signal, sender) = waitForSignal(in: &signals, seconds: timeout)
            switch signal {
            case SIGHUP where options.sighupReopens:
                // logrotate moved the file away: rows so far are in it, the next batch goes to the new one.
                queue.async { [log] in
                    if let log, let problem = log.reopen() { session.report("\(MonitorOptions.commandName): \(problem)") }
                    else if options.verbose, let log { session.report("\(MonitorOptions.commandName): SIGHUP: logging to \(log.name)") }
                }
            case SIGINT, SIGTERM, SIGHUP:
                first = (signal, sender, monotonicSeconds())
                break waiting
            case SIGWINCH:
                queue.async { session.live?.resize() }
            case SIGTSTP:
                // Ctrl-Z: give the terminal back (for at most 0.2 s), then stop for real
                // (SIGSTOP cannot be caught).
                queue.sync { session.live?.suspend() }
                io.stdout.drain(until: monotonicSeconds() + 0.2)
                kill(getpid(), SIGSTOP)
            case SIGCONT:
                queue.async { session.live?.resume() }
            default:
                continue
            }
        }
        return end(session, manager: manager, kinds: kinds, io: io, options: options, signals: &signals, first: first)
    }

    /// The end, within ``endBudget`` whatever stdout and stderr do: on a thread of its own, stop
    /// the library's updates (this joins the capture threads while the handlers are still
    /// registered, and lets the library restore the device), drain the session's queue (every
    /// sample read before the stop is logged) and close the log, give the terminal back, and let
    /// stdout and then stderr (the summary) drain until their deadlines. The main thread waits for
    /// that or for a second SIGINT, SIGTERM or SIGHUP, which ends the run at once (status 128 + the
    /// signal) once the stop has returned (waiting at most 0.25 s for it), restoring the terminal.
    ///
    /// A Ctrl-C reaches every process of the terminal's foreground group: a wrapper that forwards
    /// it (iio-sim, a supervisor) delivers the same keypress a second time, from another sender,
    /// moments later. A signal from a sender other than the first one's within 0.5 s is taken
    /// for that copy, not for a second request.
    private static func end(_ session: WatchSession, manager: MotionManager, kinds: [SensorKind], io: WatchIO,
                            options: MonitorOptions, signals: inout sigset_t,
                            first: (signal: Int32, sender: pid_t, time: Double)?) -> Int32 {
        let start = monotonicSeconds()
        let result = Locked<Int32?>(nil)
        let stopped = DispatchSemaphore(value: 0)
        let main = pthread_self()
        startThread("mm-end") {
            manager.stopAllUpdates()
            stopped.signal()
            let statistics = kinds.map { ($0, manager.updateStatistics(of: $0)) }
            let status = session.finish(statistics: statistics, verbose: options.verbose, until: start + endBudget - 0.25)
            // Past the budget only when --mqtt waited for its broker: stderr still gets its moment.
            _ = io.end(status, until: max(start + endBudget, monotonicSeconds() + 0.25))
            result.withLock { $0 = status }
            pthread_kill(main, WatchSession.wakeSignal)
        }
        while true {
            let (signal, sender) = waitForSignal(in: &signals, seconds: 60)
            if let status = result.withLock({ $0 }) { return status }
            if signal == SIGINT || signal == SIGTERM || signal == SIGHUP {
                if let first, first.sender != sender, monotonicSeconds() - first.time < 0.5 { continue }
                _ = stopped.wait(timeout: .now() + 0.25)
                if session.live != nil { writeWithin(STDOUT_FILENO, "\r\n" + Terminal.restore, seconds: 0.1); Terminal.restoreInput() }
                _exit(128 + signal)
            }
        }
    }

    /// `--wait-for-device`: when sensors wait for their device, discovers the devices again and
    /// restarts each sensor whose device is back (the same name and label, any index), and device
    /// motion with them if it waited too.
    private static func replug(manager: MotionManager, options: MonitorOptions, session: WatchSession) {
        let waiting = session.waitingSensors
        guard !waiting.isEmpty else { return }
        manager.rediscover()
        var back: [(SensorKind, SensorInfo)] = []
        for (kind, was) in waiting {
            guard let now = manager.sensor(kind), now.deviceName == was.name, now.label == was.label,
                  access("/sys/bus/iio/devices/" + now.deviceID, F_OK) == 0 || !options.uri.hasPrefix("local:") else { continue }
            back.append((kind, now))
        }
        guard !back.isEmpty else { return }
        let motion = session.motionWaits && waiting.count == back.count
        session.queue.sync {
            for (kind, info) in back { session.resumed(kind, as: info, motion: motion) }
        }
        start(back.map(\.0), of: manager, options: options, session: session, motion: motion)
    }

    /// Configures the manager and starts every sensor's updates, handlers on the session's queue.
    /// - Parameter motion: start device motion too (when the session shows it).
    private static func start(_ kinds: [SensorKind], of manager: MotionManager, options: MonitorOptions,
                              session: WatchSession, motion: Bool = true) {
        manager.preferredMode = options.captureMode
        // Called once per distinct notice (today: a polled fallback, with its reason), on the
        // manager's notice queue: the session takes it, with this program's remedy, to its queue.
        manager.noticeHandler = { [session] notice in session.note(Advice.text(notice)) }
        // Interval and rate first: changing them restarts running updates. The live view and the
        // log get batches as often as the interval says (every 50 ms with --interval 0).
        for kind in kinds {
            switch kind {
            case .accelerometer: manager.accelerometerUpdateInterval = options.interval
            case .gyroscope: manager.gyroUpdateInterval = options.interval
            case .magnetometer: manager.magnetometerUpdateInterval = options.interval
            }
        }
        // --rate applies to the sensors shown and to those device motion reads.
        var rated = kinds
        if session.motion && motion {
            for kind in [SensorKind.accelerometer, .gyroscope] where !rated.contains(kind) { rated.append(kind) }
        }
        if let rate = options.rate {
            for kind in rated { manager.requestSamplingFrequency(rate, for: kind) }
        }
        let queue = session.queue
        // Inline (no log file, no broker): every handler runs on the capture thread that read its
        // samples and enters the session's queue there (`sync` on an idle serial queue runs the
        // block on the calling thread), so a refill wakes one thread for the display, the lines
        // and device motion together. Otherwise the handlers run on the queue itself, so that a
        // disk or a broker that stalls holds up the queue, never the capture.
        let delivery: HandlerDelivery = session.inline ? .captureThread : .queue(queue)
        let inline = session.inline
        let enter: @Sendable (@escaping @Sendable () -> Void) -> Void = { work in
            if inline { queue.sync(execute: work) } else { work() }
        }
        // Device motion first: it asks for at least 100 Hz, so the sensors' own consumers, added
        // next, join captures already at their final rate instead of restarting them.
        if session.motion && motion {
            manager.deviceMotionUpdateInterval = options.interval
            manager.startDeviceMotionBatches(using: options.referenceFrame.frame, on: delivery) { batch, error in
                enter {
                    if let batch { session.motion(batch) }
                    if let error { session.failMotion(error) }
                }
            }
        }
        for kind in kinds {
            // Batches first: a second consumer of the same sensor does not restart its capture
            // when the first already takes every sample.
            if session.wantsBatches {
                switch kind {
                case .accelerometer:
                    manager.startAccelerometerBatches(on: delivery) { batch, error in
                        enter {
                            if let batch { session.batch(batch) }
                            if let error { session.fail(.accelerometer, error) }
                        }
                    }
                case .gyroscope:
                    manager.startGyroBatches(on: delivery) { batch, error in
                        enter {
                            if let batch { session.batch(batch) }
                            if let error { session.fail(.gyroscope, error) }
                        }
                    }
                case .magnetometer:
                    manager.startMagnetometerBatches(on: delivery) { batch, error in
                        enter {
                            if let batch { session.batch(batch) }
                            if let error { session.fail(.magnetometer, error) }
                        }
                    }
                }
            }
            if session.linesArePushed {
                switch kind {
                case .accelerometer:
                    manager.startAccelerometerUpdates(on: delivery) { data, error in
                        enter {
                            if let data { session.push(data) }
                            if let error { session.fail(.accelerometer, error) }
                        }
                    }
                case .gyroscope:
                    manager.startGyroUpdates(on: delivery) { data, error in
                        enter {
                            if let data { session.push(data) }
                            if let error { session.fail(.gyroscope, error) }
                        }
                    }
                case .magnetometer:
                    manager.startMagnetometerUpdates(on: delivery) { data, error in
                        enter {
                            if let data { session.push(data) }
                            if let error { session.fail(.magnetometer, error) }
                        }
                    }
                }
            }
        }
        // Starting is synchronous: the mode and frequency in force are known now (a sensor that
        // failed to start has none, and its handler reports the error).
        let setup = kinds.map { ($0, manager.mode(of: $0), manager.samplingFrequency(of: $0)) }
        let motionSources = session.motion && motion ? SensorKind.allCases.filter { manager.sensor($0) != nil } : []
        queue.async {
            if session.motion && motion {
                session.live?.configureMotion(sources: motionSources)
                if options.verbose {
                    let delivery = options.interval == 0 ? "every estimate" : "the newest estimate at most every \(Format.shortest(options.interval)) s"
                    session.report("deviceMotion: \(options.referenceFrame.frameName), from the \(motionSources.map(\.rawValue).joined(separator: ", ")), \(delivery)")
                }
            }
            for (kind, mode, frequency) in setup {
                session.live?.configure(kind, mode: mode, frequency: frequency)
                if options.verbose, let mode {
                    session.report(WatchSession.setupLine(kind, sensor: manager.sensor(kind), mode: mode,
                                                           frequency: frequency, interval: options.interval))
                    if let line = CalibrationNotes.verbose(kind, manager: manager, uncalibrated: options.uncalibrated) { session.report(line) }
                    if let sensor = manager.sensor(kind) { session.report(MountMatrixText.verboseLine(sensor)) }
                } else if let problem = manager.sensor(kind)?.calibrationProblem {
                    session.report("\(MonitorOptions.commandName): note: the \(kind) is read uncalibrated: \(problem)")
                }
            }
            // A matrix udev gave that could not be used is the library's notice (noticeHandler above).
        }
    }

    /// Waits up to `seconds` for one of `signals` (blocked); returns it and who sent it (0 for
    /// the kernel: a terminal's Ctrl-C), or 0 on timeout.
    private static func waitForSignal(in signals: inout sigset_t, seconds: Double) -> (signal: Int32, sender: pid_t) {
        let s = max(0, seconds)
        var timeout = timespec(tv_sec: Int(s), tv_nsec: Int((s - s.rounded(.down)) * 1e9))
        var info = siginfo_t()
        while true {
            let signal = sigtimedwait(&signals, &info, &timeout)
            if signal > 0 { return (signal, info._sifields._kill.si_pid) }
            // EINTR (e.g. SIGCONT after a stop) restarts the wait; a retry from the full timeout is
            // harmless because the caller recomputes the deadline. EAGAIN is the timeout.
            if errno != EINTR { return (0, 0) }
        }
    }
}

extension Reading {
    /// The library's sample as the CLI prints it; the device is filled in by the printer.
    init(_ d: AccelerometerData) {
        self.init(kind: .accelerometer, deviceID: "", deviceDescription: "", timestamp: d.timestamp,
                  x: d.acceleration.x, y: d.acceleration.y, z: d.acceleration.z)
    }

    init(_ d: GyroData) {
        self.init(kind: .gyroscope, deviceID: "", deviceDescription: "", timestamp: d.timestamp,
                  x: d.rotationRate.x, y: d.rotationRate.y, z: d.rotationRate.z)
    }

    init(_ d: MagnetometerData) {
        self.init(kind: .magnetometer, deviceID: "", deviceDescription: "", timestamp: d.timestamp,
                  x: d.magneticField.x, y: d.magneticField.y, z: d.magneticField.z)
    }
}

/// The process's environment (`environ`), for the few variables the live view heeds.
func environmentVariables() -> [String: String] {
    var result: [String: String] = [:]
    var entry = environ
    while let pointer = entry.pointee {
        let text = String(cString: pointer)
        if let eq = text.firstIndex(of: "=") {
            result[String(text[..<eq])] = String(text[text.index(after: eq)...])
        }
        entry += 1
    }
    return result
}

/// stdout's and stderr's channels for one continuous run, and the filter of libiio's stderr:
/// from the start of the run everything the program says goes through them, so that nothing
/// (not even a message before streaming) waits for a reader.
final class WatchIO: Sendable {
    let stdout: OutputChannel
    /// Writes to a duplicate of the real stderr (fd 2 itself goes through ``filter``).
    let stderr: OutputChannel
    let filter: StderrFilter?

    /// - Parameter verbose: `-v`: libiio's noise line is shown.
    init(verbose: Bool) {
        stdout = OutputChannel(fd: STDOUT_FILENO, name: "stdout", limit: WatchSession.stdoutBacklog)
        let original = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3)
        stderr = OutputChannel(fd: original >= 0 ? original : STDERR_FILENO, name: "stderr", limit: WatchSession.stderrBacklog)
        filter = original >= 0 ? StderrFilter(original: original, channel: stderr, hide: !verbose) : nil
    }

    /// A line for stderr.
    func error(_ line: String) { stderr.control(line + "\n") }

    /// Queues a report's lines; returns its status.
    func emit(_ report: Report) -> Int32 {
        for line in report.stdout { stdout.control(line + "\n") }
        for line in report.stderr { error(line) }
        return report.status
    }

    /// Lets stdout, libiio's last lines and stderr drain until `deadline` at the latest; fd 2 is
    /// the real stderr again afterwards.
    /// - Returns: `status`.
    func end(_ status: Int32, until deadline: Double = monotonicSeconds() + Watch.endBudget) -> Int32 {
        stdout.finish(until: deadline - 0.1)
        filter?.finish(until: deadline - 0.05)
        stderr.finish(until: deadline)
        return status
    }
}
