internal import Glibc

/// Offsets a calibration moved into the driver's own registers: the `in_accel_{x,y,z}_calibbias`
/// or `in_anglvel_{x,y,z}_calibbias` files, which the chip adds to every sample it produces.
///
/// The files hold register counts whose meaning depends on the chip; ``KernelOffsets/unit(driver:kind:)``
/// knows the drivers whose units are documented. `original` is what the files held before the
/// first write (restored by `motion-monitor calibrate --restore-kernel`), `written` what was
/// written. A register lowered by `n` counts lowers every reading by `n · unit`, so the hardware
/// took ``bias`` = `(original − written) · unit` out of the readings, and a calibration's own
/// ``SensorCalibration/bias`` keeps only the rest.
public struct KernelOffsets: Sendable, Hashable {
    /// The three files, in x, y, z order (e.g. `in_accel_x_calibbias`).
    public var files: [String]
    /// What the files held before motion-monitor first wrote them.
    public var original: [Int]
    /// What was written.
    public var written: [Int]
    /// SI units (m/s² or rad/s) per register count.
    public var unit: Double

    /// A record of offsets written.
    /// - Parameters:
    ///   - files: the three files, x, y, z.
    ///   - original: their values before the first write.
    ///   - written: the values written.
    ///   - unit: SI units per count.
    public init(files: [String], original: [Int], written: [Int], unit: Double) {
        self.files = files
        self.original = original
        self.written = written
        self.unit = unit
    }

    /// What the registers take out of each reading compared with `original`, sensor axes, SI.
    public var bias: AxisValues {
        AxisValues(x: Double(original[0] - written[0]) * unit, y: Double(original[1] - written[1]) * unit,
                   z: Double(original[2] - written[2]) * unit)
    }

    /// The calibbias files of a sensor of `kind`.
    public static func files(for kind: SensorKind) -> [String] {
        let type = kind == .gyroscope ? "anglvel" : "accel"
        return ["x", "y", "z"].map { "in_\(type)_\($0)_calibbias" }
    }

    /// SI units per calibbias count, and the step the register moves by, for the drivers whose
    /// calibbias units are known; nil for the others.
    ///
    /// inv_mpu6050 (`inv_mpu6050_sensor_show`/`_set`) reads and writes the 16-bit offset registers
    /// as they are: on the MPU-6000/6050/9150 (`XA_OFFS_H` 0x06…, `XG_OFFS_USRH` 0x13…) the
    /// accelerometer's count is 1/2048 g (the ±16 g range) whatever range is configured, and bit 0
    /// of its low byte is reserved (kept: the step is 2); the gyroscope's count is 1/32.8 °/s (the
    /// ±1000 °/s range). InvenSense, "MPU Hardware Offset Registers Application Note".
    /// Later InvenSense chips (MPU-6500, MPU-9250, ICM-20602, ...) keep the accelerometer's
    /// offsets three bytes apart, which the 6.1 driver does not do, so they are not listed.
    /// - Parameters:
    ///   - driver: the IIO device's name.
    ///   - kind: accelerometer or gyroscope.
    public static func unit(driver: String?, kind: SensorKind) -> (unit: Double, step: Int)? {
        switch (driver, kind) {
        case ("mpu6050", .accelerometer), ("mpu6000", .accelerometer), ("mpu9150", .accelerometer):
            return (9.80665 / 2048, 2)
        case ("mpu6050", .gyroscope), ("mpu6000", .gyroscope), ("mpu9150", .gyroscope):
            return (Double.pi / 180 / 32.8, 1)
        default:
            return nil
        }
    }

    /// ``unit(driver:kind:)``, or an error saying the driver's units are not known.
    /// - Throws: ``MotionError`` (``MotionError/Code/notAvailable``) naming the driver.
    public static func knownUnit(driver: String?, kind: SensorKind) throws(MotionError) -> (unit: Double, step: Int) {
        guard let u = unit(driver: driver, kind: kind) else {
            throw MotionError(code: .notAvailable, device: driver,
                              detail: "the units of \(driver ?? "this driver")'s calibbias files are not known to IIOMotion (known: mpu6050, mpu6000, mpu9150)")
        }
        return u
    }

    /// Reads a sensor's three calibbias files.
    /// - Parameters:
    ///   - sensor: an accelerometer or gyroscope.
    ///   - uri: the IIO context's URI.
    /// - Returns: x, y, z counts.
    /// - Throws: ``MotionError`` naming the device and file when one is missing or not a number.
    public static func read(_ sensor: SensorInfo, uri: String) throws(MotionError) -> [Int] {
        let (context, index) = try open(sensor, uri: uri)
        var values: [Int] = []
        for file in files(for: sensor.kind) {
            switch context.readDeviceFile(index, file) {
            case let .success(text):
                guard let v = AttributeText.integer(text) else {
                    throw MotionError.notANumber(device: sensor.deviceDescription, file: file, text: text)
                }
                values.append(Int(v))
            case let .failure(e):
                throw MotionError(code: e.rawValue == ENOENT ? .notAvailable : MotionError.code(forErrno: e.rawValue),
                                  underlyingErrno: e.rawValue, call: "read", device: sensor.deviceDescription, attribute: file,
                                  detail: "\(file) of \(sensor.deviceDescription) cannot be read (\(e))")
            }
        }
        return values
    }

