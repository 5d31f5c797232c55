package import Dispatch
package import Glibc

/// One refill's scans: the first scan, the number of bytes read and the size of one scan.
package typealias Scans = (start: UnsafeRawPointer, bytes: Int, step: Int)

/// One IIO device as a capture uses it: its attributes, its trigger, its buffer, and the clock the
/// capture keeps time by. This is everything ``DeviceCapture`` (with ``DeviceSettings`` and
/// ``PolledReader``) asks of libiio.
///
/// ``LibIIODevice`` (IIOMotionLibIIO) implements it on libiio; the unit tests implement it with an embedded device
/// (scripted attributes, scans and failures, and a virtual clock), so the capture's decisions run
/// in-process. ``DeviceCapture`` is generic over it, so the refill path calls the implementation
/// directly (no existential box, no allocation).
///
/// Every call is made on the capture's own thread, except ``DeviceBuffer/cancel()`` (it is
/// `Sendable` so that the thread can be handed it).
/// Errors are positive errno values.
package protocol DeviceIO: AnyObject, Sendable {
    associatedtype Buffer: DeviceBuffer

    /// Whether the device is on this machine: its sysfs folder readable, its clocks this machine's
    /// (false over iiod).
    var isLocal: Bool { get }

    /// The device's channels, as discovery sees them; nil when it is gone.
    func describe() -> RawDevice?

    /// Whether the device lists a device-level attribute of this name.
    func hasAttribute(_ name: String) -> Bool
    /// Reads a listed device-level attribute.
    func readAttribute(_ name: String) -> Result<String, MotionError.Errno>
    /// Writes a listed device-level attribute; nil on success.
    func writeAttribute(_ name: String, _ value: String) -> MotionError.Errno?
    /// Reads a channel attribute by libiio's short name (`raw`, `sampling_frequency`).
    func readChannelAttribute(channel: Int, _ name: String) -> Result<String, MotionError.Errno>
    /// Writes a channel attribute by libiio's short name; nil on success.
    func writeChannelAttribute(channel: Int, _ name: String, _ value: String) -> MotionError.Errno?
    /// Reads the attribute, device-level or of a channel, whose sysfs file is `file`
    /// (`in_accel_scale`, `in_accel_x_raw`); `ENOENT` when no attribute has that file.
    func readAttributeFile(_ file: String) -> Result<String, MotionError.Errno>
    /// Reads a file of the device's folder by its path (`buffer/length`, `scan_elements/in_accel_x_en`).
    func readFile(_ path: String) -> Result<String, MotionError.Errno>
    /// Writes a file of the device's folder by its path; nil on success.
    func writeFile(_ path: String, _ value: String) -> MotionError.Errno?
    /// The raw text of a file libiio reads but does not expose (`scan_elements/*_type`), for
    /// messages; nil when it cannot be read.
    func sysfsText(_ path: String) -> String?

    /// The current trigger's name ("" when none is set); `ENOENT` when the device has no trigger support.
    func triggerName() -> Result<String, MotionError.Errno>
    /// Whether a trigger of this name exists in the device's context.
    func triggerExists(named name: String) -> Bool
    /// Makes the trigger of this name the device's current trigger; nil on success.
    func setTrigger(named name: String) -> MotionError.Errno?

    /// How long a refill may wait for data (libiio's context timeout).
    func setTimeout(seconds: Double)
    /// Enables exactly `channels` and opens a buffer of `samples` scans per refill, with a kernel
    /// buffer of `kernelBuffers` × `samples` scans.
    func openBuffer(channels: [Int], samples: Int, kernelBuffers: Int) -> Result<Buffer, MotionError.Errno>

    /// Seconds on the capture's monotonic clock (`CLOCK_MONOTONIC` on a real device).
    func now() -> Double
    /// Nanoseconds on `clock` (a `current_timestamp_clock` clock).
    func nanoseconds(on clock: clockid_t) -> Int64
    /// Waits until ``now()`` reaches `deadline`, or `wake` is signalled.
    func pause(until deadline: Double, wake: DispatchSemaphore)
}

/// A device's open buffer. Created, refilled and destroyed on the capture's thread; ``cancel()``
/// may come from any thread.
package protocol DeviceBuffer: AnyObject, Sendable {
    /// Blocks until a refill's worth of scans arrived, the timeout passed, or ``cancel()``.
    func refill() -> Result<Scans, MotionError.Errno>
    /// Makes a blocked refill return at once (permanently: the buffer must then be destroyed).
    func cancel()
    /// Disables the buffer and its channels now (idempotent).
    func destroy()
    /// The byte offset of a channel's element within a scan.
    func offset(ofChannel channel: Int) -> Int?
}
