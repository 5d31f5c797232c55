import Dispatch
@preconcurrency import Glibc // stdout and stderr are C globals
import IIOMotion
import Locking
import Synchronization

/// The continuous mode: streams each requested sensor through the library's streaming API and
/// prints what it delivers, until `--count` readings of every sensor, `--duration`, SIGINT or
/// SIGTERM, or until every sensor has failed.
///
/// - `--interval S` > 0: push handlers, at most one reading per interval per sensor, the newest
///   (Core Motion's `startAccelerometerUpdates(to:withHandler:)`).
/// - `--interval 0`: batched handlers with every sample the sensor makes, none coalesced.
///
/// Handlers run on one serial queue, ``StreamPrinter/queue``, which owns stdout while streaming:
/// each delivery is formatted whole, then written and flushed at once, so lines never interleave
/// and a pipe sees them live.
///
/// Signals: SIGINT and SIGTERM are blocked before libiio or Dispatch start any thread (threads
/// inherit the mask) and then *waited for* with `sigtimedwait` on the main thread, so no signal
/// handler runs and nothing calls libiio from one (the approach of libiio's own `iio_readdev`).
/// The printer wakes the main thread the same way, with a SIGUSR1 sent to it, when every sensor
/// is done; the main thread otherwise sleeps, so an idle monitor costs no wake-ups.
///
/// Issue D replaces the output (live view, CSV) but can keep this skeleton: availability, manager
/// set-up, the wait, and the stop-then-drain order that loses nothing the library delivered.
enum Watch {
    static func run(_ options: MonitorOptions) -> Int32 {
        var signals = sigset_t()
        sigemptyset(&signals)
        for s in [SIGINT, SIGTERM, StreamPrinter.wakeSignal] { sigaddset(&signals, s) }
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
        Console.flush()

        let printer = StreamPrinter(options: options, sensors: kinds.compactMap { manager.sensor($0) },
                                    mainThread: pthread_self())
        start(kinds, of: manager, options: options, printer: printer)

        let deadline = options.duration.map { monotonicSeconds() + $0 }
        while !printer.isFinished {
            var timeout = 3600.0
            if let deadline {
                timeout = deadline - monotonicSeconds()
                if timeout <= 0 { break }
            }
            let signal = waitForSignal(in: &signals, seconds: timeout)
            if signal == SIGINT || signal == SIGTERM { break }
        }

        // Stop first (this joins the capture threads), then drain the queue: every reading the
        // library handed over before the stop is printed.
        manager.stopAllUpdates()
        return printer.finish(statistics: kinds.map { ($0, manager.updateStatistics(of: $0)) }, verbose: options.verbose)
    }

