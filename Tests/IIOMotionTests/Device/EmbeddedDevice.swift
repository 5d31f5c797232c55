import Dispatch
import Foundation
import Glibc
import SystemSupport
@testable import IIOMotion
@testable import IIOMotionCore

/// An IIO device in memory, for running ``DeviceCapture`` in-process (as swift-nio's
/// EmbeddedChannel runs a channel's handlers): its folder is a dictionary of file texts, its
/// refills a script of scans and failures, its clock a virtual one that only the script moves.
///
/// It behaves as Linux 6.1's IIO core does where a capture's decisions depend on it: the buffer's
/// `_en` files, `buffer/length` and `current_timestamp_clock` refuse writes (EBUSY) while the
/// buffer is enabled; destroying the buffer writes 0 to every `_en` file; a trigger is set by name
/// and must exist; an unplugged device answers ENODEV to everything.
///
/// Refills wait for nothing: a ``Refill/stall`` advances the clock by the timeout in force and
/// answers ETIMEDOUT, as libiio does after that long. When the script is used up a refill blocks
/// until the buffer is cancelled (at most 10 s of real time, then ETIMEDOUT), so a test reads
/// exactly the batches it scripted. Polled waits advance the clock to their deadline at once,
/// `pollBudget` times; then they block until the capture is stopped (at most 10 s).
final class EmbeddedDevice: DeviceIO, Sendable {
    /// One refill's outcome.
    enum Refill: Sendable {
        /// These scans' bytes (a whole number of scans).
        case scans([UInt8])
        /// No data within the timeout in force: the clock moves on by it, and the refill fails with ETIMEDOUT.
        case stall
        /// The refill fails with this errno.
        case error(Int32)
        /// The device is removed: this refill and every later call fail with ENODEV.
        case unplug
    }

    struct State: Sendable {
        /// The device folder: path (`sampling_frequency`, `buffer/length`, `in_accel_x_raw`) → text.
        var files: [String: String] = [:]
        /// Reads of these paths fail with the errno.
        var readErrors: [String: Int32] = [:]
        /// Writes of these paths fail with the errno.
        var writeErrors: [String: Int32] = [:]
        /// Writes of these paths succeed, and the file keeps its text (a driver that ignores the value).
        var ignoredWrites: Set<String> = []
        /// Writes of these paths take only the listed values; others fail with EINVAL.
        var accepted: [String: [String]] = [:]
        /// The context's triggers.
        var triggers: Set<String> = []
        /// Whether the device is on this machine.
        var isLocal = true
        /// Opening the buffer fails with this errno.
        var openError: Int32?
        /// What refills deliver, in order.
        var refills: [Refill] = []
        /// Polled waits that return at once before they block until stop.
        var pollBudget = Int.max
        /// The polled wait at which the device is unplugged (1: the first).
        var unplugAtPause: Int?

        /// The virtual clock, seconds (`CLOCK_MONOTONIC`).
        var clock = 1000.0
        /// Other clocks, nanoseconds ahead of `CLOCK_MONOTONIC`.
        var clockOffsets: [clockid_t: Int64] = [CLOCK_REALTIME: 1_700_000_000_000_000_000]
        /// The refill timeout in force, seconds.
        var timeout = 0.0

        // What happened, for the tests to check.
        var unplugged = false
        var bufferEnabled = false
        var cancelled = false
        /// Every write that took effect, in order.
        var writes: [(path: String, value: String)] = []
        /// Every timeout set, in order.
        var timeouts: [Double] = []
        /// Every buffer opened: its channels, scans per refill and kernel buffers.
        var opened: [(channels: [Int], samples: Int, kernelBuffers: Int)] = []
        var refillCount = 0
        var pauses = 0
    }

    let raw: RawDevice
    let state: Locked<State>
    /// Signalled by a cancel, for a refill that waits at the end of its script.
    fileprivate let cancelled = DispatchSemaphore(value: 0)

