import Glibc
import IIOMotion

/// One sample of one sensor, as the CLI prints it.
struct Reading: Equatable, Sendable {
    var kind: SensorKind
    /// The IIO id, e.g. `"iio:device0"`.
    var deviceID: String
    /// `"iio:device0 (bmi160)"`.
    var deviceDescription: String
    /// Seconds on `CLOCK_MONOTONIC`.
    var timestamp: Double
    var x: Double
    var y: Double
    var z: Double
}

extension Reading {
    /// A library sample with its device's labels.
    /// - Parameters:
    ///   - sample: the sample.
    ///   - deviceID: e.g. `"iio:device0"`.
    ///   - deviceDescription: e.g. `"iio:device0 (bmi160)"`.
    init(_ sample: some SensorSample, deviceID: String, deviceDescription: String) {
        let v = sample.axes
        self.init(kind: type(of: sample).sensorKind, deviceID: deviceID, deviceDescription: deviceDescription,
                  timestamp: sample.timestamp, x: v.x, y: v.y, z: v.z)
    }
}

/// The text forms of readings and device lists. Pure functions: the tests pin them down.
enum Format {
    // MARK: Readings

    /// The pinned JSON line of a reading:
    /// `{"sensor":"accelerometer","device":"iio:device0","timestamp":S,"x":X,"y":Y,"z":Z}`.
    static func json(_ r: Reading) -> String {
        JSONValue.object([
            ("sensor", .string(r.kind.rawValue)),
            ("device", .string(r.deviceID)),
            ("timestamp", .number(r.timestamp)),
            ("x", .number(r.x)),
            ("y", .number(r.y)),
            ("z", .number(r.z)),
        ]).text
    }

    /// The readable line `--once` and the plain continuous view print, e.g.
    /// `accelerometer  iio:device0 (bmi160)  x +0.0000  y +0.0000  z -1.0003 g  at 1234.567890 s`.
    static func line(_ r: Reading, units: MotionUnits) -> String {
        "\(r.kind.rawValue.padding(to: 13))  \(r.deviceDescription)  \(axes(r)) \(unit(r.kind, units))  at \(fixed(r.timestamp, 6)) s"
    }

    /// The unit symbol of a sensor's readings.
    static func unit(_ kind: SensorKind, _ units: MotionUnits) -> String {
        switch (kind, units) {
        case (.accelerometer, .coreMotion): "g"
        case (.accelerometer, .si): "m/s²"
        case (.gyroscope, _): "rad/s"
        case (.magnetometer, _): "µT"
        }
    }

    // MARK: Device motion

    /// The pinned JSON line of a device motion estimate, angles in radians, gravity and
    /// user acceleration in g, rotation rate in rad/s, numbers in their shortest round-trip form:
    /// `{"sensor":"deviceMotion","timestamp":S,"attitude":{"roll":R,"pitch":P,"yaw":Y,"quaternion":{"x":..,"y":..,"z":..,"w":..}},"gravity":{"x":..,"y":..,"z":..},"userAcceleration":{"x":..,"y":..,"z":..},"rotationRate":{"x":..,"y":..,"z":..}}`.
    static func json(_ m: DeviceMotion) -> String {
        let q = m.attitude.quaternion
        func xyz(_ x: Double, _ y: Double, _ z: Double) -> JSONValue { .object([("x", .number(x)), ("y", .number(y)), ("z", .number(z))]) }
        return JSONValue.object([
            ("sensor", .string("deviceMotion")),
            ("timestamp", .number(m.timestamp)),
            ("attitude", .object([
                ("roll", .number(m.attitude.roll)),
                ("pitch", .number(m.attitude.pitch)),
                ("yaw", .number(m.attitude.yaw)),
                ("quaternion", .object([("x", .number(q.x)), ("y", .number(q.y)), ("z", .number(q.z)), ("w", .number(q.w))])),
            ])),
            ("gravity", xyz(m.gravity.x, m.gravity.y, m.gravity.z)),
            ("userAcceleration", xyz(m.userAcceleration.x, m.userAcceleration.y, m.userAcceleration.z)),
            ("rotationRate", xyz(m.rotationRate.x, m.rotationRate.y, m.rotationRate.z)),
        ]).text
    }

    /// The readable line of a device motion estimate, angles in degrees, e.g.
    /// `deviceMotion   roll +0.00°  pitch +0.00°  yaw +90.00°  gravity x +0.0000  y +0.0000  z -1.0000 g  user x +0.0000  y +0.0000  z +0.0000 g  at 12.345678 s`,
    /// with `  heading 123.45°` before `at` in a north-referenced frame (heading ≥ 0).
    static func line(_ m: DeviceMotion) -> String {
        let a = m.attitude
        var text = "deviceMotion   roll \(degrees(a.roll))  pitch \(degrees(a.pitch))  yaw \(degrees(a.yaw))"
        text += "  gravity \(xyz(m.gravity.x, m.gravity.y, m.gravity.z)) g"
        text += "  user \(xyz(m.userAcceleration.x, m.userAcceleration.y, m.userAcceleration.z)) g"
        if m.heading >= 0 { text += "  heading \(fixed(m.heading, 2))°" }
        return text + "  at \(fixed(m.timestamp, 6)) s"
    }

