// The one description of a scan element's storage format, shared by IIOMotion's decoder, the
// fuzzer and the simulator (IIOSimKit's encoder and ScanLayout). The standard library only: no
// libiio, and no Foundation (whose CharacterSet would not link into the statically linked
// executables that use IIOMotion).

/// The storage format of one scan element, as the kernel prints it in `scan_elements/<channel>_type`:
/// `[be|le]:[s|u]realbits/storagebits[Xrepeat]>>shift` (`iio_show_fixed_type` in
/// `drivers/iio/industrialio-buffer.c`; the fields of the kernel's `struct iio_scan_type` and of
/// libiio's `struct iio_data_format`).
///
/// The kernel ABI's rule for reading an element (sysfs-bus-iio, "Scan type"): take the
/// `storageBits`-wide word in its byte order, shift it right by `shift`, keep the low `realBits`
/// bits, and sign-extend them when signed.
///
/// A value may hold fields no kernel writes: it is built from whatever libiio reports, and
/// ``isDecodable`` says whether a scan can be read with it. ``init(parsing:)`` accepts only
/// decodable formats.
public struct ScanFormat: Hashable, Sendable, CustomStringConvertible {
    /// True for `be`, false for `le`.
    public var isBigEndian: Bool
    /// True for `s`, false for `u`.
    public var isSigned: Bool
    /// The bits that carry the value (`realbits`; libiio's `bits`).
    public var realBits: Int
    /// Bits of storage per repetition, 8, 16, 32 or 64 in every kernel (`storagebits`; libiio's `length`).
    public var storageBits: Int
    /// How many values the element carries (1 unless the type has `X<repeat>`).
    public var `repeat`: Int
    /// The right shift a reader applies before keeping the real bits.
    public var shift: Int

    /// A format from its fields, as given: nothing is checked (see ``isDecodable``).
    public init(isBigEndian: Bool = false, isSigned: Bool, realBits: Int, storageBits: Int, repeat: Int = 1, shift: Int = 0) {
        self.isBigEndian = isBigEndian
        self.isSigned = isSigned
        self.realBits = realBits
        self.storageBits = storageBits
        self.repeat = `repeat`
        self.shift = shift
    }

    /// Whether an element of this format can be read, and libiio can lay it out: storage of 8, 16,
    /// 32 or 64 bits, at least one real bit, and real bits plus shift within the storage word (the
    /// kernel ABI's own constraints; every driver's `_type` meets them).
    ///
    /// A garbled `scan_elements/*_type` file breaks them: libiio leaves the fields it could not
    /// parse at 0, and its layout arithmetic takes offsets modulo `length / 8 × repeat` (zero
    /// for a length under 8 bits, as read in libiio 0.24); storage of 63 bits (found by
    /// scripts/fuzz) or 24 made the decoder load 8 bytes from a 7- or 3-byte element, past the end
    /// of the scan; a shift of the whole word reads a silent 0. IIOMotion does not use such a
    /// channel as a scan element (the sensor is polled; a bad timestamp element means scans are
    /// dated by the read time).
    public var isDecodable: Bool {
        [8, 16, 32, 64].contains(storageBits) && `repeat` >= 1
            && realBits >= 1 && shift >= 0 && realBits <= storageBits - shift
    }

    /// Bytes one element occupies in a scan, repeats included (`iio_storage_bytes_for_si`).
    public var byteCount: Int { storageBits / 8 * `repeat` }

    // MARK: Text

    /// Errors in a type string.
    public struct ParseError: Error, CustomStringConvertible, Equatable {
        /// The text, trimmed.
        public var text: String
        /// What is wrong with it.
        public var reason: String
        /// `invalid scan type "<text>": <reason>`.
        public var description: String { "invalid scan type \"\(text)\": \(reason)" }
    }

    /// Parses a kernel type string such as `le:s16/16>>0`, `be:u12/16>>4` or `le:s16/16X4>>0`.
    /// A trailing newline or NUL (libiio writes one) is ignored. Upper-case `S`/`U` (as `iio_info`
    /// prints them) are accepted.
    /// - Throws: ``ParseError`` when the string is not a valid type or its sizes are inconsistent.
    public init(parsing raw: String) throws {
        // Unicode white space and NUL together, so that a trailing "\n\0" (sysfs text plus
        // libiio's terminator) is removed too.
        let text = Self.trimmed(raw)
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
        if let range = rest.firstRange(of: ">>") {
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
        realBits = b
        storageBits = sb
        self.repeat = repeatValue
        shift = shiftValue
    }

    /// `text` without the white space (Unicode's `White_Space`: what Foundation's
    /// `whitespacesAndNewlines` holds) and NULs at either end.
    static func trimmed(_ text: String) -> String {
        func trim(_ c: Unicode.Scalar) -> Bool { c == "\0" || c.properties.isWhitespace }
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !trim($0) }), let last = scalars.lastIndex(where: { !trim($0) }) else {
            return ""
        }
        return String(scalars[first...last])
    }

    /// The type string in the kernel's format (`%s:%c%d/%d>>%u`, or with `X%d` when repeated),
    /// e.g. `le:s12/16>>4`.
    public var description: String {
        let e = isBigEndian ? "be" : "le"
        let s = isSigned ? "s" : "u"
        if `repeat` > 1 { return "\(e):\(s)\(realBits)/\(storageBits)X\(`repeat`)>>\(shift)" }
        return "\(e):\(s)\(realBits)/\(storageBits)>>\(shift)"
    }

    // MARK: Reading

    /// Reads one repetition at `offset` in `bytes` the way the kernel ABI says a reader must: byte
    /// order, shift right, then keep the real bits and sign-extend. The plain reference reader
    /// (tests, the simulator's own checks); IIOMotion's decoder reads scans with readers it
    /// prepares once per capture.
    /// - Precondition: ``isDecodable``, and the element lies inside `bytes`.
    public func decode(_ bytes: some RandomAccessCollection<UInt8>, at offset: Int) -> Int64 {
        let n = storageBits / 8
        var word: UInt64 = 0
        let base = bytes.index(bytes.startIndex, offsetBy: offset)
        for i in 0..<n {
            let byte = UInt64(bytes[bytes.index(base, offsetBy: i)])
            word |= byte << (8 * (isBigEndian ? n - 1 - i : i))
        }
        word >>= shift
        if realBits >= 64 { return Int64(bitPattern: word) }
        word &= (UInt64(1) << realBits) - 1
        if isSigned && (word >> (realBits - 1)) & 1 == 1 {
            word |= ~((UInt64(1) << realBits) - 1)
        }
        return Int64(bitPattern: word)
    }
}
