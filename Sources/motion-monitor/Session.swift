import Dispatch
@preconcurrency import Glibc // stdout and stderr are C globals
import IIOMotion
import Locking
import Synchronization

/// Where the continuous view's readings go on stdout.
enum Display: Equatable, Sendable {
    /// The live view: panels redrawn in place (stdout is a terminal that can).
    case live(color: Bool, unicode: Bool)
    /// One readable line per reading.
    case lines
    /// One JSON object per reading per line.
    case json
    /// Nothing on stdout (`--quiet`, or `--csv -` owns it).
    case none

    /// Decides from the options and the environment, without touching the terminal.
    /// - Parameters:
    ///   - options: the parsed command line.
    ///   - stdoutIsTerminal: `isatty(1)`.
    ///   - environment: `TERM`, `NO_COLOR`, `LANG`, `LC_ALL`, `LC_CTYPE` are read.
    /// - Returns: the live view only on a terminal that is not `TERM=dumb` and only when neither
    ///   `--json`, `--quiet` nor `--csv -` asks for something else; colour unless `--no-color` or
    ///   a non-empty `NO_COLOR` (no-color.org); Unicode bars and rules when the locale is UTF-8.
    static func choose(_ options: MonitorOptions, stdoutIsTerminal: Bool, environment: [String: String]) -> Display {
        if options.quiet || options.csvToStdout { return .none }
        if options.json { return .json }
        let term = environment["TERM"] ?? ""
        guard stdoutIsTerminal, !term.isEmpty, term != "dumb" else { return .lines }
        let color = !options.noColor && (environment["NO_COLOR"] ?? "").isEmpty
        // The first of LC_ALL, LC_CTYPE, LANG that is set decides, as setlocale(3) does.
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty } ?? ""
        let unicode = String(locale.lowercased().filter { $0 != "-" }).contains("utf8")
        return .live(color: color, unicode: unicode)
    }
}

/// Everything the continuous view does with what the library delivers, on one serial queue
/// (``queue``), which owns stdout while streaming: the line printer (`--json` or plain lines), the
/// ``CSVLog`` and the ``LiveView``; `--count`; failures; and waking the main thread when every
/// sensor is done.
///
/// Deliveries come two ways: batched handlers (every sample: the log, the live view, and lines
/// with `--interval 0`) and push handlers (the newest sample per interval: lines otherwise).
final class StreamSession: Sendable {
    /// Sent to the main thread (where it is blocked and waited for) when every sensor is done.
    static let wakeSignal = SIGUSR1

    /// Where the library runs the handlers; the only writer of stdout while streaming.
    let queue: DispatchQueue
    /// `--csv`, once opened.
    let log: CSVLog?
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

    private let units: MotionUnits
    private let limit: Int?
    private let bufferedOnly: Bool
    private let mainThread: pthread_t
    private let finished = Atomic<Bool>(false)
    private let labels: [SensorKind: (id: String, description: String)]
    /// The sampling period of a running sensor for gap counting: nil when unknown or polled.
    private let period: @Sendable (SensorKind) -> Double?
    private let state = Locked(State())

    private struct State: Sendable {
        /// Samples of the batched handlers, per sensor, before `--count`.
        var handed: [SensorKind: Int] = [:]
        /// Of those, the ones within `--count`.
        var taken: [SensorKind: Int] = [:]
        /// Lines printed per sensor.
        var printed: [SensorKind: Int] = [:]
        /// Sensors that reached `--count` or failed.
        var done: Set<SensorKind> = []
        var failures: [(kind: SensorKind, error: MotionError)] = []
        /// Why the log stopped.
        var logFailure: String?
        /// Messages for stderr held back while the live view owns the terminal.
        var deferred: [String] = []
        /// Device motion estimates shown, and whether it reached `--count` or failed.
        var motionShown = 0
        var motionDone = false
        var motionFailure: MotionError?
    }

