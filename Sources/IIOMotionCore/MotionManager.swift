import SystemSupport

/// The entry point: finds the IIO accelerometer, gyroscope and magnetometer on a machine and
/// reads them, in Core Motion's units and conventions by default.
///
/// ```swift
/// import IIOMotion
///
/// let manager = MotionManager()                 // local sysfs; or MotionManager(uri: "ip:pi.local")
/// if manager.isAccelerometerAvailable {
///     let sample = try manager.readAccelerometer()
///     print(sample.acceleration.z)              // ≈ −1.0 (g) with the device face up on a table
/// }
/// for device in try manager.devices {
///     print(device.id, device.name ?? "?", device.sensors.map(\.kind))
/// }
/// ```
///
/// **Units.** With ``MotionUnits/coreMotion`` (the default) acceleration is in g and a device
/// lying still face up reads z ≈ −1, as on Apple platforms: each axis is
/// `−(M · ((raw + offset) · scale)) / 9.80665`, where `M` is the mount matrix and
/// `(raw + offset) · scale` is the kernel's m/s² (face up: z ≈ +9.81). Rotation rate is in rad/s,
/// right-hand rule (the same sign as IIO's `anglvel`). Magnetic field is in µT. With
/// ``MotionUnits/si`` acceleration is in m/s² with the kernel's sign. Timestamps are seconds on
/// `CLOCK_MONOTONIC`.
///
/// **Threads.** A manager is `Sendable`; every method may be called from any thread, including
/// from inside any of its callbacks (a handler may stop the very updates it is being called for).
/// The IIO context is opened, and the devices discovered, once in `init` (and again by
/// ``rediscover()``).
///
/// **Where callbacks run.**
/// - Push and batched handlers: on the queue given to `start…`, else on the sensor's own private
///   serial queue (one per sensor, so a handler that blocks holds up only its own sensor);
///   handlers started with ``HandlerDelivery/captureThread`` on the device's capture thread.
/// - Device motion handlers: on the queue given, else on the manager's private device motion
///   queue; with ``HandlerDelivery/captureThread``, on the capture thread that made the estimate.
/// - The `(nil, error)` call that ends a handler's updates: on the handler's queue; for a
///   capture-thread handler, on the sensor's (or device motion's) private queue.
/// - ``noticeHandler``: on the manager's private notice queue (never a capture thread).
/// - Async sequences: the loop runs in its own task; the library only hands it values.
///
/// **Lifetime.** Releasing the manager stops all its updates: async sequences end, capture
/// threads are joined and the devices closed, so another manager (or program) can stream the
/// same device at once. A handler that captures the manager keeps it alive until its updates stop.
public final class MotionManager: Sendable {
    /// The IIO context URI: `"local:"` for this machine's sysfs, `"ip:HOST[:PORT]"` for iiod.
    public let uri: String
    /// The units and sign conventions of readings.
    public let units: MotionUnits

    let selectors: [SensorKind: DeviceSelector]
    private let overrides: [SensorKind: MountMatrix]
    /// Opens a context on ``uri`` and discovers its devices (the backend's ``DeviceBackend/discover(uri:)``).
    private let discoverDevices: @Sendable (_ uri: String) -> Result<Discovery, MotionError>
    /// Which calibrations readings get (see MotionManager+Calibration.swift).
    let calibrationSettings: Locked<CalibrationSettings>
    let state: Locked<State>
    /// Streaming: captures, subscribers and the latest samples (see Streaming.swift).
    let hub: StreamHub
    /// Device motion: the fusion filter and its state (see DeviceMotionUpdates.swift).
    let motionEngine = DeviceMotionEngine()

    /// Immutable snapshot of one discovery; replaced whole by `rediscover()`, so readers copy it out
    /// of the lock and do their (possibly slow) sysfs I/O without holding it.
    struct State: Sendable {
        var discovery: Result<Discovery, MotionError>
        var chosen: [SensorKind: SensorPlan]
    }