    /// Radians as signed degrees with two decimals: `+90.00°`.
    static func degrees(_ radians: Double) -> String {
        fixed(radians * 180 / .pi, 2, sign: true) + "°"
    }

    private static func xyz(_ x: Double, _ y: Double, _ z: Double) -> String {
        "x \(fixed(x, 4, sign: true))  y \(fixed(y, 4, sign: true))  z \(fixed(z, 4, sign: true))"
    }

    private static func axes(_ r: Reading) -> String {
        "x \(fixed(r.x, 4, sign: true))  y \(fixed(r.y, 4, sign: true))  z \(fixed(r.z, 4, sign: true))"
    }

    // MARK: Device lists

    /// `--list --json`: one object per device, keys in this order: `id`, `name`, `label`,
    /// `location`, `sensors`, `buffered`, `trigger`, `sampling_frequency` (Hz per sensor, or null),
    /// `mount_matrix` (rows per sensor), `mount_matrix_source` (per sensor: `kernel:FILE`,
    /// `udev:PROPERTY`, `caller` or `identity`; see ``MountMatrixText/key(_:)``).
    /// A device with a sensor whose published scale IIOMotion corrects (``SensorInfo/scaleCorrection``)
    /// has a `scale_correction` key: per such sensor, `published`, `used` and the kernel `source` line.
    /// A device udev's hardware database places (`ACCEL_LOCATION`, ``SensorInfo/udevLocation``) has
    /// a `udev_location` key: `display` or `base`, as udev gives it.
    /// With `calibration`, each device's object ends with a `calibration` key holding what it returns.
    static func json(_ devices: [DeviceInfo], calibration: ((DeviceInfo) -> JSONValue)? = nil) -> String {
        JSONValue.array(devices.map { d in
            .object([
                ("id", .string(d.id)),
                ("name", .string(d.name)),
                ("label", .string(d.label)),
                ("location", .string(d.location)),
                ("sensors", .array(d.sensors.map { .string($0.kind.rawValue) })),
                ("buffered", .bool(d.canBuffer)),
                ("trigger", .string(d.triggerName)),
                ("sampling_frequency", .object(d.sensors.map { ($0.kind.rawValue, .number($0.samplingFrequency)) })),
                ("mount_matrix", .object(d.sensors.map { s in
                    (s.kind.rawValue, .array(s.mountMatrix.rows.map { .array($0.map { .number($0) }) }))
                })),
                ("mount_matrix_source", .object(d.sensors.map { ($0.kind.rawValue, .string(MountMatrixText.key($0.mountMatrixSource))) })),
            ] + scaleCorrections(d) + (udevLocation(d).map { [("udev_location", .string($0))] } ?? [])
              + (calibration.map { [("calibration", $0(d))] } ?? []))
        }).text
    }

    /// The `scale_correction` key of a device's `--list --json` object, or nothing when no sensor
    /// of the device has its scale corrected.
    private static func scaleCorrections(_ d: DeviceInfo) -> [(String, JSONValue)] {
        let corrected = d.sensors.compactMap { s in
            s.scaleCorrection.map { c in
                (s.kind.rawValue, JSONValue.object([("published", .number(c.published)), ("used", .number(c.published * c.factor)),
                                                    ("source", .string(c.source))]))
            }
        }
        return corrected.isEmpty ? [] : [("scale_correction", .object(corrected))]
    }

    /// Where udev's hardware database places the device (`ACCEL_LOCATION`: `display` or `base`), or
    /// nil when it says nothing. udev's properties are the device's: every sensor of it has the same.
    static func udevLocation(_ d: DeviceInfo) -> String? {
        d.sensors.lazy.compactMap(\.udevLocation).first
    }

    /// `--list`: a table with a header row, columns padded to their widest cell. MATRIX says where
    /// the mount matrix in force comes from (``MountMatrixText/cell(_:)``). Below it, a line per
    /// device udev's hardware database places (`location of iio:device0 (bma255): display (udev hwdb
    /// ACCEL_LOCATION)`), and a line per sensor whose published scale IIOMotion corrects
    /// (``SensorInfo/scaleCorrection``).
    static func table(_ devices: [DeviceInfo]) -> String {
        let locations = devices.compactMap { d in
            udevLocation(d).map { "location of \(d.id) (\(d.name ?? "-")): \($0) (udev hwdb ACCEL_LOCATION)" }
        }
        let corrections = devices.flatMap { d in
            d.sensors.compactMap { s in
                s.scaleCorrection.map { c in
                    "scale of the \(s.kind) of \(d.id) (\(d.name ?? "-")): \(plain(c.published)) published, "
                        + "\(plain(c.published * c.factor)) used (the driver's unit is not the ABI's: \(c.source))"
                }
            }
        }
        return ([rows(devices)] + locations + corrections).joined(separator: "\n")
    }

