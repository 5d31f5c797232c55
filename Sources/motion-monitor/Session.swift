// Over 500 lines: ``WatchSession`` is one class whose private state (the per-sensor counts, the
// log, the live view's model) both its deliveries and its end read and write on one queue;
// kept in one file so that this state stays private to it.
import Dispatch
@preconcurrency import Glibc // stdout and stderr are C globals
import IIOMotion
import SystemSupport
import Synchronization

/// Everything the continuous view does with what the library delivers, on one serial queue
/// (``queue``): the `--csv` log, the ``LiveView``'s model and frames, the lines (`--json` or plain),
/// `--count`, failures, and waking the main thread when the run is done.
///
/// The queue never writes to stdout or stderr: it hands their output to their ``OutputChannel``s,
/// whose threads do the writing. So the log (a file, written here) never waits for a terminal or a
/// pipe: while stdout is stalled the log stays complete and the display gives way (newest frame or
/// line wins). When stdout carries every sample (`--csv -`, lines with `--interval 0`) it is a
/// log too, with its own bounded backlog, and what it drops is counted.
///
/// Deliveries come two ways: batched handlers (every sample: the log, the live view, and lines
/// with `--interval 0`) and push handlers (the newest sample per interval: lines otherwise); both
/// run in the queue, entered from the capture thread when ``inline``.
final class WatchSession: Sendable {
    /// Sent to the main thread (where it is blocked and waited for) when the run is done.
    static let wakeSignal = SIGUSR1
    /// The bound of stdout's backlog when it carries every sample (about 50 s of two sensors'
    /// JSON lines at 1.6 kHz).
    static let stdoutBacklog = 16 << 20
    /// The bound of stderr's backlog (messages, libiio's lines).
    static let stderrBacklog = 1 << 20
    /// The tag and slot of device motion's lines in stdout's channel.
    static let motionTag = 3

    /// What the handlers run in: the log's path.
    let queue: DispatchQueue
    /// True when the handlers enter ``queue`` from the capture thread (`queue.sync`: on that
    /// thread, no wake-up of another) rather than being run by it: when nothing the session does
    /// can wait for a device (no log file, no broker; stdout's writes never wait, see
    /// ``OutputChannel``).
    let inline: Bool
    /// `--csv`, once opened.
    let log: CSVLog?
    /// `--mqtt`: every sample taken is published too.
    let mqtt: MQTTSink?
    /// The live view, when ``Display/live(color:unicode:)``.
    let live: LiveView?
    /// How readings are shown.
    let display: Display
    /// True when lines come from push handlers (`--interval` > 0 and lines or JSON shown).
    let linesArePushed: Bool
    /// True when some sensor consumer takes every sample (log, live view, `--interval 0`).
    let wantsBatches: Bool
    /// True when device motion runs: requested, available, and shown (live view, lines or JSON;
    /// the log has no place for it).
    let motion: Bool
    /// stdout's and stderr's writers.
    let stdout: OutputChannel
    let stderr: OutputChannel
    /// True when stdout carries every sample (`--csv -`, lines or JSON with `--interval 0`): it
    /// is then a log, whose losses count, not a display.
    let stdoutIsLog: Bool

    private let units: MotionUnits
    private let limit: Int?
    private let bufferedOnly: Bool
    private let mainThread: pthread_t
    private let finished = Atomic<Bool>(false)
    /// Each sensor's device (`iio:device0`, `iio:device0 (bmi160)`): changed when a device that
    /// went away comes back under another index (`--wait-for-device`).
    private let sensorBox: Locked<[SensorKind: SensorInfo]>
    private func label(_ kind: SensorKind) -> (id: String, description: String)? {
        sensorBox.withLock { $0[kind].map { ($0.deviceID, $0.deviceDescription) } }
    }
    /// The sensors that stream (a fixed set: a device that comes back brings the same kinds).
    private let kinds: Set<SensorKind>
    /// `--wait-for-device`: a sensor whose device went away is waited for, not a failure.
    let waitsForDevices: Bool
    /// The sampling period of a running sensor for gap counting: nil when unknown or polled.
    private let period: @Sendable (SensorKind) -> Double?
    private let state = Locked(State())

