import Testing
@testable import IIOSimKit
import IIOScanFormat

private func type(_ text: String) -> ScanFormat {
    // Test inputs are all valid; a failure here is reported by the parsing tests.
    (try? ScanFormat(parsing: text)) ?? ScanFormat(isSigned: true, realBits: 1, storageBits: 8)
}

private let s16 = "le:s16/16>>0"
private let ts = "le:s64/64>>0"

private func layout(_ channels: [(String, Int, String)]) -> ScanLayout {
    ScanLayout(channels: channels.map { (channel: $0.0, index: $0.1, type: type($0.2)) })
}

@Suite("Scan layout (iio_compute_scan_bytes)", .timeLimit(.minutes(3)))
struct ScanLayoutTests {
    @Test("3 × s16 + s64 timestamp: 0, 2, 4, 8; 16 bytes")
    func accelAndTimestamp() {
        let l = layout([("accel_x", 0, s16), ("accel_y", 1, s16), ("accel_z", 2, s16), ("timestamp", 3, ts)])
        #expect(l.elements.map(\.offset) == [0, 2, 4, 8])
        #expect(l.scanSize == 16)
        #expect(l.elements.map(\.channel) == ["accel_x", "accel_y", "accel_z", "timestamp"])
    }

    @Test("6 × s16 + timestamp: 0…10, timestamp at 16; 24 bytes")
    func sixAxes() {
        let l = layout([("anglvel_x", 0, s16), ("anglvel_y", 1, s16), ("anglvel_z", 2, s16),
                        ("accel_x", 3, s16), ("accel_y", 4, s16), ("accel_z", 5, s16), ("timestamp", 6, ts)])
        #expect(l.elements.map(\.offset) == [0, 2, 4, 6, 8, 10, 16])
        #expect(l.scanSize == 24)
    }

    @Test("HID: 3 × s16/32 + timestamp: 0, 4, 8, 16; 24 bytes")
    func hid() {
        let t = "le:s16/32>>0"
        let l = layout([("accel_x", 0, t), ("accel_y", 1, t), ("accel_z", 2, t), ("timestamp", 3, ts)])
        #expect(l.elements.map(\.offset) == [0, 4, 8, 16])
        #expect(l.scanSize == 24)
    }

    @Test("u8, s32, u16: 0, 4, 8; padded to 12 (the largest element is 4 bytes)")
    func mixedWidths() {
        let l = layout([("a", 0, "le:u8/8>>0"), ("b", 1, "le:s32/32>>0"), ("c", 2, "le:u16/16>>0")])
        #expect(l.elements.map(\.offset) == [0, 4, 8])
        #expect(l.scanSize == 12)
    }

    @Test("Small mixed cases")
    func small() {
        #expect(layout([("a", 0, s16)]).scanSize == 2)
        #expect(layout([("a", 0, s16)]).elements.map(\.offset) == [0])
        #expect(layout([("a", 0, "le:u8/8>>0")]).scanSize == 1)
        // u8, u8, s16 → 0, 1, 2; 4 bytes
        let a = layout([("a", 0, "le:u8/8>>0"), ("b", 1, "le:u8/8>>0"), ("c", 2, s16)])
        #expect(a.elements.map(\.offset) == [0, 1, 2])
        #expect(a.scanSize == 4)
        // s16, u8 → 0, 2; 3 bytes padded to 4
        let b = layout([("a", 0, s16), ("b", 1, "le:u8/8>>0")])
        #expect(b.elements.map(\.offset) == [0, 2])
        #expect(b.scanSize == 4)
        // 3 × s16 + s32 → 0, 2, 4, 8; 12 bytes
        let c = layout([("a", 0, s16), ("b", 1, s16), ("c", 2, s16), ("d", 3, "be:s32/32>>0")])
        #expect(c.elements.map(\.offset) == [0, 2, 4, 8])
        #expect(c.scanSize == 12)
        // adis16475-like: 3 × be:s32 + be:s16 temp + ts → 0, 4, 8, 12, 16; 24 bytes
        let d = layout([("x", 0, "be:s32/32>>0"), ("y", 1, "be:s32/32>>0"), ("z", 2, "be:s32/32>>0"),
                        ("temp", 3, "be:s16/16>>0"), ("timestamp", 4, ts)])
        #expect(d.elements.map(\.offset) == [0, 4, 8, 12, 16])
        #expect(d.scanSize == 24)
    }

