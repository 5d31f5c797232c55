import Testing
@testable import IIOSimKit
import IIOScanFormat

/// Bytes of one repetition of `value` in type `text`.
private func encoded(_ text: String, _ value: Int64, _ upper: ScanFormat.UpperBits = .sign) throws -> [UInt8] {
    let t = try ScanFormat(parsing: text)
    var buffer = [UInt8](repeating: 0x5A, count: t.storageBits / 8)
    t.encode(value, into: &buffer, at: 0, upperBits: upper)
    return buffer
}

private func decoded(_ text: String, _ bytes: [UInt8]) throws -> Int64 {
    try ScanFormat(parsing: text).decode(bytes, at: 0)
}

@Suite("ScanFormat encoding: exact bytes", .timeLimit(.minutes(3)))
struct ScanEncodingTests {
    @Test("16-bit little and big endian")
    func sixteenBit() throws {
        #expect(try encoded("le:s16/16>>0", -2) == [0xFE, 0xFF])
        #expect(try encoded("be:s16/16>>0", -2) == [0xFF, 0xFE])
        #expect(try encoded("le:s16/16>>0", 0x1234) == [0x34, 0x12])
        #expect(try encoded("be:s16/16>>0", 0x1234) == [0x12, 0x34])
        #expect(try encoded("le:u16/16>>0", 0xBEEF) == [0xEF, 0xBE])
        #expect(try encoded("le:s16/16>>0", 32767) == [0xFF, 0x7F])
        #expect(try encoded("le:s16/16>>0", -32768) == [0x00, 0x80])
        #expect(try encoded("le:s16/16>>0", 0) == [0x00, 0x00])
    }

    @Test("Shifted 12-bit data: the value sits above `shift` zero bits")
    func shifted() throws {
        // 0xABC << 4 = 0xABC0
        #expect(try encoded("le:u12/16>>4", 0xABC) == [0xC0, 0xAB])
        #expect(try encoded("be:u12/16>>4", 0xABC) == [0xAB, 0xC0])
        // -2048 is 0x800 in 12 bits; << 4 = 0x8000
        #expect(try encoded("le:s12/16>>4", -2048) == [0x00, 0x80])
        // 0x3FF << 6 = 0xFFC0
        #expect(try encoded("be:u10/16>>6", 0x3FF) == [0xFF, 0xC0])
    }

    @Test("s12/16>>4 fills every storage bit with data or shift: the upper-bit policy changes nothing")
    func s12Shift4HasNoUpperBits() throws {
        // -1 = 0xFFF in 12 bits; << 4 = 0xFFF0.
        for upper in [ScanFormat.UpperBits.sign, .zero, .pattern] {
            #expect(try encoded("le:s12/16>>4", -1, upper) == [0xF0, 0xFF])
        }
    }

    @Test("s12/16>>0: the top nibble is sign, zero or the 0xA5 pattern")
    func s12UpperBits() throws {
        // -1 → data 0x0FFF; upper nibble mask 0xF000. Pattern 0xA5A5 & 0xF000 = 0xA000.
        #expect(try encoded("le:s12/16>>0", -1, .sign) == [0xFF, 0xFF])
        #expect(try encoded("le:s12/16>>0", -1, .zero) == [0xFF, 0x0F])
        #expect(try encoded("le:s12/16>>0", -1, .pattern) == [0xFF, 0xAF])
        // A positive value has a zero sign fill.
        #expect(try encoded("le:s12/16>>0", 5, .sign) == [0x05, 0x00])
        #expect(try encoded("le:s12/16>>0", 5, .pattern) == [0x05, 0xA0])
        // Unsigned types never sign-fill.
        #expect(try encoded("le:u12/16>>0", 0xFFF, .sign) == [0xFF, 0x0F])
    }

    @Test("s12/16>>2: two shift bits at the bottom, two upper bits at the top")
    func s12Shift2() throws {
        // -1 → 0xFFF << 2 = 0x3FFC; upper mask 0xC000; pattern 0xA5A5 & 0xC000 = 0x8000.
        #expect(try encoded("le:s12/16>>2", -1, .sign) == [0xFC, 0xFF])
        #expect(try encoded("le:s12/16>>2", -1, .zero) == [0xFC, 0x3F])
        #expect(try encoded("le:s12/16>>2", -1, .pattern) == [0xFC, 0xBF])
        #expect(try encoded("be:s12/16>>2", -1, .zero) == [0x3F, 0xFC])
    }

