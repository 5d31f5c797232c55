/// The sensors' settings and state: sampling frequency, timeout, backlog bound, mode, notices,
/// statistics, and stopping everything.
extension MotionManager {
    /// Asks for a sampling frequency (Hz) for a sensor, instead of the lowest one that serves its
    /// update interval; nil goes back to that rule. The device may round it to what it supports:
    /// ``samplingFrequency(of:)`` says what is in force.
    /// - Parameters:
    ///   - hz: the frequency, or nil.
    ///   - kind: the sensor.
    public func requestSamplingFrequency(_ hz: Double?, for kind: SensorKind) {
        hub.state.withLock { $0.sensors[kind, default: .init()].requestedRate = hz.map { max($0, 0) } }
        restartIfActive(kind)
    }

    /// How long a buffered sensor may stay silent before it is reported as failed
    /// (``MotionError/Code/timedOut``), in seconds; nil (the default) sizes it from the buffer:
    /// at least 1 s and well over the time one buffer takes to fill.
    public var timeout: Double? {
        get { hub.state.withLock { $0.timeout } }
        set { hub.state.withLock { $0.timeout = newValue.map { max($0, 0.001) } } }
    }

    /// How many samples a batched handler on a queue, or the loop of an async batch sequence,
    /// may fall behind before new batches are dropped for it, whole, and counted in
    /// ``UpdateStatistics/dropped``: the bound on the memory a blocked handler or a slow loop can
    /// hold. Default 262,144 samples (164 s at 1.6 kHz, about 12 MiB of samples). Applies at once.
    public var maximumBatchBacklog: Int {
        get { hub.state.withLock { $0.batchBacklogLimit } }
        set { hub.state.withLock { $0.batchBacklogLimit = max(newValue, 1) } }
    }

    /// Buffered, polled, or buffered with a polled fallback (the default). Applies to updates
    /// started afterwards.
    public var preferredMode: SensorMode.Preference {
        get { hub.state.withLock { $0.preference } }
        set { hub.state.withLock { $0.preference = newValue } }
    }

    /// Called once per distinct notice, on the manager's private notice queue (a serial queue,
    /// never a capture thread): when a sensor is polled because its buffer cannot be used, with
    /// the reason, and when a saved magnetometer calibration cannot be used or saved
    /// (``magnetometerCalibrationFolder``), and when the mount matrix udev's hardware database gives a
    /// sensor the manager reads is not a mount matrix (announced as the handler is set, and after
    /// ``rediscover()``; the kernel's matrix is used). The library prints nothing itself. Any method
    /// of the manager may be called from it.
    public var noticeHandler: (@Sendable (MotionNotice) -> Void)? {
        get { hub.state.withLock { $0.noticeHandler } }
        set {
            hub.state.withLock { $0.noticeHandler = newValue }
            announceDiscoveryNotices()
        }
    }

    /// How a running sensor is read, or nil when it is not running.
    /// - Parameter kind: the sensor.
    /// - Returns: buffered or polled.
    public func mode(of kind: SensorKind) -> SensorMode? {
        hub.sensor(kind).status?.mode
    }

    /// The sampling frequency in force for a running sensor, as read back from the device.
    /// - Parameter kind: the sensor.
    /// - Returns: Hz, or nil when unknown or not running.
    public func samplingFrequency(of kind: SensorKind) -> Double? {
        hub.sensor(kind).status?.samplingFrequency
    }

    /// Why a running sensor is polled although buffering was allowed, or nil.
    /// - Parameter kind: the sensor.
    /// - Returns: the reason, a sentence.
    public func fallbackReason(of kind: SensorKind) -> String? {
        hub.sensor(kind).status?.fallbackReason
    }

    /// The failure that keeps a running sensor from its buffer, when it is polled although
    /// buffering was allowed, or nil: the same failure ``fallbackReason(of:)`` describes, with
    /// its code, device, file and errno (`.permissionDenied`: the buffer's files are not this
    /// user's; `.deviceBusy`: another program streams the device).
    /// - Parameter kind: the sensor.
    /// - Returns: the failure.
    public func fallbackError(of kind: SensorKind) -> MotionError? {
        hub.sensor(kind).status?.fallbackCause
    }

    /// Samples received, delivered and coalesced since the sensor's updates started.
    /// - Parameter kind: the sensor.
    /// - Returns: the counts.
    public func updateStatistics(of kind: SensorKind) -> UpdateStatistics {
        hub.sensor(kind).statistics
    }

    /// Stops every sensor's updates and device motion, and joins their capture threads.
    public func stopAllUpdates() {
        stopDeviceMotionUpdates()
        stop(SensorKind.allCases, owner: .user)
    }
}