    @Test("Nothing enabled: an empty scan")
    func empty() {
        let l = ScanLayout(channels: [])
        #expect(l.elements.isEmpty)
        #expect(l.scanSize == 0)
    }

    @Test("Elements are ordered by scan index, whatever the input order")
    func orderedByIndex() {
        let l = layout([("timestamp", 3, ts), ("accel_z", 2, s16), ("accel_x", 0, s16), ("accel_y", 1, s16)])
        #expect(l.elements.map(\.channel) == ["accel_x", "accel_y", "accel_z", "timestamp"])
        #expect(l.elements.map(\.index) == [0, 1, 2, 3])
        #expect(l.elements.map(\.offset) == [0, 2, 4, 8])
        #expect(l.scanSize == 16)
        #expect(l == layout([("accel_x", 0, s16), ("accel_y", 1, s16), ("accel_z", 2, s16), ("timestamp", 3, ts)]))
    }

    @Test("bmi160: indices 4…10, only accel (7, 8, 9) and the timestamp (10) enabled")
    func bmi160AccelOnly() {
        let l = layout([("timestamp", 10, ts), ("accel_y", 8, s16), ("accel_x", 7, s16), ("accel_z", 9, s16)])
        #expect(l.elements.map(\.channel) == ["accel_x", "accel_y", "accel_z", "timestamp"])
        #expect(l.elements.map(\.index) == [7, 8, 9, 10])
        #expect(l.elements.map(\.offset) == [0, 2, 4, 8])
        #expect(l.scanSize == 16)
        // Without the timestamp: 6 bytes, no padding beyond the 2-byte elements.
        let noTS = layout([("accel_x", 7, s16), ("accel_y", 8, s16), ("accel_z", 9, s16)])
        #expect(noTS.elements.map(\.offset) == [0, 2, 4])
        #expect(noTS.scanSize == 6)
        // Gyro (4…6) after a gap in indices: still contiguous in the buffer.
        let gyroAndTS = layout([("anglvel_x", 4, s16), ("anglvel_z", 6, s16), ("timestamp", 10, ts)])
        #expect(gyroAndTS.elements.map(\.offset) == [0, 2, 8])
        #expect(gyroAndTS.scanSize == 16)
    }

    @Test("A repeated element (16 bits X4 = 8 bytes) is aligned to its whole size")
    func repeated() {
        let quat = "le:s16/16X4>>0"
        #expect(layout([("q", 0, quat)]).scanSize == 8)
        // s16 at 0, then the 8-byte element aligned to 8.
        let a = layout([("a", 0, s16), ("q", 1, quat)])
        #expect(a.elements.map(\.offset) == [0, 8])
        #expect(a.scanSize == 16)
        // u8, X4 at 8, s16 at 16, timestamp at 24 → 32 bytes
        let b = layout([("a", 0, "le:u8/8>>0"), ("q", 1, quat), ("c", 2, s16), ("timestamp", 3, ts)])
        #expect(b.elements.map(\.offset) == [0, 8, 16, 24])
        #expect(b.scanSize == 32)
        // X4 of 32-bit storage is 16 bytes and sets the final padding.
        let c = layout([("q", 0, "le:s16/32X4>>0"), ("a", 1, s16)])
        #expect(c.elements.map(\.offset) == [0, 16])
        #expect(c.scanSize == 32)
    }

    @Test("ALIGN(x, a) = (x + a - 1) & ~(a - 1)", arguments: [
        (0, 8, 0), (1, 8, 8), (8, 8, 8), (9, 8, 16), (5, 4, 8), (6, 2, 6), (7, 2, 8), (3, 1, 3), (4, 0, 4),
    ])
    func kernelAlign(x: Int, a: Int, expected: Int) {
        #expect(ScanLayout.kernelAlign(x, a) == expected)
    }
}
