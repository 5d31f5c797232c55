internal import Dispatch

/// How the public calls of Streaming.swift become the hub's consumers: a handler, batches, an
/// async sequence or pull reads per sensor, and the captures brought in line with them.
extension MotionManager {
    func latest<T: PublicSample>(_ kind: SensorKind) -> T? {
        let s = hub.latest.withLock { $0.samples[kind] }
        return s.map { T($0) }
    }

    func setInterval(_ value: Double, for kind: SensorKind) {
        // Between every sample (0) and an hour.
        var v = value.isFinite ? min(max(value, 0), 3600) : 0.1
        if v > 0, let fastest = sensor(kind)?.availableSamplingFrequencies?.maximum, fastest > 0 {
            v = max(v, 1 / fastest)
        }
        let changed = hub.state.withLock { s -> Bool in
            let old = s.sensors[kind]?.interval
            s.sensors[kind, default: .init()].interval = v
            return old != v
        }
        if changed { restartIfActive(kind) }
    }

    func restartIfActive(_ kind: SensorKind) {
        guard hub.isActive(kind, owner: nil) else { return }
        reconcile()
    }

    /// Brings the captures in line with the consumers: on the control queue, waiting for it, or
    /// (from a capture thread) queued there.
    /// - Returns: the sensors that could not start, and why; empty when queued.
    @discardableResult
    func reconcile() -> [SensorKind: MotionError] {
        let plans = activePlans()
        return hub.onControl { [hub, uri] in hub.reconcile(plans: plans, uri: uri) } ?? [:]
    }

    /// The chosen plan per kind, or the reason a kind has none.
    func plan(_ kind: SensorKind) -> Result<SensorPlan, MotionError> {
        let snapshot = state.withLock { $0 }
        if let p = snapshot.chosen[kind] {
            if let problem = p.info.problem { return .failure(problem) }
            return .success(p)
        }
        switch snapshot.discovery {
        case .failure(let e): return .failure(e)
        case .success(let d): return .failure(notAvailableError(kind, discovery: d))
        }
    }

    func activePlans() -> [SensorKind: SensorPlan] {
        state.withLock { $0.chosen }
    }

    /// How a start ended.
    enum Started {
        /// Running; the consumer's id.
        case started(Int)
        /// Not running. `reported`: the consumer's callbacks have already been given the error
        /// (the capture failed to start; they are removed).
        case failed(MotionError, reported: Bool)
    }

    /// Registers a consumer, then starts (or restarts) the device capture. From a capture thread
    /// the capture's start is queued: its failure then reaches the consumer's callbacks (a pull
    /// consumer sees the sensor inactive).
    func start(_ kind: SensorKind, _ consumer: StreamHub.Consumer) -> Started {
        if case .failure(let e) = plan(kind) { return .failed(e, reported: false) }
        // Counts restart when the sensor goes from idle to active, not when a second consumer joins.
        let wasActive = hub.isActive(kind, owner: nil)
        guard let id = hub.add(kind, consumer) else {
            return .failed(MotionError(code: .notAvailable, detail: "The motion manager is being released"), reported: false)
        }
        if !wasActive { hub.state.withLock { $0.sensors[kind]?.statistics = UpdateStatistics() } }
        if let e = reconcile()[kind] { return .failed(e, reported: true) }
        return .started(id)
    }

    func startPull(_ kind: SensorKind) throws(MotionError) {
        let running = hub.state.withLock { s in
            s.sensors[kind]?.consumers.values.contains { if case .pull = $0.delivery, $0.owner == .user { true } else { false } } ?? false
        }
        if running && hub.isActive(kind) { return }
        if case .failed(let e, _) = start(kind, StreamHub.Consumer(delivery: .pull)) { throw e }
    }

    /// Removes the user's push consumers of `kind` (a handler or an async sequence, which ends):
    /// a new one replaces them, as in Core Motion.
    private func replacePush(_ kind: SensorKind) {
        hub.remove(kind) { _, c in if case .coalesced = c.delivery, c.owner == .user { true } else { false } }
    }

    /// Removes the user's batched consumers of `kind` (a handler or an async sequence, which ends).
    private func replaceBatches(_ kind: SensorKind) {
        hub.remove(kind) { _, c in if case .batched = c.delivery, c.owner == .user { true } else { false } }
    }

