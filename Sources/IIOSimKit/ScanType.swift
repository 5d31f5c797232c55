/// The storage format of one scan element, as the kernel prints it in `scan_elements/<channel>_type`:
/// `[be|le]:[s|u]bits/storagebits[Xrepeat]>>shift` (`iio_show_fixed_type` in
/// `drivers/iio/industrialio-buffer.c`).
///
/// Encoding follows the kernel's rule for reading it back (sysfs-bus-iio, "Scan type"): the value is
/// shifted left by `shift` into a `storageBits`-wide word; a reader shifts right first, then masks to
/// `bits`. Bits of the storage word above `bits + shift` are filled per ``UpperBits``.
public struct ScanType: Hashable, Sendable, CustomStringConvertible {
    /// True for `be`, false for `le`.
    public var isBigEndian: Bool
    /// True for `s`, false for `u`.
    public var isSigned: Bool
    /// Number of meaningful bits.
    public var bits: Int
    /// Bits of storage per repetition (8, 16, 32 or 64).
    public var storageBits: Int
    /// How many values the element carries (1 unless the type has `X<repeat>`).
    public var repeatCount: Int
    /// Right shift a reader applies before masking.
    public var shift: Int

    /// How the simulator fills storage bits that carry no data (above `bits + shift`).
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

    public init(isBigEndian: Bool, isSigned: Bool, bits: Int, storageBits: Int, repeatCount: Int = 1, shift: Int = 0) {
        self.isBigEndian = isBigEndian
        self.isSigned = isSigned
        self.bits = bits
        self.storageBits = storageBits
        self.repeatCount = repeatCount
        self.shift = shift
    }

    /// Errors in a type string.
    public struct ParseError: Error, CustomStringConvertible, Equatable {
        public var text: String
        public var reason: String
        public var description: String { "invalid scan type \"\(text)\": \(reason)" }
    }

    /// Parses a kernel type string such as `le:s16/16>>0`, `be:u12/16>>4` or `le:s16/16X4>>0`.
    /// A trailing newline or NUL (libiio writes one) is ignored. Upper-case `S`/`U` (as `iio_info`
    /// prints them) are accepted.
    /// - Throws: ``ParseError`` when the string is not a valid type or its sizes are inconsistent.
    public init(parsing raw: String) throws {
        // One set, so that a trailing "\n\0" (sysfs text plus libiio's terminator) is removed too.
        let text = raw.trimmingCharacters(in: .whitespacesAndNewlines.union(CharacterSet(charactersIn: "\0")))
        func fail(_ reason: String) -> ParseError { ParseError(text: text, reason: reason) }
        let parts = text.split(separator: ":", maxSplits: 1)
        guard parts.count == 2 else { throw fail("expected <le|be>:<s|u><bits>/<storage>") }
        switch parts[0] {
        case "le": isBigEndian = false
        case "be": isBigEndian = true
        default: throw fail("endianness must be le or be")
        }
        var rest = Substring(parts[1])
        guard let signChar = rest.first else { throw fail("missing sign") }
        switch signChar {
        case "s", "S": isSigned = true
        case "u", "U": isSigned = false
        default: throw fail("sign must be s or u")
        }
        rest = rest.dropFirst()
        var shiftValue = 0
        if let range = rest.range(of: ">>") {
            guard let s = Int(rest[range.upperBound...]), s >= 0 else { throw fail("bad shift") }
            shiftValue = s
            rest = rest[..<range.lowerBound]
        }
        var repeatValue = 1
        if let x = rest.firstIndex(of: "X") {
            // The kernel's repeat is a u8; a larger one once overflowed `byteCount` (scripts/fuzz).
            guard let r = Int(rest[rest.index(after: x)...]), r >= 1, r <= 255 else { throw fail("bad repeat") }
            repeatValue = r
            rest = rest[..<x]
        }
        let sizes = rest.split(separator: "/")
        guard sizes.count == 2, let b = Int(sizes[0]), let sb = Int(sizes[1]) else {
            throw fail("expected <bits>/<storagebits>")
        }
        guard [8, 16, 32, 64].contains(sb) else { throw fail("storage bits must be 8, 16, 32 or 64") }
        // `bits <= storage - shift`, not `bits + shift <= storage`: a huge shift must not overflow.
        guard b >= 1, b <= sb - shiftValue else { throw fail("bits + shift exceed storage bits") }
        bits = b
        storageBits = sb
        repeatCount = repeatValue
        shift = shiftValue
    }

    /// The type string in the kernel's format (`%s:%c%d/%d>>%u`, or with `X%d` when repeated).
    public var description: String {
        let e = isBigEndian ? "be" : "le"
        let s = isSigned ? "s" : "u"
        if repeatCount > 1 { return "\(e):\(s)\(bits)/\(storageBits)X\(repeatCount)>>\(shift)" }
        return "\(e):\(s)\(bits)/\(storageBits)>>\(shift)"
    }

    /// Bytes one element occupies in a scan, repeats included (`iio_storage_bytes_for_si`).
    public var byteCount: Int { storageBits / 8 * repeatCount }

    /// The smallest and largest values `bits` can hold.
    public var valueRange: ClosedRange<Int64> {
        if isSigned {
            if bits >= 64 { return Int64.min...Int64.max }
            return -(Int64(1) << (bits - 1))...((Int64(1) << (bits - 1)) - 1)
        }
        // u63 is exactly 0...Int64.max (computing 1 << 63 - 1 in Int64 would overflow); u64 is capped there.
        if bits >= 63 { return 0...Int64.max }
        return 0...((Int64(1) << bits) - 1)
    }

    /// Clamps `value` into ``valueRange`` (a sensor saturates rather than wraps).
    public func saturate(_ value: Int64) -> Int64 {
        min(max(value, valueRange.lowerBound), valueRange.upperBound)
    }

    /// The storage word for `value` (one repetition), before byte order is applied; `next` is
    /// the value whose bits ``UpperBits/nextField`` puts above it.
    public func storageWord(for value: Int64, upperBits: UpperBits = .sign, next: Int64 = 0) -> UInt64 {
        let dataMask: UInt64 = bits >= 64 ? ~0 : (UInt64(1) << bits) - 1
        let storageMask: UInt64 = storageBits >= 64 ? ~0 : (UInt64(1) << storageBits) - 1
        var word = (UInt64(bitPattern: value) & dataMask) << shift
        let used = bits + shift
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

    /// Reads one repetition back the way the kernel ABI says a reader must: byte order, shift right,
    /// then mask to `bits` and sign-extend. Used by tests and by the simulator's own checks.
    public func decode(_ bytes: some RandomAccessCollection<UInt8>, at offset: Int) -> Int64 {
        let n = storageBits / 8
        var word: UInt64 = 0
        let base = bytes.index(bytes.startIndex, offsetBy: offset)
        for i in 0..<n {
            let byte = UInt64(bytes[bytes.index(base, offsetBy: i)])
            word |= byte << (8 * (isBigEndian ? n - 1 - i : i))
        }
        word >>= shift
        if bits >= 64 { return Int64(bitPattern: word) }
        word &= (UInt64(1) << bits) - 1
        if isSigned && (word >> (bits - 1)) & 1 == 1 {
            word |= ~((UInt64(1) << bits) - 1)
        }
        return Int64(bitPattern: word)
    }
}

import Foundation
