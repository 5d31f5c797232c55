internal import CLibUdev
internal import Glibc
package import IIOMotionCore
internal import SystemSupport

/// This machine's udev database, read through libudev: the production lookup of ``UdevDatabase``.
extension UdevDatabase {
    /// The database of a context whose libiio backend is `backend` (`"local"`, `"network"`, ...):
    /// this machine's udev, through libudev, for the local backend; none for every other backend,
    /// whose devices are not this machine's, and none when this machine has no udev database
    /// (`/run/udev/data` absent: udev does not run here, as in most containers).
    package static func system(backend: String) -> UdevDatabase {
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
