/// Where discovery finds udev's properties of an IIO device: the properties systemd's hardware
/// database (`/lib/udev/hwdb.d/60-sensor.hwdb`, and local files in `/etc/udev/hwdb.d/`) gives
/// sensors, through `60-sensor.rules`, by the sensor's parent modalias and the machine's DMI data.
///
/// systemd defines these sensor properties (hwdb.d/parse_hwdb.py, 60-sensor.hwdb's header):
/// `ACCEL_MOUNT_MATRIX` (`"x1, y1, z1; x2, y2, z2; x3, y3, z3"`, the IIO mount-matrix text),
/// `ACCEL_LOCATION` (`display` or `base`) and `PROXIMITY_NEAR_LEVEL`. There is none for gyroscopes
/// or magnetometers.
///
/// A lookup is a seam: the system's libudev in production (``system(backend:)``, in the
/// IIOMotionLibIIO target), a table in the unit tests.
package struct UdevDatabase: Sendable {
    /// Why there is no udev to ask (a remote context, no udev database on this machine, libudev
    /// failed); nil when lookups work.
    package let unavailable: String?
    private let lookup: @Sendable (_ deviceID: String) -> [String: String]

    /// The udev properties discovery uses.
    package static let matrixProperty = "ACCEL_MOUNT_MATRIX"
    package static let locationProperty = "ACCEL_LOCATION"
    package static let propertyNames = [matrixProperty, locationProperty]

    /// A database that answers from `lookup`.
    /// - Parameter lookup: an IIO id (`"iio:device0"`) to the properties udev holds for it.
    package init(lookup: @escaping @Sendable (_ deviceID: String) -> [String: String]) {
        unavailable = nil
        self.lookup = lookup
    }

    /// No database: every lookup answers nothing.
    /// - Parameter reason: why, a phrase such as "a remote context (ip:) has no udev".
    package init(unavailable reason: String) {
        unavailable = reason
        lookup = { _ in [:] }
    }

    /// The properties of ``propertyNames`` udev holds for the device (absent ones left out).
    package func properties(of deviceID: String) -> [String: String] {
        lookup(deviceID)
    }
}
