/// The devices of one IIO context as discovery walks them: libiio's context in production
/// (``LibIIOContext``, in the IIOMotionLibIIO target), a list of embedded devices in the unit tests.
package protocol DeviceContext: AnyObject, Sendable {
    associatedtype Device: DeviceIO

    /// The URI the context was opened on (`"local:"`, `"ip:HOST"`).
    var uri: String { get }
    /// libiio's name of the context's backend (`"local"`, `"network"`): which udev database
    /// discovery asks (``UdevDatabase/system(backend:)``).
    var backendName: String { get }
    /// The number of devices, triggers included.
    var deviceCount: Int { get }
    /// The device at `index` (below ``deviceCount``).
    func device(at index: Int) -> Device
    /// The device of this id (`"iio:device0"`); nil when it is not there.
    func device(id: String) -> Device?
}

/// Where a ``MotionManager`` gets its devices: it opens contexts, for discovery and for each
/// capture (a capture opens a context of its own, so that its thread shares no libiio state).
///
/// ``LibIIOBackend`` (IIOMotionLibIIO) in production; the unit tests give a manager embedded devices through it.
package protocol DeviceBackend: Sendable {
    associatedtype Context: DeviceContext

    /// Opens a context on `uri`.
    /// - Throws: ``MotionError`` (``MotionError/Code/contextUnavailable`` and similar) when it cannot.
    func open(uri: String) throws(MotionError) -> Context

    /// Where discovery finds udev's properties of the context's devices.
    func udev(for context: Context) -> UdevDatabase
}

extension DeviceBackend {
    /// Opens a context on `uri` and discovers its motion sensors.
    func discover(uri: String) -> Result<Discovery, MotionError> {
        do throws(MotionError) {
            let context = try open(uri: uri)
            return .success(Discovery(context: context, udev: udev(for: context)))
        } catch {
            return .failure(error)
        }
    }

    /// Captures on this backend: each opens its own context on the settings' URI and captures
    /// its device there (``DeviceCapture`` on the backend's device type, so the refill path calls
    /// it directly).
    var captures: CaptureFactory {
        { settings, deliver, fail in
            let uri = settings.uri, id = settings.plans.first?.info.deviceID ?? ""
            return DeviceCapture<Context.Device>(
                settings: settings,
                open: { () throws(MotionError) in try self.open(uri: uri).device(id: id) },
                deliver: deliver, fail: fail)
        }
    }
}