    private struct State: Sendable {
        /// Samples of the batched handlers, per sensor, before `--count`.
        var handed: [SensorKind: Int] = [:]
        /// Of those, the ones within `--count`.
        var taken: [SensorKind: Int] = [:]
        /// Lines given to stdout per sensor by the push handlers.
        var printed: [SensorKind: Int] = [:]
        /// Sensors that reached `--count` or failed.
        var done: Set<SensorKind> = []
        /// Sensors that reached `--count` (their part of the run is over: a failure after it, a
        /// device that stalls while the other sensors finish, is not the run's).
        var reached: Set<SensorKind> = []
        /// `--duration` has elapsed (``WatchSession/durationElapsed()``): failures from then on, while
        /// the updates are being stopped, are not the run's.
        var durationElapsed = false
        /// Failures that came after their sensor's end condition was met, for `--verbose`.
        var afterEnd: [String] = []
        var failures: [(kind: SensorKind, error: MotionError)] = []
        /// Sensors whose device went away (`--wait-for-device`), with that device's name and
        /// label (how it is recognised when it comes back) and when it went.
        var waiting: [SensorKind: (name: String?, label: String?, since: Double)] = [:]
        /// Device motion stopped with its sensors' device and waits for them.
        var motionWaiting = false
        /// Why the log (or stdout carrying every sample) stopped.
        var logFailure: String?
        /// Why publishing had to end the run (credentials, TLS), with its status.
        var mqttFailure: MQTTSink.StartError?
        /// Messages for stderr held back while the live view owns the terminal.
        var deferred: [String] = []
        /// Device motion estimates shown, and whether it reached `--count` or failed.
        var motionShown = 0
        var motionDone = false
        var motionFailure: MotionError?
        /// stdout closed or failed, and the run ends for it (no log file to keep going for).
        var stdoutGone = false
        var stdoutEnd: OutputChannel.Outcome?
    }

    /// - Parameters:
    ///   - options: the command line.
    ///   - queue: the session's queue (serial); the log was opened for it.
    ///   - display: how readings are shown.
    ///   - stdout: stdout's channel.
    ///   - stderr: stderr's channel.
    ///   - log: the opened `--csv` log, if any (confined to ``queue`` from now on).
    ///   - sensors: the sensors that will stream.
    ///   - period: the sampling period in force of a running sensor (gaps are counted in it).
    ///   - mainThread: the thread waiting for signals.
    ///   - motion: whether device motion runs (its estimates come through ``motion(_:)``).
    ///   - makeLive: builds the live view on the queue, or returns nil.
    init(options: MonitorOptions, queue: DispatchQueue, display: Display, stdout: OutputChannel, stderr: OutputChannel,
         log: CSVLog?, mqtt: MQTTSink? = nil, sensors: [SensorInfo], period: @escaping @Sendable (SensorKind) -> Double?, mainThread: pthread_t,
         motion: Bool = false, makeLive: (DispatchQueue) -> LiveView?) {
        self.queue = queue
        self.display = display
        self.stdout = stdout
        self.stderr = stderr
        self.log = log
        self.mqtt = mqtt
        units = options.units
        limit = options.count
        bufferedOnly = options.captureMode == .buffered
        self.period = period
        self.mainThread = mainThread
        self.motion = motion
        var byKind: [SensorKind: SensorInfo] = [:]
        for s in sensors { byKind[s.kind] = s }
        sensorBox = Locked(byKind)
        kinds = Set(byKind.keys)
        waitsForDevices = options.waitForDevice
        let showsLines = display == .lines || display == .json
        linesArePushed = showsLines && options.interval > 0
        stdoutIsLog = options.csvToStdout || (showsLines && options.interval == 0)
        live = makeLive(queue)
        wantsBatches = log != nil || mqtt != nil || live != nil || (showsLines && options.interval == 0)
        inline = (log?.isStdout ?? true) && mqtt == nil
    }

