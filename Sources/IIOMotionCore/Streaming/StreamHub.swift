internal import Dispatch
import SystemSupport

/// The streaming side of a ``MotionManager``: which sensors are wanted, by whom, the device
/// captures serving them (``CaptureSource``s), and the newest sample of each sensor.
///
/// Locks are held only to copy or update small state: never while a capture thread blocks in the
/// kernel, never while a user's callback runs, never while a capture thread is joined. Starting and
/// stopping captures is serialised on ``control``, which never runs a user's callback and never
/// waits for a handler queue; callers that must not wait for it (capture threads) queue their
/// work on it instead (``onControl(_:)``).
final class StreamHub: Sendable {
    /// Serialises reconfiguration (start, stop, restart of device captures).
    let control = DispatchQueue(label: "IIOMotion.control")
    /// Where a sensor's handlers run when the caller names no queue: one serial queue per sensor,
    /// so that a handler that blocks holds up only its own sensor's deliveries.
    let handlerQueues = PerSensor<DispatchQueue>({ kind in DispatchQueue(label: "IIOMotion.handlers.\(kind)") })
    /// Where device motion handlers run when the caller names no queue.
    let motionHandlerQueue = DispatchQueue(label: "IIOMotion.handlers.deviceMotion")
    /// Where ``MotionManager/noticeHandler`` runs.
    let noticeQueue = DispatchQueue(label: "IIOMotion.notices")

    /// The default handler queue of `kind`.
    func handlerQueue(_ kind: SensorKind) -> DispatchQueue { handlerQueues[kind] }
    let state = Locked(HubState())
    /// The newest sample of each kind (in ``units``): what `accelerometerData` and friends read.
    let latest = Locked(Latest())
    /// The units captures deliver samples in.
    let units: MotionUnits
    /// Makes the device captures: the manager's backend's (``DeviceBackend/captures``: libiio's in
    /// production, embedded devices' in unit tests), or scripted ones.
    let makeCapture: CaptureFactory

    #if compiler(>=6.2)
    private static let controlKey = DispatchSpecificKey<ObjectIdentifier>()
    #else
    private nonisolated(unsafe) static let controlKey = DispatchSpecificKey<ObjectIdentifier>()  // a key has no state (an identity); Dispatch marks it Sendable from Swift 6.2
    #endif

    init(units: MotionUnits = .coreMotion, makeCapture: @escaping CaptureFactory) {
        self.units = units
        self.makeCapture = makeCapture
        control.setSpecific(key: Self.controlKey, value: ObjectIdentifier(self))
    }

    struct Latest: Sendable {
        var samples = PerSensor<Sample?>(repeating: nil)
    }

    /// A consumer of one sensor's samples.
    struct Consumer: Sendable {
        enum Delivery: Sendable {
            /// The newest sample, at most once per interval. A nil `queue` runs the handler on the
            /// capture thread itself, before its next refill (errors then go to the sensor's
            /// default handler queue).
            case coalesced(@Sendable (Sample?, MotionError?) -> Void, queue: DispatchQueue?)
            /// Every sample, in batches: `make` turns a capture batch into the job that hands this
            /// kind's samples (decoded into the public type on the capture thread) to the
            /// handler; `fail` is the handler's error call. A nil `queue` runs the job on the
            /// capture thread itself, before its next refill (errors then go to the sensor's
            /// default handler queue).
            case batched(make: @Sendable (CaptureBatch) -> @Sendable () -> Void,
                         fail: @Sendable (MotionError) -> Void, queue: DispatchQueue?)
            /// No callback: the caller polls the newest sample.
            case pull
        }
        var delivery: Delivery
        /// Who registered it: stopping a sensor's updates removes only its owner's consumers
        /// (device motion keeps the accelerometer running when its own updates stop, as in Core Motion).
        var owner: Owner = .user
        /// A sampling frequency this consumer needs at least (device motion's filter), if any.
        var minimumRate: Double?
        /// The update interval this consumer follows, when it is not the sensor's own (device
        /// motion's ``MotionManager/deviceMotionUpdateInterval``).
        var interval: Double?
        /// A batched consumer that also wants the newest sample promptly (device motion): refills
        /// then follow the interval instead of holding at least 50 ms.
        var timely = false
        /// The samples it was handed and has not yet handled, bounded by
        /// ``HubState/batchBacklogLimit``; nil for consumers that cannot fall behind (those run on
        /// the capture thread).
        var backlog: Backlog?
        /// How the consumer hears that its updates ended without an error (stop, replacement,
        /// release of the manager): async sequences finish. Runs on `queue`, after what was
        /// already dispatched there.
        var ended: (queue: DispatchQueue, run: @Sendable () -> Void)?
        /// When the next coalesced delivery is due, in sample time.
        var schedule = CoalescingSchedule()
        /// A coalesced consumer's one pending sample (a handler that falls behind gets the newest).
        let mailbox = Mailbox<Sample>()
    }

