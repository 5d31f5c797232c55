internal import Glibc

/// A calibration of an accelerometer or a gyroscope: what the library does to each reading
/// before the mount matrix and the unit conversion.
///
/// In the sensor's own axes (the chip's, before the mount matrix, so a calibration stays right
/// when the mount matrix is corrected) and the kernel's SI units (m/s² for acceleration with the
/// kernel's sign, rad/s for rotation), a reading `v = (raw + offset) · scale` becomes
///
/// ```
/// v′ = matrix · (v − bias)
/// ```
///
/// For an accelerometer `bias` is the offset (what it reads in free fall) and `matrix` undoes
/// each axis's scale error and the axes' misalignment (cross-axis sensitivity); for a gyroscope
/// `bias` is the rate it reads at rest and `matrix` is usually the identity.
///
/// `motion-monitor calibrate` measures one and stores it per device; ``MotionManager`` applies
/// the stored one to every reading by default (see ``MotionManager/CalibrationChoice``).
///
/// ```swift
/// var c = SensorCalibration(kind: .accelerometer, bias: AxisValues(x: 0.49, y: -0.2, z: 0.1))
/// let manager = MotionManager(calibration: .supplied([.accelerometer: c]))
/// manager.sensor(.accelerometer)?.calibration   // c
/// ```
public struct SensorCalibration: Sendable, Hashable {
    /// The sensor calibrated: ``SensorKind/accelerometer`` or ``SensorKind/gyroscope``.
    public var kind: SensorKind
    /// Subtracted from each reading, in the sensor's axes: m/s² (accelerometer) or rad/s (gyroscope).
    public var bias: AxisValues
    /// Applied after the bias, row by row (3×3), in the sensor's axes.
    public var matrix: [[Double]]
    /// When the calibration was made, seconds since 1970-01-01 UTC.
    public var created: Double
    /// The fit's root-mean-square residual, m/s² (accelerometer; nil when not measured): how far
    /// the calibrated readings of the faces were from ±1 g along their axes.
    public var residual: Double?
    /// The largest standard deviation of the sensor's readings while it was being measured, in
    /// its units (nil when not measured): how still it was.
    public var stillness: Double?
    /// The identity of the device it was made on (see ``SensorCalibration/identity(of:uri:)``).
    public var device: String?
    /// The part of the offset the driver's calibbias registers took (nil when none did): `bias`
    /// is then only what they did not. A stored calibration is applied with its bias adjusted to
    /// what the registers hold (they return to the chip's factory values at power-up).
    public var kernel: KernelOffsets?

