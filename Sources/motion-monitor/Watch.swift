import Dispatch
@preconcurrency import Glibc // stdout and stderr are C globals
import IIOMotion
import Locking
import Synchronization

/// The continuous mode: streams each requested sensor through the library's streaming API into a
/// ``StreamSession`` (the live view, lines or JSON, and the `--csv` log), until `--count` readings of
/// every sensor, `--duration`, SIGINT, SIGTERM or SIGHUP, until every sensor has failed, or until
/// the log cannot be written.
///
/// - Lines and JSON with `--interval S` > 0: push handlers, at most one reading per interval per
///   sensor, the newest (Core Motion's `startAccelerometerUpdates(to:withHandler:)`).
/// - The log, the live view, and lines with `--interval 0`: batched handlers with every sample
///   the sensor makes, none coalesced (the live view draws the newest of them each frame).
///
/// Handlers run on one serial queue, ``StreamSession/queue``, which owns stdout while streaming.
///
/// Signals: SIGINT, SIGTERM, SIGHUP (and for the live view SIGWINCH, SIGTSTP and SIGCONT) are
/// blocked before libiio or Dispatch start any thread (threads inherit the mask) and then *waited
/// for* with `sigtimedwait` on the main thread, so no signal handler runs and nothing calls libiio
/// or touches the terminal from one (the approach of libiio's own `iio_readdev`). The session wakes
/// the main thread the same way, with a SIGUSR1 sent to it, when every sensor is done; the main
/// thread otherwise sleeps, so an idle monitor costs no wake-ups. Every way out (the end, a signal,
/// an error) goes through the same stop, drain, restore and summary.
enum Watch {
    static func run(_ options: MonitorOptions) -> Int32 {
        let display = Display.choose(options, stdoutIsTerminal: isatty(STDOUT_FILENO) == 1,
                                     environment: environmentVariables())
        var live = false
        if case .live = display { live = true }
        var signals = sigset_t()
        sigemptyset(&signals)
        var waited = [SIGINT, SIGTERM, SIGHUP, StreamSession.wakeSignal]
        if live { waited += [SIGWINCH, SIGTSTP, SIGCONT] }
        for s in waited { sigaddset(&signals, s) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        let manager = Monitor.makeManager(options)
        var present = Set<SensorKind>()
        do throws(MotionError) {
            _ = try manager.devices
            present = Set(SensorKind.allCases.filter { manager.sensor($0) != nil })
        } catch {
            if let report = Report.contextFailure(error, uri: options.uri) { return Monitor.emit(report) }
        }
        // Device motion runs when asked for and possible, and when something shows it: under `all`
        // with nothing on stdout (--quiet, --csv -) it would only cost the 100 Hz it needs.
        let motionAvailable = present.contains(.accelerometer) && present.contains(.gyroscope)
        let motionExplicit = options.sensor == .motion || options.referenceFrame != .arbitrary
        let motion = options.deviceMotion && motionAvailable && (display != .none || options.sensor == .motion)
        let optional = Set(options.kinds.filter { options.sensor.isOptional($0) })
        let (report, kinds) = Report.availability(requested: options.kinds, present: present, optional: optional,
                                                  motion: options.deviceMotion ? (motionAvailable, motionExplicit) : nil)
        if report.status != ExitStatus.success {
            _ = Monitor.emit(report)
            if options.device != nil { Console.error(Monitor.noMatchHint(options, manager)) }
            return report.status
        }
        if options.deviceMotion, motionAvailable, !manager.availableAttitudeReferenceFrames().contains(options.referenceFrame.frame) {
            return Monitor.emit(Report.frameUnavailable(options.referenceFrame, available: manager.availableAttitudeReferenceFrames()))
        }
        // In the live view the availability messages are shown in place of the panels, and
        // repeated on stderr once the terminal is given back.
        if !live { _ = Monitor.emit(report) }
        Console.flush()

        let queue = DispatchQueue(label: "motion-monitor.output")
        var log: CSVLog?
        if let path = options.csv {
            do throws(CSVLog.OpenError) {
                log = try CSVLog(path: path, force: options.force, append: options.append, queue: queue)
            } catch {
                Console.error(error.message)
                return error.status
            }
        }
        let session = StreamSession(
            options: options, queue: queue, display: display, log: log, sensors: kinds.compactMap { manager.sensor($0) },
            period: { [manager] kind in
                guard manager.mode(of: kind) == .buffered, let hz = manager.samplingFrequency(of: kind), hz > 0 else { return nil }
                return 1 / hz
            },
            mainThread: pthread_self(), motion: motion,
            makeLive: { queue in
                guard case .live(let color, let unicode) = display else { return nil }
                let shown = options.kinds.filter { present.contains($0) || !optional.contains($0) }
                return LiveView(queue: queue, style: ScreenStyle(color: color, unicode: unicode), options: options,
                                sensors: shown.map { ($0, present.contains($0) ? manager.sensor($0) : nil) },
                                motion: motion ? options.referenceFrame : nil, log: log)
            })
        for line in report.stderr where live { session.report(line) }
        start(kinds, of: manager, options: options, session: session)
        if let view = session.live {
            Terminal.restoreOnCrash()
            queue.sync { view.start() }
        }

        let deadline = options.duration.map { monotonicSeconds() + $0 }
        waiting: while !session.isFinished {
            var timeout = 3600.0
            if let deadline {
                timeout = deadline - monotonicSeconds()
                if timeout <= 0 { break }
            }
            switch waitForSignal(in: &signals, seconds: timeout) {
            case SIGINT, SIGTERM, SIGHUP:
                break waiting
            case SIGWINCH:
                queue.async { session.live?.resize() }
            case SIGTSTP:
                // Ctrl-Z: give the terminal back, then stop for real (SIGSTOP cannot be caught).
                queue.sync { session.live?.suspend() }
                kill(getpid(), SIGSTOP)
            case SIGCONT:
                queue.async { session.live?.resume() }
            default:
                continue
            }
        }

        // Stop first (this joins the capture threads while the handlers are still registered),
        // then drain the queue: every sample the library read before the stop is handled.
        manager.stopAllUpdates()
        return session.finish(statistics: kinds.map { ($0, manager.updateStatistics(of: $0)) }, verbose: options.verbose)
    }

    /// Configures the manager and starts every sensor's updates, handlers on the session's queue.
    private static func start(_ kinds: [SensorKind], of manager: MotionManager, options: MonitorOptions,
                              session: StreamSession) {
        manager.preferredMode = options.captureMode
        // Called once per distinct notice (today: a polled fallback, with its reason).
        manager.noticeHandler = { [session] notice in session.note(notice) }
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
        if session.motion {
            for kind in [SensorKind.accelerometer, .gyroscope] where !rated.contains(kind) { rated.append(kind) }
        }
        if let rate = options.rate {
            for kind in rated { manager.requestSamplingFrequency(rate, for: kind) }
        }
        let queue = session.queue
        // Device motion first: it asks for at least 100 Hz, so the sensors' own consumers, added
        // next, join captures already at their final rate instead of restarting them.
        if session.motion {
            manager.deviceMotionUpdateInterval = options.interval
            manager.startDeviceMotionUpdates(using: options.referenceFrame.frame, to: queue) { m, error in
                if let m { session.motion(m) }
                if let error { session.failMotion(error) }
            }
        }
        for kind in kinds {
            // Batches first: a second consumer of the same sensor does not restart its capture
            // when the first already takes every sample.
            if session.wantsBatches {
                switch kind {
                case .accelerometer:
                    manager.startAccelerometerBatches(to: queue) { batch, error in
                        if let batch { session.batch(.accelerometer, batch.map(Sample.init)) }
                        if let error { session.fail(.accelerometer, error) }
                    }
                case .gyroscope:
                    manager.startGyroBatches(to: queue) { batch, error in
                        if let batch { session.batch(.gyroscope, batch.map(Sample.init)) }
                        if let error { session.fail(.gyroscope, error) }
                    }
                case .magnetometer:
                    manager.startMagnetometerBatches(to: queue) { batch, error in
                        if let batch { session.batch(.magnetometer, batch.map(Sample.init)) }
                        if let error { session.fail(.magnetometer, error) }
                    }
                }
            }
            if session.linesArePushed {
                switch kind {
                case .accelerometer:
                    manager.startAccelerometerUpdates(to: queue) { data, error in
                        if let data { session.push(.accelerometer, Sample(data)) }
                        if let error { session.fail(.accelerometer, error) }
                    }
                case .gyroscope:
                    manager.startGyroUpdates(to: queue) { data, error in
                        if let data { session.push(.gyroscope, Sample(data)) }
                        if let error { session.fail(.gyroscope, error) }
                    }
                case .magnetometer:
                    manager.startMagnetometerUpdates(to: queue) { data, error in
                        if let data { session.push(.magnetometer, Sample(data)) }
                        if let error { session.fail(.magnetometer, error) }
                    }
                }
            }
        }
        // Starting is synchronous: the mode and frequency in force are known now (a sensor that
        // failed to start has none, and its handler reports the error).
        let setup = kinds.map { ($0, manager.mode(of: $0), manager.samplingFrequency(of: $0)) }
        let motionSources = session.motion ? SensorKind.allCases.filter { manager.sensor($0) != nil } : []
        queue.async {
            if session.motion {
                session.live?.configureMotion(sources: motionSources)
                if options.verbose {
                    let delivery = options.interval == 0 ? "every estimate" : "the newest estimate at most every \(Format.shortest(options.interval)) s"
                    session.report("deviceMotion: \(options.referenceFrame.frameName), from the \(motionSources.map(\.rawValue).joined(separator: ", ")), \(delivery)")
                }
            }
            for (kind, mode, frequency) in setup {
                session.live?.configure(kind, mode: mode, frequency: frequency)
                if options.verbose, let mode {
                    session.report(StreamSession.setupLine(kind, sensor: manager.sensor(kind), mode: mode,
                                                           frequency: frequency, interval: options.interval))
                }
            }
        }
    }

    /// Waits up to `seconds` for one of `signals` (blocked); returns it, or 0 on timeout.
    private static func waitForSignal(in signals: inout sigset_t, seconds: Double) -> Int32 {
        let s = max(0, seconds)
        var timeout = timespec(tv_sec: Int(s), tv_nsec: Int((s - s.rounded(.down)) * 1e9))
        while true {
            let signal = sigtimedwait(&signals, nil, &timeout)
            if signal > 0 { return signal }
            // EINTR (e.g. SIGCONT after a stop) restarts the wait; a retry from the full timeout is
            // harmless because the caller recomputes the deadline. EAGAIN is the timeout.
            if errno != EINTR { return 0 }
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

/// Seconds on `CLOCK_MONOTONIC`.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}