    /// What a batched consumer has been handed and not yet handled, in samples.
    final class Backlog: Sendable {
        private let pending = Locked(0)
        /// True when the hub's job releases the samples once the handler returns; false when the
        /// consumer releases them itself (an async sequence, as its loop takes each batch).
        let releasedByJob: Bool

        init(releasedByJob: Bool) { self.releasedByJob = releasedByJob }

        /// Counts `count` more samples if that keeps the backlog within `limit`.
        func reserve(_ count: Int, limit: Int) -> Bool {
            pending.withLock { p in
                guard p + count <= limit else { return false }
                p += count
                return true
            }
        }

        func release(_ count: Int) { pending.withLock { $0 -= count } }

        var count: Int { pending.withLock { $0 } }
    }

    /// Who a consumer belongs to.
    enum Owner: Sendable, Hashable {
        /// The sensor's own updates (start…Updates, start…Batches, the async forms).
        case user
        /// Device motion's feed.
        case deviceMotion
    }

    /// Per sensor kind.
    struct Sensor: Sendable {
        var consumers: [Int: Consumer] = [:]
        /// Being stopped: its capture is wound down while its consumers still get what was read.
        var stopping = false
        var interval: Double = 0.1
        var requestedRate: Double?
        var statistics = UpdateStatistics()
        var status: CaptureStatus?
    }

    struct HubState: Sendable {
        var sensors: [SensorKind: Sensor] = [:]
        var captures: [String: RunningCapture] = [:]
        var nextConsumer = 0
        var nextCaptureSerial = 0
        var timeout: Double?
        var preference: SensorMode.Preference = .auto
        var noticeHandler: (@Sendable (MotionNotice) -> Void)?
        var announced: Set<String> = []
        /// Samples a batched consumer may have been handed and not yet handled before new batches
        /// are dropped (and counted) for it.
        var batchBacklogLimit = 1 << 18
        /// The manager is gone: nothing starts any more.
        var closed = false
    }

    /// A capture and what it was started for.
    struct RunningCapture: Sendable {
        var capture: any CaptureSource
        var key: CaptureKey
        /// Identifies this capture among the device's successive ones (a failure report from an
        /// old capture must not stop its replacement).
        var serial: Int
    }

    /// What decides whether a running capture still fits.
    struct CaptureKey: Equatable, Sendable {
        var kinds: [SensorKind]
        var interval: Double
        var everySample = false
        var handsOff = false
        var timely = false
        var rate: Double?
        var timeout: Double?
        var preference: SensorMode.Preference
    }

    func sensor(_ kind: SensorKind) -> Sensor {
        state.withLock { $0.sensors[kind] ?? Sensor() }
    }

    // MARK: Consumers

    /// Adds a consumer of `kind`; returns its id, or nil when the manager is gone.
    func add(_ kind: SensorKind, _ consumer: Consumer) -> Int? {
        var consumer = consumer
        if case .batched(_, _, _?) = consumer.delivery, consumer.backlog == nil {
            consumer.backlog = Backlog(releasedByJob: true)
        }
        return state.withLock { s -> Int? in
            guard !s.closed else { return nil }
            let id = s.nextConsumer
            s.nextConsumer += 1
            s.sensors[kind, default: Sensor()].consumers[id] = consumer
            s.sensors[kind]!.stopping = false
            return id
        }
    }

    /// Removes the consumers of `kind` that `matches` picks (e.g. the user's push handler); those
    /// that wait for an end (async sequences) hear it unless `quietly`.
    func remove(_ kind: SensorKind, quietly: Bool = false, where matches: (Int, Consumer) -> Bool) {
        let ended = state.withLock { s -> [(DispatchQueue, @Sendable () -> Void)] in
            guard let consumers = s.sensors[kind]?.consumers else { return [] }
            var ended: [(DispatchQueue, @Sendable () -> Void)] = []
            for (id, c) in consumers where matches(id, c) {
                s.sensors[kind]!.consumers[id] = nil
                if let e = c.ended, !quietly { ended.append(e) }
            }
            return ended
        }
        Self.dispatch(ended)
    }

    /// Removes one consumer.
    func remove(_ kind: SensorKind, id: Int, quietly: Bool = false) {
        remove(kind, quietly: quietly) { cid, _ in cid == id }
    }

    /// Whether `kind` runs for `owner` (nil: for anyone).
    func isActive(_ kind: SensorKind, owner: Owner? = .user) -> Bool {
        state.withLock { s in
            guard let sensor = s.sensors[kind], !sensor.stopping else { return false }
            return owner.map { o in sensor.consumers.values.contains { $0.owner == o } } ?? !sensor.consumers.isEmpty
        }
    }