    /// True once every sensor has reached its count or failed, the log failed, or stdout went
    /// away with no log file to keep going for.
    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Whether `--count` is counted on batches (every sample) rather than on printed lines.
    private var countsBatches: Bool { log != nil || mqtt != nil || live != nil || !linesArePushed }

    /// Whether the run goes on without stdout: a log file is written to its end condition.
    private var logsToFile: Bool { log.map { !$0.isStdout } ?? false || mqtt != nil }

    // MARK: Deliveries (on the queue)

    /// A batched handler's samples, oldest first.
    func batch<S: SensorSample>(_ samples: [S]) {
        dispatchPrecondition(condition: .onQueue(queue))
        let kind = S.sensorKind
        guard let label = label(kind) else { return }
        let take = state.withLock { s -> Int in
            s.handed[kind, default: 0] += samples.count
            guard !s.done.contains(kind) || !countsBatches else { return 0 }
            let already = s.taken[kind, default: 0]
            let take = limit.map { max(0, min(samples.count, $0 - already)) } ?? samples.count
            s.taken[kind] = already + take
            if countsBatches, let limit, already + take >= limit {
                // A sensor that reached its count keeps running until all are done: stopping one
                // sensor of a shared device would restart the device's buffer for the other.
                s.done.insert(kind)
                s.reached.insert(kind)
            }
            return take
        }
        let slice = samples.prefix(take)
        if let log, !slice.isEmpty {
            let failedBefore = log.failure != nil
            if !log.append(slice, device: label.id, period: period(kind)), !failedBefore, let failure = log.failure {
                state.withLock { s in
                    s.logFailure = s.logFailure ?? failure
                    s.done.formUnion(kinds)
                }
                live?.logStopped(failure)
            }
        }
        if let mqtt, !slice.isEmpty {
            mqtt.append(slice, device: label.id)
            if let problem = mqtt.startProblem() {
                let first = state.withLock { s -> Bool in
                    defer { s.mqttFailure = s.mqttFailure ?? problem; s.done.formUnion(kinds) }
                    return s.mqttFailure == nil
                }
                if first { live?.logStopped(problem.message) }
            }
        }
        live?.update(slice, received: samples.count)
        if !linesArePushed, display == .lines || display == .json, !slice.isEmpty {
            var text = ""
            for s in slice {
                text += line(s, label)
                text += "\n"
            }
            stdout.append(Array(text.utf8), tag: kind.tag, items: slice.count)
        }
        wakeIfDone()
    }

    /// A push handler's newest sample: offered to stdout, where a newer one replaces it if
    /// stdout has not taken it yet.
    func push<S: SensorSample>(_ sample: S) {
        dispatchPrecondition(condition: .onQueue(queue))
        let kind = S.sensorKind
        guard let label = label(kind) else { return }
        let ok = state.withLock { s -> Bool in
            let printed = s.printed[kind, default: 0]
            guard !s.done.contains(kind), limit.map({ printed < $0 }) ?? true else { return false }
            s.printed[kind] = printed + 1
            if !countsBatches, let limit, printed + 1 >= limit {
                s.done.insert(kind)
                s.reached.insert(kind)
            }
            return true
        }
        guard ok else { return wakeIfDone() }
        let text = Array((line(sample, label) + "\n").utf8)
        // `--count n` asks for n lines: those are queued (n bounds them), not replaced.
        if limit != nil { stdout.append(text, tag: kind.tag, items: 1) } else { stdout.offer(text, slot: kind.tag) }
        wakeIfDone()
    }

