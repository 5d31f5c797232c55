internal import Dispatch
import SystemSupport

extension StreamHub {
    // MARK: Reconfiguration

    /// Brings the running captures in line with the consumers: one capture per device serving every
    /// active sensor of that device; captures whose sensors, interval, rate or mode changed are
    /// restarted. Runs on ``control``. A sensor that cannot start fails alone: its consumers hear
    /// why, and the device's other sensors start without it.
    /// - Returns: the setup error of each sensor that could not start.
    @discardableResult
    func reconcile(plans: [SensorKind: SensorPlan], uri: String) -> [SensorKind: MotionError] {
        dispatchPrecondition(condition: .onQueue(control))
        let (wanted, running) = state.withLock { s -> ([String: (CaptureKey, [SensorPlan])], [String: RunningCapture]) in
            var byDevice: [String: (CaptureKey, [SensorPlan])] = [:]
            guard !s.closed else { return ([:], s.captures) }
            for kind in SensorKind.allCases {
                guard let sensor = s.sensors[kind], !sensor.consumers.isEmpty, !sensor.stopping,
                      let plan = plans[kind] else { continue }
                let id = plan.info.deviceID
                var entry = byDevice[id] ?? (CaptureKey(kinds: [], interval: .infinity, rate: nil, timeout: s.timeout, preference: s.preference), [])
                entry.0.kinds.append(kind)
                for c in sensor.consumers.values {
                    entry.0.interval = min(entry.0.interval, c.interval ?? sensor.interval)
                    if case .batched(_, _, let queue) = c.delivery {
                        entry.0.everySample = true  // a batched consumer wants every sample…
                        // …and, on a queue or in an async sequence, keeps batches past the refill
                        if queue != nil || c.backlog != nil { entry.0.handsOff = true }
                        if c.timely { entry.0.timely = true }
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
                if s.captures[id]?.serial == run.serial { s.captures[id] = nil }
                for k in run.key.kinds { s.sensors[k]?.status = nil }
            }
        }
        var failures: [SensorKind: MotionError] = [:]
        for (id, (key, devicePlans)) in wanted.sorted(by: { $0.key < $1.key }) {
            if state.withLock({ $0.captures[id] != nil }) { continue }
            let failed = startCapture(device: id, key: key, plans: devicePlans, uri: uri,
                                      previously: running[id]?.key.kinds ?? [])
            for (k, e) in failed { failures[k] = e }
        }
        return failures
    }

    /// Starts the capture of one device for `key`. When it cannot start with all its sensors, it
    /// tries them one by one (those that ran before first) and keeps every one that can run
    /// together: one broken sensor does not take the device's others down.
    /// - Returns: the sensors that could not start, and why (their consumers have heard it).
    private func startCapture(device id: String, key: CaptureKey, plans: [SensorPlan], uri: String,
                              previously: [SensorKind]) -> [SensorKind: MotionError] {
        func attempt(_ kinds: [SensorKind]) -> Result<Void, MotionError> {
            var key = key
            key.kinds = kinds
            let chosen = plans.filter { kinds.contains($0.info.kind) }
            let settings = CaptureSettings(uri: uri, plans: chosen, units: units, interval: key.interval, everySample: key.everySample,
                                           handsOff: key.handsOff, timely: key.timely, requestedRate: key.rate,
                                           timeout: key.timeout, preference: key.preference)
            let serial = state.withLock { s -> Int in
                s.nextCaptureSerial += 1
                return s.nextCaptureSerial
            }
            let capture = makeCapture(
                settings,
                { [weak self] batch in self?.deliver(batch) },
                { [weak self] kinds, error, ended in
                    self?.captureFailed(deviceID: id, serial: serial, kinds: kinds, error: error, ended: ended)
                })
            // Registered before it starts, so that a failure it reports at once is recognised as its own.
            state.withLock { $0.captures[id] = RunningCapture(capture: capture, key: key, serial: serial) }
            do throws(MotionError) {
                let status = try capture.start()
                state.withLock { s in
                    for k in kinds where !(s.sensors[k]?.consumers.isEmpty ?? true) { s.sensors[k]?.status = status }
                }
                if let reason = status.fallbackReason {
                    announce(MotionNotice(sensors: kinds, device: capture.deviceText,
                                          message: "Polling \(capture.deviceText) instead of streaming its buffer: \(reason).",
                                          cause: status.fallbackCause), once: reason)
                }
                return .success(())
            } catch {
                state.withLock { s in if s.captures[id]?.serial == serial { s.captures[id] = nil } }
                return .failure(error)
            }
        }
        /// Stops and forgets the device's capture started by an earlier attempt.
        func stopCurrent() {
            let run = state.withLock { s -> RunningCapture? in
                defer { s.captures[id] = nil }
                return s.captures[id]
            }
            run?.capture.stop()
        }
        var failures: [SensorKind: MotionError] = [:]
        switch attempt(key.kinds) {
        case .success:
            return [:]
        case .failure(let error) where key.kinds.count == 1:
            failures[key.kinds[0]] = error
        case .failure:
            let order = key.kinds.filter { previously.contains($0) } + key.kinds.filter { !previously.contains($0) }
            var working: [SensorKind] = []
            for k in order {
                stopCurrent()  // the device's buffer can serve one capture at a time
                switch attempt(working + [k]) {
                case .success:
                    working.append(k)
                case .failure(let e):
                    failures[k] = e
                    if !working.isEmpty, case .failure(let e) = attempt(working) {
                        for w in working { failures[w] = e }
                        working = []
                    }
                }
            }
        }
        fail(kinds: Array(failures.keys), errors: failures)
        return failures
    }

    /// Sensors of a capture failed: they stop and their consumers hear why; the others go on.
    /// When the capture itself `ended`, it is removed and joined (on ``control``). A report from a
    /// capture that has been replaced meanwhile is ignored.
    private func captureFailed(deviceID: String, serial: Int, kinds: [SensorKind], error: MotionError, ended: Bool) {
        guard state.withLock({ $0.captures[deviceID]?.serial == serial }) else { return }
        fail(kinds: kinds, errors: Dictionary(uniqueKeysWithValues: kinds.map { ($0, error) }))
        guard ended else { return }
        control.async { [self] in
            let run = state.withLock { s -> RunningCapture? in
                guard let r = s.captures[deviceID], r.serial == serial else { return nil }
                s.captures[deviceID] = nil
                for k in r.key.kinds { s.sensors[k]?.status = nil }
                return r
            }
            run?.capture.stop()
        }
    }

    /// The sensors' updates end with an error: every consumer hears it once (on its queue; a
    /// capture-thread handler on the sensor's default queue) and is removed.
    private func fail(kinds: [SensorKind], errors: [SensorKind: MotionError]) {
        let jobs = state.withLock { s -> [(DispatchQueue, @Sendable () -> Void)] in
            var jobs: [(DispatchQueue, @Sendable () -> Void)] = []
            for k in kinds {
                guard var sensor = s.sensors[k], let error = errors[k] else { continue }
                sensor.status = nil
                for c in sensor.consumers.values {
                    switch c.delivery {
                    case let .coalesced(h, q): jobs.append((q ?? handlerQueue(k), { h(nil, error) }))
                    case let .batched(_, h, q): jobs.append((q ?? handlerQueue(k), { h(error) }))
                    case .pull: break
                    }
                }
                sensor.consumers = [:]
                sensor.stopping = false
                s.sensors[k] = sensor
            }
            return jobs
        }
        latest.withLock { l in for k in kinds { l.samples[k] = nil } }
        Self.dispatch(jobs)
    }
}
