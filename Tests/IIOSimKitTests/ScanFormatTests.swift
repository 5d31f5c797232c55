import Testing
@testable import IIOSimKit
import IIOScanFormat

/// One expected parse: the text and every field, written out by hand.
struct ScanFormatCase: Sendable, CustomTestStringConvertible {
    var text: String
    var isBigEndian: Bool
    var isSigned: Bool
    var bits: Int
    var storageBits: Int
    var repeatCount: Int
    var shift: Int
    /// What the kernel prints for it (`iio_show_fixed_type`).
    var kernelText: String
    var testDescription: String { text.debugDescription }

    init(_ text: String, be: Bool, signed: Bool, _ bits: Int, _ storage: Int, repeat r: Int = 1, shift: Int = 0,
         kernel: String? = nil) {
        self.text = text
        isBigEndian = be
        isSigned = signed
        self.bits = bits
        storageBits = storage
        repeatCount = r
        self.shift = shift
        kernelText = kernel ?? text
    }
}

@Suite("ScanFormat parsing and printing", .timeLimit(.minutes(3)))
struct ScanFormatParsingTests {
    static let valid: [ScanFormatCase] = [
        ScanFormatCase("le:s16/16>>0", be: false, signed: true, 16, 16),
        ScanFormatCase("be:s16/16>>0", be: true, signed: true, 16, 16),
        ScanFormatCase("le:u16/16>>0", be: false, signed: false, 16, 16),
        ScanFormatCase("be:u12/16>>4", be: true, signed: false, 12, 16, shift: 4),
        ScanFormatCase("le:u12/16>>4", be: false, signed: false, 12, 16, shift: 4),
        ScanFormatCase("le:s12/16>>0", be: false, signed: true, 12, 16),
        ScanFormatCase("le:s16/32>>0", be: false, signed: true, 16, 32),
        ScanFormatCase("le:s24/32>>8", be: false, signed: true, 24, 32, shift: 8),
        ScanFormatCase("be:s32/32>>0", be: true, signed: true, 32, 32),
        ScanFormatCase("le:s64/64>>0", be: false, signed: true, 64, 64),
        ScanFormatCase("be:u64/64>>0", be: true, signed: false, 64, 64),
        ScanFormatCase("le:u8/8>>0", be: false, signed: false, 8, 8),
        ScanFormatCase("le:s4/8>>4", be: false, signed: true, 4, 8, shift: 4),
        ScanFormatCase("le:s1/8>>7", be: false, signed: true, 1, 8, shift: 7),
        ScanFormatCase("le:s16/16X4>>0", be: false, signed: true, 16, 16, repeat: 4),
        ScanFormatCase("le:s16/32X4>>0", be: false, signed: true, 16, 32, repeat: 4),
        ScanFormatCase("be:u10/16X3>>6", be: true, signed: false, 10, 16, repeat: 3, shift: 6),
        // `iio_info` prints the sign in upper case; the kernel never does.
        ScanFormatCase("le:S16/32>>0", be: false, signed: true, 16, 32, kernel: "le:s16/32>>0"),
        ScanFormatCase("be:U10/16>>6", be: true, signed: false, 10, 16, shift: 6, kernel: "be:u10/16>>6"),
        // What a read of the sysfs file returns, and what libiio's buffers may carry.
        ScanFormatCase("le:s16/16>>0\n", be: false, signed: true, 16, 16, kernel: "le:s16/16>>0"),
        ScanFormatCase("le:s16/16>>0\0", be: false, signed: true, 16, 16, kernel: "le:s16/16>>0"),
        ScanFormatCase("be:u12/16>>4\n\0", be: true, signed: false, 12, 16, shift: 4, kernel: "be:u12/16>>4"),
        // sysfs-bus-iio writes the shift as optional: `…[Xrepeat][>>shift]`.
        ScanFormatCase("le:s16/16", be: false, signed: true, 16, 16, kernel: "le:s16/16>>0"),
        ScanFormatCase("le:s16/16X2", be: false, signed: true, 16, 16, repeat: 2, kernel: "le:s16/16X2>>0"),
    ]