    /// A calibration.
    /// - Parameters:
    ///   - kind: the sensor.
    ///   - bias: subtracted from each reading (sensor axes, SI units).
    ///   - matrix: applied after the bias; the identity by default.
    ///   - created: when it was made (default: now).
    public init(kind: SensorKind, bias: AxisValues, matrix: [[Double]] = [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
                created: Double? = nil) {
        self.kind = kind
        self.bias = bias
        self.matrix = matrix
        self.created = created ?? Self.now()
    }

    /// The reading `v` (sensor axes, SI units) calibrated: `matrix · (v − bias)`.
    /// - Parameter v: an uncalibrated reading.
    /// - Returns: the calibrated reading.
    public func apply(_ v: (x: Double, y: Double, z: Double)) -> (x: Double, y: Double, z: Double) {
        let d = (v.x - bias.x, v.y - bias.y, v.z - bias.z)
        let m = matrix
        return (m[0][0] * d.0 + m[0][1] * d.1 + m[0][2] * d.2,
                m[1][0] * d.0 + m[1][1] * d.1 + m[1][2] * d.2,
                m[2][0] * d.0 + m[2][1] * d.1 + m[2][2] * d.2)
    }

    /// Each axis's gain as the sensor has it (the diagonal of `matrix`'s inverse): 1.002 reads
    /// 0.2 % too much. Nil when `matrix` cannot be inverted.
    public var scale: AxisValues? {
        guard let inv = Self.inverse(matrix) else { return nil }
        return AxisValues(x: inv[0][0], y: inv[1][1], z: inv[2][2])
    }

    /// `created` as `2026-12-06 05:12:40 UTC`.
    public var createdDescription: String {
        var t = time_t(created.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) UTC"
    }

    /// Whether every value is finite, the kind is one this applies to, and `matrix` is 3×3 and
    /// invertible; the reason when not.
    public var problem: String? {
        guard kind != .magnetometer else { return "a magnetometer is calibrated by device motion, not by a SensorCalibration" }
        guard matrix.count == 3, matrix.allSatisfy({ $0.count == 3 }) else { return "its matrix is not 3×3" }
        guard ([bias.x, bias.y, bias.z] + matrix.flatMap { $0 }).allSatisfy(\.isFinite) else { return "a value is not finite" }
        guard let det = Self.determinant(matrix), abs(det) > 1e-6 else { return "its matrix cannot be inverted" }
        return nil
    }

    // MARK: Text

    /// The file format's first line.
    static let header = "# IIOMotion sensor calibration"

    /// The calibration as the text of its file (a line per value, `key value…`).
    public var text: String {
        var lines = [Self.header, "version 1", "kind \(kind.rawValue)"]
        if let device { lines.append("device \(device)") }
        lines.append("created \(Self.number(created)) (\(createdDescription))")
        lines.append("bias \(Self.number(bias.x)) \(Self.number(bias.y)) \(Self.number(bias.z))")
        lines.append("matrix " + matrix.flatMap { $0 }.map(Self.number).joined(separator: " "))
        if let residual { lines.append("residual \(Self.number(residual))") }
        if let stillness { lines.append("stillness \(Self.number(stillness))") }
        if let kernel {
            lines.append("kernel-files " + kernel.files.joined(separator: " "))
            lines.append("kernel-original " + kernel.original.map(String.init).joined(separator: " "))
            lines.append("kernel-written " + kernel.written.map(String.init).joined(separator: " "))
            lines.append("kernel-unit \(Self.number(kernel.unit))")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Reads ``text``.
    /// - Parameter text: a calibration file's contents.
    /// - Throws: ``MotionError`` (``MotionError/Code/invalidAttribute``) naming the line at fault.
    public init(parsing text: String) throws(MotionError) {
        func bad(_ why: String) -> MotionError {
            MotionError(code: .invalidAttribute, detail: "not a sensor calibration: \(why)")
        }
        var kind: SensorKind?
        var bias: [Double]?
        var matrix: [Double]?
        var created: Double?
        var values: (device: String?, residual: Double?, stillness: Double?) = (nil, nil, nil)
        var version: String?
        var kernel: (files: [String]?, original: [Double]?, written: [Double]?, unit: Double?) = (nil, nil, nil, nil)
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = raw.trimmingWhitespace
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(separator: " ", maxSplits: 1)
            let key = String(parts[0]), rest = parts.count > 1 ? String(parts[1]) : ""
            let numbers = rest.split(separator: " ").map { Double($0) }
            func numbersOnly(_ n: Int) throws(MotionError) -> [Double] {
                let found = numbers.compactMap { $0 }
                guard numbers.count == n, found.count == n else { throw bad("\"\(key)\" needs \(n) numbers, the line is \"\(line)\"") }
                return found
            }
            switch key {
            case "version": version = rest
            case "kind":
                guard let k = SensorKind(rawValue: rest), k != .magnetometer else { throw bad("unknown kind \"\(rest)\"") }
                kind = k
            case "device": values.device = rest
            case "created":
                guard let first = rest.split(separator: " ").first, let t = Double(first), t.isFinite else {
                    throw bad("\"created\" needs a time, the line is \"\(line)\"")
                }
                created = t
            case "bias": bias = try numbersOnly(3)
            case "matrix": matrix = try numbersOnly(9)
            case "residual": values.residual = try numbersOnly(1)[0]
            case "stillness": values.stillness = try numbersOnly(1)[0]
            case "kernel-files":
                let files = rest.split(separator: " ").map(String.init)
                guard files.count == 3 else { throw bad("\"kernel-files\" needs 3 file names, the line is \"\(line)\"") }
                kernel.files = files
            case "kernel-original": kernel.original = try numbersOnly(3)
            case "kernel-written": kernel.written = try numbersOnly(3)
            case "kernel-unit": kernel.unit = try numbersOnly(1)[0]
            default: break  // later versions may add lines
            }
        }
        guard version == "1" else { throw bad(version.map { "version \($0) is not one this library reads" } ?? "no version line") }
        guard let kind else { throw bad("no kind line") }
        guard let bias else { throw bad("no bias line") }
        guard let matrix else { throw bad("no matrix line") }
        self.init(kind: kind, bias: AxisValues(x: bias[0], y: bias[1], z: bias[2]),
                  matrix: [Array(matrix[0..<3]), Array(matrix[3..<6]), Array(matrix[6..<9])], created: created ?? 0)
        device = values.device
        residual = values.residual
        stillness = values.stillness
        switch kernel {
        case (nil, nil, nil, nil): break
        case let (files?, original?, written?, unit?):
            guard (original + written).allSatisfy({ $0 == $0.rounded() && abs($0) < 1e9 }), unit.isFinite, unit > 0 else {
                throw bad("the kernel-original, kernel-written and kernel-unit lines need whole counts and a positive unit")
            }
            self.kernel = KernelOffsets(files: files, original: original.map { Int($0) }, written: written.map { Int($0) }, unit: unit)
        default:
            throw bad("kernel-files, kernel-original, kernel-written and kernel-unit go together; one is missing")
        }
        if let problem { throw bad(problem) }
    }

    // MARK: Helpers

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
    }

    /// The shortest text that reads back as the same `Double`.
    static func number(_ v: Double) -> String {
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return "\(v)"
    }

    static func determinant(_ m: [[Double]]) -> Double? {
        guard m.count == 3, m.allSatisfy({ $0.count == 3 }) else { return nil }
        return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    }

    /// The inverse of a 3×3 matrix, nil when it has none.
    package static func inverse(_ m: [[Double]]) -> [[Double]]? {
        guard let det = determinant(m), det != 0, det.isFinite else { return nil }
        func c(_ r0: Int, _ c0: Int, _ r1: Int, _ c1: Int) -> Double { m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0] }
        return [[c(1, 1, 2, 2) / det, -c(0, 1, 2, 2) / det, c(0, 1, 1, 2) / det],
                [-c(1, 0, 2, 2) / det, c(0, 0, 2, 2) / det, -c(0, 0, 1, 2) / det],
                [c(1, 0, 2, 1) / det, -c(0, 0, 2, 1) / det, c(0, 0, 1, 1) / det]]
    }
}
