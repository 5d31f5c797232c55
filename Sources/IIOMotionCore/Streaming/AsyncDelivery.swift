// The async sequences' delivery. The per-sample sequences (`accelerometerUpdates()` and the
// like, `deviceMotionUpdates`) are the toolchain's `AsyncThrowingStream.makeStream` with a buffer
// of the newest element. The batch sequences (`accelerometerBatches()` and the like) keep
// ``BatchInbox``, the one hand-made channel, because `AsyncThrowingStream`'s buffer cannot keep
// their guarantee: the backlog is bounded in *samples* (``MotionManager/maximumBatchBacklog``,
// batches past it dropped whole and counted), which needs to know when the loop takes each batch,
// and a stream's buffer only bounds the number of elements and never tells the producer that one
// was taken. Both kinds end on stop (plainly, or throwing the error that stopped the sensor) and
// on the task's cancellation.
import SystemSupport

/// The link between an async sequence and its consumer in the hub: the consumer's id once it is
/// registered, and whether the sequence has already ended (it may end, cancelled, before the start
/// returns the id).
final class StreamLink: Sendable {
    private let state = Locked<(id: Int?, ended: Bool)>((nil, false))

    /// The sequence ended; returns the consumer to remove, if it is registered yet (else
    /// ``attach(_:)`` reports it).
    func end() -> Int? {
        state.withLock { s in
            s.ended = true
            return s.id
        }
    }

    /// Records the consumer's id; true when the sequence has already ended (remove it now).
    func attach(_ id: Int) -> Bool {
        state.withLock { s in
            s.id = id
            return s.ended
        }
    }
}

/// Runs `onRelease` when the last reference goes: held by an unfolding async sequence's closure,
/// which the sequence releases when its iteration ends, is cancelled, or the sequence is dropped.
final class StreamToken: Sendable {
    private let onRelease: @Sendable () -> Void
    init(_ onRelease: @escaping @Sendable () -> Void) { self.onRelease = onRelease }
    deinit { onRelease() }
}

/// The batches an async batch sequence has been handed and its loop has not yet taken. The hub
/// counts them against ``MotionManager/maximumBatchBacklog`` when it hands them over (batches
/// past the limit are dropped, whole, and counted); the loop's taking a batch releases its
/// samples. So a slow loop holds at most that many samples, however long it stalls.
final class BatchInbox<T: Sendable>: Sendable {
    private struct State: Sendable {
        var batches: [[T]] = []
        /// How the sequence ends once the batches are taken: nil while it runs, `.success` for a
        /// plain end, `.failure` for the error it throws (once; it ends plainly after).
        var end: Result<Void, MotionError>?
        var waiter: CheckedContinuation<[T]?, any Error>?
        var cancelled = false
    }

    private let state = Locked(State())
    private let backlog: StreamHub.Backlog

    init(backlog: StreamHub.Backlog) { self.backlog = backlog }

    /// A batch for the loop (its samples already reserved in the backlog).
    func offer(_ batch: [T]) {
        let outcome = state.withLock { s -> InboxOffer<T> in
            guard s.end == nil, !s.cancelled else { return .refused }
            if let w = s.waiter {
                s.waiter = nil
                return .handed(w)
            }
            s.batches.append(batch)
            return .queued
        }
        switch outcome {
        case .queued: break
        case .handed(let w):
            backlog.release(batch.count)
            w.resume(returning: batch)
        case .refused:
            backlog.release(batch.count)
        }
    }

    /// Ends the sequence after the batches already handed over: plainly, or throwing `error`.
    func finish(throwing error: MotionError?) {
        let waiter = state.withLock { s -> CheckedContinuation<[T]?, any Error>? in
            guard s.end == nil else { return nil }
            if let w = s.waiter {
                // A waiting loop has taken every batch: it gets the end itself.
                s.waiter = nil
                s.end = .success(())
                return w
            }
            s.end = error.map { .failure($0) } ?? .success(())
            return nil
        }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    /// The next batch, or nil at the end; throws the error that ended the updates.
    func next() async throws -> [T]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<[T]?, any Error>) in
                let action = state.withLock { s -> InboxTake<T> in
                    if !s.batches.isEmpty { return .value(s.batches.removeFirst()) }
                    if s.cancelled { return .value(nil) }
                    switch s.end {
                    case .failure(let e)?:
                        s.end = .success(())
                        return .fail(e)
                    case .success?: return .value(nil)
                    case nil:
                        s.waiter = c
                        return .wait
                    }
                }
                switch action {
                case .value(let batch):
                    if let batch { backlog.release(batch.count) }
                    c.resume(returning: batch)
                case .fail(let e): c.resume(throwing: e)
                case .wait: break
                }
            }
        } onCancel: {
            cancel()
        }
    }

    /// The loop's task was cancelled: a waiting `next()` returns nil, and so does every later one.
    func cancel() {
        let waiter = state.withLock { s -> CheckedContinuation<[T]?, any Error>? in
            s.cancelled = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }
}

/// What ``BatchInbox/offer(_:)`` did with a batch.
private enum InboxOffer<T: Sendable> {
    case queued, handed(CheckedContinuation<[T]?, any Error>), refused
}

/// What ``BatchInbox/next()`` does.
private enum InboxTake<T: Sendable> {
    case value([T]?), fail(MotionError), wait
}
