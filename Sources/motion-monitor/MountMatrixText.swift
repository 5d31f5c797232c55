import IIOMotion

/// How motion-monitor says which mount matrix is in force and where it came from: the kernel, udev's
/// hardware database, the caller (a library user's override), or none (the identity).
enum MountMatrixText {
    /// The short origin for the `--list` table: `kernel`, `udev hwdb`, `caller`, `identity`.
    static func origin(_ source: MountMatrix.Source) -> String {
        switch source {
        case .sysfs: "kernel"
        case .udev: "udev hwdb"
        case .override: "caller"
        case .identity: "identity"
        }
    }

    /// The origin for `--list --json`: `kernel:in_accel_mount_matrix`, `udev:ACCEL_MOUNT_MATRIX`,
    /// `caller`, `identity`.
    static func key(_ source: MountMatrix.Source) -> String {
        switch source {
        case .sysfs(let file): "kernel:\(file)"
        case .udev(let property): "udev:\(property)"
        case .override: "caller"
        case .identity: "identity"
        }
    }

    /// The `--list` table's cell of a device: one origin when its sensors share it, else each
    /// sensor's (`accelerometer=udev hwdb,gyroscope=kernel`).
    static func cell(_ sensors: [SensorInfo]) -> String {
        let origins = sensors.map { origin($0.mountMatrixSource) }
        guard let first = origins.first else { return "-" }
        if origins.allSatisfy({ $0 == first }) { return first }
        return zip(sensors, origins).map { "\($0.kind.rawValue)=\($1)" }.joined(separator: ",")
    }

    /// The `--verbose` line of a sensor, e.g.
    /// `accelerometer: mount matrix 0, 1, 0; 1, 0, 0; 0, 0, 1 from udev hwdb (ACCEL_MOUNT_MATRIX)`.
    static func verboseLine(_ sensor: SensorInfo) -> String {
        let from = switch sensor.mountMatrixSource {
        case .sysfs(let file): "the kernel (\(file))"
        case .udev(let property): "udev hwdb (\(property))"
        case .override: "the caller (mountMatrixOverrides)"
        case .identity: "nowhere: the identity (neither the kernel nor udev gives one)"
        }
        var line = "\(sensor.kind): mount matrix \(sensor.mountMatrix) from \(from)"
        if let reason = sensor.udevUnavailable { line += "; udev not asked: \(reason)" }
        return line
    }

    /// Notes for stderr on the sensors' matrices: each udev matrix that was rejected (always, once
    /// per device), and, when `sayNoUdev`, that udev could not be asked (once).
    static func notes(_ sensors: [SensorInfo], sayNoUdev: Bool) -> [String] {
        var lines: [String] = []
        var seen = Set<String>()
        for s in sensors {
            if let rejected = s.rejectedUdevMountMatrix, seen.insert(rejected).inserted {
                lines.append("note: \(rejected).")
            }
        }
        if sayNoUdev, let reason = sensors.lazy.compactMap(\.udevUnavailable).first {
            lines.append("note: udev was not asked for mount matrices (\(reason)): they are the kernel's.")
        }
        return lines
    }
}
