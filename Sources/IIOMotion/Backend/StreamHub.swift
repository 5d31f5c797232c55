internal import CIIOShim
internal import Dispatch
internal import Glibc
import Locking

/// The streaming side of a ``MotionManager``: which sensors are wanted, by whom, the device
/// captures serving them, and the newest sample of each sensor.
///
/// Locks are held only to copy or update small state: never while a capture thread blocks in the
/// kernel, never while a user's handler runs, never while a capture thread is joined. Starting and
/// stopping captures is serialised on ``control``.
final class StreamHub: Sendable {
    /// Serialises reconfiguration (start, stop, restart of device captures).
    let control = DispatchQueue(label: "IIOMotion.control")
    /// Where a sensor's handlers run when the caller names no queue: one serial queue per sensor,
    /// so that a handler that blocks holds up only its own sensor's deliveries.
    let handlerQueues = SensorKind.allCases.map { DispatchQueue(label: "IIOMotion.handlers.\($0)") }
    /// Where device motion handlers run when the caller names no queue.
    let motionHandlerQueue = DispatchQueue(label: "IIOMotion.handlers.deviceMotion")

    /// The default handler queue of `kind`.
    func handlerQueue(_ kind: SensorKind) -> DispatchQueue { handlerQueues[kind.slot] }
    let state = Locked(HubState())
    /// The newest sample of each kind (in ``units``): what `accelerometerData` and friends read.
    let latest = Locked(Latest())
    /// The units captures deliver samples in.
    let units: MotionUnits

    init(units: MotionUnits = .coreMotion) {
        self.units = units
    }

    struct Latest: Sendable {
        var samples: [CapturedSample?] = [nil, nil, nil]
    }

    /// A consumer of one sensor's samples.
    struct Consumer: Sendable {
        enum Delivery: Sendable {
            /// The newest sample, at most once per interval.
            case coalesced(@Sendable (CapturedSample?, MotionError?) -> Void, queue: DispatchQueue)
            /// Every sample, in batches: `make` turns a capture batch into the job that hands this
            /// kind's samples (decoded into the public type on the capture thread) to the
            /// handler; `fail` is the handler's error call. A nil `queue` runs the job on the
            /// capture thread itself, before its next refill (errors still go to the sensor's
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
        /// Sample time from which the next coalesced delivery is due.
        var nextDue: Double = -.infinity
        /// A coalesced consumer's one pending sample (a handler that falls behind gets the newest).
        let mailbox = Mailbox()
        /// A batched consumer's samples dispatched and not yet handled.
        let backlog = Locked(0)
    }

    /// The sample waiting for a coalesced handler, and whether a job to deliver it is queued: at
    /// most one job per consumer is ever queued, so a blocked handler costs no memory.
    final class Mailbox: Sendable {
        private let slot = Locked<(sample: CapturedSample?, scheduled: Bool)>((nil, false))

        /// Leaves `sample` for the handler; true when a job must be queued to deliver it, false
        /// when the queued job will deliver it instead of an older sample (which is coalesced).
        func put(_ sample: CapturedSample) -> Bool {
            slot.withLock { s in
                s.sample = sample
                defer { s.scheduled = true }
                return !s.scheduled
            }
        }

        /// The sample to deliver now (the queued job calls this).
        func take() -> CapturedSample? {
            slot.withLock { s in
                defer { s = (nil, false) }
                return s.sample
            }
        }
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
        var error: MotionError?
    }

    struct HubState: Sendable {
        var sensors: [SensorKind: Sensor] = [:]
        var captures: [String: RunningCapture] = [:]
        var nextConsumer = 0
        var nextCaptureSerial = 0
        var timeout: Double?
        var preference: SensorMode.Preference = .auto
        var noticeHandler: (@Sendable (String) -> Void)?
        var announced: Set<String> = []
        /// Samples a batched consumer may have dispatched and not yet handled before new batches
        /// are dropped (and counted) for it.
        var batchBacklogLimit = 1 << 18
    }

    /// A capture and what it was started for.
    struct RunningCapture: Sendable {
        var capture: DeviceCapture
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

    /// Adds a consumer of `kind`; returns its id.
    func add(_ kind: SensorKind, _ delivery: Consumer.Delivery, owner: Owner = .user, minimumRate: Double? = nil) -> Int {
        state.withLock { s in
            let id = s.nextConsumer
            s.nextConsumer += 1
            s.sensors[kind, default: Sensor()].consumers[id] = Consumer(delivery: delivery, owner: owner, minimumRate: minimumRate)
            s.sensors[kind]!.error = nil
            s.sensors[kind]!.stopping = false
            return id
        }
    }

    /// Removes consumers of `kind` (all when `id` is nil, or just the pull one when `pullOnly`).
    func remove(_ kind: SensorKind, id: Int? = nil) {
        state.withLock { s in
            if let id { s.sensors[kind]?.consumers[id] = nil } else { s.sensors[kind]?.consumers = [:] }
        }
    }