    /// Device motion estimates, oldest first (the newest at most once per `--interval`, or every
    /// one with 0, those of one refill together).
    func motion(_ batch: [DeviceMotion]) {
        dispatchPrecondition(condition: .onQueue(queue))
        let take = state.withLock { s -> Int in
            guard !s.motionDone else { return 0 }
            let take = limit.map { max(0, min(batch.count, $0 - s.motionShown)) } ?? batch.count
            s.motionShown += take
            if let limit, s.motionShown >= limit { s.motionDone = true }
            return take
        }
        guard take > 0 else { return }
        let shown = batch.prefix(take)
        if let live { for m in shown { live.update(motion: m) } }
        switch display {
        case .json, .lines:
            var text = ""
            for m in shown {
                text += display == .json ? Format.json(m) : Format.line(m)
                text += "\n"
            }
            if stdoutIsLog || limit != nil {
                stdout.append(Array(text.utf8), tag: Self.motionTag, items: shown.count)
            } else {
                stdout.offer(Array(text.utf8), slot: Self.motionTag)
            }
        default: break
        }
        wakeIfDone()
    }

    /// Device motion's error: it has stopped (the sensors' own updates may go on). After its
    /// `--count` was reached, or `--duration` elapsed, it is not a failure of the run.
    func failMotion(_ error: MotionError) {
        dispatchPrecondition(condition: .onQueue(queue))
        let late = state.withLock { s -> Bool in
            guard (s.motionDone && s.motionFailure == nil) || s.durationElapsed else { return false }
            s.afterEnd.append("deviceMotion: \(error)")
            return true
        }
        if late { return wakeIfDone() }
        if waitsForDevices, let device = error.device, Self.isGone(device, error) {
            state.withLock { $0.motionWaiting = true }
            report("\(MonitorOptions.commandName): device motion stopped: \(device) is gone; it resumes when its sensors are back.")
            return
        }
        let first = state.withLock { s -> Bool in
            guard s.motionFailure == nil else { return false }
            s.motionFailure = error
            s.motionDone = true
            return true
        }
        guard first else { return }
        live?.fail(motion: error)
        report(Report.motionFailureMessage(error))
        wakeIfDone()
    }

    /// A handler's error: the sensor has stopped. Both handlers of a sensor report it; once is kept.
    func fail(_ kind: SensorKind, _ error: MotionError) {
        fail(kind, error, rechecks: Self.silentRechecks)
    }

    /// With `--wait-for-device`, a buffer that went silent (ETIMEDOUT) is looked at again this many
    /// times, every half second, before it counts as a failure: a device's folder may go only
    /// some time after its data stopped (a driver being unbound, a loaded machine).
    static let silentRechecks = 6

    /// A failure after the sensor reached its `--count`, or after `--duration` elapsed, is not a
    /// failure of the run (the run's end condition was met): it is kept for `--verbose` only.
    /// - Parameter rechecks: how many more times a silent buffer's device is looked for.
    private func fail(_ kind: SensorKind, _ error: MotionError, rechecks: Int) {
        dispatchPrecondition(condition: .onQueue(queue))
        let late = state.withLock { s -> Bool in
            guard s.reached.contains(kind) || s.durationElapsed else { return false }
            s.afterEnd.append("\(kind): \(error)")
            return true
        }
        if late { return wakeIfDone() }
        if waitsForDevices, rechecks > 0, error.underlyingErrno == ETIMEDOUT, let label = label(kind), !Self.isGone(label.id, error) {
            queue.asyncAfter(deadline: .now() + 0.5) { [self] in fail(kind, error, rechecks: rechecks - 1) }
            return
        }
        if waitsForDevices, let label = label(kind), Self.isGone(label.id, error) {
            let sensor = sensorBox.withLock { $0[kind] }
            let newly = state.withLock { s -> Bool in
                guard s.waiting[kind] == nil else { return false }
                s.waiting[kind] = (sensor?.deviceName, sensor?.label, monotonicSeconds())
                return true
            }
            if newly {
                live?.fail(kind, error)
                report("\(MonitorOptions.commandName): the \(kind) (\(label.description)) is gone (\(error)); waiting for it to come back.")
            }
            return
        }
        let first = state.withLock { s -> Bool in
            guard !s.failures.contains(where: { $0.kind == kind }) else { return false }
            s.failures.append((kind, error))
            s.done.insert(kind)
            return true
        }
        guard first else { return }
        live?.fail(kind, error)
        report(Report.failureMessage(kind, error))
        let got = state.withLock { ($0.taken[kind] ?? 0) + ($0.printed[kind] ?? 0) }
        if bufferedOnly && got == 0 {
            report("(--mode buffered was given: --mode auto reads the \(kind) by polling when its buffer cannot be used.)")
        }
        wakeIfDone()
    }

