internal import CIIOShim
internal import Glibc

/// Owns one libiio buffer (`struct iio_buffer *`); `deinit` destroys it, which disables the
/// kernel buffer and its channels.
///
/// One capture thread creates, refills and destroys it; any thread may ``cancel()`` it.
final class IIOBuffer: @unchecked Sendable { // only cancel() is called off the owning thread, and iio_buffer_cancel is libiio's one documented thread-safe call
    private let handle: OpaquePointer
    /// Kept so the context outlives its buffer.
    let context: IIOContext

    init(handle: OpaquePointer, context: IIOContext) {
        self.handle = handle
        self.context = context
    }

    deinit {
        iioshim_buffer_destroy(handle)
    }

    /// Blocks until the buffer is full, the context's timeout passes, or ``cancel()``.
    /// - Returns: the first scan, the number of bytes read and the scan size; or a positive errno.
    func refill() -> Result<(start: UnsafeRawPointer, bytes: Int, step: Int), Errno> {
        var start: UnsafePointer<UInt8>?
        var step = 0
        let n = iioshim_buffer_refill(handle, &start, &step)
        if n < 0 { return .failure(Errno(Int32(truncatingIfNeeded: -n))) }
        guard let start else { return .failure(Errno(EIO)) }
        return .success((UnsafeRawPointer(start), n, step))
    }

    /// Makes a blocked refill return at once (permanently: the buffer must then be destroyed).
    func cancel() {
        iioshim_buffer_cancel(handle)
    }

    /// The byte offset of a channel's element within a scan, by libiio's own layout.
    func offset(ofChannel channel: Int, device: Int) -> Int? {
        context.withHandle { ctx in
            let r = iioshim_buffer_channel_offset(handle, ctx, UInt32(device), UInt32(channel))
            return r < 0 ? nil : r
        }
    }
}

extension IIOContext {
    /// Writes a listed device-level attribute. Returns nil on success, or the errno.
    func writeDeviceAttribute(_ device: Int, _ name: String, _ value: String) -> Errno? {
        let r = withHandle { iioshim_device_attr_write($0, UInt32(device), name, value) }
        return r < 0 ? Errno(Int32(truncatingIfNeeded: -r)) : nil
    }

    /// Writes a listed channel attribute. Returns nil on success, or the errno.
    func writeChannelAttribute(_ device: Int, channel: Int, _ name: String, _ value: String) -> Errno? {
        let r = withHandle { iioshim_channel_attr_write($0, UInt32(device), UInt32(channel), name, value) }
        return r < 0 ? Errno(Int32(truncatingIfNeeded: -r)) : nil
    }

    /// The index of the device with this id (`iio:device0`).
    func deviceIndex(id: String) -> Int? {
        let r = withHandle { iioshim_device_index($0, id) }
        return r < 0 ? nil : Int(r)
    }

    /// The index of the trigger with this name.
    func triggerIndex(name: String) -> Int? {
        let r = withHandle { iioshim_trigger_index($0, name) }
        return r < 0 ? nil : Int(r)
    }

    /// Makes `trigger` the current trigger of `device`. Returns nil on success, or the errno.
    func setTrigger(_ device: Int, trigger: Int) -> Errno? {
        let r = withHandle { iioshim_device_set_trigger($0, UInt32(device), UInt32(trigger)) }
        return r < 0 ? Errno(-r) : nil
    }

    /// Enables exactly `channels` of `device` and creates a buffer of `samples` scans.
    func createBuffer(_ device: Int, channels: [Int], samples: Int) -> Result<IIOBuffer, Errno> {
        var error: Int32 = 0
        let list = channels.map { UInt32($0) }
        let handle = withHandle { ctx in
            list.withUnsafeBufferPointer { iioshim_buffer_create(ctx, UInt32(device), $0.baseAddress!, $0.count, samples, &error) }
        }
        guard let handle else { return .failure(Errno(-error)) }
        return .success(IIOBuffer(handle: handle, context: self))
    }
}
