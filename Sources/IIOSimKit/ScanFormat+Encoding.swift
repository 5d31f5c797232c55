public import IIOScanFormat

/// The simulator's side of a scan element's format (``ScanFormat``, the kernel's
/// `scan_elements/<channel>_type`): writing values the way a driver does.
///
/// Encoding follows the kernel's rule for reading it back (sysfs-bus-iio, "Scan type"): the value is
/// shifted left by `shift` into a `storageBits`-wide word; a reader shifts right first, then masks to
/// `realBits`. Bits of the storage word above `realBits + shift` are filled per ``UpperBits``.
extension ScanFormat {
    /// How the simulator fills storage bits that carry no data (above `realBits + shift`).
    public enum UpperBits: String, Codable, Sendable {
        /// Sign extension for signed types, zeros for unsigned ones (what a driver storing an `sN`
        /// value in a wider integer produces).
        case sign
        /// Always zero.
        case zero
        /// A fixed bit pattern (0xA5…), to catch readers that forget to mask.
        case pattern
        /// The bytes that follow the value in the device's report: the raw value of the next axis
        /// of the same type (x → y → z), zeros after the last (HID sensor hubs on Linux 6.1, whose
        /// drivers copy 32 bits out of a report of 16-bit fields).
        case nextField = "next-field"
    }

    /// The smallest and largest values `realBits` can hold.
    public var valueRange: ClosedRange<Int64> {
        if isSigned {
            if realBits >= 64 { return Int64.min...Int64.max }
            return -(Int64(1) << (realBits - 1))...((Int64(1) << (realBits - 1)) - 1)
        }
        // u63 is exactly 0...Int64.max (computing 1 << 63 - 1 in Int64 would overflow); u64 is capped there.
        if realBits >= 63 { return 0...Int64.max }
        return 0...((Int64(1) << realBits) - 1)
    }

    /// Clamps `value` into ``valueRange`` (a sensor saturates rather than wraps).
    public func saturate(_ value: Int64) -> Int64 {
        min(max(value, valueRange.lowerBound), valueRange.upperBound)
    }

    /// The storage word for `value` (one repetition), before byte order is applied; `next` is
    /// the value whose bits ``UpperBits/nextField`` puts above it.
    public func storageWord(for value: Int64, upperBits: UpperBits = .sign, next: Int64 = 0) -> UInt64 {
        let dataMask: UInt64 = realBits >= 64 ? ~0 : (UInt64(1) << realBits) - 1
        let storageMask: UInt64 = storageBits >= 64 ? ~0 : (UInt64(1) << storageBits) - 1
        var word = (UInt64(bitPattern: value) & dataMask) << shift
        let used = realBits + shift
        if used < storageBits {
            let upperMask = storageMask & ~((UInt64(1) << used) - 1)
            switch upperBits {
            case .zero: break
            case .sign:
                if isSigned && value < 0 { word |= upperMask }
            case .pattern:
                word |= 0xA5A5_A5A5_A5A5_A5A5 & upperMask
            case .nextField:
                word |= (UInt64(bitPattern: next) << used) & upperMask
            }
        }
        return word & storageMask
    }

    /// Writes one repetition of `value` into `buffer` at `offset`, in this type's byte order.
    /// - Parameters:
    ///   - value: the sample, already saturated to ``valueRange``.
    ///   - buffer: the scan bytes.
    ///   - offset: where this repetition starts.
    ///   - upperBits: what to put in unused storage bits.
    ///   - next: the next field's value, for ``UpperBits/nextField``.
    public func encode(_ value: Int64, into buffer: inout [UInt8], at offset: Int, upperBits: UpperBits = .sign, next: Int64 = 0) {
        let word = storageWord(for: value, upperBits: upperBits, next: next)
        let n = storageBits / 8
        for i in 0..<n {
            let byte = UInt8(truncatingIfNeeded: word >> (8 * (isBigEndian ? n - 1 - i : i)))
            buffer[offset + i] = byte
        }
    }
}
