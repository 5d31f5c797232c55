#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import SystemSupport

/// Small POSIX file helpers used by the simulator (errors carry errno and the path).
enum Files {
    struct Failure: Error, CustomStringConvertible {
        var path: String
        var operation: String
        var errno: Int32
        var description: String { "\(operation) \(path): \(errnoText(errno))" }
    }

    /// Writes `contents` to `path` (create/truncate); a new file gets `mode`, an existing one keeps
    /// its own mode (and owner and group), as a sysfs attribute does when the driver's value changes:
    /// permissions given by a udev rule (group `iio`, 0664) survive the simulator's rewrites.
    /// An existing read-only file of ours is made writable for the write (root needs no such step,
    /// a normal user running the simulator's tree writer does).
    static func write(_ contents: String, to path: String, mode: mode_t = 0o644) throws {
        var existing = stat()
        let finalMode = lstat(path, &existing) == 0 && existing.st_mode & S_IFMT == S_IFREG
            ? existing.st_mode & 0o7777 : mode
        var fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        if fd < 0 && errno == EACCES && chmod(path, 0o600) == 0 {
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        }
        guard fd >= 0 else { throw Failure(path: path, operation: "create", errno: errno) }
        defer { close(fd) }
        try writeAll(fd, Array(contents.utf8), path: path)
        fchmod(fd, finalMode)
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(path: path, operation: "write", errno: errno)
            }
            done += n
        }
    }

    /// Replaces `path` atomically: writes a temporary file in `scratch` (same filesystem) and renames it.
    static func replaceAtomically(_ contents: String, at path: String, scratch: String, mode: mode_t) throws {
        let tmp = scratch + "/" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        try write(contents, to: tmp, mode: mode)
        if rename(tmp, path) != 0 {
            let e = errno
            unlink(tmp)
            throw Failure(path: path, operation: "rename onto", errno: e)
        }
    }

    /// Reads a small file; nil when it cannot be read. Trailing NULs and whitespace are removed
    /// (libiio writes values with a trailing NUL).
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 4096)
        var total = 0
        while total < buf.count {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + total, $0.count - total) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { break }
            total += n
        }
        let s = String(decoding: buf[0..<total], as: UTF8.self)
        return s.trimmingCharacters(in: CharacterSet.whitespacesAndNewlines.union(CharacterSet(charactersIn: "\0")))
    }

    /// The errno a read of `path` fails with once the file is open (a driver's show() refusing);
    /// nil when it reads, or cannot be opened.
    static func readErrno(_ path: String) -> Int32? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n >= 0 { return nil }
            if errno != EINTR { return errno }
        }
    }

    /// The errno names a fixture's ``Fixture/Device/unreadable`` may give, and their values.
    static let errnoNames: [String: Int32] = ["EINVAL": EINVAL, "EBUSY": EBUSY, "EIO": EIO, "ENODATA": ENODATA,
                                              "EOPNOTSUPP": EOPNOTSUPP]

    static func errnoValue(_ name: String) -> Int32? { errnoNames[name] }

    static func errnoName(_ value: Int32) -> String? { errnoNames.first { $0.value == value }?.key }

    /// mkdir -p.
    static func makeDirectory(_ path: String, mode: mode_t = 0o755) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: Int(mode)])
        } catch {
            throw Failure(path: path, operation: "mkdir", errno: Int32((error as NSError).code))
        }
    }

    /// rm -rf.
    static func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Monotonic and other clocks, in nanoseconds.
enum SimClock {
    /// The current time of `clock` in nanoseconds.
    static func now(_ clock: clockid_t = CLOCK_MONOTONIC) -> Int64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// The clock named as in `current_timestamp_clock`; nil for names the kernel does not accept.
    static func clock(named name: String) -> clockid_t? {
        switch name {
        case "realtime": return CLOCK_REALTIME
        case "monotonic": return CLOCK_MONOTONIC
        case "monotonic_raw": return CLOCK_MONOTONIC_RAW
        case "realtime_coarse": return CLOCK_REALTIME_COARSE
        case "monotonic_coarse": return CLOCK_MONOTONIC_COARSE
        case "boottime": return CLOCK_BOOTTIME
        case "tai": return CLOCK_TAI
        default: return nil
        }
    }
}
