internal import CIIOShim
internal import IIOMotionCore
internal import IIOScanFormat

/// Owns one libiio context (`struct iio_context *`); `deinit` destroys it.
///
/// Every libiio call goes through the methods here, addressed by device and channel index, so no
/// libiio pointer other than the context itself ever exists in Swift, and that one never leaves
/// this class.
final class IIOContext: @unchecked Sendable { // the pointer is immutable after init and only ever used for attribute I/O, which libiio 0.24 allows concurrently (local: stateless fopen/fread per call; network: iiod client serialises each request under its own lock)
    /// The URI the context was created from, e.g. `"local:"`.
    let uri: String
    private let handle: OpaquePointer

    /// The size of the buffer used for attribute reads; libiio's local backend fails reads of files
    /// longer than 1024 bytes with `EFBIG` anyway.
    static let attributeBufferSize = 1025

    /// Opens a context.
    /// - Throws: `MotionError` with code `.contextUnavailable` (or `.permissionDenied`).
    init(uri: String) throws(MotionError) {
        var error: Int32 = 0
        guard let handle = iioshim_context_create(uri, &error) else {
            throw MotionError.contextFailure(uri: uri, errno: -error)
        }
        self.uri = uri
        self.handle = handle
    }

    deinit {
        iioshim_context_destroy(handle)
    }

    /// Runs `body` with the context handle (for the buffer code in this folder).
    func withHandle<R>(_ body: (OpaquePointer) -> R) -> R { body(handle) }

    /// Sets libiio's I/O timeout (0 waits forever).
    func setTimeout(milliseconds: UInt32) -> Int32 {
        iioshim_context_set_timeout(handle, milliseconds)
    }

    /// The backend name ("local", "network", ...).
    var backendName: String { String(cString: iioshim_context_name(handle)) }

    /// Number of devices, triggers included.
    var deviceCount: Int { Int(iioshim_device_count(handle)) }

    /// The id (`"iio:device0"`, `"trigger0"`) of the device at `index`, or nil if out of range.
    func deviceID(_ index: Int) -> String? {
        var desc = iioshim_device_desc()
        guard iioshim_device_describe(handle, UInt32(index), &desc) == 0 else { return nil }
        return desc.id.map { String(cString: $0) } ?? ""
    }

    /// Discovery facts about the device at `index`, or nil if out of range.
    func describeDevice(_ index: Int) -> RawDevice? {
        var desc = iioshim_device_desc()
        guard iioshim_device_describe(handle, UInt32(index), &desc) == 0 else { return nil }
        var channels: [RawChannel] = []
        channels.reserveCapacity(Int(desc.channel_count))
        for c in 0..<Int(desc.channel_count) {
            var cd = iioshim_channel_desc()
            guard iioshim_channel_describe(handle, UInt32(index), UInt32(c), &cd) == 0 else { continue }
            let kind: RawChannel.Kind
            switch cd.kind {
            case IIOSHIM_KIND_ACCEL: kind = .accel
            case IIOSHIM_KIND_ANGLVEL: kind = .anglvel
            case IIOSHIM_KIND_MAGN: kind = .magn
            case IIOSHIM_KIND_TIMESTAMP: kind = .timestamp
            default: kind = .other
            }
            let axis: Axis?
            switch cd.axis {
            case IIOSHIM_AXIS_X: axis = .x
            case IIOSHIM_AXIS_Y: axis = .y
            case IIOSHIM_AXIS_Z: axis = .z
            default: axis = nil
            }
            // A scan element whose format the decoder cannot read is treated as none (see
            // ScanFormat.isDecodable): never enabled, so libiio never lays it out either.
            let parsed: ScanFormat? = cd.is_scan_element
                ? ScanFormat(
                    isBigEndian: cd.format.is_be, isSigned: cd.format.is_signed, realBits: Int(cd.format.bits),
                    storageBits: Int(cd.format.length), repeat: Int(cd.format.repeat), shift: Int(cd.format.shift))
                : nil
            let format = parsed.flatMap { $0.isDecodable ? $0 : nil }
            channels.append(RawChannel(
                index: c, id: cd.id.map { String(cString: $0) } ?? "", kind: kind, axis: axis,
                hasRaw: cd.has_raw,
                rawFile: cd.raw_filename.map { String(cString: $0) },
                scanIndex: format != nil && cd.scan_index >= 0 ? cd.scan_index : nil,
                format: format,
                unreadableFormat: format == nil ? parsed : nil))
        }
        return RawDevice(
            index: index,
            id: desc.id.map { String(cString: $0) } ?? "",
            name: desc.name.map { String(cString: $0) },
            label: desc.label.map { String(cString: $0) },
            isTrigger: desc.is_trigger,
            canBuffer: desc.can_buffer,
            channels: channels)
    }

    /// Whether the device lists a device-level attribute of this name.
    func deviceHasAttribute(_ device: Int, _ name: String) -> Bool {
        iioshim_device_has_attr(handle, UInt32(device), name)
    }

    /// Reads a listed device-level attribute. Returns the text, or a negative errno.
    func readDeviceAttribute(_ device: Int, _ name: String) -> Result<String, MotionError.Errno> {
        readString { iioshim_device_attr_read(handle, UInt32(device), name, $0, $1) }
    }

    /// Reads whatever attribute libiio maps to the sysfs file `file` of the device.
    func readDeviceFile(_ device: Int, _ file: String) -> Result<String, MotionError.Errno> {
        readString { iioshim_device_read_file(handle, UInt32(device), file, $0, $1) }
    }

    /// Reads a listed channel attribute by libiio's short name ("raw", "scale").
    func readChannelAttribute(_ device: Int, channel: Int, _ name: String) -> Result<String, MotionError.Errno> {
        readString { iioshim_channel_attr_read(handle, UInt32(device), UInt32(channel), name, $0, $1) }
    }

    /// The current trigger's name ("" when none is set), or a negative errno (`-ENOENT` when the
    /// device has no trigger support).
    func triggerName(_ device: Int) -> Result<String, MotionError.Errno> {
        readString { buf, len in
            let r = iioshim_device_trigger_name(handle, UInt32(device), buf, len)
            return r < 0 ? Int(r) : 0
        }
    }

    private func readString(_ body: (UnsafeMutablePointer<CChar>, Int) -> Int) -> Result<String, MotionError.Errno> {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Self.attributeBufferSize) { buf in
            let base = buf.baseAddress!
            base[0] = 0
            let n = body(base, buf.count)
            if n < 0 { return .failure(MotionError.Errno(Int32(truncatingIfNeeded: -n))) }
            return .success(String(cString: base))
        }
    }
}

