public import IIOScanFormat

/// Where each enabled element sits in a scan, by the kernel's rule (`iio_compute_scan_bytes` in
/// `drivers/iio/industrialio-buffer.c`): elements in scan-index order, each aligned to its own size
/// (storage bytes × repeat), and the whole scan padded to a multiple of its largest element.
public struct ScanLayout: Sendable, Equatable {
    /// One enabled element.
    public struct Element: Sendable, Equatable {
        /// Channel id, e.g. `accel_x` or `timestamp`.
        public var channel: String
        /// Scan index (`scan_elements/in_<channel>_index`).
        public var index: Int
        /// The element's type.
        public var type: ScanFormat
        /// Byte offset in the scan.
        public var offset: Int
    }

    /// Elements in buffer order.
    public var elements: [Element]
    /// Bytes per scan (`iio_device_get_sample_size` must agree).
    public var scanSize: Int

    /// Lays out `channels` (id, index, type) as the kernel would; input order does not matter.
    public init(channels: [(channel: String, index: Int, type: ScanFormat)]) {
        var bytes = 0
        var largest = 0
        var out: [Element] = []
        for c in channels.sorted(by: { $0.index < $1.index }) {
            let length = c.type.byteCount
            bytes = Self.kernelAlign(bytes, length)
            out.append(Element(channel: c.channel, index: c.index, type: c.type, offset: bytes))
            bytes += length
            largest = max(largest, length)
        }
        elements = out
        scanSize = largest == 0 ? 0 : Self.kernelAlign(bytes, largest)
    }

    /// The kernel's `ALIGN(x, a)`: `(x + a - 1) & ~(a - 1)`. Exact for powers of two, which every
    /// real layout uses; kept bit-for-bit for the odd repeat counts too.
    static func kernelAlign(_ x: Int, _ a: Int) -> Int {
        guard a > 0 else { return x }
        return (x + a - 1) & ~(a - 1)
    }
}
