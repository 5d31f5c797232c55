import SystemSupport

/// What waits for a handler that is called at most once per interval (a sensor's push handler, an
/// async sequence of updates, device motion's handler), and whether a job to deliver it is queued:
/// at most one job per handler is ever queued, so a handler that blocks costs no memory.
///
/// A new value replaces the ones waiting (the handler gets the newest), or, appended, waits
/// behind them, at most ``limit`` values (the oldest go first): device motion at interval 0.
final class Mailbox<Value: Sendable>: Sendable {
    /// How many appended values may wait at most.
    let limit: Int
    private let slot = Locked<(values: [Value], scheduled: Bool)>(([], false))

    /// - Parameter limit: how many appended values may wait at most.
    init(limit: Int = 1) { self.limit = limit }

    /// Leaves `values` for the handler, after those waiting (`appending`) or instead of them.
    /// - Returns: whether a job must be queued to deliver them (false: the job already queued will
    ///   deliver them), and how many waiting values were replaced (coalesced).
    func put(_ values: [Value], appending: Bool = false) -> (schedule: Bool, replaced: Int) {
        slot.withLock { s in
            var replaced = 0
            if appending {
                s.values += values
                if s.values.count > limit {
                    replaced = s.values.count - limit
                    s.values.removeFirst(replaced)
                }
            } else {
                replaced = s.values.count
                s.values = values
            }
            defer { s.scheduled = true }
            return (!s.scheduled, replaced)
        }
    }

    /// The values to deliver now, oldest first (the queued job calls this).
    func take() -> [Value] {
        slot.withLock { s in
            defer { s = ([], false) }
            return s.values
        }
    }
}

/// When the next delivery to a handler called once per interval is due, in sample (or estimate)
/// time: on a schedule, so a wake-up period that does not divide the interval (80 ms refills for a
/// 100 ms interval) still gives one delivery per interval on average, and a stall does not cause a
/// burst afterwards.
struct CoalescingSchedule: Sendable {
    /// Time from which the next delivery is due.
    private(set) var nextDue: Double = -.infinity

    /// Whether a value of time `t` is due; when it is, the schedule moves on by `interval` (from
    /// `t` itself after a gap longer than the interval).
    /// - Parameters:
    ///   - t: the value's time, seconds.
    ///   - interval: the handler's interval, seconds.
    ///   - tolerance: how early a value still counts as due.
    mutating func due(_ t: Double, interval: Double, tolerance: Double = 1e-6) -> Bool {
        guard t >= nextDue - tolerance else { return false }
        nextDue = t - nextDue > interval ? t + interval : nextDue + interval
        return true
    }
}
