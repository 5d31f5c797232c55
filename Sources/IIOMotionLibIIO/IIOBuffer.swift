internal import CIIOShim
internal import Glibc
package import IIOMotionCore
internal import SystemSupport

/// Owns one libiio buffer (`struct iio_buffer *`); ``destroy()`` (or `deinit`) destroys it, which
/// disables the kernel buffer and its channels.
///
/// One capture thread creates, refills and destroys it; any thread may ``cancel()`` it.
package final class IIOBuffer: DeviceBuffer, @unchecked Sendable { // refill and destroy run on the owning thread only; cancel, the one call made elsewhere, is libiio's one documented thread-safe call and is serialised with destroy by `destroyed`'s lock
    private let handle: OpaquePointer
    /// Kept so the context outlives its buffer.
    let context: IIOContext
    /// The device's index in the context.
    let device: Int
    /// Set once the buffer is destroyed: a late ``cancel()`` then does nothing.
    private let destroyed = Locked(false)

    init(handle: OpaquePointer, context: IIOContext, device: Int) {
        self.handle = handle
        self.context = context
        self.device = device
    }

    deinit {
        destroy()
    }

    /// Destroys the buffer now (idempotent; owning thread): the kernel buffer is disabled when this
    /// returns, so that attributes the kernel refuses to change while it runs (EBUSY) can be put back.
    package func destroy() {
        destroyed.withLock { done in
            guard !done else { return }
            done = true
            iioshim_buffer_destroy(handle)
        }
    }

    /// Blocks until the buffer is full, the context's timeout passes, or ``cancel()``.
    /// - Returns: the first scan, the number of bytes read and the scan size; or a positive errno.
    package func refill() -> Result<Scans, MotionError.Errno> {
        var start: UnsafePointer<UInt8>?
        var step = 0
        let n = iioshim_buffer_refill(handle, &start, &step)
        if n < 0 { return .failure(MotionError.Errno(Int32(truncatingIfNeeded: -n))) }
        guard let start else { return .failure(MotionError.Errno(EIO)) }
        return .success((UnsafeRawPointer(start), n, step))
    }

    /// Makes a blocked refill return at once (permanently: the buffer must then be destroyed).
    package func cancel() {
        destroyed.withLock { done in
            if !done { iioshim_buffer_cancel(handle) }
        }
    }

    /// The byte offset of a channel's element within a scan, by libiio's own layout.
    package func offset(ofChannel channel: Int) -> Int? {
        context.withHandle { ctx in
            let r = iioshim_buffer_channel_offset(handle, ctx, UInt32(device), UInt32(channel))
            return r < 0 ? nil : r
        }
    }
}

extension IIOContext {
    /// Writes a listed device-level attribute. Returns nil on success, or the errno.
    func writeDeviceAttribute(_ device: Int, _ name: String, _ value: String) -> MotionError.Errno? {
        let r = withHandle { iioshim_device_attr_write($0, UInt32(device), name, value) }
        return r < 0 ? MotionError.Errno(Int32(truncatingIfNeeded: -r)) : nil
    }

    /// Writes a listed channel attribute. Returns nil on success, or the errno.
    func writeChannelAttribute(_ device: Int, channel: Int, _ name: String, _ value: String) -> MotionError.Errno? {
        let r = withHandle { iioshim_channel_attr_write($0, UInt32(device), UInt32(channel), name, value) }
        return r < 0 ? MotionError.Errno(Int32(truncatingIfNeeded: -r)) : nil
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
    func setTrigger(_ device: Int, trigger: Int) -> MotionError.Errno? {
        let r = withHandle { iioshim_device_set_trigger($0, UInt32(device), UInt32(trigger)) }
        return r < 0 ? MotionError.Errno(-r) : nil
    }

    /// Reads a file of the device's folder by its path (`buffer/length`,
    /// `scan_elements/in_accel_x_en`), listed attribute or not; an empty file reads as "".
    func readDevicePath(_ device: Int, _ path: String) -> Result<String, MotionError.Errno> {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Self.attributeBufferSize) { buf in
            let base = buf.baseAddress!
            let n = withHandle { iioshim_device_path_read($0, UInt32(device), path, base, buf.count) }
            if n < 0 { return .failure(MotionError.Errno(Int32(truncatingIfNeeded: -n))) }
            return .success(String(cString: base))
        }
    }

    /// Writes a file of the device's folder by its path. Returns nil on success, or the errno.
    func writeDevicePath(_ device: Int, _ path: String, _ value: String) -> MotionError.Errno? {
        let r = withHandle { iioshim_device_path_write($0, UInt32(device), path, value) }
        return r < 0 ? MotionError.Errno(Int32(truncatingIfNeeded: -r)) : nil
    }

    /// Enables exactly `channels` of `device` and creates a buffer of `samples` scans per refill,
    /// with a kernel buffer of `kernelBuffers` × `samples` scans (0: libiio's 4).
    func createBuffer(_ device: Int, channels: [Int], samples: Int, kernelBuffers: Int = 0) -> Result<IIOBuffer, MotionError.Errno> {
        var error: Int32 = 0
        let list = channels.map { UInt32($0) }
        let handle = withHandle { ctx in
            list.withUnsafeBufferPointer {
                iioshim_buffer_create(ctx, UInt32(device), $0.baseAddress!, $0.count, samples, UInt32(clamping: kernelBuffers), &error)
            }
        }
        guard let handle else { return .failure(MotionError.Errno(-error)) }
        return .success(IIOBuffer(handle: handle, context: self, device: device))
    }
}
