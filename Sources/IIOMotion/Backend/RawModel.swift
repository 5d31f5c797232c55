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
    /// can be decoded with (see ``ScanFormat/isDecodable``): the channel is then no scan element.
    var unreadableFormat: ScanFormat?
}

/// The layout of one scan element (`scan_elements/<ch>_type`), kept for buffered decoding.
struct ScanFormat: Sendable, Equatable {
    var storageBits: Int
    var realBits: Int
    var shift: Int
    var `repeat`: Int
    var isSigned: Bool
    var isFullyDefined: Bool
    var isBigEndian: Bool
}

extension ScanFormat {
    /// Whether ``ScanDecoder`` can read an element of this format, and libiio can lay it out:
    /// storage of 8, 16, 32 or 64 bits, at least one real bit, and real bits plus shift within
    /// the storage word (the kernel ABI's own constraints; every driver's `_type` meets them).
    ///
    /// A garbled `scan_elements/*_type` file breaks them: libiio leaves the fields it could not
    /// parse at 0, and its layout arithmetic takes offsets modulo `length / 8 × repeat` (zero
    /// for a length under 8 bits, as read in libiio 0.24); storage of 63 bits (found by
    /// scripts/fuzz) or 24 made the decoder load 8 bytes from a 7- or 3-byte element, past the end
    /// of the scan; a shift of the whole word reads a silent 0. Such a channel is not used as a
    /// scan element (the sensor is polled; a bad timestamp element means scans are dated by the
    /// read time).
    var isDecodable: Bool {
        [8, 16, 32, 64].contains(storageBits) && `repeat` >= 1
            && realBits >= 1 && shift >= 0 && realBits <= storageBits - shift
    }
}

extension ScanFormat: CustomStringConvertible {
    /// The fields in the kernel ABI's spelling, `le:s12/16>>4` (real bits / storage bits).
    var description: String {
        "\(isBigEndian ? "be" : "le"):\(isSigned ? "s" : "u")\(realBits)/\(storageBits)\(`repeat` > 1 ? "X\(`repeat`)" : "")>>\(shift)"
    }
}