    /// Whether a failure means the sensor's device went away (`--wait-for-device` waits for it
    /// then): its sysfs folder is gone (a local context), or the error says so (ENODEV, ENOENT).
    static func isGone(_ deviceID: String, _ error: MotionError) -> Bool {
        if let e = error.underlyingErrno, e == ENODEV || e == ENOENT || e == ENXIO { return true }
        let id = deviceID.split(separator: " ").first.map(String.init) ?? deviceID
        return id.hasPrefix("iio:device") && access("/sys/bus/iio/devices/" + id, F_OK) != 0
    }

    /// The sensors that wait for their device, with how each is recognised.
    var waitingSensors: [SensorKind: (name: String?, label: String?, since: Double)] { state.withLock { $0.waiting } }

    /// Whether device motion waits for its sensors' device.
    var motionWaits: Bool { state.withLock { $0.motionWaiting } }

    /// A waited-for sensor is back (`sensor`, maybe under another index): its rows go on, after a
    /// gap the log shows, and stderr says so.
    func resumed(_ kind: SensorKind, as sensor: SensorInfo, motion: Bool) {
        dispatchPrecondition(condition: .onQueue(queue))
        let since = state.withLock { s -> Double? in
            if motion { s.motionWaiting = false }
            return s.waiting.removeValue(forKey: kind)?.since
        }
        sensorBox.withLock { $0[kind] = sensor }
        log?.resumed(kind)
        live?.resumed(kind)
        let gap = since.map { " after \(Format.shortest(((monotonicSeconds() - $0) * 10).rounded() / 10)) s" } ?? ""
        report("\(MonitorOptions.commandName): the \(kind) is back as \(sensor.deviceDescription)\(gap); logging again.")
    }

    /// A notice of the library (e.g. a polled fallback and its reason): on stderr, or in the
    /// live view.
    func note(_ text: String) {
        queue.async { [self] in
            live?.note(text)
            report("note: \(text)")
        }
    }

    /// stdout closed or failed (from its writer thread). With a log file the run goes on to its
    /// end condition, without a display; otherwise it ends as after Ctrl-C (a write error of a
    /// stdout that carries every sample is the log's failure).
    func stdoutEnded(_ outcome: OutputChannel.Outcome) {
        state.withLock { s in
            s.stdoutEnd = outcome
            if case .failed(let e) = outcome, stdoutIsLog {
                s.logFailure = s.logFailure ?? "writing stdout failed: \(errnoDescription(e))"
            }
            if !logsToFile { s.stdoutGone = true }
        }
        queue.async { [self] in live?.stdoutEnded() }
        wakeIfDone()
    }

    /// A message for stderr: now, or after the live view has given the terminal back.
    func report(_ line: String) {
        if live != nil {
            state.withLock { $0.deferred.append(line) }
        } else {
            stderr.control(line + "\n")
        }
    }

    private func line(_ s: some SensorSample, _ label: (id: String, description: String)) -> String {
        let r = Reading(s, deviceID: label.id, deviceDescription: label.description)
        return display == .json ? Format.json(r) : Format.line(r, units: units)
    }

    /// `--duration` has elapsed (from the main thread, before the updates are stopped).
    func durationElapsed() {
        state.withLock { $0.durationElapsed = true }
    }

    private func wakeIfDone() {
        let allDone = state.withLock { s in
            (s.done.count >= kinds.count && (!motion || s.motionDone)) || s.logFailure != nil || s.stdoutGone
        }
        if allDone, !finished.exchange(true, ordering: .acquiringAndReleasing) {
            pthread_kill(mainThread, Self.wakeSignal)
        }
    }

    // MARK: The end

