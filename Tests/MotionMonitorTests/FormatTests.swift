import Foundation
import Testing
@testable import IIOMotion
@testable import IIOMotionCore
@testable import motion_monitor

private func reading(_ x: Double, _ y: Double, _ z: Double, kind: SensorKind = .accelerometer, t: Double = 812.25) -> Reading {
    Reading(kind: kind, deviceID: "iio:device0", deviceDescription: "iio:device0 (bmi160)", timestamp: t, x: x, y: y, z: z)
}

private func sensorInfo(
    _ kind: SensorKind, _ id: String, name: String?, label: String? = nil, frequency: Double? = nil,
    matrix: MountMatrix = .identity, source: MountMatrix.Source = .identity, trigger: String? = nil, buffered: Bool = true
) -> SensorInfo {
    SensorInfo(
        kind: kind, deviceID: id, deviceName: name, label: label, location: nil,
        scale: AxisValues(all: 0.000598), scaleFile: "in_accel_scale", offset: AxisValues(all: 0), offsetFile: nil,
        mountMatrix: matrix, mountMatrixSource: source, samplingFrequency: frequency,
        samplingFrequencyFile: nil, availableSamplingFrequencies: nil, isPollable: true,
        problem: nil, canBuffer: buffered, triggerName: trigger, hasTimestampChannel: true)
}

private func device(_ id: String, name: String?, label: String? = nil, trigger: String? = nil, buffered: Bool = true,
                    _ sensors: [SensorInfo]) -> DeviceInfo {
    DeviceInfo(id: id, name: name, label: label, location: nil, sensors: sensors, canBuffer: buffered,
               triggerName: trigger, hasTimestampChannel: true)
}

@Suite("Output formats", .timeLimit(.minutes(3)))
struct FormatTests {
    @Test("The --once --json line: exact keys, order and shape")
    func readingJSON() {
        #expect(Format.json(reading(0.5, -0.25, -1, t: 812.999438968))
            == #"{"sensor":"accelerometer","device":"iio:device0","timestamp":812.999438968,"x":0.5,"y":-0.25,"z":-1.0}"#)
        #expect(Format.json(reading(0, 1.570875, -3e-7, kind: .gyroscope, t: 1))
            == #"{"sensor":"gyroscope","device":"iio:device0","timestamp":1.0,"x":0.0,"y":1.570875,"z":-3e-07}"#)
    }

    @Test("Numbers in JSON round-trip exactly", arguments: [
        -0.9999951053621777, 0.1, 1.0 / 3.0, 9.80665, .leastNonzeroMagnitude, 1.7976931348623157e308, 1e16, -2.5e-8, 0, 123456.789012345,
    ])
    func roundTrip(value: Double) throws {
        let line = Format.json(reading(value, value, value, t: value))
        // Valid JSON…
        #expect(try JSONSerialization.jsonObject(with: Data(line.utf8)) is [String: Any])
        // …whose numbers parse back to the same Double. (Not checked through JSONSerialization: on
        // Linux, Foundation's parser is off by an ulp on some values, e.g. -0.9999951053621777.)
        for key in ["timestamp", "x", "y", "z"] {
            let text = try #require(Self.field(key, in: line))
            #expect(Double(text) == value, "\(key) \(text)")
        }
    }

    @Test("Random values round-trip through the JSON text")
    func randomRoundTrip() throws {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<1000 {
            let v = Double(bitPattern: rng.next())
            guard v.isFinite else { continue }
            let text = try #require(Self.field("x", in: Format.json(reading(v, 0, 0))))
            #expect(Double(text) == v)
        }
    }

    @Test("JSON cannot carry infinity or NaN: they become null")
    func nonFinite() {
        #expect(JSONValue.number(.infinity).text == "null")
        #expect(JSONValue.number(.nan).text == "null")
    }

    @Test("JSON strings are escaped")
    func escaping() {
        #expect(JSONValue.string("a\"b\\c\nd\u{1}é").text == #""a\"b\\c\nd\u0001é""#)
        #expect(JSONValue.object([("k", .null), ("b", .bool(false))]).text == #"{"k":null,"b":false}"#)
    }

