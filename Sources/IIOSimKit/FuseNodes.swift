#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport

/// The `/dev/iio:deviceN` nodes served through FUSE (see `SimFuse.h`): one reader at a time, a
/// kfifo per buffer session that a later `buffer/enable` write invalidates at once, whole scans
/// per read. Used inside the simulator's namespaces whenever FUSE can be mounted; elsewhere the
/// nodes are FIFOs (see ``StreamSession``).
final class FuseNodes: @unchecked Sendable {  // the C side serialises every call on its mutex; the pointer never changes
    private let fs: OpaquePointer
    /// Device number → node index in the FUSE file system.
    private let index: [Int: Int32]
    let mountpoint: String

    /// Mounts the file system at `mountpoint` with a node per device number in `devices`.
    /// - Throws: ``Files/Failure`` when FUSE is not available or the mount is refused.
    init(mountpoint: String, devices: [Int]) throws {
        try Files.makeDirectory(mountpoint, mode: 0o755)
        let names = devices.map { strdup("iio:device\($0)") }
        defer { names.forEach { free($0) } }
        var error: Int32 = 0
        let pointers = names.map { UnsafePointer($0!) }
        guard let fs = pointers.withUnsafeBufferPointer({ simfuse_start(mountpoint, $0.baseAddress!, Int32(devices.count), &error) }) else {
            throw Files.Failure(path: mountpoint, operation: "mount fuse", errno: -error)
        }
        self.fs = fs
        self.mountpoint = mountpoint
        index = Dictionary(uniqueKeysWithValues: devices.enumerated().map { ($1, Int32($0)) })
    }

    deinit { simfuse_stop(fs) }

    func path(device: Int) -> String { mountpoint + "/iio:device\(device)" }

    /// Starts session `session` of a device: its kfifo emptied and sized; `mtime` is the
    /// `buffer/enable` file's modification time when the session was decided.
    func sessionBegin(device: Int, session: Int, scanSize: Int, length: Int, watermark: Int,
                      enablePath: String, mtime: timespec) -> Bool {
        guard let i = index[device] else { return false }
        return simfuse_session_begin(fs, i, UInt64(session), scanSize, length, watermark, enablePath,
                                     Int64(mtime.tv_sec), Int64(mtime.tv_nsec)) == 0
    }

    /// Ends the session; the scans it left unread.
    func sessionEnd(device: Int, session: Int) -> Int {
        guard let i = index[device] else { return 0 }
        return max(0, simfuse_session_end(fs, i, UInt64(session)))
    }

    /// Queues scans; how many fitted (the rest found the kfifo full), or nil when the session is over.
    func push(device: Int, session: Int, _ bytes: UnsafeRawPointer, scans: Int) -> Int? {
        guard let i = index[device] else { return nil }
        let r = simfuse_push(fs, i, UInt64(session), bytes, scans)
        return r >= 0 ? r : nil
    }

    func queued(device: Int) -> Int { index[device].map { max(0, simfuse_queued(fs, $0)) } ?? 0 }
    func readers(device: Int) -> Int { index[device].map { Int(max(0, simfuse_readers(fs, $0))) } ?? 0 }
    func eventFD(device: Int) -> Int32 { index[device].map { simfuse_event_fd(fs, $0) } ?? -1 }
    func unplug(device: Int) { if let i = index[device] { simfuse_unplug(fs, i) } }
}
