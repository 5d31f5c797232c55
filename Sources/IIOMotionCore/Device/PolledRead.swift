internal import Glibc
internal import SystemSupport

extension Discovery {
    /// Reads one sample of `plan`'s sensor through sysfs (see ``PolledReader/readSI``).
    func readSI(_ plan: SensorPlan, matrix: MountMatrix) throws(MotionError) -> (vector: (x: Double, y: Double, z: Double), timestamp: Double) {
        var info = plan.info
        info.mountMatrix = matrix
        return try PolledReader.readSI(device: context.device(at: plan.deviceIndex), channels: plan.rawChannels, info: info)
    }
}

/// Polled (sysfs) reads of one three-axis sensor.
enum PolledReader {
    /// Reads the three `raw` files, then `(raw + offset) · scale`, the sensor's calibration
    /// (``SensorInfo/calibration``) and the mount matrix `M · v`.
    /// The result is in the kernel's SI units and sign, in the device's axes.
    ///
    /// - Parameters:
    ///   - device: the device to read.
    ///   - channels: the x, y, z channels and their `raw` files.
    ///   - info: scale, offset and mount matrix.
    /// - Returns: the vector and the `CLOCK_MONOTONIC` time halfway through the three reads.
    /// - Throws: ``MotionError`` naming the device and file when a read fails or a `raw` file
    ///   does not hold a decimal integer.
    static func readSI(device: some DeviceIO, channels: [(channel: Int, file: String)?], info: SensorInfo)
        throws(MotionError) -> (vector: (x: Double, y: Double, z: Double), timestamp: Double) {
        if let problem = info.problem { throw problem }
        guard info.isPollable, let scale = info.scale, channels.count == 3 else {
            throw MotionError(code: .notAvailable, device: info.deviceDescription,
                              detail: "\(info.deviceDescription) has no in_\(info.kind.iioType)_{x,y,z}_raw files, so its \(info.kind) can only be streamed, not polled")
        }
        var raw = (x: 0.0, y: 0.0, z: 0.0)
        let start = device.now()
        for axis in Axis.allCases {
            guard let (channel, file) = channels[axis.rawValue] else { continue }
            let text: String
            switch device.readChannelAttribute(channel: channel, "raw") {
            case .success(let t): text = t
            case .failure(let e):
                throw MotionError.io(e.rawValue, call: "iio_channel_attr_read", device: info.deviceDescription, attribute: file)
            }
            guard let value = AttributeText.integer(text) else {
                throw MotionError(code: .invalidAttribute, device: info.deviceDescription, attribute: file,
                                  detail: "\(file) contains \"\(AttributeText.trimmed(text))\", which is not an integer")
            }
            let si = (Double(KernelQuirks.signedRaw(value, deviceName: info.deviceName, kind: info.kind)) + info.offset[axis]) * scale[axis]
            switch axis {
            case .x: raw.x = si
            case .y: raw.y = si
            case .z: raw.z = si
            }
        }
        let end = device.now()
        if let c = info.calibration { raw = c.apply(raw) }
        return (info.mountMatrix.apply(raw), start + (end - start) / 2)
    }
}