    init(raw: RawDevice, state: State) {
        self.raw = raw
        self.state = Locked(state)
    }

    /// The file behind a channel attribute: `raw` is the channel's own file, anything else the
    /// type's shared one (`in_accel_sampling_frequency`), as libiio resolves them for these devices.
    func channelFile(_ channel: Int, _ name: String) -> String {
        let c = raw.channels[channel]
        if name == "raw", let file = c.rawFile { return file }
        let type = c.id.split(separator: "_").dropLast().joined(separator: "_")
        return "in_\(type.isEmpty ? c.id : type)_\(name)"
    }

    /// The `scan_elements/*_en` file of a channel.
    func enableFile(_ channel: Int) -> String { "scan_elements/in_\(raw.channels[channel].id)_en" }

    /// The text of a file now.
    func file(_ path: String) -> String? { state.withLock { $0.files[path] } }

    // MARK: DeviceIO

    var isLocal: Bool { state.withLock { $0.isLocal } }

    func describe() -> RawDevice? { state.withLock { $0.unplugged } ? nil : raw }

    /// A device-level attribute: a file of the folder itself that is no channel's (`in_…`).
    func hasAttribute(_ name: String) -> Bool {
        !name.hasPrefix("in_") && !name.contains("/") && state.withLock { $0.files[name] != nil }
    }
    func readAttribute(_ name: String) -> Result<String, MotionError.Errno> { readFile(name) }
    func writeAttribute(_ name: String, _ value: String) -> MotionError.Errno? { writeFile(name, value) }
    func readChannelAttribute(channel: Int, _ name: String) -> Result<String, MotionError.Errno> {
        readFile(channelFile(channel, name))
    }
    func writeChannelAttribute(channel: Int, _ name: String, _ value: String) -> MotionError.Errno? {
        writeFile(channelFile(channel, name), value)
    }

    /// Every file of the folder is an attribute here (libiio lists each sysfs file of a device or
    /// channel as one).
    func readAttributeFile(_ file: String) -> Result<String, MotionError.Errno> { readFile(file) }

    func readFile(_ path: String) -> Result<String, MotionError.Errno> {
        state.withLock { s in
            if s.unplugged { return .failure(MotionError.Errno(ENODEV)) }
            if let e = s.readErrors[path] { return .failure(MotionError.Errno(e)) }
            guard let text = s.files[path] else { return .failure(MotionError.Errno(ENOENT)) }
            return .success(text + "\n")
        }
    }

    func writeFile(_ path: String, _ value: String) -> MotionError.Errno? {
        state.withLock { s in
            if s.unplugged { return MotionError.Errno(ENODEV) }
            if let e = s.writeErrors[path] { return MotionError.Errno(e) }
            guard s.files[path] != nil else { return MotionError.Errno(ENOENT) }
            let busy = path.hasPrefix("scan_elements/") || path == "buffer/length" || path == "current_timestamp_clock"
            if s.bufferEnabled && busy { return MotionError.Errno(EBUSY) }
            if let ok = s.accepted[path], !ok.contains(value) { return MotionError.Errno(EINVAL) }
            if s.ignoredWrites.contains(path) { return nil }
            s.files[path] = value
            s.writes.append((path, value))
            return nil
        }
    }

    func sysfsText(_ path: String) -> String? {
        state.withLock { s in s.isLocal ? s.files[path].map { $0 + "\n" } : nil }
    }

    func triggerName() -> Result<String, MotionError.Errno> { readFile("trigger/current_trigger").map { String(AttributeText.trimmed($0)) } }

    func triggerExists(named name: String) -> Bool { state.withLock { $0.triggers.contains(name) } }

    func setTrigger(named name: String) -> MotionError.Errno? {
        guard triggerExists(named: name) else { return MotionError.Errno(EINVAL) }
        return writeFile("trigger/current_trigger", name)
    }