    @Test("HID's s16 in 32-bit storage")
    func hid() throws {
        #expect(try encoded("le:s16/32>>0", -2, .sign) == [0xFE, 0xFF, 0xFF, 0xFF])
        #expect(try encoded("le:s16/32>>0", -2, .zero) == [0xFE, 0xFF, 0x00, 0x00])
        // 0xA5A5A5A5 & 0xFFFF0000 = 0xA5A50000
        #expect(try encoded("le:s16/32>>0", -2, .pattern) == [0xFE, 0xFF, 0xA5, 0xA5])
        #expect(try encoded("le:s16/32>>0", 2, .sign) == [0x02, 0x00, 0x00, 0x00])
        #expect(try encoded("le:s16/32>>0", 2, .pattern) == [0x02, 0x00, 0xA5, 0xA5])
    }

    @Test("32-bit, big endian (adis16475)")
    func thirtyTwoBit() throws {
        #expect(try encoded("be:s32/32>>0", -2) == [0xFF, 0xFF, 0xFF, 0xFE])
        #expect(try encoded("be:s32/32>>0", 0x0102_0304) == [0x01, 0x02, 0x03, 0x04])
        #expect(try encoded("le:s32/32>>0", 0x0102_0304) == [0x04, 0x03, 0x02, 0x01])
        #expect(try encoded("be:s32/32>>0", -2_147_483_648) == [0x80, 0x00, 0x00, 0x00])
    }

    @Test("64-bit timestamps")
    func timestamps() throws {
        #expect(try encoded("le:s64/64>>0", 0x17A2_B3C4_D5E6_F708)
                == [0x08, 0xF7, 0xE6, 0xD5, 0xC4, 0xB3, 0xA2, 0x17])
        #expect(try encoded("be:s64/64>>0", 0x17A2_B3C4_D5E6_F708)
                == [0x17, 0xA2, 0xB3, 0xC4, 0xD5, 0xE6, 0xF7, 0x08])
        #expect(try encoded("le:s64/64>>0", -1) == [UInt8](repeating: 0xFF, count: 8))
        #expect(try encoded("le:s64/64>>0", Int64.min) == [0, 0, 0, 0, 0, 0, 0, 0x80])
        #expect(try encoded("le:s64/64>>0", Int64.max) == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F])
        // 1_700_000_000 s in ns: 1.7e18 = 0x1797_9CFE_362A_0000
        #expect(try encoded("le:s64/64>>0", 1_700_000_000_000_000_000)
                == [0x00, 0x00, 0x2A, 0x36, 0xFE, 0x9C, 0x97, 0x17])
    }

    @Test("8-bit storage")
    func eightBit() throws {
        #expect(try encoded("le:s8/8>>0", -128) == [0x80])
        #expect(try encoded("le:s8/8>>0", -2) == [0xFE])
        #expect(try encoded("be:s8/8>>0", -2) == [0xFE])
        #expect(try encoded("le:u8/8>>0", 200) == [0xC8])
        #expect(try encoded("le:u4/8>>4", 0xA) == [0xA0])
        // -3 = 0xD in 4 bits; upper nibble: sign 0xF0, zero, pattern 0xA5 & 0xF0 = 0xA0
        #expect(try encoded("le:s4/8>>0", -3, .sign) == [0xFD])
        #expect(try encoded("le:s4/8>>0", -3, .zero) == [0x0D])
        #expect(try encoded("le:s4/8>>0", -3, .pattern) == [0xAD])
    }

    @Test("encode writes only its own bytes, at the offset")
    func writesAtOffset() throws {
        let t = try ScanFormat(parsing: "be:s16/16>>0")
        var buffer = [UInt8](repeating: 0x11, count: 6)
        t.encode(-2, into: &buffer, at: 2)
        #expect(buffer == [0x11, 0x11, 0xFF, 0xFE, 0x11, 0x11])
        #expect(t.decode(buffer, at: 2) == -2)
        #expect(t.decode(buffer[1...], at: 1) == -2)  // offset is relative to the collection's start
    }

    @Test("Each repetition of an X4 element is one storage word")
    func repeats() throws {
        let t = try ScanFormat(parsing: "le:s16/16X4>>0")
        var buffer = [UInt8](repeating: 0, count: t.byteCount)
        for (i, v) in [Int64(1), -1, 0x1234, -32768].enumerated() { t.encode(v, into: &buffer, at: 2 * i) }
        #expect(buffer == [0x01, 0x00, 0xFF, 0xFF, 0x34, 0x12, 0x00, 0x80])
        #expect((0..<4).map { t.decode(buffer, at: 2 * $0) } == [1, -1, 0x1234, -32768])
    }

    @Test("storageWord is the word before byte order")
    func storageWord() throws {
        #expect(try ScanFormat(parsing: "be:u12/16>>4").storageWord(for: 0xABC) == 0xABC0)
        #expect(try ScanFormat(parsing: "le:s16/32>>0").storageWord(for: -2, upperBits: .zero) == 0x0000_FFFE)
        #expect(try ScanFormat(parsing: "le:s16/32>>0").storageWord(for: -2, upperBits: .sign) == 0xFFFF_FFFE)
        #expect(try ScanFormat(parsing: "le:s64/64>>0").storageWord(for: -1) == UInt64.max)
    }
}

