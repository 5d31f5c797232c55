import Glibc
import IIOMotion

/// What to do about a library error or notice, in this program's terms (its scripts, its flags):
/// the library's sentences say what failed and why; motion-monitor adds the remedy.
enum Advice {
    /// Where the udev rule lives once installed: by scripts/install-udev, or by the Debian package.
    static let ruleFiles = ["/etc/udev/rules.d/99-iio-motion.rules", "/usr/lib/udev/rules.d/99-iio-motion.rules"]

    /// How this user gets the device's files: group membership once the rule is installed,
    /// otherwise the rule itself.
    static func permissionRemedy(ruleInstalled: Bool = ruleFiles.contains { access($0, F_OK) == 0 }) -> String {
        ruleInstalled
            ? "The udev rule 99-iio-motion.rules is installed: add this user to the group iio (`sudo usermod -aG iio $USER`), then log in again; or run as root."
            : "Install the udev rules with `sudo scripts/install-udev` (then log in again so the group iio applies), or run as root."
    }

    /// The remedy for an error, or nil when the error's own sentence is all there is to say.
    /// - Parameters:
    ///   - error: the library's error.
    ///   - ruleInstalled: whether the project's udev rule is installed on this machine.
    static func remedy(for error: MotionError, ruleInstalled: Bool? = nil) -> String? {
        let installed = ruleInstalled ?? ruleFiles.contains { access($0, F_OK) == 0 }
        switch error.code {
        case .permissionDenied where error.attribute?.hasSuffix("_raw") == true:
            return "Restore read access, or stream from the buffer instead: " + permissionRemedy(ruleInstalled: installed)
        case .permissionDenied where error.uri == nil || error.device != nil:
            return permissionRemedy(ruleInstalled: installed)
        case .deviceBusy:
            return "Stop that process (e.g. `sudo systemctl stop iio-sensor-proxy`) and try again."
        case .ioError where error.underlyingErrno == EINVAL && error.call == "iio_buffer_refill":
            return "Check them, or read this device with --mode polled."
        default:
            return nil
        }
    }

    /// The remedy for a notice (a polled fallback): how to get the buffer, where this program can say.
    /// - Parameters:
    ///   - notice: the library's notice.
    ///   - ruleInstalled: whether the project's udev rule is installed on this machine.
    static func remedy(for notice: MotionNotice, ruleInstalled: Bool? = nil) -> String? {
        guard let cause = notice.cause, cause.code == .permissionDenied else { return nil }
        return permissionRemedy(ruleInstalled: ruleInstalled ?? ruleFiles.contains { access($0, F_OK) == 0 })
    }

    /// The error's sentence followed by its remedy.
    static func text(_ error: MotionError) -> String {
        remedy(for: error).map { "\(error) \($0)" } ?? "\(error)"
    }

    /// The notice's sentence followed by its remedy.
    static func text(_ notice: MotionNotice) -> String {
        remedy(for: notice).map { "\(notice) \($0)" } ?? "\(notice)"
    }
}
