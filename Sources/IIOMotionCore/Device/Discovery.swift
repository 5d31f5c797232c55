internal import Glibc
import IIOScanFormat

/// Everything needed to read one sensor by polling, plus its public description.
struct SensorPlan: Sendable {
    var info: SensorInfo
    /// Index of the device in the context.
    var deviceIndex: Int
    /// Channel index and `raw` file of x, y, z; nil for an axis without a `raw` file.
    var rawChannels: [(channel: Int, file: String)?]
    /// Buffer layout per axis (x, y, z), for later buffered capture.
    var scanElements: [ScanElement?]
    /// The timestamp scan element of the device, if any.
    var timestampElement: ScanElement?
}

/// A channel's position and layout in the device's scan.
struct ScanElement: Sendable, Equatable {
    var channel: Int
    var scanIndex: Int
    var format: ScanFormat
}

/// The result of walking one context: every motion device, and a read plan per sensor.
struct Discovery: Sendable {
    let context: any DeviceContext
    let devices: [DeviceInfo]
    let plans: [SensorPlan]

    /// Walks every device of `context` (through ``DeviceIO``, as a capture reads it), reading
    /// names, labels, scales, offsets, mount matrices and sampling frequencies, and udev's properties of each device (`ACCEL_MOUNT_MATRIX`,
    /// `ACCEL_LOCATION`). Problems with one sensor are recorded in its ``SensorInfo/problem``;
    /// they never abort discovery of the others.
    /// - Parameters:
    ///   - context: the IIO context.
    ///   - udev: where udev's properties come from (``DeviceBackend/udev(for:)``: this machine's
    ///     udev for a local libiio context, none for a remote one).
    init(context: some DeviceContext, udev: UdevDatabase) {
        var devices: [DeviceInfo] = []
        var plans: [SensorPlan] = []
        for index in 0..<context.deviceCount {
            let device = context.device(at: index)
            guard let raw = device.describe(), !raw.isTrigger else { continue }
            let found = Self.sensors(of: raw, on: device, udev: udev)
            guard !found.isEmpty else { continue }
            plans += found
            let first = found[0].info
            devices.append(DeviceInfo(
                id: raw.id, name: raw.name, label: raw.label, location: first.location,
                sensors: found.map(\.info), canBuffer: raw.canBuffer,
                triggerName: first.triggerName, hasTimestampChannel: first.hasTimestampChannel))
        }
        self.context = context
        self.devices = devices
        self.plans = plans
    }

