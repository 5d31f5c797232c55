import SystemSupport

/// A refit of the magnetometer's calibration (``MagnetometerCalibrator/refitted()``) on a thread
/// of its own (an ``OSThread``: not a capture thread, so neither marked nor counted as one), over a copy of the calibrator taken when it was due: the copy fixes the samples and
/// pairs every pass of the fit uses, so the result is a function of them alone, whenever the
/// thread runs. ``result()`` waits for the thread (without spinning) if it has not finished; if
/// no thread could be started, it fits there and then. Whoever holds the last reference ends the
/// thread's life: the deinitialiser joins it, so none outlives device motion by more than a fit.
final class MagnetometerRefit: Sendable {
    private let snapshot: MagnetometerCalibrator
    private let fitted: Locked<MagnetometerCalibrator.Refit?>
    private let thread: Locked<OSThread?>

    /// Starts fitting `snapshot` (a calibrator with ``MagnetometerCalibrator/isRefitDue``, taken
    /// with ``MagnetometerCalibrator/takeRefit()``).
    init(_ snapshot: MagnetometerCalibrator) {
        self.snapshot = snapshot
        let fitted = Locked<MagnetometerCalibrator.Refit?>(nil)
        self.fitted = fitted
        let t = try? OSThread(name: "magnetometer refit") {
            let refit = snapshot.refitted()
            fitted.withLock { $0 = refit }
        }
        thread = Locked(t)
    }

    /// The refit's result, once its thread has ended.
    func result() -> MagnetometerCalibrator.Refit {
        if let t = thread.withLock({ t -> OSThread? in
            defer { t = nil }
            return t
        }) {
            t.join()
        }
        // No thread (none could start, or another caller is joining it): the same fit, here.
        return fitted.withLock { $0 } ?? snapshot.refitted()
    }

    deinit {
        thread.withLock { t -> OSThread? in
            defer { t = nil }
            return t
        }?.join()
    }
}