    /// Removes the consumers of `kind` that `matches` picks (e.g. the user's push handler).
    func remove(_ kind: SensorKind, where matches: (Consumer) -> Bool) {
        state.withLock { s in
            guard let consumers = s.sensors[kind]?.consumers else { return }
            for (id, c) in consumers where matches(c) { s.sensors[kind]!.consumers[id] = nil }
        }
    }

    /// Whether `kind` runs for `owner` (nil: for anyone).
    func isActive(_ kind: SensorKind, owner: Owner? = .user) -> Bool {
        state.withLock { s in
            guard let sensor = s.sensors[kind] else { return false }
            let has = owner.map { o in sensor.consumers.values.contains { $0.owner == o } } ?? !sensor.consumers.isEmpty
            return has && sensor.error == nil && !sensor.stopping
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
        let exclusive = state.withLock { s -> [SensorKind: [Int]] in
            var exclusive: [SensorKind: [Int]] = [:]
            for k in kinds where s.sensors[k] != nil {
                if s.sensors[k]!.consumers.values.contains(where: { $0.owner != owner }) {
                    for (id, c) in s.sensors[k]!.consumers where c.owner == owner { s.sensors[k]!.consumers[id] = nil }
                } else {
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
                for id in ids { s.sensors[k]!.consumers[id] = nil }
                s.sensors[k]!.stopping = false
                if s.sensors[k]!.consumers.isEmpty {
                    s.sensors[k]!.error = nil
                    idle.append(k)
                }
            }
            return idle
        }
        latest.withLock { l in for k in idle { l.samples[k.slot] = nil } }
    }

    // MARK: Reconfiguration

    /// Brings the running captures in line with the consumers: one capture per device serving every
    /// active sensor of that device; captures whose sensors, interval, rate or mode changed are
    /// restarted. Runs on ``control``. Setup errors go to the consumers of the sensors concerned.
    /// - Returns: the setup error of each sensor that could not start.
    @discardableResult
    func reconcile(plans: [SensorKind: SensorPlan], uri: String) -> [SensorKind: MotionError] {
        dispatchPrecondition(condition: .onQueue(control))
        let (wanted, running) = state.withLock { s -> ([String: (CaptureKey, [SensorPlan])], [String: RunningCapture]) in
            var byDevice: [String: (CaptureKey, [SensorPlan])] = [:]
            for kind in SensorKind.allCases {
                guard let sensor = s.sensors[kind], !sensor.consumers.isEmpty, sensor.error == nil, !sensor.stopping,
                      let plan = plans[kind] else { continue }
                let id = plan.info.deviceID
                var entry = byDevice[id] ?? (CaptureKey(kinds: [], interval: .infinity, rate: nil, timeout: s.timeout, preference: s.preference), [])
                entry.0.kinds.append(kind)
                entry.0.interval = min(entry.0.interval, sensor.interval)
                for c in sensor.consumers.values {
                    if case .batched(_, _, let queue) = c.delivery {
                        entry.0.everySample = true  // a batched consumer wants every sample…
                        if queue != nil { entry.0.handsOff = true }  // …and, on a queue, keeps batches past the refill
                    } else {
                        entry.0.timely = true  // a push or pull consumer wants the newest promptly
                    }
                }
                if let r = sensor.requestedRate { entry.0.rate = max(entry.0.rate ?? 0, r) }
                for r in sensor.consumers.values.compactMap(\.minimumRate) where sensor.requestedRate == nil {
                    entry.0.rate = max(entry.0.rate ?? 0, r)
                }
                entry.1.append(plan)
                byDevice[id] = entry
            }
            return (byDevice, s.captures)
        }
        // Stop what no longer fits (joins happen here, with no lock held).
        for (id, run) in running where wanted[id]?.0 != run.key {
            run.capture.stop()
            state.withLock { s in
                s.captures[id] = nil
                for k in run.key.kinds { s.sensors[k]?.status = nil }
            }
        }
        var failures: [SensorKind: MotionError] = [:]
        for (id, (key, devicePlans)) in wanted.sorted(by: { $0.key < $1.key }) {
            if state.withLock({ $0.captures[id] != nil }) { continue }
            let settings = CaptureSettings(uri: uri, plans: devicePlans, units: units, interval: key.interval, everySample: key.everySample,
                                           handsOff: key.handsOff, timely: key.timely, requestedRate: key.rate,
                                           timeout: key.timeout, preference: key.preference)
            let serial = state.withLock { s -> Int in
                s.nextCaptureSerial += 1
                return s.nextCaptureSerial
            }
            let capture = DeviceCapture(
                settings: settings,
                deliver: { [weak self] batch in self?.deliver(batch) },
                fail: { [weak self] kinds, error, ended in
                    self?.captureFailed(deviceID: id, serial: serial, kinds: kinds, error: error, ended: ended)
                })
            do throws(MotionError) {
                let status = try capture.start()
                let notice: (@Sendable (String) -> Void)? = state.withLock { s in
                    s.captures[id] = RunningCapture(capture: capture, key: key, serial: serial)
                    for k in key.kinds { s.sensors[k]?.status = status }
                    if let reason = status.fallbackReason, s.announced.insert(reason).inserted { return s.noticeHandler }
                    return nil
                }
                if let notice, let reason = status.fallbackReason {
                    notice("Polling \(capture.deviceText) instead of streaming its buffer: \(reason).")
                }
            } catch {
                for k in key.kinds { failures[k] = error }
                fail(kinds: key.kinds, error: error)
            }
        }
        return failures
    }

    // MARK: Delivery (capture threads)

    /// Hands a batch to everyone who wants it. Called on a capture thread; allocates per batch
    /// (the job list, when there are push consumers), never per sample. Jobs of consumers served
    /// on the capture thread run here, last, with no lock held.
    func deliver(_ batch: CaptureBatch) {
        guard !batch.isEmpty else { return }
        let newest = batch.newest
        latest.withLock { l in
            if let n = newest.0 { l.samples[0] = n }
            if let n = newest.1 { l.samples[1] = n }
            if let n = newest.2 { l.samples[2] = n }
        }
        var jobs: [(DispatchQueue, @Sendable () -> Void)] = []
        var here: [@Sendable () -> Void] = []
        state.withLock { s in
            for kind in SensorKind.allCases {
                guard let n = batch.newest(kind), var sensor = s.sensors[kind] else { continue }
                let count = batch.count(kind)
                sensor.statistics.samples += count
                for (id, var c) in sensor.consumers {
                    switch c.delivery {
                    case let .coalesced(handler, queue):
                        // One delivery per interval of *sample* time, on a schedule: a wake-up
                        // period that does not divide the interval (80 ms refills for a 100 ms
                        // interval) still gives one delivery per interval on average, and a stall
                        // does not cause a burst afterwards.
                        if n.timestamp >= c.nextDue - 1e-6 {
                            c.nextDue = n.timestamp - c.nextDue > sensor.interval ? n.timestamp + sensor.interval : c.nextDue + sensor.interval
                            sensor.statistics.coalesced += count - 1
                            let mailbox = c.mailbox
                            if mailbox.put(n) {
                                sensor.statistics.delivered += 1
                                jobs.append((queue, { if let s = mailbox.take() { handler(s, nil) } }))
                            } else {
                                // The handler has not taken the previous one yet: it gets this instead.
                                sensor.statistics.coalesced += 1
                            }
                        } else {
                            sensor.statistics.coalesced += count
                        }
                        sensor.consumers[id] = c
                    case let .batched(make, _, nil):
                        // On this thread, after the lock is released: no backlog can build up.
                        here.append(make(batch))
                    case let .batched(make, _, queue?):
                        let backlog = c.backlog, limit = s.batchBacklogLimit
                        let admitted = backlog.withLock { pending -> Bool in
                            guard pending + count <= limit else { return false }
                            pending += count
                            return true
                        }
                        if !admitted {
                            sensor.statistics.dropped += count  // the handler is too far behind
                        } else {
                            let job = make(batch)
                            jobs.append((queue, {
                                job()
                                backlog.withLock { $0 -= count }
                            }))
                        }
                    case .pull:
                        break
                    }
                }
                s.sensors[kind] = sensor
            }
        }
        Self.dispatch(jobs)
        for job in here { job() }
    }

    /// Sensors of a capture failed: they stop and their consumers hear why; the others go on.
    /// When the capture itself `ended`, it is removed and joined (on ``control``), unless it has
    /// already been replaced by a newer capture of the same device.
    private func captureFailed(deviceID: String, serial: Int, kinds: [SensorKind], error: MotionError, ended: Bool) {
        fail(kinds: kinds, error: error)
        guard ended else { return }
        control.async { [self] in
            let run = state.withLock { s -> RunningCapture? in
                guard let r = s.captures[deviceID], r.serial == serial else { return nil }
                s.captures[deviceID] = nil
                return r
            }
            run?.capture.stop()
        }
    }

    private func fail(kinds: [SensorKind], error: MotionError) {
        let jobs = state.withLock { s -> [(DispatchQueue, @Sendable () -> Void)] in
            var jobs: [(DispatchQueue, @Sendable () -> Void)] = []
            for k in kinds {
                guard var sensor = s.sensors[k] else { continue }
                sensor.error = error
                sensor.status = nil
                for c in sensor.consumers.values {
                    switch c.delivery {
                    case let .coalesced(h, q): jobs.append((q, { h(nil, error) }))
                    case let .batched(_, h, q): jobs.append((q ?? handlerQueue(k), { h(error) }))
                    case .pull: break
                    }
                }
                s.sensors[k] = sensor
            }
            return jobs
        }
        Self.dispatch(jobs)
    }
}

extension StreamHub {
    /// Whether the calling thread is a capture thread (running a handler delivered there).
    static var onCaptureThread: Bool { iioshim_is_capture_thread() != 0 }

    /// Runs `work` on ``control`` and returns its result; on a capture thread, queues it and
    /// returns nil instead, because waiting there could deadlock: ``control`` may be joining
    /// that very thread.
    func onControl<T: Sendable>(_ work: @escaping @Sendable () -> T) -> T? {
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

extension SensorKind {
    /// Index into fixed per-kind storage.
    var slot: Int {
        switch self {
        case .accelerometer: 0
        case .gyroscope: 1
        case .magnetometer: 2
        }
    }
}