    private static func sensors(of raw: RawDevice, on device: some DeviceIO, udev: UdevDatabase) -> [SensorPlan] {
        let kinds: [(SensorKind, RawChannel.Kind)] = [(.accelerometer, .accel), (.gyroscope, .anglvel), (.magnetometer, .magn)]
        let present = kinds.filter { k in raw.channels.contains { $0.kind == k.1 && $0.axis != nil } }
        guard !present.isEmpty else { return [] }
        let hasAccelerometer = present.contains { $0.0 == .accelerometer }
        // systemd's sensor properties are all `ACCEL_`: asked only of devices with an accelerometer.
        let properties = hasAccelerometer ? udev.properties(of: raw.id) : [:]

        let deviceText = raw.name.map { "\(raw.id) (\($0))" } ?? raw.id
        let location: String? = device.hasAttribute("location")
            ? (try? device.readAttribute("location").get()).map { String(AttributeText.trimmed($0)) }
            : nil
        let trigger: String? = switch device.triggerName() {
        case .success(let name) where !name.isEmpty: name
        default: nil
        }
        let timestamp = raw.channels.first { $0.kind == .timestamp }
        let timestampElement = timestamp.flatMap { c in
            c.scanIndex.flatMap { i in c.format.map { ScanElement(channel: c.index, scanIndex: i, format: $0) } }
        }

        return present.map { kind, channelKind in
            let reader = AttributeReader(device: device, deviceText: deviceText)
            let axes = Axis.allCases.map { axis in
                raw.channels.first { $0.kind == channelKind && $0.axis == axis }
            }
            let prefix = "in_\(kind.iioType)"
            var problem: MotionError?

            let missing = Axis.allCases.filter { axes[$0.rawValue] == nil }
            if !missing.isEmpty {
                let names = missing.map { "\(prefix)_\($0)" }.joined(separator: ", ")
                problem = MotionError(code: .notAvailable, device: deviceText,
                                      detail: "\(deviceText) has no \(names) channel, so its \(kind) cannot be used")
            }

            // Scale and offset, per axis: the per-axis file, the per-type file, the device file.
            var scale = AxisValues(all: 1)
            var scaleReadable = true
            var scaleFile: String?
            var scaleCorrection: KernelScaleCorrection?
            var offset = AxisValues(all: 0)
            var offsetFile: String?
            for axis in Axis.allCases {
                let axisStem = axes[axis.rawValue]?.rawFile.flatMap { $0.hasSuffix("_raw") ? String($0.dropLast(4)) : nil }
                    ?? "\(prefix)_\(axis)"
                do throws(MotionError) {
                    if let (v, file) = try reader.factor(in: ["\(axisStem)_scale", "\(prefix)_scale", "scale"]) {
                        // A driver known to publish its scale in another unit than the ABI's.
                        let correction = KernelQuirks.scaleCorrection(deviceName: raw.name, kind: kind, published: v)
                        scale[axis] = v * (correction?.factor ?? 1)
                        if axis == .x {
                            scaleFile = file
                            scaleCorrection = correction.map { KernelScaleCorrection(published: v, factor: $0.factor, source: $0.source) }
                        }
                    }
                    if let (v, file) = try reader.factor(in: ["\(axisStem)_offset", "\(prefix)_offset", "offset"]) {
                        offset[axis] = v
                        if axis == .x { offsetFile = file }
                    }
                } catch {
                    scaleReadable = false
                    problem = problem ?? error
                }
            }

            let mount = Self.mountMatrix(kind: kind, deviceText: deviceText, udev: properties) { () throws(MotionError) in
                try reader.mountMatrix(in: ["\(prefix)_mount_matrix", "mount_matrix", "in_mount_matrix"])
            }
            if let error = mount.problem { problem = problem ?? error }

            // Sampling frequency is informational: a bad file does not make the sensor unusable.
            let frequency = try? reader.number(in: ["\(prefix)_sampling_frequency", "sampling_frequency"])
            let isCrosEC = raw.name.map { $0.hasPrefix("cros-ec") || $0.hasPrefix("cros_ec") } ?? false
            let available = reader.text(in: ["\(prefix)_sampling_frequency_available", "sampling_frequency_available"])
                .flatMap { SamplingFrequencies(parsing: $0.text, zeroMinMaxIsRange: isCrosEC) }

            let rawChannels = axes.map { c in c.flatMap { c in c.rawFile.map { (channel: c.index, file: $0) } } }
            let info = SensorInfo(
                kind: kind, deviceID: raw.id, deviceName: raw.name, label: raw.label, location: location,
                scale: scaleReadable ? scale : nil,
                scaleFile: scaleFile, offset: offset, offsetFile: offsetFile,
                mountMatrix: mount.matrix, mountMatrixSource: mount.source,
                samplingFrequency: frequency?.value, samplingFrequencyFile: frequency?.file,
                availableSamplingFrequencies: available,
                isPollable: rawChannels.allSatisfy { $0 != nil },
                problem: problem, canBuffer: raw.canBuffer, triggerName: trigger,
                hasTimestampChannel: timestampElement != nil,
                udevLocation: properties[UdevDatabase.locationProperty].map { String(AttributeText.trimmed($0)) },
                rejectedUdevMountMatrix: mount.rejected, udevUnavailable: udev.unavailable,
                scaleCorrection: scaleCorrection)
            let scanElements = axes.map { c in
                c.flatMap { c in c.scanIndex.flatMap { i in c.format.map { ScanElement(channel: c.index, scanIndex: i, format: $0) } } }
            }
            return SensorPlan(info: info, deviceIndex: raw.index, rawChannels: rawChannels,
                              scanElements: scanElements, timestampElement: timestampElement)
        }
    }
}

extension Discovery {
    /// A sensor's mount matrix as discovery settles it (a caller's override comes later, in
    /// ``MotionManager``).
    struct MountMatrixChoice {
        var matrix = MountMatrix.identity
        var source = MountMatrix.Source.identity
        /// Why udev's matrix was not used (``SensorInfo/rejectedUdevMountMatrix``).
        var rejected: String?
        /// The kernel's matrix could not be read or parsed, and udev gave none to use instead.
        var problem: MotionError?
    }

    /// The mount matrix of a sensor: udev's (``udevMountMatrix(_:kind:deviceText:)``) when it gives
    /// a valid one, else the kernel's (`kernel`: the first of the sysfs files, nil when none is
    /// published), else the identity. As iio-sensor-proxy's `setup_mount_matrix`: the hardware
    /// database is the machine's own correction of what the firmware tells the kernel.
    /// - Parameters:
    ///   - kind: the sensor's kind.
    ///   - deviceText: the device, for messages.
    ///   - udev: the device's udev properties.
    ///   - kernel: reads the kernel's matrix and the file it came from.
    static func mountMatrix(kind: SensorKind, deviceText: String, udev: [String: String],
                            kernel: () throws(MotionError) -> (MountMatrix, String)?) -> MountMatrixChoice {
        var choice = MountMatrixChoice()
        let fromUdev = udevMountMatrix(udev, kind: kind, deviceText: deviceText)
        choice.rejected = fromUdev.rejected
        if let m = fromUdev.matrix {
            choice.matrix = m
            choice.source = .udev(property: UdevDatabase.matrixProperty)
            return choice
        }
        do throws(MotionError) {
            if let (m, file) = try kernel() {
                choice.matrix = m
                choice.source = .sysfs(file: file)
            }
        } catch {
            choice.problem = error
        }
        return choice
    }

