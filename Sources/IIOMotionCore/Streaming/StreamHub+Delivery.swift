internal import Dispatch
import SystemSupport

extension StreamHub {
    // MARK: Delivery (capture threads)

    /// Hands a batch to everyone who wants it. Called on a capture thread; allocates per batch
    /// (the job list, when there are push consumers), never per sample. Jobs of consumers served
    /// on the capture thread run here, last, with no lock held.
    func deliver(_ batch: CaptureBatch) {
        guard !batch.isEmpty else { return }
        let newest = batch.newest
        latest.withLock { l in
            for kind in SensorKind.allCases { if let n = newest[kind] { l.samples[kind] = n } }
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
                        // One delivery per interval of *sample* time.
                        if c.schedule.due(n.timestamp, interval: sensor.interval) {
                            sensor.statistics.coalesced += count - 1
                            let mailbox = c.mailbox
                            if mailbox.put([n]).schedule {
                                sensor.statistics.delivered += 1
                                let job: @Sendable () -> Void = { if let s = mailbox.take().last { handler(s, nil) } }
                                if let queue { jobs.append((queue, job)) } else { here.append(job) }
                            } else {
                                // The handler has not taken the previous one yet: it gets this instead.
                                sensor.statistics.coalesced += 1
                            }
                        } else {
                            sensor.statistics.coalesced += count
                        }
                        sensor.consumers[id] = c
                    case let .batched(make, _, queue):
                        let job: @Sendable () -> Void
                        if let backlog = c.backlog {
                            if !backlog.reserve(count, limit: s.batchBacklogLimit) {
                                sensor.statistics.dropped += count  // the handler is too far behind
                                break
                            }
                            let handle = make(batch)
                            if backlog.releasedByJob {
                                job = {
                                    handle()
                                    backlog.release(count)
                                }
                            } else {
                                job = handle
                            }
                        } else {
                            job = make(batch)
                        }
                        // On this thread, after the lock is released, or on the consumer's queue.
                        if let queue { jobs.append((queue, job)) } else { here.append(job) }
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
}
