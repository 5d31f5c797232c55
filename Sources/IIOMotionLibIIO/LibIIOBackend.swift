package import Dispatch
package import Glibc
package import IIOMotionCore
internal import SystemSupport

/// ``DeviceBackend`` on libiio (and, for a local context, this machine's udev).
package struct LibIIOBackend: DeviceBackend {
    package init() {}

    package func open(uri: String) throws(MotionError) -> LibIIOContext {
        LibIIOContext(try IIOContext(uri: uri))
    }

    /// This machine's udev for a local context, none for any other (``UdevDatabase/system(backend:)``).
    package func udev(for context: LibIIOContext) -> UdevDatabase { UdevDatabase.system(backend: context.backendName) }
}

/// ``DeviceContext`` on a libiio context.
package final class LibIIOContext: DeviceContext {
    let context: IIOContext

    init(_ context: IIOContext) { self.context = context }

    package var uri: String { context.uri }
    package var backendName: String { context.backendName }
    package var deviceCount: Int { context.deviceCount }

    package func device(at index: Int) -> LibIIODevice {
        LibIIODevice(context: context, index: index, id: context.deviceID(index) ?? "")
    }

    package func device(id: String) -> LibIIODevice? {
        context.deviceIndex(id: id).map { LibIIODevice(context: context, index: $0, id: id) }
    }
}

/// ``DeviceIO`` on libiio: one device of a context it keeps open.
package final class LibIIODevice: DeviceIO {
    let context: IIOContext
    let index: Int
    private let id: String

    init(context: IIOContext, index: Int, id: String) {
        self.context = context
        self.index = index
        self.id = id
    }

    package var isLocal: Bool { context.backendName == "local" }
    package func describe() -> RawDevice? { context.describeDevice(index) }
    package func hasAttribute(_ name: String) -> Bool { context.deviceHasAttribute(index, name) }
    package func readAttribute(_ name: String) -> Result<String, MotionError.Errno> { context.readDeviceAttribute(index, name) }
    package func writeAttribute(_ name: String, _ value: String) -> MotionError.Errno? { context.writeDeviceAttribute(index, name, value) }
    package func readChannelAttribute(channel: Int, _ name: String) -> Result<String, MotionError.Errno> {
        context.readChannelAttribute(index, channel: channel, name)
    }
    package func writeChannelAttribute(channel: Int, _ name: String, _ value: String) -> MotionError.Errno? {
        context.writeChannelAttribute(index, channel: channel, name, value)
    }
    package func readAttributeFile(_ file: String) -> Result<String, MotionError.Errno> { context.readDeviceFile(index, file) }
    package func readFile(_ path: String) -> Result<String, MotionError.Errno> { context.readDevicePath(index, path) }
    package func writeFile(_ path: String, _ value: String) -> MotionError.Errno? { context.writeDevicePath(index, path, value) }

    package func sysfsText(_ path: String) -> String? {
        guard isLocal, let f = fopen("/sys/bus/iio/devices/\(id)/\(path)", "r") else { return nil }
        defer { fclose(f) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = fread(&buffer, 1, buffer.count - 1, f)
        return String(decoding: buffer[..<n], as: UTF8.self)
    }

    package func triggerName() -> Result<String, MotionError.Errno> { context.triggerName(index) }
    package func triggerExists(named name: String) -> Bool { context.triggerIndex(name: name) != nil }
    package func setTrigger(named name: String) -> MotionError.Errno? {
        guard let t = context.triggerIndex(name: name) else { return MotionError.Errno(ENOENT) }
        return context.setTrigger(index, trigger: t)
    }

    package func setTimeout(seconds: Double) { _ = context.setTimeout(milliseconds: RefillSizing.milliseconds(seconds)) }
    package func openBuffer(channels: [Int], samples: Int, kernelBuffers: Int) -> Result<IIOBuffer, MotionError.Errno> {
        context.createBuffer(index, channels: channels, samples: samples, kernelBuffers: kernelBuffers)
    }

    package func now() -> Double { monotonicSeconds() }
    package func nanoseconds(on clock: clockid_t) -> Int64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
    package func pause(until deadline: Double, wake: DispatchSemaphore) {
        let wait = max(0, deadline - monotonicSeconds())
        _ = wake.wait(timeout: .now() + .nanoseconds(Int(wait * 1e9)))
    }
}
