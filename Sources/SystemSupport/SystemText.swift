internal import Glibc

/// Seconds on `CLOCK_MONOTONIC`, the clock of every timestamp and deadline in the package.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

/// The C library's text for an errno value, e.g. `"Permission denied"` for 13 (thread-safe:
/// `strerror_r`). A negative value is read as its magnitude, as libiio returns errors.
/// - Parameter value: the errno value.
public func errnoText(_ value: Int32) -> String {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { buf in
        let base = buf.baseAddress!
        base[0] = 0
        guard strerror_r(value < 0 ? -value : value, base, buf.count) == 0, base[0] != 0 else {
            return "Unknown error \(value < 0 ? -value : value)"
        }
        return String(cString: base)
    }
}

/// The `<errno.h>` name of the errno values the package meets (`"EACCES"`), or nil.
/// - Parameter value: the errno value (a negative one is read as its magnitude).
public func errnoName(_ value: Int32) -> String? {
    switch value < 0 ? -value : value {
    case EPERM: "EPERM"
    case ENOENT: "ENOENT"
    case EINTR: "EINTR"
    case EIO: "EIO"
    case ENXIO: "ENXIO"
    case EBADF: "EBADF"
    case EAGAIN: "EAGAIN"
    case ENOMEM: "ENOMEM"
    case EACCES: "EACCES"
    case EBUSY: "EBUSY"
    case EEXIST: "EEXIST"
    case ENODEV: "ENODEV"
    case ENOTDIR: "ENOTDIR"
    case EISDIR: "EISDIR"
    case EINVAL: "EINVAL"
    case EMFILE: "EMFILE"
    case EFBIG: "EFBIG"
    case ENOSPC: "ENOSPC"
    case EROFS: "EROFS"
    case EPIPE: "EPIPE"
    case ENOSYS: "ENOSYS"
    case ETIMEDOUT: "ETIMEDOUT"
    case ECONNREFUSED: "ECONNREFUSED"
    case ECONNRESET: "ECONNRESET"
    case ENOTCONN: "ENOTCONN"
    case ECONNABORTED: "ECONNABORTED"
    case EHOSTUNREACH: "EHOSTUNREACH"
    case EDQUOT: "EDQUOT"
    default: nil
    }
}

/// `"no space left on device (ENOSPC)"`: the text with its first letter lowered, then the name
/// (or `errno N` for a value without one), for messages that continue a sentence.
/// - Parameter value: the errno value.
public func errnoDescription(_ value: Int32) -> String {
    let text = errnoText(value)
    let lower = text.prefix(1).lowercased() + text.dropFirst()
    return "\(lower) (\(errnoName(value) ?? "errno \(value < 0 ? -value : value)"))"
}
