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
    /// The store callback's owner, retained for as long as the file system serves.
    private let store: Unmanaged<StoreBox>

    /// Decides a write to attribute `attr` on the serving thread: an errno to refuse it, or what
    /// the file holds from then on (see `simfuse_store_fn`).
    typealias Store = @Sendable (_ attr: Int, _ value: String) -> Result<String, Errno>

    /// A positive errno the store refuses a write with.
    struct Errno: Error { var code: Int32 }

    final class StoreBox: Sendable {
        let store: Store
        init(_ store: @escaping Store) { self.store = store }
    }

    /// Mounts the file system at `mountpoint` with a node per device number in `devices` and
    /// `attributes` attribute files (`attr0`…), whose writes `store` decides.
    /// - Throws: ``Files/Failure`` when FUSE is not available or the mount is refused.
    init(mountpoint: String, devices: [Int], attributes: Int = 0, store: @escaping Store = { .success($1) }) throws {
        try Files.makeDirectory(mountpoint, mode: 0o755)
        let names = devices.map { strdup("iio:device\($0)") }
        defer { names.forEach { free($0) } }
        var error: Int32 = 0
        let pointers = names.map { UnsafePointer($0!) }
        let box = Unmanaged.passRetained(StoreBox(store))
        let callback: simfuse_store_fn = { context, attr, value, _, out, cap in
            let box = Unmanaged<StoreBox>.fromOpaque(context!).takeUnretainedValue()
            switch box.store(Int(attr), String(cString: value)) {
            case .failure(let e): return -e.code
            case .success(let text):
                let bytes = Array(text.utf8.prefix(Int(cap) - 1))
                bytes.withUnsafeBufferPointer { b in
                    if let base = b.baseAddress { memcpy(out, base, b.count) }
                }
                out[bytes.count] = 0
                return 0
            }
        }
        guard let fs = pointers.withUnsafeBufferPointer({
            simfuse_start(mountpoint, $0.baseAddress!, Int32(devices.count), Int32(attributes), callback, box.toOpaque(), &error)
        }) else {
            box.release()
            throw Files.Failure(path: mountpoint, operation: "mount fuse", errno: -error)
        }
        self.fs = fs
        self.mountpoint = mountpoint
        self.store = box
        index = Dictionary(uniqueKeysWithValues: devices.enumerated().map { ($1, Int32($0)) })
    }

    deinit {
        simfuse_stop(fs)
        store.release()
    }

    func path(device: Int) -> String { mountpoint + "/iio:device\(device)" }

    /// Starts session `session` of a device: its kfifo emptied and sized; `mtime` is the
    /// `buffer/enable` file's modification time when the session was decided.
    func sessionBegin(device: Int, session: Int, scanSize: Int, length: Int, watermark: Int,
                      enableAttribute: Int, mtime: timespec) -> Bool {
        guard let i = index[device] else { return false }
        return simfuse_session_begin(fs, i, UInt64(session), scanSize, length, watermark, Int32(enableAttribute),
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

    // MARK: Attribute files

    /// The path of attribute file `attr` in the file system (to bind-mount onto its sysfs path).
    func attributePath(_ attr: Int) -> String { mountpoint + "/attr\(attr)" }

    /// What attribute `attr` holds (without the newline the file shows); nil once unplugged.
    func attribute(_ attr: Int) -> String? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(SIMFUSE_ATTR_MAX)) { buf in
            let n = simfuse_attr_get(fs, Int32(attr), buf.baseAddress!, buf.count)
            return n < 0 ? nil : String(cString: buf.baseAddress!)
        }
    }

    /// Sets what attribute `attr` holds, as the driver does (no store callback).
    func setAttribute(_ attr: Int, _ value: String) { _ = simfuse_attr_set(fs, Int32(attr), value) }

    func setAttributeMode(_ attr: Int, _ mode: mode_t) { _ = simfuse_attr_set_mode(fs, Int32(attr), UInt32(mode)) }

    func unplugAttribute(_ attr: Int) { simfuse_attr_unplug(fs, Int32(attr)) }

    /// Reads of attribute `attr` fail with `code` (0: they succeed again).
    func setAttributeReadError(_ attr: Int, _ code: Int32) { _ = simfuse_attr_set_read_error(fs, Int32(attr), code) }

    /// Attribute `attr` shows a NUL after its newline.
    func setAttributeTrailingNul(_ attr: Int) { _ = simfuse_attr_set_trailing_nul(fs, Int32(attr), 1) }

    /// The node of `device` has no buffer, only events (reads fail with EINVAL).
    func setEventsOnly(device: Int) { if let i = index[device] { _ = simfuse_node_set_events_only(fs, i) } }

    /// Readable when attributes were written (see ``takeWritten()``).
    var writtenFD: Int32 { simfuse_written_fd(fs) }

    /// The attributes written since the last call, in order.
    func takeWritten() -> [Int] {
        var out: [Int] = []
        var buf = [Int32](repeating: 0, count: 256)
        while true {
            let n = buf.withUnsafeMutableBufferPointer { simfuse_take_written(fs, $0.baseAddress!, Int32($0.count)) }
            out += buf.prefix(Int(n)).map(Int.init)
            if n < buf.count { return out }
        }
    }
}