    /// Stops `owner`'s updates of `kinds`. A sensor nobody else uses stops without losing a
    /// sample: its capture ends (and is joined) while the consumers are still registered, so every
    /// batch read reaches them; then the consumers go. A sensor another owner still uses keeps
    /// running: only `owner`'s consumers go (its capture restarts if what it must serve changed).
    /// Runs on ``control``.
    func stop(_ kinds: [SensorKind], owner: Owner = .user, plans: [SensorKind: SensorPlan], uri: String) {
        dispatchPrecondition(condition: .onQueue(control))
        // Per exclusive sensor, the consumers this stop removes once the capture is wound down:
        // those there now. One another owner adds meanwhile (its start waits for this stop on
        // ``control``) stays, and its own reconfiguration then restarts the sensor.
        var ended: [(DispatchQueue, @Sendable () -> Void)] = []
        let exclusive = state.withLock { s -> [SensorKind: [Int]] in
            var exclusive: [SensorKind: [Int]] = [:]
            for k in kinds where s.sensors[k] != nil {
                if s.sensors[k]!.consumers.values.contains(where: { $0.owner != owner }) {
                    for (id, c) in s.sensors[k]!.consumers where c.owner == owner {
                        s.sensors[k]!.consumers[id] = nil
                        if let e = c.ended { ended.append(e) }
                    }
                } else if !s.sensors[k]!.consumers.isEmpty {
                    s.sensors[k]!.stopping = true
                    exclusive[k] = Array(s.sensors[k]!.consumers.keys)
                }
            }
            return exclusive
        }
        reconcile(plans: plans, uri: uri)
        let idle = state.withLock { s -> [SensorKind] in
            var idle: [SensorKind] = []
            for (k, ids) in exclusive {
                for id in ids {
                    if let c = s.sensors[k]!.consumers.removeValue(forKey: id), let e = c.ended { ended.append(e) }
                }
                s.sensors[k]!.stopping = false
                if s.sensors[k]!.consumers.isEmpty { idle.append(k) }
            }
            return idle
        }
        latest.withLock { l in for k in idle { l.samples[k] = nil } }
        Self.dispatch(ended)
    }

    /// The manager is released: every consumer goes (async sequences end), and the captures are
    /// stopped and joined: on ``control`` and waiting for it, or, from a capture thread, queued
    /// there (the hub lives until it has run).
    func close() {
        let ended = state.withLock { s -> [(DispatchQueue, @Sendable () -> Void)] in
            s.closed = true
            var ended: [(DispatchQueue, @Sendable () -> Void)] = []
            for k in SensorKind.allCases {
                for c in s.sensors[k]?.consumers.values ?? [:].values { if let e = c.ended { ended.append(e) } }
                s.sensors[k]?.consumers = [:]
            }
            return ended
        }
        latest.withLock { $0 = Latest() }
        Self.dispatch(ended)
        _ = onControl { [self] in
            let running = state.withLock { s -> [RunningCapture] in
                defer { s.captures = [:] }
                return Array(s.captures.values)
            }
            for run in running { run.capture.stop() }
        }
    }

    /// Hands `notice` to the notice handler, on the notice queue, the first time `key` is seen.
    func announce(_ notice: MotionNotice, once key: String) {
        guard let handler = state.withLock({ s in s.announced.insert(key).inserted ? s.noticeHandler : nil }) else { return }
        noticeQueue.async { handler(notice) }
    }
}

extension StreamHub {
    /// Whether the calling thread is a capture thread (running a handler delivered there).
    static var onCaptureThread: Bool { ThisThread.isCaptureThread }

    /// Whether the calling code runs on this hub's ``control`` queue.
    var isOnControl: Bool { DispatchQueue.getSpecific(key: Self.controlKey) == ObjectIdentifier(self) }

    /// Runs `work` on ``control`` and returns its result. Already on ``control`` it runs at once;
    /// on a capture thread it is queued and nil returned, because waiting there could deadlock:
    /// ``control`` may be joining that very thread.
    func onControl<T: Sendable>(_ work: @escaping @Sendable () -> T) -> T? {
        if isOnControl { return work() }
        if Self.onCaptureThread {
            control.async { _ = work() }
            return nil
        }
        return control.sync(execute: work)
    }

    /// Runs the jobs on their queues, one `async` per queue (in order), so that a batch feeding
    /// two handlers on one queue wakes that queue's thread once, not twice.
    static func dispatch(_ jobs: [(DispatchQueue, @Sendable () -> Void)]) {
        guard let first = jobs.first else { return }
        if jobs.count == 1 {
            first.0.async(execute: first.1)
            return
        }
        var queues: [DispatchQueue] = []
        for (q, _) in jobs where !queues.contains(where: { $0 === q }) { queues.append(q) }
        for q in queues {
            let mine = jobs.filter { $0.0 === q }.map(\.1)
            q.async { for job in mine { job() } }
        }
    }
}
