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

    /// How a driver's calibbias files hold an offset: what one count is, the step the register
    /// moves by, the counts it can hold, and whether the files show counts or SI values.
    public struct Layout: Sendable, Hashable {
        /// SI units (m/s² or rad/s) per count.
        public var unit: Double
        /// The counts a written value moves by (values in between are not kept by the register).
        public var step: Int
        /// The counts the register holds; a value outside is refused before anything is written.
        public var range: ClosedRange<Int>
        /// The files show SI values (count × ``unit``, rounded by the driver) rather than counts.
        public var showsSI: Bool
        /// Decimals the driver parses from a written SI value (6: micro, 9: nano).
        public var decimals: Int

        /// A layout.
        public init(unit: Double, step: Int, range: ClosedRange<Int>, showsSI: Bool = false, decimals: Int = 0) {
            self.unit = unit
            self.step = step
            self.range = range
            self.showsSI = showsSI
            self.decimals = decimals
        }
    }

    /// The calibbias layout of the drivers whose units the kernel's 6.1 source (or, for
    /// inv_mpu6050, InvenSense's documentation) establishes; nil for the others
    /// (``refusal(driver:kind:)`` says why).
    ///
    /// - inv_mpu6050 on the MPU-6000/6050/9150 (`inv_mpu6050_sensor_show`/`_set`, inv_mpu_core.c:557-569)
    ///   reads and writes the 16-bit offset registers as they are: the accelerometer's count is
    ///   1/2048 g (the ±16 g range) whatever range is configured, and bit 0 of its low byte is
    ///   reserved (kept: the step is 2); the gyroscope's count is 1/32.8 °/s (the ±1000 °/s range).
    ///   InvenSense, "MPU Hardware Offset Registers Application Note". Later InvenSense chips
    ///   (MPU-6500, MPU-9250, ICM-20602, ...) keep the accelerometer's offsets three bytes apart,
    ///   which the 6.1 driver does not do, so they are not listed.
    /// - adxl345/adxl375 (adxl345_core.c:123-133, :158-165): the 8-bit OFS register × 4, "4x accel
    ///   data scale factor": a count is one full-resolution data count, `adxl345_uscale` 38300 µm/s²
    ///   and `adxl375_uscale` 480000 µm/s² (:55, :61); the driver writes `val / 4` into 8 bits
    ///   without a range check, so −512…508 in steps of 4 is enforced here.
    /// - adxl312/adxl313/adxl314 (adxl313_core.c:273-284, :306-316): the same × 4, counts of the
    ///   chip's data scale (`scale_factor` nano m/s², :100-118), −512…508 (the driver's own check).
    /// - inv_icm42600 (`icm42600`, `icm42602`, `icm42605`, `icm42622`, devices `<chip>-accel` and
    ///   `<chip>-gyro`): the files show SI values of a signed 12-bit register, rounded to the
    ///   nearest count when written: 0.5 mg per count, micro m/s² (inv_icm42600_accel.c:351-359,
    ///   :417-431, :477-493), 1/32 °/s per count, nano rad/s (inv_icm42600_gyro.c:367-371, :429-444,
    ///   :483-505); −2048…2047.
    /// - Parameters:
    ///   - driver: the IIO device's name.
    ///   - kind: accelerometer or gyroscope.
    public static func layout(driver: String?, kind: SensorKind) -> Layout? {
        let g = 9.80665
        guard let driver else { return nil }
        switch (driver, kind) {
        case ("mpu6050", .accelerometer), ("mpu6000", .accelerometer), ("mpu9150", .accelerometer):
            return Layout(unit: g / 2048, step: 2, range: -32768...32767)
        case ("mpu6050", .gyroscope), ("mpu6000", .gyroscope), ("mpu9150", .gyroscope):
            return Layout(unit: Double.pi / 180 / 32.8, step: 1, range: -32768...32767)
        case ("adxl345", .accelerometer):
            return Layout(unit: 0.0383, step: 4, range: -512...508)
        case ("adxl375", .accelerometer):
            return Layout(unit: 0.48, step: 4, range: -512...508)
        case ("adxl312", .accelerometer):
            return Layout(unit: 0.028425072, step: 4, range: -512...508)
        case ("adxl313", .accelerometer):
            return Layout(unit: 0.009576806, step: 4, range: -512...508)
        case ("adxl314", .accelerometer):
            return Layout(unit: 0.478858719, step: 4, range: -512...508)
        default:
            break
        }
        let chips = ["icm42600", "icm42602", "icm42605", "icm42622"]
        if kind == .accelerometer, driver.hasSuffix("-accel"), chips.contains(String(driver.dropLast(6))) {
            return Layout(unit: g * 0.0005, step: 1, range: -2048...2047, showsSI: true, decimals: 6)
        }
        if kind == .gyroscope, driver.hasSuffix("-gyro"), chips.contains(String(driver.dropLast(5))) {
            return Layout(unit: Double.pi / 180 / 32, step: 1, range: -2048...2047, showsSI: true, decimals: 9)
        }
        return nil
    }

    /// Why `--write-kernel` is refused for a driver that has calibbias files but no ``layout(driver:kind:)``;
    /// nil when nothing more specific than "not known" can be said.
    public static func refusal(driver: String?, kind: SensorKind) -> String? {
        guard let driver else { return nil }
        if ["mpu6500", "mpu6515", "mpu9250", "mpu9255", "icm20608", "icm20609", "icm20689", "icm20602", "icm20690",
            "iam20680"].contains(driver), kind == .accelerometer {
            return "6.1's inv_mpu6050 writes \(driver)'s accelerometer offsets 2 bytes apart (inv_mpu_core.c:557-569), but the chip keeps them 3 bytes apart: writing them would corrupt the registers"
        }
        if driver == "mpu3050" {
            return "6.1's mpu3050 driver keeps calibbias in memory and writes it to the chip only at its next power-up (mpu3050-core.c:212-217, :403-407), and its unit is not stated in the driver"
        }
        if ["mma8451", "mma8452", "mma8453", "mma8652", "mma8653", "fxls8471"].contains(driver) {
            return "6.1's mma8452 driver writes \(driver)'s 8-bit offset register as given (−128…127, mma8452.c:750-758) without saying its unit, which differs between the chips of the family"
        }
        if driver == "adxl355" || driver == "adxl359" {
            return "6.1's adxl355 driver writes a 16-bit offset (adxl355_core.c:563-566) without saying its unit"
        }
        return nil
    }

    /// SI units per calibbias count, and the step the register moves by (``layout(driver:kind:)``).
    /// - Parameters:
    ///   - driver: the IIO device's name.
    ///   - kind: accelerometer or gyroscope.
    public static func unit(driver: String?, kind: SensorKind) -> (unit: Double, step: Int)? {
        layout(driver: driver, kind: kind).map { ($0.unit, $0.step) }
    }

    /// ``layout(driver:kind:)``, or an error saying why the driver's calibbias is not written.
    /// - Throws: ``MotionError`` (``MotionError/Code/notAvailable``) naming the driver.
    public static func knownLayout(driver: String?, kind: SensorKind) throws(MotionError) -> Layout {
        guard let l = layout(driver: driver, kind: kind) else {
            let why = refusal(driver: driver, kind: kind)
                ?? "the units of \(driver ?? "this driver")'s calibbias files are not known to IIOMotion"
            throw MotionError(code: .notAvailable, device: driver,
                              detail: why + " (known: mpu6050, mpu6000, mpu9150, adxl345, adxl375, adxl312, adxl313, adxl314, icm42600, icm42602, icm42605, icm42622)")
        }
        return l
    }

    /// ``knownLayout(driver:kind:)``'s unit and step.
    /// - Throws: ``MotionError`` (``MotionError/Code/notAvailable``) naming the driver.
    public static func knownUnit(driver: String?, kind: SensorKind) throws(MotionError) -> (unit: Double, step: Int) {
        let l = try knownLayout(driver: driver, kind: kind)
        return (l.unit, l.step)
    }

    /// The text written to a calibbias file for `count` (the count itself, or its SI value).
    static func text(_ count: Int, layout: Layout?) -> String {
        guard let layout, layout.showsSI else { return String(count) }
        return Self.fixed(Double(count) * layout.unit, decimals: layout.decimals)
    }

    /// A calibbias file's text as counts (SI values divided by the unit, to the nearest count).
    static func count(_ text: String, layout: Layout?) -> Int? {
        guard let layout, layout.showsSI else { return AttributeText.integer(text).map { Int($0) } }
        guard let v = AttributeText.decimal(text), v.isFinite, abs(v) < 1e6 else { return nil }
        return Int((v / layout.unit).rounded())
    }

    /// `v` with `decimals` decimals, rounded half away from zero, without Foundation.
    static func fixed(_ v: Double, decimals: Int) -> String {
        var p: Int64 = 1
        for _ in 0..<decimals { p *= 10 }
        let n = Int64((abs(v) * Double(p)).rounded())
        let whole = n / p, fraction = String(n % p)
        let sign = v < 0 && n != 0 ? "-" : ""
        if decimals == 0 { return sign + String(whole) }
        return sign + String(whole) + "." + String(repeating: "0", count: decimals - fraction.count) + fraction
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
        let layout = try knownLayout(driver: driver, kind: calibration.kind)
        let (unit, step) = (layout.unit, layout.step)
        let b = [calibration.bias.x, calibration.bias.y, calibration.bias.z]
        var written: [Int] = []
        for i in 0..<3 {
            let counts = Int((b[i] / unit / Double(step)).rounded()) * step
            let v = current[i] - counts
            guard layout.range.contains(v) else {
                throw MotionError(code: .invalidAttribute, device: driver, attribute: files(for: calibration.kind)[i],
                                  detail: "the offset needs \(v) in \(files(for: calibration.kind)[i]), outside what the register holds (\(layout.range.lowerBound)…\(layout.range.upperBound) counts of \(layout.unit) \(calibration.kind == .gyroscope ? "rad/s" : "m/s²"))")
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
}

/// The calibbias files read and written through a context's devices (``DeviceIO``): the public
/// ``read(_:uri:)`` and ``write(_:to:uri:)`` (in the IIOMotion target) on a libiio context.
extension KernelOffsets {
    /// Reads a sensor's three calibbias files on `context`.
    /// - Parameters:
    ///   - sensor: an accelerometer or gyroscope.
    ///   - context: an open context holding the sensor's device.
    /// - Returns: x, y, z counts.
    /// - Throws: ``MotionError`` naming the device and file when one is missing or not a number.
    package static func read(_ sensor: SensorInfo, in context: some DeviceContext) throws(MotionError) -> [Int] {
        let device = try device(of: sensor, in: context)
        var values: [Int] = []
        for file in files(for: sensor.kind) {
            switch device.readAttributeFile(file) {
            case let .success(text):
                guard let v = count(text, layout: layout(driver: sensor.deviceName, kind: sensor.kind)) else {
                    throw MotionError.notANumber(device: sensor.deviceDescription, file: file, text: text)
                }
                values.append(v)
            case let .failure(e):
                throw MotionError(code: e.rawValue == ENOENT ? .notAvailable : MotionError.code(forErrno: e.rawValue),
                                  underlyingErrno: e.rawValue, call: "read", device: sensor.deviceDescription, attribute: file,
                                  detail: "\(file) of \(sensor.deviceDescription) cannot be read (\(e))")
            }
        }
        return values
    }

    /// Writes a sensor's three calibbias files on `context` and reads them back; on a failure the
    /// files already written are put back (``write(_:to:uri:)`` says more).
    /// - Parameters:
    ///   - values: x, y, z counts.
    ///   - sensor: an accelerometer or gyroscope.
    ///   - context: an open context holding the sensor's device.
    /// - Throws: ``MotionError`` naming the device and file, or when a file reads back other than written.
    package static func write(_ values: [Int], to sensor: SensorInfo, in context: some DeviceContext) throws(MotionError) {
        let before = try read(sensor, in: context)
        let device = try device(of: sensor, in: context)
        let names = files(for: sensor.kind)
        let layout = layout(driver: sensor.deviceName, kind: sensor.kind)
        /// Puts files `0..<count` back as they were; what happened, for the error's detail.
        func undo(_ count: Int) -> String {
            guard count > 0 else { return "" }
            var back: [String] = [], failed: [String] = []
            for i in 0..<count {
                if let e = device.writeFile(names[i], text(before[i], layout: layout)) {
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
            if let range = layout?.range, !range.contains(v) {
                throw MotionError(code: .invalidAttribute, device: sensor.deviceDescription, attribute: file,
                                  detail: "\(v) does not fit \(file) of \(sensor.deviceDescription) (\(range.lowerBound)…\(range.upperBound))\(undo(i))")
            }
            if let e = device.writeFile(file, text(v, layout: layout)) {
                let root = e.rawValue == EACCES || e.rawValue == EPERM ? " (writing it needs root)" : ""
                throw MotionError(code: MotionError.code(forErrno: e.rawValue), underlyingErrno: e.rawValue, call: "write",
                                  device: sensor.deviceDescription, attribute: file,
                                  detail: "\(file) of \(sensor.deviceDescription) cannot be written: \(e)\(root)\(undo(i))")
            }
        }
        let back = try read(sensor, in: context)
        if let i = (0..<3).first(where: { back[$0] != values[$0] }) {
            let file = names[i]
            throw MotionError(code: .invalidAttribute, device: sensor.deviceDescription, attribute: file,
                              detail: "\(file) of \(sensor.deviceDescription) reads \(back[i]) after \(values[i]) was written\(undo(3))")
        }
    }

    /// The sensor's device in `context`.
    /// - Throws: ``MotionError`` (``MotionError/Code/notAvailable``) when it is gone.
    private static func device<Context: DeviceContext>(of sensor: SensorInfo, in context: Context) throws(MotionError) -> Context.Device {
        guard let device = context.device(id: sensor.deviceID) else {
            throw MotionError(code: .notAvailable, device: sensor.deviceDescription, detail: "\(sensor.deviceID) is gone from \(context.uri)")
        }
        return device
    }
}