    func setTimeout(seconds: Double) {
        state.withLock {
            $0.timeout = seconds
            $0.timeouts.append(seconds)
        }
    }

    func openBuffer(channels: [Int], samples: Int, kernelBuffers: Int) -> Result<EmbeddedBuffer, MotionError.Errno> {
        // libiio writes the length and watermark and enables the channels before it enables the
        // buffer; a refusal comes at the enable, and leaves those written.
        if let e = writeFile("buffer/length", String(samples * max(kernelBuffers, 4))) { return .failure(e) }
        _ = writeFile("buffer/watermark", String(samples))
        for c in channels { _ = writeFile(enableFile(c), "1") }
        return state.withLock { s in
            s.opened.append((channels, samples, kernelBuffers))
            if let e = s.openError { return .failure(MotionError.Errno(e)) }
            s.bufferEnabled = true
            s.files["buffer/enable"] = "1"
            return .success(EmbeddedBuffer(device: self, channels: channels))
        }
    }

    func now() -> Double { state.withLock { $0.clock } }

    func nanoseconds(on clock: clockid_t) -> Int64 {
        state.withLock { s in Int64((s.clock * 1e9).rounded()) + (s.clockOffsets[clock] ?? 0) }
    }

    func pause(until deadline: Double, wake: DispatchSemaphore) {
        let block = state.withLock { s -> Bool in
            s.pauses += 1
            if s.unplugAtPause == s.pauses { s.unplugged = true }
            guard s.pauses <= s.pollBudget else { return true }
            s.clock = max(s.clock, deadline)
            return false
        }
        if block { _ = wake.wait(timeout: .now() + 10) }
    }

    /// The bytes of scans with `enabled` channels enabled: `values` per scan, by channel index
    /// (little-endian, each element as wide as its storage; a channel left out reads 0).
    func scans(_ values: [[Int: Int64]], enabled: [Int]) -> [UInt8] {
        let (offsets, step) = layout(enabled)
        var out: [UInt8] = []
        for scan in values {
            var bytes = [UInt8](repeating: 0, count: step)
            for (c, v) in scan {
                guard let off = offsets[c], let f = raw.channels[c].format else { continue }
                for i in 0..<(f.storageBits / 8) { bytes[off + i] = UInt8(truncatingIfNeeded: v >> (8 * i)) }
            }
            out += bytes
        }
        return out
    }

    /// Bytes of one scan of `channels` as the kernel lays it out: each element aligned to its
    /// size, in scan-index order; the scan padded to its largest element.
    func layout(_ channels: [Int]) -> (offsets: [Int: Int], step: Int) {
        var offsets: [Int: Int] = [:]
        var at = 0, largest = 1
        for c in channels.sorted(by: { (raw.channels[$0].scanIndex ?? 0) < (raw.channels[$1].scanIndex ?? 0) }) {
            guard let f = raw.channels[c].format else { continue }
            let size = f.storageBits / 8 * f.repeat
            let align = f.storageBits / 8
            at = (at + align - 1) / align * align
            offsets[c] = at
            at += size
            largest = max(largest, align)
        }
        return (offsets, (at + largest - 1) / largest * largest)
    }
}

/// The buffer of an ``EmbeddedDevice``.
final class EmbeddedBuffer: DeviceBuffer, @unchecked Sendable { // `storage` is used by refill and deinit only, on the capture's thread; the rest is immutable or locked
    let device: EmbeddedDevice
    let channels: [Int]
    private let layout: (offsets: [Int: Int], step: Int)
    /// The bytes of the last refill (valid until the next one, as libiio's are).
    private var storage: UnsafeMutableRawBufferPointer?
    private let destroyed = Locked(false)

    init(device: EmbeddedDevice, channels: [Int]) {
        self.device = device
        self.channels = channels
        layout = device.layout(channels)
    }

    deinit {
        storage?.deallocate()
    }