    @Test("--list --json: one object per device, pinned keys first, label null when absent")
    func listJSON() throws {
        let m = try MountMatrix(parsing: "0, 1, 0; -1, 0, 0; 0, 0, 1")
        let devices = [
            device("iio:device0", name: "bmi160", trigger: "bmi160-dev0", [
                sensorInfo(.accelerometer, "iio:device0", name: "bmi160", frequency: 100, matrix: m, source: .udev(property: "ACCEL_MOUNT_MATRIX")),
                sensorInfo(.gyroscope, "iio:device0", name: "bmi160", frequency: 12.5, matrix: m, source: .sysfs(file: "in_mount_matrix")),
            ]),
            device("iio:device1", name: "cros-ec-accel", label: "accel-base", buffered: false, [
                sensorInfo(.accelerometer, "iio:device1", name: "cros-ec-accel", label: "accel-base"),
            ]),
        ]
        let text = Format.json(devices)
        #expect(text == "["
            + #"{"id":"iio:device0","name":"bmi160","label":null,"location":null,"sensors":["accelerometer","gyroscope"],"#
            + #""buffered":true,"trigger":"bmi160-dev0","sampling_frequency":{"accelerometer":100.0,"gyroscope":12.5},"#
            + #""mount_matrix":{"accelerometer":[[0.0,1.0,0.0],[-1.0,0.0,0.0],[0.0,0.0,1.0]],"gyroscope":[[0.0,1.0,0.0],[-1.0,0.0,0.0],[0.0,0.0,1.0]]},"#
            + #""mount_matrix_source":{"accelerometer":"udev:ACCEL_MOUNT_MATRIX","gyroscope":"kernel:in_mount_matrix"}},"#
            + #"{"id":"iio:device1","name":"cros-ec-accel","label":"accel-base","location":null,"sensors":["accelerometer"],"#
            + #""buffered":false,"trigger":null,"sampling_frequency":{"accelerometer":null},"#
            + #""mount_matrix":{"accelerometer":[[1.0,0.0,0.0],[0.0,1.0,0.0],[0.0,0.0,1.0]]},"#
            + #""mount_matrix_source":{"accelerometer":"identity"}}"#
            + "]")
        #expect(try JSONSerialization.jsonObject(with: Data(text.utf8)) is [[String: Any]])
        #expect(Format.json([DeviceInfo]()) == "[]")
    }

    @Test("--list: a padded table with a header")
    func table() {
        let devices = [
            device("iio:device0", name: "cros-ec-accel", label: "accel-base", [
                sensorInfo(.accelerometer, "iio:device0", name: "cros-ec-accel", label: "accel-base", frequency: 0),
            ]),
            device("iio:device1", name: "bmi160", trigger: "bmi160-dev0", [
                sensorInfo(.accelerometer, "iio:device1", name: "bmi160", frequency: 100, source: .udev(property: "ACCEL_MOUNT_MATRIX")),
                sensorInfo(.gyroscope, "iio:device1", name: "bmi160", frequency: 12.5, source: .udev(property: "ACCEL_MOUNT_MATRIX")),
            ]),
            device("iio:device2", name: "fxos8700", [
                sensorInfo(.accelerometer, "iio:device2", name: "fxos8700", source: .sysfs(file: "in_accel_mount_matrix")),
                sensorInfo(.magnetometer, "iio:device2", name: "fxos8700"),
            ]),
        ]
        #expect(Format.table(devices) == """
            DEVICE       NAME           LABEL       SENSORS                     BUFFERED  SAMPLING         TRIGGER      MATRIX
            iio:device0  cros-ec-accel  accel-base  accelerometer               yes       0 Hz             -            identity
            iio:device1  bmi160         -           accelerometer,gyroscope     yes       100 Hz, 12.5 Hz  bmi160-dev0  udev hwdb
            iio:device2  fxos8700       -           accelerometer,magnetometer  yes       -                -            accelerometer=kernel,magnetometer=identity
            """)
    }

    @Test("--list and --list --json: udev's ACCEL_LOCATION of a device, only where udev gives one")
    func listLocation() throws {
        var display = sensorInfo(.accelerometer, "iio:device0", name: "bmi160")
        display.udevLocation = "display"
        var gyro = sensorInfo(.gyroscope, "iio:device0", name: "bmi160")
        gyro.udevLocation = "display"
        var base = sensorInfo(.accelerometer, "iio:device2", name: "bma255")
        base.udevLocation = "base"
        let devices = [
            device("iio:device0", name: "bmi160", [display, gyro]),
            device("iio:device1", name: "mxc4005", [sensorInfo(.accelerometer, "iio:device1", name: "mxc4005")]),
            device("iio:device2", name: "bma255", [base]),
        ]
        let lines = Format.table(devices).split(separator: "\n").map(String.init)
        #expect(lines.count == 6, "\(lines)")
        #expect(Array(lines.suffix(2)) == [
            "location of iio:device0 (bmi160): display (udev hwdb ACCEL_LOCATION)",
            "location of iio:device2 (bma255): base (udev hwdb ACCEL_LOCATION)",
        ])
        #expect(lines[1].hasPrefix("iio:device0") && lines[2].hasPrefix("iio:device1") && lines[3].hasPrefix("iio:device2"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(Format.json(devices).utf8)) as? [[String: Any]])
        #expect(json.map { $0["udev_location"] as? String } == ["display", nil, "base"])
        #expect(json[1].keys.contains("udev_location") == false)
        // Without udev's location the table is the table alone.
        let plain = [device("iio:device1", name: "mxc4005", [sensorInfo(.accelerometer, "iio:device1", name: "mxc4005")])]
        #expect(!Format.table(plain).contains("location") && !Format.json(plain).contains("udev_location"))
    }

    @Test("-v and notes: the matrix in force, where it came from, a rejected udev matrix, no udev")
    func mountMatrixText() throws {
        let m = try MountMatrix(parsing: "0, 1, 0; -1, 0, 0; 0, 0, 1")
        var udev = sensorInfo(.accelerometer, "iio:device6", name: "bma255", matrix: m, source: .udev(property: "ACCEL_MOUNT_MATRIX"))
        #expect(MountMatrixText.verboseLine(udev)
            == "accelerometer: mount matrix 0, 1, 0; -1, 0, 0; 0, 0, 1 from udev hwdb (ACCEL_MOUNT_MATRIX)")
        var kernel = sensorInfo(.gyroscope, "iio:device0", name: "bmi160", source: .sysfs(file: "in_anglvel_mount_matrix"))
        kernel.udevUnavailable = "a remote (ip:) context has no udev"
        #expect(MountMatrixText.verboseLine(kernel)
            == "gyroscope: mount matrix 1, 0, 0; 0, 1, 0; 0, 0, 1 from the kernel (in_anglvel_mount_matrix); udev not asked: a remote (ip:) context has no udev")
        #expect(MountMatrixText.verboseLine(sensorInfo(.accelerometer, "d", name: nil, source: .override))
            .hasSuffix("from the caller (mountMatrixOverrides)"))
        udev.rejectedUdevMountMatrix = "udev's ACCEL_MOUNT_MATRIX of iio:device6 (bma255) is not used: x; the kernel's mount matrix is used instead"
        var gyro = udev
        gyro.kind = .gyroscope
        #expect(MountMatrixText.notes([udev, gyro, kernel], sayNoUdev: false)
            == ["note: udev's ACCEL_MOUNT_MATRIX of iio:device6 (bma255) is not used: x; the kernel's mount matrix is used instead."])
        #expect(MountMatrixText.notes([kernel], sayNoUdev: true)
            == ["note: udev was not asked for mount matrices (a remote (ip:) context has no udev): they are the kernel's."])
        #expect(MountMatrixText.notes([kernel], sayNoUdev: false).isEmpty)
    }

    @Test("Readable lines: fixed decimals with a sign, the unit, the device")
    func lines() {
        #expect(Format.line(reading(0, -0.0, -0.99999), units: .coreMotion)
            == "accelerometer  iio:device0 (bmi160)  x +0.0000  y +0.0000  z -1.0000 g  at 812.250000 s")
        #expect(Format.line(reading(0, 0, 1.23456), units: .si).hasSuffix("z +1.2346 m/s²  at 812.250000 s"))
        #expect(Format.line(reading(1, 0, 0, kind: .gyroscope), units: .si).contains("x +1.0000  y +0.0000  z +0.0000 rad/s"))
    }

    @Test("Human numbers")
    func numbers() {
        #expect(Format.shortest(100) == "100")
        #expect(Format.shortest(12.5) == "12.5")
        #expect(Format.fixed(-1.23456, 3) == "-1.235")
        #expect(Format.fixed(2, 1, sign: true) == "+2.0")
    }

    /// The text of `"key":VALUE` in a one-line JSON object.
    static func field(_ key: String, in line: String) -> String? {
        guard let r = line.range(of: "\"\(key)\":") else { return nil }
        return String(line[r.upperBound...].prefix { $0 != "," && $0 != "}" })
    }
}

@Suite("Byte-level number formatting matches the String forms", .timeLimit(.minutes(3)))
struct ByteFormattingTests {
    /// Values of every magnitude and sign, from a fixed seed; plus the edges.
    static func values() -> [Double] {
        var g = SystemRandomNumberGenerator.Seeded(seed: 0x5EED)
        var out: [Double] = [0, -0.0, 1, -1, 0.5, -0.5, 0.00005, -0.00005, 0.000049999, 1.5e-7, 2.5, 3.5, 0.125, 0.0625,
                             9.99995, 99999.99995, 0x1p52 - 1, 0x1p52, 0x1p53, 1e20, -1e22, .leastNonzeroMagnitude,
                             .leastNormalMagnitude, .greatestFiniteMagnitude / 1e250, 6286.3339975, 6286.3339965, -0.9999951053621777]
        for _ in 0..<20_000 {
            let bits = g.next()
            let d = Double(bitPattern: bits)
            if d.isFinite { out.append(d) }
            // Everyday magnitudes, where the rounding of the last printed digit matters.
            let e = Double(g.next() % 24) - 12
            out.append((Double(g.next() % 2_000_001) - 1_000_000) / 1_000_000 * pow(10, e))
            out.append(Double(g.next() % 1_000_000) / 10_000 + 0.00005) // near ties at 4 decimals
        }
        return out
    }

    @Test("fixed(_:_:sign:) is printf's %.*f")
    func fixedIsPrintf() {
        for d in Self.values() {
            for digits in [0, 1, 4, 6, 9] {
                for sign in [false, true] {
                    let fast = Format.fixed(d, digits, sign: sign), slow = Format.fixedPrintf(d, digits, sign: sign)
                    if fast != slow { Issue.record("\(d) \(digits) \(sign): \(fast) != \(slow)"); return }
                }
            }
        }
    }

    @Test("CSV rows: values are Double.description, timestamps whole nanoseconds")
    func csvRowsAreTheStringForms() {
        let values = Self.values()
        var out = CSVBytes(capacity: 16)
        defer { out.free() }
        let labels = CSVFormat.labels(sensor: .gyroscope, device: "iio:device3")
        var expected = ""
        for (i, v) in values.enumerated() {
            let t = [1.0, 6286.333997, 0.000000001, 8999999999.999999, 1e10, -2.25, .infinity][i % 7] + (i % 7 < 4 ? Double(i) * 1e-9 : 0)
            let s = GyroData(timestamp: t, rotationRate: RotationRate(x: v, y: -v, z: i % 3 == 0 ? .nan : v * 3))
            CSVFormat.appendRow(s, labels: labels, to: &out)
            func text(_ d: Double) -> String { d.isFinite ? d.description : "null" }
            let ts: String
            if t.isFinite, abs(t) < 9e9 {
                let ns = Int64((abs(t) * 1e9).rounded())
                let f = String(ns % 1_000_000_000)
                ts = (t < 0 && ns != 0 ? "-" : "") + "\(ns / 1_000_000_000)." + String(repeating: "0", count: 9 - f.count) + f
            } else {
                ts = t.isFinite ? t.description : "nan"
            }
            expected += "\(ts),gyroscope,iio:device3,\(text(s.rotationRate.x)),\(text(s.rotationRate.y)),\(text(s.rotationRate.z))\n"
        }
        #expect(out.string == expected)
    }
}

private extension SystemRandomNumberGenerator {
    /// splitmix64: reproducible.
    struct Seeded: RandomNumberGenerator {
        var seed: UInt64
        mutating func next() -> UInt64 {
            seed &+= 0x9E37_79B9_7F4A_7C15
            var z = seed
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1330_11EB
            return z ^ (z >> 31)
        }
    }
}
