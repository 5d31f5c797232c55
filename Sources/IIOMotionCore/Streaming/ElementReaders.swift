/// Reads one element of a scan; the capture picks one per refill so that the per-sample loop
/// has no format switch.
protocol ElementReader {
    init(_ element: ScanDecoder.Element)
    func value(_ scan: UnsafeRawPointer) -> Int64
}

/// Any format: ``ScanDecoder/Element/value(_:)``.
struct GeneralReader: ElementReader {
    let element: ScanDecoder.Element
    init(_ element: ScanDecoder.Element) { self.element = element }
    @inline(__always) func value(_ scan: UnsafeRawPointer) -> Int64 { element.value(scan) }
}

/// `le:s16/16>>0`.
struct LE16Reader: ElementReader {
    let offset: Int
    init(_ element: ScanDecoder.Element) { offset = element.offset }
    @inline(__always) func value(_ scan: UnsafeRawPointer) -> Int64 {
        Int64(Int16(littleEndian: scan.loadUnaligned(fromByteOffset: offset, as: Int16.self)))
    }
}

/// `le:s32/32>>0`.
struct LE32Reader: ElementReader {
    let offset: Int
    init(_ element: ScanDecoder.Element) { offset = element.offset }
    @inline(__always) func value(_ scan: UnsafeRawPointer) -> Int64 {
        Int64(Int32(littleEndian: scan.loadUnaligned(fromByteOffset: offset, as: Int32.self)))
    }
}

/// `le:s64/64>>0` (timestamps).
struct LE64Reader: ElementReader {
    let offset: Int
    init(_ element: ScanDecoder.Element) { offset = element.offset }
    @inline(__always) func value(_ scan: UnsafeRawPointer) -> Int64 {
        Int64(littleEndian: scan.loadUnaligned(fromByteOffset: offset, as: Int64.self))
    }
}

/// `be:s16/16>>0`.
struct BE16Reader: ElementReader {
    let offset: Int
    init(_ element: ScanDecoder.Element) { offset = element.offset }
    @inline(__always) func value(_ scan: UnsafeRawPointer) -> Int64 {
        Int64(Int16(bigEndian: scan.loadUnaligned(fromByteOffset: offset, as: Int16.self)))
    }
}
