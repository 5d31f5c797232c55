#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import SystemSupport
import Foundation

/// The private namespaces in which the simulated devices live.
///
/// `iio-sim` re-executes itself through util-linux's `unshare` (a process that has started threads
/// cannot enter a new user namespace, and the Swift runtime may have): as a normal user with
/// `--user --map-root-user --mount --net`, as root with `--mount --net`. Mount propagation is
/// private, so nothing below is visible to, or changes, the host.
enum Sandbox {
    static let insideVariable = "IIO_SIM_INSIDE_NAMESPACE"

    static var isInside: Bool { ProcessInfo.processInfo.environment[insideVariable] == "1" }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Replaces this process with `unshare … <this program> <arguments>`.
    static func reexecInNamespaces(arguments: [String]) throws -> Never {
        guard let unshare = findExecutable("unshare") else {
            throw Failure(description: "cannot find unshare (Debian package util-linux)")
        }
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var argv = [unshare]
        if geteuid() != 0 { argv += ["--user", "--map-root-user"] }
        argv += ["--mount", "--net", "--propagation", "private", "--", me] + arguments
        setenv(insideVariable, "1", 1)
        let cargs = argv.map { strdup($0) } + [nil]
        execv(unshare, cargs)
        throw Failure(description: "exec \(unshare): \(errnoText(errno))")
    }

    /// The first executable called `name` in PATH, /usr/sbin or /sbin.
    static func findExecutable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/bin"] {
            let p = dir + "/" + name
            if access(p, X_OK) == 0 { return p }
        }
        return nil
    }

    /// Mounts an empty tmpfs on `target` and puts back every entry that was there (bind mounts for
    /// files, directories and device nodes; symlinks recreated), reaching the hidden originals
    /// through a file descriptor opened before the mount. Nothing is created outside the namespace.
    static func overlayDirectory(_ target: String, keep: Bool) throws {
        let dirfd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirfd >= 0 else { throw Failure(description: "open \(target): \(errnoText(errno))") }
        defer { close(dirfd) }
        let entries = keep ? ((try? FileManager.default.contentsOfDirectory(atPath: target)) ?? []) : []
        let r = simsupport_mount_tmpfs(target, "mode=755")
        guard r == 0 else { throw Failure(description: "mount tmpfs on \(target): \(errnoText(r))") }
        let hidden = "/proc/self/fd/\(dirfd)"
        for name in entries.sorted() {
            let src = hidden + "/" + name, dst = target + "/" + name
            var st = stat()
            guard lstat(src, &st) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFLNK:
                if let dest = try? FileManager.default.destinationOfSymbolicLink(atPath: src) {
                    symlink(dest, dst)
                }
            case S_IFDIR:
                mkdir(dst, st.st_mode & 0o7777)
                _ = simsupport_bind(src, dst, 1)
            default:
                let fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
                if fd >= 0 { close(fd) }
                _ = simsupport_bind(src, dst, 0)
            }
        }
    }

    /// Gives this mount namespace an empty `/sys/bus/iio` (the rest of /sys/bus kept) and a /dev
    /// that can hold `iio:deviceN` nodes (everything the host's /dev had kept).
    static func prepareMounts() throws {
        if FileManager.default.fileExists(atPath: "/sys/bus/iio") {
            // A machine with real IIO hardware: hide it behind the simulated devices.
            let r = simsupport_mount_tmpfs("/sys/bus/iio", "mode=755")
            guard r == 0 else { throw Failure(description: "mount tmpfs on /sys/bus/iio: \(errnoText(r))") }
        } else {
            try overlayDirectory("/sys/bus", keep: true)
            guard mkdir("/sys/bus/iio", 0o755) == 0 else {
                throw Failure(description: "mkdir /sys/bus/iio: \(errnoText(errno))")
            }
        }
        try overlayDirectory("/dev", keep: true)
        _ = simsupport_loopback_up()
    }
}