    /// A manager on `backend`'s devices: the public initializer (IIOMotion's `init(uri:…)`) on
    /// libiio (``LibIIOBackend``), the unit tests on embedded devices. Discovery, polled reads and
    /// captures all go through it.
    package init(
        uri: String, units: MotionUnits, accelerometer: DeviceSelector, gyroscope: DeviceSelector,
        magnetometer: DeviceSelector, mountMatrixOverrides: [SensorKind: MountMatrix],
        calibration: CalibrationChoice, backend: some DeviceBackend
    ) {
        self.uri = uri
        self.units = units
        self.hub = StreamHub(units: units, makeCapture: backend.captures)
        let discoverDevices: @Sendable (String) -> Result<Discovery, MotionError> = { uri in backend.discover(uri: uri) }
        self.discoverDevices = discoverDevices
        let selectors: [SensorKind: DeviceSelector] = [
            .accelerometer: accelerometer, .gyroscope: gyroscope, .magnetometer: magnetometer,
        ]
        self.selectors = selectors
        self.overrides = mountMatrixOverrides
        let settings = CalibrationSettings(choice: calibration)
        self.calibrationSettings = Locked(settings)
        self.state = Locked(Self.choose(from: discoverDevices(uri), uri: uri, selectors: selectors,
                                        overrides: mountMatrixOverrides, calibration: settings))
        let folder = MagnetometerCalibrationStore.defaultFolder()
        motionEngine.state.withLock { $0.calibrationFolder = folder }
    }

    /// A manager over `plans` (no IIO context) whose captures `makeCapture` makes: for the unit
    /// tests' scripted sources. It keeps no magnetometer calibration unless
    /// ``magnetometerCalibrationFolder`` is set.
    init(plans: [SensorPlan], units: MotionUnits = .coreMotion, makeCapture: @escaping CaptureFactory) {
        self.uri = "scripted:"
        self.units = units
        self.hub = StreamHub(units: units, makeCapture: makeCapture)
        self.selectors = [:]
        self.overrides = [:]
        self.discoverDevices = { uri in
            .failure(MotionError(code: .contextUnavailable, uri: uri, detail: "A scripted manager has no IIO context"))
        }
        self.calibrationSettings = Locked(CalibrationSettings(choice: .uncalibrated))
        var chosen: [SensorKind: SensorPlan] = [:]
        for p in plans { chosen[p.info.kind] = p }
        self.state = Locked(State(discovery: .failure(MotionError(code: .contextUnavailable, uri: "scripted:",
                                                                  detail: "A scripted manager has no IIO context")),
                                  chosen: chosen))
    }

    /// Stops every update (async sequences end), joins the capture threads and closes the devices.
    deinit {
        endDeviceMotionOnRelease()
        hub.close()
    }

    /// The sensors the selectors choose from `discovered`, with the overrides and calibrations applied.
    private static func choose(
        from discovered: Result<Discovery, MotionError>, uri: String, selectors: [SensorKind: DeviceSelector],
        overrides: [SensorKind: MountMatrix], calibration: CalibrationSettings
    ) -> State {
        let discovery: Discovery
        switch discovered {
        case .success(let d): discovery = d
        case .failure(let error): return State(discovery: .failure(error), chosen: [:])
        }
        var chosen: [SensorKind: SensorPlan] = [:]
        for kind in [SensorKind.accelerometer, .gyroscope, .magnetometer] {
            let candidates = discovery.plans.filter { $0.info.kind == kind }
            let preferred = kind == .accelerometer ? nil : chosen[.accelerometer]?.info.deviceID
            let selector = selectors[kind] ?? .automatic
            guard let pick = selector.choose(from: candidates.map(\.info), sameDeviceAs: preferred),
                  var plan = candidates.first(where: { $0.info.deviceID == pick.deviceID })
            else { continue }
            plan.info = plan.info.overridingMountMatrix(with: overrides[kind])
            calibration.apply(to: &plan.info, uri: uri, context: discovery.context)
            chosen[kind] = plan
        }
        return State(discovery: .success(discovery), chosen: chosen)
    }

    /// Closes the IIO context and discovers the devices again, e.g. after a hot-plug or after
    /// another program changed a range. Readings already returned are unaffected.
    public func rediscover() {
        let fresh = Self.choose(from: discoverDevices(uri), uri: uri, selectors: selectors, overrides: overrides,
                                calibration: calibrationSettings.withLock { $0 })
        state.withLock { $0 = fresh }
        announceDiscoveryNotices()
    }

    // MARK: Availability

    /// True if an accelerometer was found and can be read. Never throws; false on machines
    /// without IIO, when the context cannot be opened, or when the sensor's attributes are broken.
    public var isAccelerometerAvailable: Bool { isAvailable(.accelerometer) }

