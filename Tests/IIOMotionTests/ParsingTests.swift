import Testing
@testable import IIOMotion
@testable import IIOMotionCore

@Suite("Strict attribute parsing", .timeLimit(.minutes(3)))
struct ParsingTests {
    @Test("Scale values the kernel prints", arguments: [
        ("0.000598", 0.000598),
        ("0.098066500", 0.0980665),
        ("-1", -1.0),
        ("+2.5", 2.5),
        ("1e-3", 0.001),
        ("0.000598\n", 0.000598),
        ("0.000598\0", 0.000598),
        ("  0.001065264 \n\0", 0.001065264),
        ("9.80665", 9.80665),
        ("100.000000", 100.0),
        (".5", 0.5),
        ("5.", 5.0),
    ])
    func decimals(text: String, expected: Double) throws {
        let v = try #require(AttributeText.decimal(text))
        #expect(v == expected)
    }

    @Test("Garbage is rejected, never read as 0", arguments: [
        "", "\n", "\0", "abc", "0x10", "nan", "inf", "-inf", "1,5", "0.5abc", "1 2", "--1",
        "+", ".", "e5", "1e", "1e+", "0.000598 m/s^2",
    ])
    func decimalGarbage(text: String) {
        #expect(AttributeText.decimal(text) == nil)
    }

    @Test("Raw values are strict decimal integers", arguments: [
        ("16384", Int64(16384)), ("-12", -12), ("+7", 7), ("0\n", 0), ("-32768\0", -32768),
        ("9223372036854775807", Int64.max), ("-9223372036854775808", Int64.min),
    ])
    func integers(text: String, expected: Int64) throws {
        #expect(try #require(AttributeText.integer(text)) == expected)
    }

    @Test("Integer garbage, octal/hex and overflow are rejected", arguments: [
        "", "0x10", "1.5", "12abc", "abc", "9223372036854775808", "- 1", "1e3",
    ])
    func integerGarbage(text: String) {
        #expect(AttributeText.integer(text) == nil)
    }

    @Test("A leading zero is decimal, not octal (strtoll base 0 would read 010 as 8)")
    func noOctal() {
        #expect(AttributeText.integer("010") == 10)
    }
}

@Suite("Mount matrix", .timeLimit(.minutes(3)))
struct MountMatrixTests {
    @Test func parsesKernelFormat() throws {
        let m = try MountMatrix(parsing: "0, 1, 0; 1, 0, 0; 0, 0, -1\n")
        #expect(m.rows == [[0, 1, 0], [1, 0, 0], [0, 0, -1]])
        #expect(m.description == "0, 1, 0; 1, 0, 0; 0, 0, -1")
    }

    @Test func parsesFractionsAndTightSpacing() throws {
        let m = try MountMatrix(parsing: "0.7071,-0.7071,0;0.7071,0.7071,0;0,0,1\0")
        #expect(m.rows[0] == [0.7071, -0.7071, 0])
    }

    @Test func identityIsDefault() throws {
        #expect(try MountMatrix(parsing: "1, 0, 0; 0, 1, 0; 0, 0, 1").isIdentity)
        #expect(MountMatrix.identity.apply((x: 1, y: 2, z: 3)) == (x: 1, y: 2, z: 3))
    }

    @Test("Applied as M·v (rows dot the vector), as iio-sensor-proxy's code does")
    func appliesAsMatrixTimesVector() throws {
        // Not symmetric, so M·v and v·M differ.
        let m = try MountMatrix(parsing: "0, -1, 0; 1, 0, 0; 0, 0, 1")
        let out = m.apply((x: 1, y: 2, z: 3))
        #expect(out.x == -2 && out.y == 1 && out.z == 3)
    }

    @Test("Invalid matrices are rejected", arguments: [
        "1, 0, 0; 0, 1, 0",
        "1, 0; 0, 1; 0, 0",
        "1, 0, 0; 0, 0, 0; 0, 0, 1",
        "1, 0, 0, 0, 1, 0, 0, 0, 1",          // old inv_mpu6050 in_gyro_matrix format
        "a, b, c; d, e, f; g, h, i",
        "",
    ])
    func rejects(text: String) {
        #expect(throws: MotionError.self) { try MountMatrix(parsing: text) }
    }

    @Test func zeroRowMessage() {
        do {
            _ = try MountMatrix(parsing: "1, 0, 0; 0, 0, 0; 0, 0, 1")
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidAttribute)
            #expect(error.description == "Row 2 of the mount matrix is all zeros.")
        }
    }
}

