/// How a buffered capture sizes its refills and the kernel buffer behind them.
package enum RefillSizing {
    /// `seconds` as libiio's timeout, in milliseconds rounded up.
    package static func milliseconds(_ seconds: Double) -> UInt32 {
        UInt32(min(seconds * 1000, Double(UInt32.max)).rounded(.up))
    }

    /// Scans per refill: one update interval's worth, so the thread wakes once per interval.
    ///
    /// The kernel buffer holds far more (see ``kernelBuffers(rate:samplesPerRefill:scanBytes:)``):
    /// when a consumer wants every sample and none wants the newest promptly, refills hold at
    /// least 50 ms of samples; when a push handler or pull reads want the newest sample, the
    /// interval wins (interval 0: one scan per refill, for the lowest latency) and batches are
    /// that small too.
    static func samplesPerRefill(rate: Double?, interval: Double, everySample: Bool) -> Int {
        guard let rate, rate > 0 else { return 1 }
        let span = everySample ? max(interval, 0.05) : interval
        return Int(min(max(1, (rate * span).rounded(.down)), 65536))
    }

    /// How long a start-up stall (a loaded machine, a slow board, an emulator) the kernel buffer
    /// rides out without losing a sample, in seconds. A 40 ms buffer lost samples under QEMU.
    static let kernelBufferSeconds = 2.0

    /// The most memory the kernel buffer may take (bytes of scans).
    static let kernelBufferBytes = 1 << 20

    /// The kernel buffer (`buffer/length`) as a multiple of the refill, for libiio: at least
    /// libiio's 4 refills, and ``kernelBufferSeconds`` of samples at `rate`, within
    /// ``kernelBufferBytes``. The watermark stays one refill, so wake-ups do not change. When
    /// the buffer is full the kernel drops the newest scans; nothing reports that.
    static func kernelBuffers(rate: Double?, samplesPerRefill samples: Int, scanBytes: Int) -> Int {
        let samples = max(1, samples)
        let cap = max(4, kernelBufferBytes / max(1, scanBytes) / samples)
        guard let rate, rate > 0, rate.isFinite else { return min(4, cap) }
        let wanted = Int((rate * kernelBufferSeconds / Double(samples)).rounded(.up))
        return max(4, min(wanted, cap))
    }
}