    /// Configures the manager and starts every sensor's updates, handlers on the printer's queue.
    private static func start(_ kinds: [SensorKind], of manager: MotionManager, options: MonitorOptions,
                              printer: StreamPrinter) {
        manager.preferredMode = options.captureMode
        // Called once per distinct notice (today: a polled fallback, with its reason).
        manager.noticeHandler = { [printer] notice in printer.note(notice) }
        // Interval and rate first: changing them restarts running updates.
        for kind in kinds {
            switch kind {
            case .accelerometer: manager.accelerometerUpdateInterval = options.interval
            case .gyroscope: manager.gyroUpdateInterval = options.interval
            case .magnetometer: break
            }
            if let rate = options.rate { manager.requestSamplingFrequency(rate, for: kind) }
        }
        let queue = printer.queue
        let batched = options.interval == 0
        for kind in kinds {
            switch (kind, batched) {
            case (.accelerometer, false):
                manager.startAccelerometerUpdates(to: queue) { data, error in
                    printer.receive(.accelerometer, data.map { [Reading($0)] }, error)
                }
            case (.accelerometer, true):
                manager.startAccelerometerBatches(to: queue) { batch, error in
                    printer.receive(.accelerometer, batch.map { $0.map(Reading.init) }, error)
                }
            case (.gyroscope, false):
                manager.startGyroUpdates(to: queue) { data, error in
                    printer.receive(.gyroscope, data.map { [Reading($0)] }, error)
                }
            case (.gyroscope, true):
                manager.startGyroBatches(to: queue) { batch, error in
                    printer.receive(.gyroscope, batch.map { $0.map(Reading.init) }, error)
                }
            case (.magnetometer, _):
                break
            }
        }
        if options.verbose {
            // Starting is synchronous: the mode and frequency in force are known now (a sensor that
            // failed to start has none, and its handler reports the error).
            let lines = kinds.compactMap { kind -> String? in
                guard let mode = manager.mode(of: kind) else { return nil }
                return StreamPrinter.setupLine(kind, sensor: manager.sensor(kind), mode: mode,
                                               frequency: manager.samplingFrequency(of: kind), interval: options.interval)
            }
            queue.async { for line in lines { Console.error(line) } }
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

/// Receives every delivery on one serial queue, prints it, counts readings per sensor, and
/// tells the main thread when every sensor is done (its `--count` reached, or failed).
final class StreamPrinter: Sendable {
    /// Sent to the main thread (where it is blocked and waited for) when every sensor is done.
    static let wakeSignal = SIGUSR1

    /// Where the library runs the handlers; the only writer of stdout while streaming.
    let queue = DispatchQueue(label: "motion-monitor.output")

    private let json: Bool
    private let units: MotionUnits
    /// `--mode buffered`: a sensor that fails before its first reading gets a hint to use auto.
    private let bufferedOnly: Bool
    private let mainThread: pthread_t
    private let finished = Atomic<Bool>(false)
    private let state: Locked<State>

    private struct State: Sendable {
        /// Readings printed per sensor.
        var printed: [SensorKind: Int] = [:]
        /// Sensors that reached `--count` or failed.
        var done: Set<SensorKind> = []
        var failures: [MotionError] = []
    }

    /// `--count`.
    private let limit: Int?

    /// What a sensor's readings are labelled with.
    private let labels: [SensorKind: (id: String, description: String)]

    init(options: MonitorOptions, sensors: [SensorInfo], mainThread: pthread_t) {
        json = options.json
        units = options.units
        bufferedOnly = options.captureMode == .buffered
        self.mainThread = mainThread
        limit = options.count
        var labels: [SensorKind: (id: String, description: String)] = [:]
        for s in sensors { labels[s.kind] = (s.deviceID, s.deviceDescription) }
        self.labels = labels
        state = Locked(State())
    }

    /// True once every sensor has reached its count or failed.
    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// A handler's delivery: readings (oldest first) or the error that stopped the sensor.
    /// Readings past `--count` are dropped; nothing arrives for a sensor after its error.
    func receive(_ kind: SensorKind, _ readings: [Reading]?, _ error: MotionError?) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let label = labels[kind] else { return }
        var text = ""
        var failure: MotionError?
        var hint = false
        let allDone = state.withLock { s -> Bool in
            guard !s.done.contains(kind) else { return false }
            if let readings {
                let printed = s.printed[kind, default: 0]
                let take = limit.map { min(readings.count, $0 - printed) } ?? readings.count
                for var r in readings.prefix(take) {
                    (r.kind, r.deviceID, r.deviceDescription) = (kind, label.id, label.description)
                    text += json ? Format.json(r) : Format.line(r, units: units)
                    text += "\n"
                }
                s.printed[kind] = printed + take
                // A sensor that reached its count keeps running until all are done: stopping one
                // sensor of a shared device would restart the device's buffer for the other.
                if let limit, printed + take >= limit { s.done.insert(kind) }
            } else if let error {
                failure = error
                hint = bufferedOnly && s.printed[kind, default: 0] == 0
                s.failures.append(error)
                s.done.insert(kind)
            }
            return s.done.count == labels.count
        }
        // Written outside the lock: a pipe's reader may be slow.
        if !text.isEmpty {
            fputs(text, stdout)
            fflush(stdout)
        }
        if let failure {
            Console.error(Report.failureMessage(kind, failure))
            if hint { Console.error("(--mode buffered was given: --mode auto reads the \(kind) by polling when its buffer cannot be used.)") }
        }
        if allDone, !finished.exchange(true, ordering: .acquiringAndReleasing) {
            pthread_kill(mainThread, Self.wakeSignal)
        }
    }

    /// Prints a notice of the library (e.g. a polled fallback and its reason) on stderr, in order
    /// with the data.
    func note(_ text: String) {
        queue.async { Console.error("note: \(text)") }
    }

    /// After the updates are stopped: prints what is still queued, and the statistics when
    /// verbose; returns the exit status (the first failure's, else 0).
    func finish(statistics: [(SensorKind, UpdateStatistics)], verbose: Bool) -> Int32 {
        let (failures, printed) = queue.sync { state.withLock { ($0.failures, $0.printed) } }
        Console.flush()
        if verbose {
            for (kind, stats) in statistics {
                Console.error("\(kind): \(printed[kind] ?? 0) printed; \(stats.samples) received, \(stats.delivered) delivered, \(stats.coalesced) coalesced")
            }
        }
        return failures.first.map(ExitStatus.of) ?? ExitStatus.success
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
}

/// Seconds on `CLOCK_MONOTONIC`.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}