@Suite("Sampling frequencies", .timeLimit(.minutes(3)))
struct SamplingFrequencyTests {
    @Test func discreteList() throws {
        let f = try #require(SamplingFrequencies(parsing: "12.500 26.000 52.000 104.000 208.000 416.000\n"))
        #expect(f == .discrete([12.5, 26, 52, 104, 208, 416]))
        #expect(f.contains(104) && !f.contains(100))
        #expect(f.minimum == 12.5 && f.maximum == 416)
    }

    @Test func bracketRange() throws {
        let f = try #require(SamplingFrequencies(parsing: "[0.0 0.002 1.99]"))
        #expect(f == .range(minimum: 0, step: 0.002, maximum: 1.99))
        #expect(f.contains(1.5) && !f.contains(2))
    }

    @Test("cros-ec's `0 min max` is a range when asked")
    func crosEC() throws {
        let f = try #require(SamplingFrequencies(parsing: "0.000000 12.500000 100.000000", zeroMinMaxIsRange: true))
        #expect(f == .range(minimum: 12.5, step: nil, maximum: 100))
        #expect(f.contains(50))
        #expect(f.description == "12.5–100 Hz")
    }

    @Test("Without the cros-ec hint the same text is a plain list")
    func notCrosEC() throws {
        let f = try #require(SamplingFrequencies(parsing: "0 12.5 100"))
        #expect(f == .discrete([0, 12.5, 100]))
    }

    @Test("Other lists are not mistaken for cros-ec ranges")
    func longerListWithZero() throws {
        let f = try #require(SamplingFrequencies(parsing: "0 2 4 6 8", zeroMinMaxIsRange: true))
        #expect(f == .discrete([0, 2, 4, 6, 8]))
    }

    @Test("Garbage is rejected", arguments: ["", "fast", "[1 2]", "[1 2 3", "1 2 x", "[3 1 1]"])
    func garbage(text: String) {
        #expect(SamplingFrequencies(parsing: text) == nil)
    }
}

@Suite("Unit conventions", .timeLimit(.minutes(3)))
struct ConversionTests {
    // A device lying still, face up: the kernel's proper acceleration is +1 g on z.
    let faceUpSI = (x: 0.0, y: 0.0, z: 9.80665)

    @Test("Core Motion convention: face up reads z = −1 g")
    func coreMotionFaceUp() {
        let a = Conversion.acceleration(faceUpSI, units: .coreMotion)
        #expect(abs(a.z - -1.0) < 1e-12)
        #expect(a.x == 0 && a.y == 0)
    }

    @Test("SI convention: face up reads z = +9.80665 m/s²")
    func siFaceUp() {
        let a = Conversion.acceleration(faceUpSI, units: .si)
        #expect(a.z == 9.80665)
    }

    @Test("Full pipeline from raw: bmi160 at ±2 g, (raw + offset)·scale, M·v, convention")
    func fromRaw() throws {
        // bmi160 raw 16400 · 0.000598 ≈ 9.807 m/s² on the chip's z; chip mounted upside down.
        let m = try MountMatrix(parsing: "1, 0, 0; 0, -1, 0; 0, 0, -1")
        let chip = (x: 0.0, y: 0.0, z: (16400.0 + 0) * 0.000598)
        let a = Conversion.acceleration(m.apply(chip), units: .coreMotion)
        #expect(abs(a.z - (16400 * 0.000598 / 9.80665)) < 1e-12) // upside-down chip: device z = −chip z, then Core Motion negates
    }

    @Test("HID sensors: offset is added before scaling")
    func hidOffset() {
        // in_accel_scale 0.098066500 (0.01 g per LSB), offset 2, raw 98 → 100 LSB = 1 g
        let si = (98.0 + 2.0) * 0.0980665
        #expect(abs(si - 9.80665) < 1e-9)
    }

    @Test("Rotation rate keeps IIO's sign in both conventions")
    func gyro() {
        let r = Conversion.rotationRate((x: 0.1, y: -0.2, z: 0.3), units: .coreMotion)
        #expect(r == RotationRate(x: 0.1, y: -0.2, z: 0.3))
        #expect(Conversion.rotationRate((x: 0.1, y: -0.2, z: 0.3), units: .si) == r)
    }

    @Test("Magnetic field: Gauss to µT")
    func magn() {
        #expect(Conversion.magneticField((x: 0.5, y: 0, z: -0.25), units: .coreMotion) == MagneticField(x: 50, y: 0, z: -25))
    }

    @Test("Sensor kind raw values are stable strings")
    func kindRawValues() {
        #expect(SensorKind.accelerometer.rawValue == "accelerometer")
        #expect(SensorKind.gyroscope.rawValue == "gyroscope")
        #expect(SensorKind.magnetometer.rawValue == "magnetometer")
    }
}
