/// A sensor's mount matrix: the 3×3 rotation that turns the chip's axes into the device's axes.
///
/// The kernel publishes it in `in_accel_mount_matrix`, `in_anglvel_mount_matrix`, `mount_matrix`
/// or `in_mount_matrix` as `"a, b, c; d, e, f; g, h, i"` (rows separated by `;`). It is applied
/// as a matrix–vector product, `out = M · v`, i.e. `out[i] = Σ_j m[i][j] · v[j]`, as
/// iio-sensor-proxy's code does.
///
/// ```swift
/// let m = try MountMatrix(parsing: "0, 1, 0; 1, 0, 0; 0, 0, -1")
/// let v = m.apply((x: 1, y: 2, z: 3))   // (x: 2, y: 1, z: -3)
/// ```
public struct MountMatrix: Sendable, Hashable, CustomStringConvertible {
    /// The rows, each `[m[i][0], m[i][1], m[i][2]]`.
    public let rows: [[Double]]

    /// Where a sensor's mount matrix came from.
    public enum Source: Sendable, Hashable, CustomStringConvertible {
        /// Read from this sysfs file of the device, e.g. `"in_accel_mount_matrix"`.
        case sysfs(file: String)
        /// Given by the caller (``MotionManager/init(uri:units:accelerometer:gyroscope:magnetometer:mountMatrixOverrides:)``).
        case override
        /// The device publishes none; the identity is used.
        case identity
        /// Given by udev for the device: a property systemd's hardware database sets
        /// (`/lib/udev/hwdb.d/60-sensor.hwdb`, local entries in `/etc/udev/hwdb.d/`), e.g.
        /// `"ACCEL_MOUNT_MATRIX"`. It replaces the kernel's matrix, as in iio-sensor-proxy.
        case udev(property: String)

        /// A short phrase such as `in_accel_mount_matrix`, `caller override`, `identity (none published)`,
        /// `udev hwdb ACCEL_MOUNT_MATRIX`.
        public var description: String {
            switch self {
            case .sysfs(let file): file
            case .override: "caller override"
            case .identity: "identity (none published)"
            case .udev(let property): "udev hwdb \(property)"
            }
        }
    }

    /// The identity matrix (what the kernel reports when no matrix is provided).
    public static let identity = MountMatrix(uncheckedRows: [[1, 0, 0], [0, 1, 0], [0, 0, 1]])

    /// The largest magnitude a value may have (see ``init(rows:)``).
    static let valueLimit = 1e100

    private init(uncheckedRows rows: [[Double]]) {
        self.rows = rows
    }

    /// Creates a matrix from three rows of three values.
    /// - Parameter rows: the rows, top to bottom.
    /// - Throws: ``MotionError`` with code ``MotionError/Code/invalidAttribute`` if the shape is not
    ///   3×3, a value is not finite or larger than 1e100 in magnitude, or a row is all zeros.
    public init(rows: [[Double]]) throws(MotionError) {
        guard rows.count == 3, rows.allSatisfy({ $0.count == 3 }) else {
            throw MotionError(code: .invalidAttribute, detail: "a mount matrix needs 3 rows of 3 values")
        }
        guard rows.allSatisfy({ $0.allSatisfy(\.isFinite) }) else {
            throw MotionError(code: .invalidAttribute, detail: "a mount matrix value is not finite")
        }
        // A rotation's values are within ±1; far larger ones would overflow readings to inf.
        guard rows.allSatisfy({ $0.allSatisfy { abs($0) <= Self.valueLimit } }) else {
            throw MotionError(code: .invalidAttribute, detail: "a mount matrix value is larger than 1e100")
        }
        if let zero = rows.firstIndex(where: { $0.allSatisfy { $0 == 0 } }) {
            throw MotionError(code: .invalidAttribute, detail: "row \(zero + 1) of the mount matrix is all zeros")
        }
        self.rows = rows
    }

    /// Parses the kernel's text form `"a, b, c; d, e, f; g, h, i"`. Whitespace (and libiio's
    /// trailing NUL) around values is ignored.
    /// - Parameter text: the file's contents.
    /// - Throws: ``MotionError`` with code ``MotionError/Code/invalidAttribute`` if the text is not
    ///   three `;`-separated rows of three `,`-separated decimal numbers, or a row is all zeros.
    public init(parsing text: String) throws(MotionError) {
        let body = AttributeText.trimmed(text)
        let rowTexts = body.split(separator: ";", omittingEmptySubsequences: false)
        guard rowTexts.count == 3 else {
            throw MotionError(code: .invalidAttribute, detail: "\"\(body)\" is not a mount matrix (expected \"a, b, c; d, e, f; g, h, i\")")
        }
        var rows: [[Double]] = []
        for rowText in rowTexts {
            let cells = rowText.split(separator: ",", omittingEmptySubsequences: false)
            guard cells.count == 3 else {
                throw MotionError(code: .invalidAttribute, detail: "\"\(body)\" is not a mount matrix (expected \"a, b, c; d, e, f; g, h, i\")")
            }
            var row: [Double] = []
            for cell in cells {
                guard let v = AttributeText.decimal(AttributeText.trimmed(String(cell))) else {
                    throw MotionError(code: .invalidAttribute, detail: "\"\(body)\" is not a mount matrix (\"\(cell.trimmingWhitespace)\" is not a number)")
                }
                row.append(v)
            }
            rows.append(row)
        }
        try self.init(rows: rows)
    }

    /// Applies the matrix: returns `M · v`.
    /// - Parameter v: a vector in the chip's axes.
    /// - Returns: the vector in the device's axes.
    public func apply(_ v: (x: Double, y: Double, z: Double)) -> (x: Double, y: Double, z: Double) {
        let r = rows
        return (
            x: r[0][0] * v.x + r[0][1] * v.y + r[0][2] * v.z,
            y: r[1][0] * v.x + r[1][1] * v.y + r[1][2] * v.z,
            z: r[2][0] * v.x + r[2][1] * v.y + r[2][2] * v.z
        )
    }

    /// True for the identity matrix.
    public var isIdentity: Bool { self == .identity }

    /// The kernel's text form, e.g. `"1, 0, 0; 0, 1, 0; 0, 0, 1"`.
    public var description: String {
        rows.map { row in row.map { Self.format($0) }.joined(separator: ", ") }.joined(separator: "; ")
    }

    private static func format(_ v: Double) -> String {
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }
}

extension Substring {
    var trimmingWhitespace: Substring { AttributeText.trimmed(String(self)) }
}
