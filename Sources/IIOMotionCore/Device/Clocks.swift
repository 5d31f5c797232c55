internal import Glibc

/// `current_timestamp_clock` names.
enum ClockNames {
    static func clock(_ name: String) -> clockid_t? {
        switch name {
        case "realtime": CLOCK_REALTIME
        case "monotonic": CLOCK_MONOTONIC
        case "monotonic_raw": CLOCK_MONOTONIC_RAW
        case "realtime_coarse": CLOCK_REALTIME_COARSE
        case "monotonic_coarse": CLOCK_MONOTONIC_COARSE
        case "boottime": CLOCK_BOOTTIME
        case "tai": CLOCK_TAI
        default: nil
        }
    }
}
