import Dispatch
import SystemSupport
@preconcurrency import Glibc // errno, stdout
import IIOMotion

/// Counts the samples missing from a stream whose timestamps should be one sampling period
/// apart: a step of about k periods means k − 1 samples were dropped (by the kernel, whose
/// buffer was full, or by the device). Steps under 1.5 periods are jitter, not drops.
struct GapCounter: Equatable, Sendable {
    /// The sampling period in seconds; nil when the frequency is unknown (then nothing is counted).
    var period: Double?
    /// Samples missing so far.
    private(set) var missing = 0
    private var last: Double?

    /// - Parameter period: 1 / the sampling frequency in force, or nil.
    init(period: Double?) {
        self.period = period.flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
    }

    /// Learns the period later (a sensor's frequency in force is known once it has started);
    /// samples from then on are checked.
    mutating func setPeriod(_ period: Double?) {
        self.period = period.flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
    }

    /// Forgets the last timestamp and the period (the stream starts again, maybe at another
    /// rate: ``setPeriod(_:)`` gives the new one); the samples counted missing so far stay.
    mutating func restart() {
        last = nil
        period = nil
    }

    /// Accounts for the next sample's timestamp.
    mutating func add(_ timestamp: Double) {
        defer { last = timestamp }
        guard let period, let last else { return }
        let step = timestamp - last
        if step > 1.5 * period {
            missing += Int((step / period).rounded()) - 1
        }
    }
}
