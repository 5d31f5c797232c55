import SystemSupport

/// What a capture needs: the device's sensors to read and how often.
struct CaptureSettings: Sendable {
    /// The context URI; the production factory opens the capture's own context on it.
    var uri: String
    /// The sensors to capture, all of one device.
    var plans: [SensorPlan]
    /// The units samples are delivered in.
    var units: MotionUnits
    /// The update interval in seconds (0: every sample as soon as it is made).
    var interval: Double
    /// Whether some consumer wants every sample (batched delivery), rather than only the newest.
    var everySample: Bool
    /// Whether some batched consumer runs on a queue (batches then outlive the refill that made
    /// them), rather than all on the capture thread.
    var handsOff = true
    /// Whether some consumer wants the newest sample promptly (a push handler or pull reads): the
    /// refills then follow ``interval`` even when another consumer wants every sample.
    var timely = false
    /// An explicit sampling frequency, which wins over the one the interval would pick.
    var requestedRate: Double?
    /// How long a refill may wait for data before the sensor is declared silent (nil: automatic).
    var timeout: Double?
    /// Buffered, polled, or buffered with a polled fallback.
    var preference: SensorMode.Preference
}

/// What a started capture runs with.
struct CaptureStatus: Sendable {
    var mode: SensorMode
    /// The sampling frequency in force, read back from the device (nil when it has none).
    var samplingFrequency: Double?
    /// Why the capture polls although buffering was wanted (announced once by the manager).
    var fallbackReason: String?
    /// The failure that made buffering impossible, when the capture polls although buffering was wanted.
    var fallbackCause: MotionError?
    /// Scans per refill (buffered), i.e. samples per wake-up.
    var samplesPerWakeup: Int
    /// The refill timeout in force, seconds.
    var timeout: Double
}
