package import IIOScanFormat

/// One axis of a three-axis sensor.
package enum Axis: Int, Sendable, CaseIterable {
    case x = 0, y = 1, z = 2
}

/// A device as libiio describes it, before any interpretation.
package struct RawDevice: Sendable {
    /// Position in the context's device list; the handle for every later call.
    package var index: Int
    /// `"iio:deviceN"` or `"triggerN"`.
    package var id: String
    package var name: String?
    package var label: String?
    package var isTrigger: Bool
    package var canBuffer: Bool
    package var channels: [RawChannel]

    package init(index: Int, id: String, name: String?, label: String?, isTrigger: Bool, canBuffer: Bool, channels: [RawChannel]) {
        self.index = index
        self.id = id
        self.name = name
        self.label = label
        self.isTrigger = isTrigger
        self.canBuffer = canBuffer
        self.channels = channels
    }
}

/// A channel as libiio describes it, already classified by the shim.
package struct RawChannel: Sendable {
    package enum Kind: Sendable { case accel, anglvel, magn, timestamp, other }
    /// Position in the device's channel list.
    package var index: Int
    /// libiio's channel id, e.g. `"accel_x"`.
    package var id: String
    package var kind: Kind
    package var axis: Axis?
    package var hasRaw: Bool
    /// The sysfs file behind the `raw` attribute, e.g. `"in_accel_x_raw"`.
    package var rawFile: String?
    /// Scan index, if the channel is a scan element.
    package var scanIndex: Int?
    /// Buffer data format, if the channel is a scan element.
    package var format: ScanFormat?
    /// The format libiio read from the channel's `scan_elements/*_type` when it is not one a scan
    /// can be decoded with (see `ScanFormat.isDecodable`): the channel is then no scan element.
    package var unreadableFormat: ScanFormat?

    package init(index: Int, id: String, kind: Kind, axis: Axis?, hasRaw: Bool, rawFile: String?, scanIndex: Int?,
                 format: ScanFormat?, unreadableFormat: ScanFormat?) {
        self.index = index
        self.id = id
        self.kind = kind
        self.axis = axis
        self.hasRaw = hasRaw
        self.rawFile = rawFile
        self.scanIndex = scanIndex
        self.format = format
        self.unreadableFormat = unreadableFormat
    }
}