    private static func rows(_ devices: [DeviceInfo]) -> String {
        let header = ["DEVICE", "NAME", "LABEL", "SENSORS", "BUFFERED", "SAMPLING", "TRIGGER", "MATRIX"]
        let rows = devices.map { d -> [String] in
            let label = d.label ?? d.location.map { "(location \($0))" } ?? "-"
            let frequencies = d.sensors.compactMap(\.samplingFrequency)
            var unique: [Double] = []
            for f in frequencies where !unique.contains(f) { unique.append(f) }
            let sampling = unique.isEmpty ? "-" : unique.map { "\(shortest($0)) Hz" }.joined(separator: ", ")
            return [
                d.id, d.name ?? "-", label, d.sensors.map(\.kind.rawValue).joined(separator: ","),
                d.canBuffer ? "yes" : "no", sampling, d.triggerName ?? "-", MountMatrixText.cell(d.sensors),
            ]
        }
        let all = [header] + rows
        let widths = header.indices.map { c in all.map { $0[c].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { c, cell in c == row.count - 1 ? cell : cell.padding(to: widths[c]) }
                .joined(separator: "  ")
        }.joined(separator: "\n")
    }

    // MARK: Numbers

    /// A small or large number without an exponent: 12 decimals at most, trailing zeros dropped
    /// (`0.000009174`, `62.5`).
    static func plain(_ d: Double) -> String {
        var text = fixed(d, 12)
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        return text
    }

    /// `100` for 100.0, `12.5` for 12.5: for humans, where the trailing `.0` is noise.
    static func shortest(_ d: Double) -> String {
        if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
        return d.description
    }

    /// `d` with `digits` decimals (printf's `%.*f`), with an explicit `+` when `sign` is true.
    /// For human output only: JSON uses ``JSONValue/number(text:)``, which round-trips.
    ///
    /// Exact, as printf: the binary value is rounded to `digits` decimals half to even, in integer
    /// arithmetic (no `withVaList`, whose casts cost more than the rest of a printed line).
    static func fixed(_ d: Double, _ digits: Int, sign: Bool = false) -> String {
        guard d.isFinite else { return d.description }
        let d = d + 0.0 // −0 reads +0: a sign on a zero is noise to a person
        // Exact when the value is a fraction of a power of two (|d| < 2^52) and 10^digits · 2^53 fits.
        guard digits >= 0, digits <= 19, d.magnitude < 0x1p52 else { return fixedPrintf(d, digits, sign: sign) }
        var scaled: UInt128 = 0
        if d != 0 {
            let m = UInt128(d.significandBitPattern | (d.exponentBitPattern == 0 ? 0 : 1 << 52))
            let shift = 1075 - Int(d.exponentBitPattern == 0 ? 1 : d.exponentBitPattern) // d = m / 2^shift, shift > 0
            var power: UInt128 = 1
            for _ in 0..<digits { power &*= 10 }
            let product = m * power // < 2^53 · 10^19 < 2^117
            if shift >= 120 {
                scaled = 0 // < 2^117 / 2^120 < ½
            } else {
                let q = product >> UInt128(shift)
                let rest = product - (q << UInt128(shift))
                let half = UInt128(1) << UInt128(shift - 1)
                scaled = rest > half || (rest == half && q & 1 == 1) ? q + 1 : q
            }
        }
        // Digits, last first, into a small buffer: sign, integer part, point, `digits` decimals.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buf in
            var i = 64
            var v = scaled
            var written = 0
            repeat {
                if written == digits && digits > 0 { i -= 1; buf[i] = UInt8(ascii: ".") }
                let (q, r) = v.quotientAndRemainder(dividingBy: 10)
                i -= 1
                buf[i] = UInt8(truncatingIfNeeded: r) &+ UInt8(ascii: "0")
                v = q
                written += 1
            } while v != 0 || written <= digits
            if d < 0 { i -= 1; buf[i] = UInt8(ascii: "-") } else if sign { i -= 1; buf[i] = UInt8(ascii: "+") }
            return String(decoding: UnsafeBufferPointer(rebasing: buf[i...]), as: UTF8.self)
        }
    }

    /// ``fixed(_:_:sign:)`` by `vsnprintf`: for the values the integer route does not cover.
    static func fixedPrintf(_ d: Double, _ digits: Int, sign: Bool = false) -> String {
        guard d.isFinite else { return d.description }
        let d = d + 0.0
        var buffer = [CChar](repeating: 0, count: 64)
        let format = sign ? "%+.*f" : "%.*f"
        _ = withVaList([Int32(digits), d]) { args in
            vsnprintf(&buffer, buffer.count, format, args)
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