@Suite("ScanFormat saturation", .timeLimit(.minutes(3)))
struct ScanSaturationTests {
    @Test("A sensor saturates at its range instead of wrapping", arguments: [
        ("le:s16/16>>0", Int64(40000), Int64(32767)),
        ("le:s16/16>>0", -40000, -32768),
        ("le:s16/16>>0", 32767, 32767),
        ("le:s16/16>>0", -32768, -32768),
        ("le:s16/16>>0", 123, 123),
        ("le:u12/16>>4", -5, 0),
        ("le:u12/16>>4", 5000, 4095),
        ("le:s12/16>>4", 2048, 2047),
        ("le:s12/16>>4", -2049, -2048),
        ("le:s16/32>>0", 1 << 20, 32767),
        ("le:u8/8>>0", 300, 255),
        ("le:s8/8>>0", -129, -128),
        ("le:s64/64>>0", Int64.max, Int64.max),
        ("le:s64/64>>0", Int64.min, Int64.min),
        ("le:u64/64>>0", -1, 0),
    ])
    func saturates(text: String, value: Int64, expected: Int64) throws {
        #expect(try ScanFormat(parsing: text).saturate(value) == expected)
    }

    @Test("Saturated extremes encode to the extreme codes")
    func extremesEncode() throws {
        let s16 = try ScanFormat(parsing: "le:s16/16>>0")
        #expect(try encoded("le:s16/16>>0", s16.saturate(1_000_000)) == [0xFF, 0x7F])
        #expect(try encoded("le:s16/16>>0", s16.saturate(-1_000_000)) == [0x00, 0x80])
        let u12 = try ScanFormat(parsing: "le:u12/16>>4")
        #expect(try encoded("le:u12/16>>4", u12.saturate(99_999)) == [0xF0, 0xFF])
    }
}

@Suite("ScanFormat decoding", .timeLimit(.minutes(3)))
struct ScanDecodingTests {
    @Test("Shift right first, then mask to bits, then sign-extend")
    func orderOfOperations() throws {
        // 0xABC5 >> 4 = 0xABC: the low nibble below the shift is ignored.
        // (Masking before shifting would give 0xBC5 >> 4 = 0xBC.)
        #expect(try decoded("le:u12/16>>4", [0xC5, 0xAB]) == 0xABC)
        #expect(try decoded("be:u12/16>>4", [0xAB, 0xC5]) == 0xABC)
        // 0x8000 >> 4 = 0x800: the 12-bit sign bit → -2048.
        #expect(try decoded("le:s12/16>>4", [0x00, 0x80]) == -2048)
        #expect(try decoded("be:s12/16>>4", [0x80, 0x0F]) == -2048)
        // 0x7FF0 >> 4 = 0x7FF = 2047.
        #expect(try decoded("le:s12/16>>4", [0xF0, 0x7F]) == 2047)
        // s12/16>>2: 0xBFFC >> 2 = 0x2FFF; & 0xFFF = 0xFFF → -1 (pattern bits above are dropped).
        #expect(try decoded("le:s12/16>>2", [0xFC, 0xBF]) == -1)
    }

