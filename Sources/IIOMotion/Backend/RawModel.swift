import IIOScanFormat

/// One axis of a three-axis sensor.
enum Axis: Int, Sendable, CaseIterable {
    case x = 0, y = 1, z = 2
}

/// A device as libiio describes it, before any interpretation.
struct RawDevice: Sendable {
    /// Position in the context's device list; the handle for every later call.
    var index: Int
    /// `"iio:deviceN"` or `"triggerN"`.
    var id: String
    var name: String?
    var label: String?
    var isTrigger: Bool
    var canBuffer: Bool
    var channels: [RawChannel]
}

/// A channel as libiio describes it, already classified by the shim.
struct RawChannel: Sendable {
    enum Kind: Sendable { case accel, anglvel, magn, timestamp, other }
    /// Position in the device's channel list.
    var index: Int
    /// libiio's channel id, e.g. `"accel_x"`.
    var id: String
    var kind: Kind
    var axis: Axis?
    var hasRaw: Bool
    /// The sysfs file behind the `raw` attribute, e.g. `"in_accel_x_raw"`.
    var rawFile: String?
    /// Scan index, if the channel is a scan element.
    var scanIndex: Int?
    /// Buffer data format, if the channel is a scan element.
    var format: ScanFormat?
    /// The format libiio read from the channel's `scan_elements/*_type` when it is not one a scan
    /// can be decoded with (see `ScanFormat.isDecodable`): the channel is then no scan element.
    var unreadableFormat: ScanFormat?
}