    @Test("Every form parses into the right fields", arguments: valid)
    func parses(c: ScanFormatCase) throws {
        let t = try ScanFormat(parsing: c.text)
        #expect(t.isBigEndian == c.isBigEndian)
        #expect(t.isSigned == c.isSigned)
        #expect(t.realBits == c.bits)
        #expect(t.storageBits == c.storageBits)
        #expect(t.repeat == c.repeatCount)
        #expect(t.shift == c.shift)
        #expect(t == ScanFormat(isBigEndian: c.isBigEndian, isSigned: c.isSigned, realBits: c.bits,
                                storageBits: c.storageBits, repeat: c.repeatCount, shift: c.shift))
    }

    @Test("description is the kernel's %s:%c%d/%d>>%u (or …X%d>>%u) and parses back", arguments: valid)
    func roundTrips(c: ScanFormatCase) throws {
        let t = try ScanFormat(parsing: c.text)
        #expect(t.description == c.kernelText)
        #expect(try ScanFormat(parsing: t.description) == t)
    }

    @Test("A repeat of 1 is printed without X, as the kernel does")
    func repeatOfOneHasNoX() {
        let t = ScanFormat(isBigEndian: false, isSigned: true, realBits: 16, storageBits: 16, repeat: 1)
        #expect(t.description == "le:s16/16>>0")
        let r = ScanFormat(isBigEndian: true, isSigned: false, realBits: 12, storageBits: 16, repeat: 2, shift: 4)
        #expect(r.description == "be:u12/16X2>>4")
    }

    static let invalid: [String] = [
        // endianness
        "xe:s16/16>>0", "LE:s16/16>>0", "el:s16/16>>0", ":s16/16>>0", "s16/16>>0",
        // sign
        "le:x16/16>>0", "le:16/16>>0",
        // storage not 8/16/32/64
        "le:s12/12>>0", "le:s16/24>>0", "le:s8/128>>0", "le:s4/4>>0", "le:s16/0>>0",
        // bits + shift > storage, or no bits
        "le:s16/16>>1", "le:u12/16>>5", "le:s17/16>>0", "le:s33/32>>0", "le:s0/16>>0", "le:s8/8>>8",
        // missing or malformed parts
        "", "\n", "\0", "le", "le:", "le:s", "le:s16", "le:s16/", "le:s/16>>0", "le:s16/>>0",
        "le:s16/16>>", "le:s16/16>>x", "le:s16/16>>-1", "le:s16/16X>>0", "le:s16/16X0>>0",
        "le:s16/16X-2>>0", "le:s16/16/16>>0", "le:sa/16>>0", "le:s16/1b>>0",
    ]

    @Test("Malformed or inconsistent types throw ParseError", arguments: invalid)
    func rejects(text: String) {
        #expect(throws: ScanFormat.ParseError.self) { try ScanFormat(parsing: text) }
    }

    @Test("ParseError names the text and the reason")
    func errorMessage() throws {
        let e = try thrownError(ScanFormat.ParseError.self) { try ScanFormat(parsing: "le:s16/24>>0\n") }
        #expect(e.text == "le:s16/24>>0")
        #expect(e.reason == "storage bits must be 8, 16, 32 or 64")
        #expect(e.description == "invalid scan type \"le:s16/24>>0\": storage bits must be 8, 16, 32 or 64")

        let b = try thrownError(ScanFormat.ParseError.self) { try ScanFormat(parsing: "BE:s16/16>>0") }
        #expect(b.reason == "endianness must be le or be")
        let s = try thrownError(ScanFormat.ParseError.self) { try ScanFormat(parsing: "le:u12/16>>5") }
        #expect(s.reason == "bits + shift exceed storage bits")
    }

    @Test("byteCount is storage bytes times repeat (iio_storage_bytes_for_si)", arguments: [
        ("le:u8/8>>0", 1), ("le:s16/16>>0", 2), ("le:u12/16>>4", 2), ("le:s16/32>>0", 4),
        ("be:s32/32>>0", 4), ("le:s64/64>>0", 8), ("le:s16/16X4>>0", 8), ("le:s16/32X4>>0", 16),
        ("le:u8/8X3>>0", 3),
    ])
    func byteCount(text: String, bytes: Int) throws {
        #expect(try ScanFormat(parsing: text).byteCount == bytes)
    }

    @Test("valueRange is what `bits` can hold", arguments: [
        ("le:s16/16>>0", Int64(-32768), Int64(32767)),
        ("le:u16/16>>0", 0, 65535),
        ("le:s12/16>>4", -2048, 2047),
        ("le:u12/16>>4", 0, 4095),
        ("le:s16/32>>0", -32768, 32767),
        ("le:s8/8>>0", -128, 127),
        ("le:u8/8>>0", 0, 255),
        ("le:s1/8>>0", -1, 0),
        ("le:u1/8>>0", 0, 1),
        ("be:s32/32>>0", -2_147_483_648, 2_147_483_647),
        ("le:u32/32>>0", 0, 4_294_967_295),
        ("le:s64/64>>0", Int64.min, Int64.max),
        ("le:u64/64>>0", 0, Int64.max),
        ("le:u63/64>>0", 0, Int64.max),  // 2^63 - 1
        ("le:s63/64>>0", -4_611_686_018_427_387_904, 4_611_686_018_427_387_903),  // ±2^62
    ])
    func valueRange(text: String, low: Int64, high: Int64) throws {
        let t = try ScanFormat(parsing: text)
        #expect(t.valueRange == low...high)
    }
}