    /// After the updates are stopped (every capture joined): handles what is still queued (the
    /// log is flushed whole and closed first), gives the terminal back, lets stdout drain until
    /// shortly before `deadline`, then queues for stderr the held-back messages, the log's
    /// summary, what stdout lost and, when verbose, the statistics. Never waits past `deadline`.
    /// - Parameters:
    ///   - statistics: the library's counts per sensor, read after the stop.
    ///   - verbose: `--verbose`.
    ///   - deadline: when stdout is given up on (``monotonicSeconds()``).
    /// - Returns: the exit status: 74 when the log failed or stdout, carrying every sample, lost
    ///   some; else the first sensor failure's; else 0.
    func finish(statistics: [(SensorKind, UpdateStatistics)], verbose: Bool, until deadline: Double) -> Int32 {
        let (s, framesDue) = queue.sync { () -> (State, Int) in
            live?.finish()
            log?.close()
            return (state.withLock { $0 }, live?.framesDue ?? 0)
        }
        let out = stdout.finish(until: deadline)
        let closed = out.outcome == .closed
        // Lines stdout dropped (full backlog), or still held at the end; after the reader went
        // away nothing is owed to it.
        let lost = out.dropped.values.reduce(0, +) + (closed ? 0 : out.unwritten.values.reduce(0, +))
        var lines = s.deferred
        if let failure = s.logFailure {
            var text = "\(MonitorOptions.commandName): \(failure)."
            if let log {
                text += " The rows written before it are kept, whole"
                    + (log.isStdout ? "." : " (\(log.name) ends with a complete row); free some space and log to a new file.")
            }
            lines.append(text)
        }
        if let log {
            lines += queue.sync { logSummary(log, s, statistics, out) }
        }
        var mqttStatus = ExitStatus.success
        if let mqtt {
            // What the broker has not taken yet (a backlog from an outage) gets up to
            // MQTTSink.flushSeconds: the log is closed by now, and a second Ctrl-C still ends at once.
            let (line, status) = mqtt.finish(seconds: max(MQTTSink.flushSeconds, deadline - monotonicSeconds()))
            lines.append(line)
            mqttStatus = status
        }
        if stdoutIsLog, !(log?.isStdout ?? false), lost > 0 {
            lines.append("\(MonitorOptions.commandName): stdout did not keep up: \(lost) lines not written ("
                         + "\(out.dropped.values.reduce(0, +)) dropped while \(WatchSession.stdoutBacklog >> 20) MiB were waiting, "
                         + "\(closed ? 0 : out.unwritten.values.reduce(0, +)) still waiting at the end)"
                         + (logsToFile ? "; the log is not affected." : "."))
        }
        if closed, stdoutIsLog || display != .none {
            lines.append("\(MonitorOptions.commandName): stdout was closed (its reader went away)"
                         + (logsToFile ? "; the log went on." : "; the run ended there."))
        }
        if verbose {
            for (kind, stats) in statistics {
                let shown = countsBatches ? s.taken[kind] ?? 0 : s.printed[kind] ?? 0
                lines.append("\(kind): \(shown) \(countsBatches ? "taken" : "printed"); \(stats.samples) received, \(stats.delivered) delivered, \(stats.coalesced) coalesced")
            }
            if motion { lines.append("deviceMotion: \(s.motionShown) estimates shown") }
            for failure in s.afterEnd {
                lines.append("\(failure) (after its end condition was met: not a failure of the run)")
            }
            lines += displaySummary(out, framesDue: framesDue)
        }
        for line in lines { stderr.control(line + "\n") }
        if s.logFailure != nil || (stdoutIsLog && lost > 0) { return ExitStatus.ioError }
        if let failure = s.mqttFailure { return failure.status }
        if mqttStatus != ExitStatus.success { return mqttStatus }
        return (s.failures.first?.error ?? s.motionFailure).map { ExitStatus.of($0) } ?? ExitStatus.success
    }