    /// Writes a sensor's three calibbias files and reads them back. When a write fails, or a file
    /// reads back other than written, the files already written are put back to what they held
    /// before, and the error says so (or says which could not be put back): the device is never
    /// left with some axes written and others not.
    /// - Parameters:
    ///   - values: x, y, z counts.
    ///   - sensor: an accelerometer or gyroscope.
    ///   - uri: the IIO context's URI.
    /// - Throws: ``MotionError`` naming the device and file (``MotionError/Code/permissionDenied``
    ///   when not root), or when a file reads back other than written.
    public static func write(_ values: [Int], to sensor: SensorInfo, uri: String) throws(MotionError) {
        let before = try read(sensor, uri: uri)
        let (context, index) = try open(sensor, uri: uri)
        let names = files(for: sensor.kind)
        /// Puts files `0..<count` back as they were; what happened, for the error's detail.
        func undo(_ count: Int) -> String {
            guard count > 0 else { return "" }
            var back: [String] = [], failed: [String] = []
            for i in 0..<count {
                if let e = context.writeDevicePath(index, names[i], String(before[i])) {
                    failed.append("\(names[i]) (\(e))")
                } else {
                    back.append("\(names[i]) = \(before[i])")
                }
            }
            var text = back.isEmpty ? "" : "; put back as found: " + back.joined(separator: ", ")
            if !failed.isEmpty {
                text += "; could NOT be put back: " + failed.joined(separator: ", ")
                    + " (they held " + before.map(String.init).joined(separator: " ") + ")"
            }
            return text
        }
        for (i, (file, v)) in zip(names, values).enumerated() {
            if let e = context.writeDevicePath(index, file, String(v)) {
                let root = e.rawValue == EACCES || e.rawValue == EPERM ? " (writing it needs root)" : ""
                throw MotionError(code: MotionError.code(forErrno: e.rawValue), underlyingErrno: e.rawValue, call: "write",
                                  device: sensor.deviceDescription, attribute: file,
                                  detail: "\(file) of \(sensor.deviceDescription) cannot be written: \(e)\(root)\(undo(i))")
            }
        }
        let back = try read(sensor, uri: uri)
        if let i = (0..<3).first(where: { back[$0] != values[$0] }) {
            let file = names[i]
            throw MotionError(code: .invalidAttribute, device: sensor.deviceDescription, attribute: file,
                              detail: "\(file) of \(sensor.deviceDescription) reads \(back[i]) after \(values[i]) was written\(undo(3))")
        }
    }

    /// Moves as much of `calibration`'s bias as the registers can take into them.
    /// - Parameters:
    ///   - calibration: the calibration measured with the registers at `current`.
    ///   - current: what the calibbias files hold now.
    ///   - previous: the record of an earlier write, whose `original` is kept.
    ///   - driver: the IIO device's name.
    /// - Returns: the values to write, and the calibration with the bias the registers take removed.
    /// - Throws: ``MotionError`` when the driver's units are unknown or a value does not fit 16 bits.
    public static func plan(_ calibration: SensorCalibration, current: [Int], previous: KernelOffsets?,
                            driver: String?) throws(MotionError) -> (offsets: KernelOffsets, calibration: SensorCalibration) {
        let (unit, step) = try knownUnit(driver: driver, kind: calibration.kind)
        let b = [calibration.bias.x, calibration.bias.y, calibration.bias.z]
        var written: [Int] = []
        for i in 0..<3 {
            let counts = Int((b[i] / unit / Double(step)).rounded()) * step
            let v = current[i] - counts
            guard v >= -32768, v <= 32767 else {
                throw MotionError(code: .invalidAttribute, device: driver, attribute: files(for: calibration.kind)[i],
                                  detail: "the offset needs \(v) in \(files(for: calibration.kind)[i]), outside the register's 16 bits")
            }
            written.append(v)
        }
        var c = calibration
        c.bias = AxisValues(x: b[0] - Double(current[0] - written[0]) * unit, y: b[1] - Double(current[1] - written[1]) * unit,
                            z: b[2] - Double(current[2] - written[2]) * unit)
        let offsets = KernelOffsets(files: files(for: calibration.kind), original: previous?.original ?? current,
                                    written: written, unit: unit)
        c.kernel = offsets
        return (offsets, c)
    }

    private static func open(_ sensor: SensorInfo, uri: String) throws(MotionError) -> (IIOContext, Int) {
        let context = try IIOContext(uri: uri)
        guard let index = context.deviceIndex(id: sensor.deviceID) else {
            throw MotionError(code: .notAvailable, device: sensor.deviceDescription, detail: "\(sensor.deviceID) is gone from \(uri)")
        }
        return (context, index)
    }
}