    @Test("Unused upper bits are masked off, whatever they hold")
    func masksUpperBits() throws {
        // 0xA7FF & 0xFFF = 0x7FF = 2047
        #expect(try decoded("le:s12/16>>0", [0xFF, 0xA7]) == 2047)
        // 0x5800 & 0xFFF = 0x800 → -2048
        #expect(try decoded("le:s12/16>>0", [0x00, 0x58]) == -2048)
        #expect(try decoded("le:s16/32>>0", [0xFE, 0xFF, 0x00, 0x00]) == -2)
        #expect(try decoded("le:s16/32>>0", [0xFE, 0xFF, 0xA5, 0xA5]) == -2)
        #expect(try decoded("le:s16/32>>0", [0x02, 0x00, 0xFF, 0xFF]) == 2)
        #expect(try decoded("le:u4/8>>0", [0xAD]) == 0xD)
        #expect(try decoded("le:s4/8>>0", [0x0D]) == -3)
    }

    @Test("Full-width values")
    func fullWidth() throws {
        #expect(try decoded("le:s64/64>>0", [0x08, 0xF7, 0xE6, 0xD5, 0xC4, 0xB3, 0xA2, 0x17]) == 0x17A2_B3C4_D5E6_F708)
        #expect(try decoded("be:s64/64>>0", [0x80, 0, 0, 0, 0, 0, 0, 0]) == Int64.min)
        #expect(try decoded("be:s32/32>>0", [0xFF, 0xFF, 0xFF, 0xFE]) == -2)
        #expect(try decoded("le:u16/16>>0", [0xFE, 0xFF]) == 65534)
        #expect(try decoded("le:s16/16>>0", [0xFE, 0xFF]) == -2)
        #expect(try decoded("le:u32/32>>0", [0xFF, 0xFF, 0xFF, 0xFF]) == 4_294_967_295)
    }

    static let forms = [
        "le:s16/16>>0", "be:s16/16>>0", "le:u16/16>>0", "be:u16/16>>0",
        "le:s12/16>>4", "be:s12/16>>4", "le:u12/16>>4", "be:u12/16>>4",
        "le:s12/16>>0", "le:s12/16>>2", "be:u10/16>>6", "le:S14/16>>2",
        "le:s16/32>>0", "be:s16/32>>0", "le:u16/32>>0", "le:s24/32>>8", "le:s20/32>>0",
        "be:s32/32>>0", "le:s32/32>>0", "le:u32/32>>0",
        "le:s64/64>>0", "be:s64/64>>0", "le:u63/64>>0", "le:s48/64>>4",
        "le:s8/8>>0", "le:u8/8>>0", "le:s4/8>>4", "le:s4/8>>0", "le:u1/8>>3", "le:s1/8>>0",
        "le:s16/16X4>>0", "le:s16/32X4>>0", "be:u12/16X3>>4",
    ]

    @Test("decode(encode(v)) == v for random values, edges and every upper-bit fill", arguments: forms)
    func roundTrip(text: String) throws {
        let t = try ScanFormat(parsing: text)
        let range = t.valueRange
        var rng = TestRandom(seed: text.utf8.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 })
        var values: [Int64] = [range.lowerBound, range.upperBound, 0, range.lowerBound / 2, range.upperBound / 2]
        values += [-1, 1].filter(range.contains)  // s1 holds only -1 and 0
        for _ in 0..<500 { values.append(Int64.random(in: range, using: &rng)) }
        let n = t.storageBits / 8
        for upper in [ScanFormat.UpperBits.sign, .zero, .pattern] {
            for v in values {
                // Each repetition at its own slot, after a 3-byte prefix so offsets are exercised.
                var buffer = [UInt8](repeating: 0xEE, count: 3 + t.byteCount)
                for r in 0..<t.repeat { t.encode(v, into: &buffer, at: 3 + r * n, upperBits: upper) }
                for r in 0..<t.repeat {
                    let back = t.decode(buffer, at: 3 + r * n)
                    #expect(back == v, "\(text) \(upper) value \(v) repetition \(r) decoded as \(back)")
                }
                #expect(buffer.prefix(3) == [0xEE, 0xEE, 0xEE])
            }
        }
    }
}