    func refill() -> Result<Scans, MotionError.Errno> {
        let next = device.state.withLock { s -> EmbeddedDevice.Refill? in
            if s.cancelled { return .error(EBADF) }
            if s.unplugged { return .error(ENODEV) }
            guard !s.refills.isEmpty else { return nil }
            s.refillCount += 1
            return s.refills.removeFirst()
        }
        switch next {
        case nil:
            _ = device.cancelled.wait(timeout: .now() + 10)
            return .failure(MotionError.Errno(device.state.withLock { $0.cancelled } ? EBADF : ETIMEDOUT))
        case .error(let e)?:
            return .failure(MotionError.Errno(e))
        case .stall?:
            device.state.withLock { $0.clock += $0.timeout }
            return .failure(MotionError.Errno(ETIMEDOUT))
        case .unplug?:
            device.state.withLock { $0.unplugged = true }
            return .failure(MotionError.Errno(ENODEV))
        case .scans(let bytes)?:
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 8)
            copy.copyBytes(from: bytes)
            storage?.deallocate()
            storage = copy
            return .success((UnsafeRawPointer(copy.baseAddress!), bytes.count, layout.step))
        }
    }

    func cancel() {
        device.state.withLock { $0.cancelled = true }
        device.cancelled.signal()
    }

    func destroy() {
        let first = destroyed.withLock { d -> Bool in
            defer { d = true }
            return !d
        }
        guard first else { return }
        device.state.withLock { s in
            s.bufferEnabled = false
            s.files["buffer/enable"] = "0"
            for path in s.files.keys where path.hasPrefix("scan_elements/") && path.hasSuffix("_en") { s.files[path] = "0" }
        }
    }

    func offset(ofChannel channel: Int) -> Int? { layout.offsets[channel] }
}

/// A context of embedded devices (device `i` at index `i`; each device's ``RawDevice/index``
/// must be its position), for running discovery and a ``MotionManager`` in-process.
final class EmbeddedContext: DeviceContext {
    let devices: [EmbeddedDevice]
    let uri = "embedded:"
    let backendName = "embedded"

    init(_ devices: [EmbeddedDevice]) { self.devices = devices }

    var deviceCount: Int { devices.count }
    func device(at index: Int) -> EmbeddedDevice { devices[index] }
    func device(id: String) -> EmbeddedDevice? { devices.first { $0.raw.id == id } }
}

/// A backend whose every context is the same ``EmbeddedContext``, with a udev database of
/// `udev` (device id → properties); none when nil.
struct EmbeddedBackend: DeviceBackend {
    let context: EmbeddedContext
    let udev: [String: [String: String]]?

    init(_ devices: [EmbeddedDevice], udev: [String: [String: String]]? = nil) {
        context = EmbeddedContext(devices)
        self.udev = udev
    }

    func open(uri: String) throws(MotionError) -> EmbeddedContext { context }

    func udev(for context: EmbeddedContext) -> UdevDatabase {
        guard let table = udev else { return UdevDatabase(unavailable: "an embedded context has no udev") }
        return UdevDatabase { id in table[id] ?? [:] }
    }

    /// What discovery finds on these devices.
    func discovery() throws(MotionError) -> Discovery { try discover(uri: context.uri).get() }
}

extension MotionManager {
    /// A manager on embedded devices: discovery, polled reads and captures through ``EmbeddedBackend``,
    /// no stored calibration.
    static func embedded(_ devices: [EmbeddedDevice], udev: [String: [String: String]]? = nil,
                         units: MotionUnits = .coreMotion, mountMatrixOverrides: [SensorKind: MountMatrix] = [:]) -> MotionManager {
        MotionManager(uri: "embedded:", units: units, accelerometer: .automatic, gyroscope: .automatic, magnetometer: .automatic,
                      mountMatrixOverrides: mountMatrixOverrides, calibration: .uncalibrated,
                      backend: EmbeddedBackend(devices, udev: udev))
    }
}