    func startPush<T: PublicSample>(_ kind: SensorKind, _ delivery: HandlerDelivery,
                                                   _ handler: @escaping @Sendable (T?, MotionError?) -> Void) {
        replacePush(kind)
        // nil: on the capture thread.
        let queue: DispatchQueue? = switch delivery {
        case .queue(let q): q ?? hub.handlerQueue(kind)
        case .captureThread: nil
        }
        let consumer = StreamHub.Consumer(delivery: .coalesced({ s, e in handler(s.map { T($0) }, e) }, queue: queue))
        if case .failed(let e, reported: false) = start(kind, consumer) { (queue ?? hub.handlerQueue(kind)).async { handler(nil, e) } }
    }

    func startBatches<T: PublicSample>(_ kind: SensorKind, _ delivery: HandlerDelivery,
                                                      _ handler: @escaping @Sendable ([T]?, MotionError?) -> Void) {
        replaceBatches(kind)
        // nil: on the capture thread.
        let queue: DispatchQueue? = switch delivery {
        case .queue(let q): q ?? hub.handlerQueue(kind)
        case .captureThread: nil
        }
        let consumer = StreamHub.Consumer(delivery: .batched(make: { batch in
            let samples = T.all(in: batch)
            return { handler(samples, nil) }
        }, fail: { handler(nil, $0) }, queue: queue))
        if case .failed(let e, reported: false) = start(kind, consumer) { (queue ?? hub.handlerQueue(kind)).async { handler(nil, e) } }
    }

    func updates<T: PublicSample>(_ kind: SensorKind) -> AsyncThrowingStream<T, any Error> {
        let (stream, continuation) = AsyncThrowingStream<T, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        replacePush(kind)
        let link = StreamLink()
        continuation.onTermination = { [weak self] _ in
            if let id = link.end() { self?.endConsumer(kind, id: id) }
        }
        let q = hub.handlerQueue(kind)
        var consumer = StreamHub.Consumer(delivery: .coalesced({ s, e in
            if let s { continuation.yield(T(s)) } else { continuation.finish(throwing: e) }
        }, queue: q))
        consumer.ended = (q, { continuation.finish() })
        switch start(kind, consumer) {
        case .failed(let e, _): continuation.finish(throwing: e)
        case .started(let id): if link.attach(id) { endConsumer(kind, id: id) }
        }
        return stream
    }

    func batches<T: PublicSample>(_ kind: SensorKind) -> AsyncThrowingStream<[T], any Error> {
        replaceBatches(kind)
        let backlog = StreamHub.Backlog(releasedByJob: false)
        let inbox = BatchInbox<T>(backlog: backlog)
        let link = StreamLink()
        // Ends this consumer when the sequence goes: iterated to its end, cancelled, or dropped.
        let token = StreamToken { [weak self] in
            if let id = link.end() { self?.endConsumer(kind, id: id) }
        }
        var consumer = StreamHub.Consumer(delivery: .batched(make: { batch in
            let samples = T.all(in: batch)
            return { inbox.offer(samples) }
        }, fail: { inbox.finish(throwing: $0) }, queue: nil))  // handed over on the capture thread
        consumer.backlog = backlog
        consumer.ended = (hub.handlerQueue(kind), { inbox.finish(throwing: nil) })
        switch start(kind, consumer) {
        case .failed(let e, _): inbox.finish(throwing: e)
        case .started(let id): if link.attach(id) { endConsumer(kind, id: id) }
        }
        return AsyncThrowingStream(unfolding: { [token] in
            _ = token
            return try await inbox.next()
        })
    }

    func endConsumer(_ kind: SensorKind, id: Int) {
        hub.remove(kind, id: id, quietly: true)
        let plans = activePlans()
        hub.control.async { [hub, uri] in hub.reconcile(plans: plans, uri: uri) }
    }

    func stop(_ kind: SensorKind) {
        stop([kind], owner: .user)
    }

    /// Stops `owner`'s updates of `kinds` and waits until their captures are wound down. From a
    /// handler running on a capture thread it cannot wait (the control queue may be joining that
    /// very thread): the consumers go at once, so no further batch reaches them, and the
    /// captures are wound down just after.
    func stop(_ kinds: [SensorKind], owner: StreamHub.Owner) {
        let plans = activePlans()
        if StreamHub.onCaptureThread {
            for kind in kinds { hub.remove(kind) { _, c in c.owner == owner } }
            hub.control.async { [hub, uri] in hub.reconcile(plans: plans, uri: uri) }
            return
        }
        _ = hub.onControl { [hub, uri] in hub.stop(kinds, owner: owner, plans: plans, uri: uri) }
    }
}