    /// True if a gyroscope was found and can be read.
    public var isGyroAvailable: Bool { isAvailable(.gyroscope) }

    /// True if a magnetometer was found and can be read.
    public var isMagnetometerAvailable: Bool { isAvailable(.magnetometer) }

    private func isAvailable(_ kind: SensorKind) -> Bool {
        state.withLock { $0.chosen[kind]?.info.isAvailable ?? false }
    }

    // MARK: Discovery

    /// Every IIO device that has a motion sensor, with what discovery learned about it.
    /// - Throws: ``MotionError`` (``MotionError/Code/contextUnavailable`` and similar) if the IIO
    ///   context could not be opened.
    public var devices: [DeviceInfo] {
        get throws(MotionError) {
            try state.withLock { $0.discovery }.get().devices
        }
    }

    /// The sensor of this kind that reads will use, after device selection and mount-matrix
    /// overrides; nil if there is none.
    /// - Parameter kind: the sensor kind.
    /// - Returns: its description.
    public func sensor(_ kind: SensorKind) -> SensorInfo? {
        state.withLock { $0.chosen[kind]?.info }
    }

    // MARK: Polled reads

    /// Reads one accelerometer sample now, through sysfs.
    ///
    /// Each call reads `in_accel_{x,y,z}_raw`; some drivers wake the sensor for it and take tens
    /// of milliseconds, and some refuse while a buffer is streaming (``MotionError/Code/deviceBusy``).
    /// - Returns: the acceleration in ``units`` (g by default) with a `CLOCK_MONOTONIC` timestamp.
    /// - Throws: ``MotionError``: ``MotionError/Code/notAvailable`` if there is no accelerometer,
    ///   or the reason the read failed.
    public func readAccelerometer() throws(MotionError) -> AccelerometerData {
        let (v, t) = try read(.accelerometer)
        return AccelerometerData(timestamp: t, acceleration: Conversion.acceleration(v, units: units))
    }

    /// Reads one gyroscope sample now, through sysfs.
    /// - Returns: the rotation rate in rad/s with a `CLOCK_MONOTONIC` timestamp.
    /// - Throws: ``MotionError``: ``MotionError/Code/notAvailable`` if there is no gyroscope, or the
    ///   reason the read failed.
    public func readGyro() throws(MotionError) -> GyroData {
        let (v, t) = try read(.gyroscope)
        return GyroData(timestamp: t, rotationRate: Conversion.rotationRate(v, units: units))
    }

    /// Reads one magnetometer sample now, through sysfs.
    /// - Returns: the field in µT with a `CLOCK_MONOTONIC` timestamp.
    /// - Throws: ``MotionError``: ``MotionError/Code/notAvailable`` if there is no magnetometer, or
    ///   the reason the read failed.
    public func readMagnetometer() throws(MotionError) -> MagnetometerData {
        let (v, t) = try read(.magnetometer)
        return MagnetometerData(timestamp: t, magneticField: Conversion.magneticField(v, units: units))
    }

    private func read(_ kind: SensorKind) throws(MotionError) -> ((x: Double, y: Double, z: Double), Double) {
        let snapshot = state.withLock { $0 }
        let discovery = try snapshot.discovery.get()
        guard let plan = snapshot.chosen[kind] else {
            throw notAvailableError(kind, discovery: discovery)
        }
        let r = try discovery.readSI(plan, matrix: plan.info.mountMatrix)
        return (r.vector, r.timestamp)
    }

    func notAvailableError(_ kind: SensorKind, discovery: Discovery) -> MotionError {
        let selector = selectors[kind] ?? .automatic
        let all = discovery.plans.filter { $0.info.kind == kind }
        let type = "in_\(kind.iioType)_{x,y,z}_raw"
        let detail: String
        if selector == .automatic || all.isEmpty {
            let count = discovery.devices.count
            detail = "No \(kind) is available: none of the IIO devices at \"\(uri)\" has \(type) channels"
                + (count == 0 ? " (it has no motion sensors at all)." : " (\(count) device(s) have other motion sensors).")
        } else {
            let ids = all.map(\.info.deviceDescription).joined(separator: ", ")
            detail = "No \(kind) matches the device selector \(selector); devices with one: \(ids)."
        }
        return MotionError(code: .notAvailable, uri: uri, detail: detail)
    }
}