    /// - Parameters:
    ///   - options: the command line.
    ///   - queue: the output queue (serial); the log was opened for it.
    ///   - display: how readings are shown.
    ///   - log: the opened `--csv` log, if any (confined to ``queue`` from now on).
    ///   - sensors: the sensors that will stream.
    ///   - period: the sampling period in force of a running sensor (gaps are counted in it).
    ///   - mainThread: the thread waiting for signals.
    ///   - motion: whether device motion runs (its estimates come through ``motion(_:)``).
    ///   - makeLive: builds the live view on the queue, or returns nil.
    init(options: MonitorOptions, queue: DispatchQueue, display: Display, log: CSVLog?, sensors: [SensorInfo],
         period: @escaping @Sendable (SensorKind) -> Double?, mainThread: pthread_t, motion: Bool = false,
         makeLive: (DispatchQueue) -> LiveView?) {
        self.queue = queue
        self.display = display
        self.log = log
        units = options.units
        limit = options.count
        bufferedOnly = options.captureMode == .buffered
        self.period = period
        self.mainThread = mainThread
        self.motion = motion
        var labels: [SensorKind: (id: String, description: String)] = [:]
        for s in sensors { labels[s.kind] = (s.deviceID, s.deviceDescription) }
        self.labels = labels
        let showsLines = display == .lines || display == .json
        linesArePushed = showsLines && options.interval > 0
        live = makeLive(queue)
        wantsBatches = log != nil || live != nil || (showsLines && options.interval == 0)
    }

    /// True once every sensor has reached its count or failed, or the log failed.
    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Whether `--count` is counted on batches (every sample) rather than on printed lines.
    private var countsBatches: Bool { log != nil || live != nil || !linesArePushed }

    // MARK: Deliveries (on the queue)

