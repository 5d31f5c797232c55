@preconcurrency import Glibc
import IIOMotion

func emit(_ fields: [(String, String)]) {
    print("{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    fflush(nil)
}

/// Open descriptors, threads, and the library's capture threads still running, of this process.
/// Capture threads are counted by the library, not by name: a thread started by a capture thread
/// (Dispatch's workers, with Swift 6.0) carries its name.
func processCounts() -> (fds: Int, threads: Int, captureThreads: Int) {
    let fds = entries("/proc/self/fd").map { $0.count - 1 } ?? -1  // less opendir's own
    let tasks = entries("/proc/self/task") ?? []
    return (fds, tasks.count, ThreadEntryPoints.runningCaptureThreads)
}

/// Descriptors of this process open on an IIO device node (`/dev/iio:deviceN`).
func openDeviceNodes() -> Int {
    (entries("/proc/self/fd") ?? []).filter { fd in
        var buf = [CChar](repeating: 0, count: 256)
        let n = readlink("/proc/self/fd/\(fd)", &buf, buf.count - 1)
        return n > 0 && String(decoding: buf.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self).contains("iio:device")
    }.count
}

/// The names in a directory (not `.` and `..`), or nil when it cannot be read.
func entries(_ path: String) -> [String]? {
    guard let dir = opendir(path) else { return nil }
    defer { closedir(dir) }
    var names: [String] = []
    while let e = readdir(dir) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// A file's first line ("" when it cannot be read).
func firstLine(_ path: String) -> String {
    guard let f = fopen(path, "r") else { return "" }
    defer { fclose(f) }
    var buf = [CChar](repeating: 0, count: 256)
    guard fgets(&buf, Int32(buf.count), f) != nil else { return "" }
    return String(decoding: buf.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func warn(_ s: String) { fputs(s + "\n", stderr) }

func fail(_ message: String) -> Never {
    warn(message)
    exit(1)
}

struct Environment {
    subscript(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
}
