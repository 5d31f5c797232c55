internal import CLibUdev
internal import Glibc
internal import SystemSupport

/// Where discovery finds udev's properties of an IIO device: the properties systemd's hardware
/// database (`/lib/udev/hwdb.d/60-sensor.hwdb`, and local files in `/etc/udev/hwdb.d/`) gives
/// sensors, through `60-sensor.rules`, by the sensor's parent modalias and the machine's DMI data.
///
/// systemd defines these sensor properties (hwdb.d/parse_hwdb.py, 60-sensor.hwdb's header):
/// `ACCEL_MOUNT_MATRIX` (`"x1, y1, z1; x2, y2, z2; x3, y3, z3"`, the IIO mount-matrix text),
/// `ACCEL_LOCATION` (`display` or `base`) and `PROXIMITY_NEAR_LEVEL`. There is none for gyroscopes
/// or magnetometers.
///
/// A lookup is a seam: the system's libudev in production (``system(backend:)``), a table in the
/// unit tests.
struct UdevDatabase: Sendable {
    /// Why there is no udev to ask (a remote context, no udev database on this machine, libudev
    /// failed); nil when lookups work.
    let unavailable: String?
    private let lookup: @Sendable (_ deviceID: String) -> [String: String]

    /// The udev properties discovery uses.
    static let matrixProperty = "ACCEL_MOUNT_MATRIX"
    static let locationProperty = "ACCEL_LOCATION"
    static let propertyNames = [matrixProperty, locationProperty]

    /// A database that answers from `lookup`.
    /// - Parameter lookup: an IIO id (`"iio:device0"`) to the properties udev holds for it.
    init(lookup: @escaping @Sendable (_ deviceID: String) -> [String: String]) {
        unavailable = nil
        self.lookup = lookup
    }

    /// No database: every lookup answers nothing.
    /// - Parameter reason: why, a phrase such as "a remote context (ip:) has no udev".
    init(unavailable reason: String) {
        unavailable = reason
        lookup = { _ in [:] }
    }

    /// The properties of ``propertyNames`` udev holds for the device (absent ones left out).
    func properties(of deviceID: String) -> [String: String] {
        lookup(deviceID)
    }

    /// The database of a context whose libiio backend is `backend` (`"local"`, `"network"`, ...):
    /// this machine's udev, through libudev, for the local backend; none for every other backend,
    /// whose devices are not this machine's, and none when this machine has no udev database
    /// (`/run/udev/data` absent: udev does not run here, as in most containers).
    static func system(backend: String) -> UdevDatabase {
        guard backend == "local" else {
            return UdevDatabase(unavailable: "a \(backend == "network" ? "remote (ip:)" : backend) context has no udev")
        }
        guard access("/run/udev/data", F_OK) == 0 else {
            return UdevDatabase(unavailable: "this machine has no udev database (/run/udev/data): udev does not run here")
        }
        guard let probe = udev_new() else {
            return UdevDatabase(unavailable: "libudev's udev_new failed (\(errnoText(errno)))")
        }
        udev_unref(probe)
        return UdevDatabase { id in Self.libudevProperties(of: id) }
    }

    /// Reads the properties of `iio`-subsystem device `deviceID` through libudev. A device udev
    /// does not know (not processed yet, or not there) has none.
    private static func libudevProperties(of deviceID: String) -> [String: String] {
        guard let udev = udev_new() else { return [:] }
        defer { udev_unref(udev) }
        guard let device = udev_device_new_from_subsystem_sysname(udev, "iio", deviceID) else { return [:] }
        defer { udev_device_unref(device) }
        var found: [String: String] = [:]
        for name in propertyNames {
            if let value = udev_device_get_property_value(device, name) {
                found[name] = String(cString: value)
            }
        }
        return found
    }
}