    /// A batched handler's samples, oldest first.
    func batch(_ kind: SensorKind, _ samples: [Sample]) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let label = labels[kind] else { return }
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
            }
            return take
        }
        let slice = samples.prefix(take)
        if let log, !slice.isEmpty {
            let failedBefore = log.failure != nil
            if !log.append(slice, of: kind, device: label.id, period: period(kind)), !failedBefore, let failure = log.failure {
                state.withLock { s in
                    s.logFailure = failure
                    s.done.formUnion(labels.keys)
                }
                live?.logStopped(failure)
            }
        }
        live?.update(kind, slice, received: samples.count)
        if !linesArePushed, display == .lines || display == .json {
            print(slice.map { reading(kind, $0, label) })
        }
        wakeIfDone()
    }

    /// A push handler's newest sample.
    func push(_ kind: SensorKind, _ sample: Sample) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let label = labels[kind] else { return }
        let ok = state.withLock { s -> Bool in
            let printed = s.printed[kind, default: 0]
            guard !s.done.contains(kind), limit.map({ printed < $0 }) ?? true else { return false }
            s.printed[kind] = printed + 1
            if !countsBatches, let limit, printed + 1 >= limit { s.done.insert(kind) }
            return true
        }
        if ok { print([reading(kind, sample, label)]) }
        wakeIfDone()
    }

    /// A device motion estimate (at most one per `--interval`, or every one with 0).
    func motion(_ m: DeviceMotion) {
        dispatchPrecondition(condition: .onQueue(queue))
        let ok = state.withLock { s -> Bool in
            guard !s.motionDone, limit.map({ s.motionShown < $0 }) ?? true else { return false }
            s.motionShown += 1
            if let limit, s.motionShown >= limit { s.motionDone = true }
            return true
        }
        guard ok else { return }
        live?.update(motion: m)
        switch display {
        case .json, .lines:
            // Written outside any lock: a pipe's reader may be slow.
            fputs((display == .json ? Format.json(m) : Format.line(m)) + "\n", stdout)
            fflush(stdout)
        default: break
        }
        wakeIfDone()
    }

    /// Device motion's error: it has stopped (the sensors' own updates may go on).
    func failMotion(_ error: MotionError) {
        dispatchPrecondition(condition: .onQueue(queue))
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
        dispatchPrecondition(condition: .onQueue(queue))
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

    /// A notice of the library (e.g. a polled fallback and its reason): on stderr in order with
    /// the data, or in the live view.
    func note(_ text: String) {
        queue.async { [self] in
            live?.note(text)
            report("note: \(text)")
        }
    }

    /// A message for stderr: now, or after the live view has given the terminal back.
    func report(_ line: String) {
        if live != nil {
            state.withLock { $0.deferred.append(line) }
        } else {
            Console.error(line)
        }
    }

    private func reading(_ kind: SensorKind, _ s: Sample, _ label: (id: String, description: String)) -> Reading {
        Reading(kind: kind, deviceID: label.id, deviceDescription: label.description, timestamp: s.timestamp, x: s.x, y: s.y, z: s.z)
    }

    private func print(_ readings: [Reading]) {
        guard !readings.isEmpty else { return }
        var text = ""
        for r in readings {
            text += display == .json ? Format.json(r) : Format.line(r, units: units)
            text += "\n"
        }
        // Written outside any lock: a pipe's reader may be slow.
        fputs(text, stdout)
        fflush(stdout)
    }

    private func wakeIfDone() {
        let allDone = state.withLock { s in
            (s.done.count >= labels.count && (!motion || s.motionDone)) || s.logFailure != nil
        }
        if allDone, !finished.exchange(true, ordering: .acquiringAndReleasing) {
            pthread_kill(mainThread, Self.wakeSignal)
        }
    }

    // MARK: The end

    /// After the updates are stopped (every capture joined): handles what is still queued, gives
    /// the terminal back, prints the held-back messages, the log's summary and, when verbose, the
    /// statistics; closes the log.
    /// - Parameters:
    ///   - statistics: the library's counts per sensor, read after the stop.
    ///   - verbose: `--verbose`.
    /// - Returns: the exit status: 74 when the log failed, else the first sensor failure's, else 0.
    func finish(statistics: [(SensorKind, UpdateStatistics)], verbose: Bool) -> Int32 {
        let (s, summary) = queue.sync { () -> (State, [String]) in
            live?.finish()
            let s = state.withLock { $0 }
            let summary = log.map { logSummary($0, s, statistics) } ?? []
            log?.close()
            return (s, summary)
        }
        Console.flush()
        for line in s.deferred { Console.error(line) }
        if let failure = s.logFailure, let log {
            Console.error("\(MonitorOptions.commandName): \(failure). The rows written before it are kept, whole"
                          + (log.name == "stdout" ? "." : " (\(log.name) ends with a complete row); free some space and log to a new file."))
        }
        for line in summary { Console.error(line) }
        if verbose {
            for (kind, stats) in statistics {
                let shown = countsBatches ? s.taken[kind] ?? 0 : s.printed[kind] ?? 0
                Console.error("\(kind): \(shown) \(countsBatches ? "taken" : "printed"); \(stats.samples) received, \(stats.delivered) delivered, \(stats.coalesced) coalesced")
            }
            if motion { Console.error("deviceMotion: \(s.motionShown) estimates shown") }
        }
        if s.logFailure != nil { return ExitStatus.ioError }
        return (s.failures.first?.error ?? s.motionFailure).map { ExitStatus.of($0) } ?? ExitStatus.success
    }

    /// The log's summary: rows per sensor, samples the kernel dropped (gaps in the timestamps),
    /// samples this program dropped (received from the library but not written; 0 unless the
    /// log failed).
    private func logSummary(_ log: CSVLog, _ s: State, _ statistics: [(SensorKind, UpdateStatistics)]) -> [String] {
        dispatchPrecondition(condition: .onQueue(queue))
        var lines = ["\(MonitorOptions.commandName): logged \(log.totalRows) samples to \(log.name)"]
        var kernelDrops = false
        for (kind, stats) in statistics {
            let rows = log.rowsWritten(kind)
            let handed = s.handed[kind] ?? 0
            let taken = s.taken[kind] ?? 0
            // Received by the library but never handed over (must not happen), plus handed over
            // within --count but not written (only after a write error).
            let ours = max(0, stats.samples - handed) + max(0, taken - rows)
            let kernel = log.kernelDropped(kind)
            if (kernel ?? 0) > 0 { kernelDrops = true }
            var line = "  \(kind.rawValue.padding(to: 13))  \(labels[kind]?.description ?? "?")  \(rows) written, "
                + "\(kernel.map(String.init) ?? "? (polled: no steady period)") dropped by the kernel, \(ours) dropped by motion-monitor"
            if handed > taken { line += ", \(handed - taken) past --count not logged" }
            lines.append(line)
        }
        if kernelDrops {
            lines.append("  (Dropped by the kernel: gaps in the timestamps, where the kernel's buffer overflowed because the reader fell behind; a lower --rate helps.)")
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