    /// `--verbose`: what stdout took of what it was given.
    private func displaySummary(_ out: OutputChannel.Stats, framesDue: Int) -> [String] {
        if live != nil {
            let drawn = out.drawn[LiveView.frameSlot] ?? 0
            return ["live view: \(drawn) frames drawn of \(framesDue) due (\(max(0, framesDue - drawn)) skipped: a newer frame replaced them before the terminal took them)"]
        }
        if stdoutIsLog {
            let written = out.written.values.reduce(0, +)
            return ["stdout: \(written) lines written, \(out.dropped.values.reduce(0, +)) dropped (backlog full), \(out.unwritten.values.reduce(0, +)) unwritten at the end"]
        }
        if linesArePushed {
            // Offered lines (the newest wins), and with --count queued ones.
            let queued = out.written.values.reduce(0, +) + out.lost
            let given = out.offered.values.reduce(0, +) + queued
            let written = out.drawn.values.reduce(0, +) + out.written.values.reduce(0, +)
            return ["stdout: \(written) lines written of \(given) (\(out.replaced.values.reduce(0, +)) replaced by a newer one before stdout took them)"]
        }
        return []
    }

    /// The log's summary: rows per sensor, samples the kernel dropped (gaps in the timestamps),
    /// samples this program dropped (received from the library but not written: only after a
    /// write error, or on stdout when its reader fell behind).
    private func logSummary(_ log: CSVLog, _ s: State, _ statistics: [(SensorKind, UpdateStatistics)],
                            _ out: OutputChannel.Stats) -> [String] {
        dispatchPrecondition(condition: .onQueue(queue))
        let closed = out.outcome == .closed
        func rows(_ kind: SensorKind) -> Int { log.isStdout ? out.written[kind.tag] ?? 0 : log.rowsWritten(kind) }
        let total = statistics.reduce(0) { $0 + rows($1.0) }
        let files = log.files.count > 1 ? "\(log.files.count) files, \(log.files.first!) to \(log.files.last!)" : log.name
        var lines = ["\(MonitorOptions.commandName): logged \(total) samples to \(files)"]
        var kernelDrops = false
        for (kind, stats) in statistics {
            let rows = rows(kind)
            let handed = s.handed[kind] ?? 0
            let taken = s.taken[kind] ?? 0
            // Received by the library but never handed over (must not happen), plus handed over
            // within --count but not written (after a write error, or a full backlog on stdout;
            // not what a closed stdout could no longer take).
            let unwritten = log.isStdout && closed ? out.dropped[kind.tag] ?? 0 : max(0, taken - rows)
            let ours = max(0, stats.samples - handed) + unwritten
            let kernel = log.kernelDropped(kind)
            if (kernel ?? 0) > 0 { kernelDrops = true }
            var line = "  \(kind.rawValue.padding(to: 13))  \(label(kind)?.description ?? "?")  \(rows) written, "
                + "\(kernel.map(String.init) ?? "? (polled: no steady period)") dropped by the kernel, \(ours) dropped by motion-monitor"
            if handed > taken { line += ", \(handed - taken) past --count not logged" }
            lines.append(line)
        }
        if kernelDrops {
            lines.append("  (Dropped by the kernel: gaps in the timestamps, where the kernel's buffer overflowed because the reader fell behind; a lower --rate helps.)")
        }
        if log.isStdout, out.dropped.values.reduce(0, +) > 0 {
            lines.append("  (Dropped by motion-monitor: stdout's reader fell more than \(WatchSession.stdoutBacklog >> 20) MiB behind.)")
        }
        return lines
    }

    /// `accelerometer: iio:device0 (bmi160), buffered at 1600 Hz, every sample` (for `--verbose`).
    static func setupLine(_ kind: SensorKind, sensor: SensorInfo?, mode: SensorMode, frequency: Double?,
                          interval: Double) -> String {
        let device = sensor?.deviceDescription ?? "?"
        let rate = frequency.map { " at \(Format.shortest($0)) Hz" } ?? ""
        let delivery = interval == 0 ? "every sample" : "the newest sample at most every \(Format.shortest(interval)) s"
        return "\(kind): \(device), \(mode)\(rate), \(delivery)"
    }
}