    /// The mount matrix udev gives a sensor of this kind, from the device's properties: its
    /// `ACCEL_MOUNT_MATRIX` for the accelerometer and for a gyroscope on the same device (one chip,
    /// one set of axes: the kernel's IMU drivers give both one matrix, bmi160 as `in_mount_matrix`,
    /// inv_mpu6050 the same one as `in_accel_` and `in_anglvel_mount_matrix`); none for a
    /// magnetometer (inv_mpu6050's has a matrix of its own, and systemd defines no property for it). A value that is not a mount matrix is rejected,
    /// with a sentence naming the device and the property.
    static func udevMountMatrix(_ properties: [String: String], kind: SensorKind, deviceText: String)
        -> (matrix: MountMatrix?, rejected: String?) {
        guard kind != .magnetometer, let text = properties[UdevDatabase.matrixProperty] else { return (nil, nil) }
        do throws(MotionError) {
            return (try MountMatrix(parsing: text), nil)
        } catch {
            // The property's value, in the sentence: the parser's names it, the matrix check does not.
            let detail = error.detail ?? "not a mount matrix"
            let value = AttributeText.trimmed(text)
            let why = detail.hasPrefix("\"\(value)\"") ? detail : "\"\(value)\" is not a mount matrix (\(detail))"
            return (nil, "udev's \(UdevDatabase.matrixProperty) of \(deviceText) is not used: \(why); the kernel's mount matrix is used instead")
        }
    }

    /// The largest scale, offset (and mount matrix value, ``MountMatrix/valueLimit``) accepted:
    /// with all three under it, `M · ((raw + offset) · scale)` is finite for every 64-bit raw
    /// value, in every unit. Real drivers' are under 1e5. A larger one ("1e305", found by
    /// scripts/fuzz) made a reading inf, then NaN through the matrix.
    static let factorLimit = 1e100
}

/// Reads attributes of one device by sysfs file name, trying candidates in order.
private struct AttributeReader<Device: DeviceIO> {
    let device: Device
    let deviceText: String

    /// The first candidate file that exists, with its text. Read errors other than "no such
    /// attribute" are returned as failures of that file.
    func text(in files: [String]) -> (text: String, file: String)? {
        try? firstText(in: files)
    }

    private func firstText(in files: [String]) throws(MotionError) -> (text: String, file: String)? {
        for file in files {
            switch device.readAttributeFile(file) {
            case .success(let text):
                return (text, file)
            case .failure(let e) where e.rawValue == ENOENT: // not published under this name; try the next
                continue
            case .failure(let e):
                let call = device.hasAttribute(file) ? "iio_device_attr_read" : "iio_channel_attr_read"
                throw MotionError.io(e.rawValue, call: call, device: deviceText, attribute: file)
            }
        }
        return nil
    }

    /// The first candidate file that exists, parsed as a decimal number.
    func number(in files: [String]) throws(MotionError) -> (value: Double, file: String)? {
        guard let (text, file) = try firstText(in: files) else { return nil }
        guard let v = AttributeText.decimal(text) else {
            throw MotionError.notANumber(device: deviceText, file: file, text: text)
        }
        return (v, file)
    }

    /// The first candidate file that exists, parsed as a scale or offset: a number of at most
    /// ``Discovery/factorLimit`` in magnitude.
    func factor(in files: [String]) throws(MotionError) -> (value: Double, file: String)? {
        guard let (v, file) = try number(in: files) else { return nil }
        guard abs(v) <= Discovery.factorLimit else {
            throw MotionError(code: .invalidAttribute, device: deviceText, attribute: file,
                              detail: "\(file) contains \(v), too large to convert readings with")
        }
        return (v, file)
    }

    /// The first candidate file that exists, parsed as a mount matrix.
    func mountMatrix(in files: [String]) throws(MotionError) -> (MountMatrix, String)? {
        guard let (text, file) = try firstText(in: files) else { return nil }
        do throws(MotionError) {
            return (try MountMatrix(parsing: text), file)
        } catch {
            throw MotionError(code: .invalidAttribute, device: deviceText, attribute: file,
                              detail: "\(file): \(error.detail ?? "not a valid mount matrix")")
        }
    }
}
