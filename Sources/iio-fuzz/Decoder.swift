internal import IIOMotion
internal import IIOScanFormat
@preconcurrency internal import Glibc

/// A scan-decoder case, read from fuzz bytes (all little-endian; a short input reads as zeros):
///
/// | bytes | meaning |
/// |---|---|
/// | 1 | flags: bit 0 a second sensor (gyroscope), bit 1 a timestamp element, bit 2 Core Motion units, bit 3 the first sensor is a magnetometer (else an accelerometer) |
/// | 1 | scans − 1 (mod 4) |
/// | 7 × 4 | element formats (x, y, z of each sensor, then the timestamp): storage bits, real bits, shift, and bit 0 signed, bit 1 big-endian, bits 2–3 `repeat` XOR 1 |
/// | 2 × 15 × 8 | per sensor: scale x, y, z, offset x, y, z, mount matrix row by row (`Double` bit patterns) |
/// | 8 | clock offset (ns) |
/// | rest | scan bytes, repeated to fill the scans |
struct DecoderInput {
    static let headerSize = 2 + 7 * 4 + 2 * 15 * 8 + 8

    var flags: UInt8
    var scans: Int
    var formats: [ScanFormat]
    /// Per sensor: scale (3), offset (3), matrix (9).
    var parameters: [[Double]]
    var clockOffset: Int64
    var payload: [UInt8]

    init(_ bytes: [UInt8]) {
        var at = 0
        func byte() -> UInt8 {
            defer { at += 1 }
            return at < bytes.count ? bytes[at] : 0
        }
        func word() -> UInt64 { (0..<8).reduce(UInt64(0)) { w, i in w | UInt64(byte()) << (8 * UInt64(i)) } }
        flags = byte()
        scans = Int(byte() % 4) + 1
        formats = (0..<7).map { _ in
            let (storage, real, shift, f) = (byte(), byte(), byte(), byte())
            return ScanFormat(isBigEndian: f & 2 != 0, isSigned: f & 1 != 0, realBits: Int(real), storageBits: Int(storage),
                              repeat: Int((f >> 2) & 3 ^ 1), shift: Int(shift))
        }
        parameters = (0..<2).map { _ in (0..<15).map { _ in Double(bitPattern: word()) } }
        clockOffset = Int64(bitPattern: word())
        payload = at < bytes.count ? Array(bytes[at...]) : []
    }

    /// A case for the seed corpus.
    init(flags: UInt8, scans: Int, formats: [ScanFormat], parameters: [[Double]], clockOffset: Int64, payload: [UInt8]) {
        self.flags = flags
        self.scans = scans
        self.formats = formats
        self.parameters = parameters
        self.clockOffset = clockOffset
        self.payload = payload
    }

    /// The bytes that read back as this case.
    var encoded: [UInt8] {
        var out: [UInt8] = [flags, UInt8(scans - 1)]
        for f in formats {
            let bits = UInt8(f.isSigned ? 1 : 0) | UInt8(f.isBigEndian ? 2 : 0) | UInt8((f.repeat ^ 1) & 3) << 2
            out += [UInt8(truncatingIfNeeded: f.storageBits), UInt8(truncatingIfNeeded: f.realBits), UInt8(truncatingIfNeeded: f.shift), bits]
        }
        for p in parameters { for d in p { out += (0..<8).map { UInt8(truncatingIfNeeded: d.bitPattern >> (8 * UInt64($0))) } } }
        out += (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: clockOffset) >> (8 * UInt64($0))) }
        return out + payload
    }
}

/// The scan decoder's properties.
enum DecoderChecks {
    /// With IIO_FUZZ_NO_GATE=1 the harness decodes formats the library refuses to buffer
    /// (``FuzzingEntryPoints/isDecodable(_:)``), as it did before that check existed: it shows
    /// what the check prevents.
    static let ignoreGate = getenv("IIO_FUZZ_NO_GATE").map { String(cString: $0) == "1" } ?? false

    /// Where libiio 0.24 puts each enabled element (`iio_buffer_first`) and the scan size
    /// (`iio_device_get_sample_size_mask`): each element aligned to its own length.
    static func layout(_ formats: [ScanFormat]) -> (offsets: [Int], size: Int) {
        func align(_ p: Int, _ n: Int) -> Int { p % n == 0 ? p : p + n - p % n }
        var ptr = 0
        var offsets: [Int] = []
        for f in formats {
            let len = f.storageBits / 8
            offsets.append(align(ptr, len))
            ptr = align(ptr, len * f.repeat) + len * f.repeat
        }
        return (offsets, ptr)
    }

    /// The kernel ABI's reading of one element, written independently of the library: the
    /// storage bytes in their order, shift right, keep the real bits, sign-extend.
    static func oracle(_ scan: UnsafeRawBufferPointer, at offset: Int, _ f: ScanFormat) -> Int64 {
        let n = f.storageBits / 8
        var word: UInt64 = 0
        for i in 0..<n {
            let b = UInt64(scan[offset + i])
            word |= b << UInt64(8 * (f.isBigEndian ? n - 1 - i : i))
        }
        word = f.shift >= 64 ? 0 : word >> UInt64(f.shift)
        let bits = min(max(f.realBits, 1), 64)
        if bits < 64 {
            word &= (UInt64(1) << UInt64(bits)) - 1
            if f.isSigned && (word >> UInt64(bits - 1)) & 1 == 1 { word |= ~((UInt64(1) << UInt64(bits)) - 1) }
        }
        return Int64(bitPattern: word)
    }

    /// Equal values, NaN matching NaN (so that a NaN is reported once, as non-finite).
    static func same(_ a: [Double], _ b: [Double]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0 == $1 || ($0.isNaN && $1.isNaN) }
    }

    static func check(_ input: DecoderInput) -> [String] {
        let count = input.flags & 1 != 0 ? 2 : 1
        let kinds: [SensorKind] = [input.flags & 8 != 0 ? .magnetometer : .accelerometer, .gyroscope]
        let units: MotionUnits = input.flags & 4 != 0 ? .coreMotion : .si
        let axisFormats = Array(input.formats[0..<(3 * count)])
        var timestampFormat = input.flags & 2 != 0 ? input.formats[6] : nil
        if ignoreGate {
            // The harness's own layout arithmetic needs whole bytes.
            guard (axisFormats + (timestampFormat.map { [$0] } ?? [])).allSatisfy({ $0.storageBits >= 8 && $0.repeat >= 1 }) else { return [] }
        } else {
            // The library polls such a sensor instead (its channels are not scan elements).
            guard axisFormats.allSatisfy(FuzzingEntryPoints.isDecodable) else { return [] }
            if let t = timestampFormat, !FuzzingEntryPoints.isDecodable(t) { timestampFormat = nil }
        }
        // Discovery reads scale and offset with AttributeText.decimal and refuses the sensor if
        // one is out of range; it uses the identity for a matrix MountMatrix refuses.
        let p = input.parameters
        guard p[0..<count].allSatisfy({ $0[0..<6].allSatisfy(FuzzingEntryPoints.acceptsFactor) }) else { return [] }
        let matrices = p[0..<count].map { q in (try? MountMatrix(rows: [Array(q[6..<9]), Array(q[9..<12]), Array(q[12..<15])])) ?? .identity }

        let (offsets, step) = layout(axisFormats + (timestampFormat.map { [$0] } ?? []))
        let sensors = (0..<count).map { k in
            FuzzingEntryPoints.DecoderSensor(
                kind: kinds[k], axes: (0..<3).map { (axisFormats[3 * k + $0], offsets[3 * k + $0]) },
                scale: (p[k][0], p[k][1], p[k][2]), offset: (p[k][3], p[k][4], p[k][5]), mountMatrix: matrices[k])
        }
        let timestamp = timestampFormat.map { ($0, offsets[3 * count]) }
        let scans = input.scans
        // Exactly the scans' bytes, so AddressSanitizer sees any read past them.
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: step * scans, alignment: 8)
        defer { bytes.deallocate() }
        for i in 0..<bytes.count { bytes[i] = input.payload.isEmpty ? 0 : input.payload[i % input.payload.count] }
        let readTime = 1000.0, period = 0.01
        let result = FuzzingEntryPoints.decode(sensors: sensors, timestamp: timestamp, clockOffset: input.clockOffset, units: units,
                                               bytes: UnsafeRawBufferPointer(bytes), step: step, scans: scans,
                                               readTime: readTime, period: period)

        var v: [String] = []
        let ro = UnsafeRawBufferPointer(bytes)
        for k in 0..<count {
            let s = sensors[k]
            guard result.reference[k].count == scans, result.batch[k].count == scans else {
                v.append("sensor \(k): \(result.reference[k].count) and \(result.batch[k].count) samples from \(scans) scans")
                continue
            }
            let r = s.mountMatrix.rows
            let unit: Double = switch s.kind {
            case .accelerometer: units == .coreMotion ? -1 / 9.80665 : 1
            case .gyroscope: 1
            case .magnetometer: 100
            }
            // The fast path folds matrix × scale × unit into one factor, the reference multiplies
            // in turn; they differ beyond rounding only when a product is subnormal (a factor
            // under 1e-100, far from any sensor's), and then it is the reference that loses bits.
            let foldable = ([s.scale.x, s.scale.y, s.scale.z, s.offset.x, s.offset.y, s.offset.z] + Array(r.joined()))
                .allSatisfy { $0 == 0 || abs($0) >= 1e-100 }
            for i in 0..<scans {
                let raw = (0..<3).map { Double(oracle(ro, at: i * step + s.axes[$0].offset, s.axes[$0].format)) }
                let c = [(raw[0] + s.offset.x) * s.scale.x, (raw[1] + s.offset.y) * s.scale.y, (raw[2] + s.offset.z) * s.scale.z]
                let expected = (0..<3).map { j in r[j][0] * c[0] + r[j][1] * c[1] + r[j][2] * c[2] }
                let bound = (0..<3).map { j in (abs(r[j][0] * c[0]) + abs(r[j][1] * c[1]) + abs(r[j][2] * c[2])) * abs(unit) }
                // The reference converts the kernel's value once: Core Motion's −v / 9.80665 for
                // acceleration in g, gauss × 100 to µT.
                let want = expected.map { e in
                    switch s.kind {
                    case .accelerometer: units == .coreMotion ? 0 - e / 9.80665 : e
                    case .gyroscope: e
                    case .magnetometer: e * 100
                    }
                }
                let got = result.reference[k][i], fast = result.batch[k][i]
                let time: Double = timestamp.map { t in Double(oracle(ro, at: i * step + t.1, t.0) &- input.clockOffset) * 1e-9 }
                    ?? readTime
                let fastTime = timestamp == nil ? readTime - Double(scans - 1 - i) * period : time
                let where_ = "sensor \(k) (\(s.kind)) scan \(i)"
                if !same([got.x, got.y, got.z], want) { v.append("\(where_): decoded \(got), the ABI says \(want)") }
                if got.timestamp != time || fast.timestamp != fastTime {
                    v.append("\(where_): timestamps \(got.timestamp), \(fast.timestamp); expected \(time), \(fastTime)")
                }
                let all = [got.x, got.y, got.z, fast.x, fast.y, fast.z, got.timestamp, fast.timestamp]
                // Attributes discovery accepts give finite values, always.
                if !all.allSatisfy(\.isFinite) { v.append("\(where_): non-finite values \(got) / \(fast) from accepted attributes") }
                for (j, b) in [fast.x, fast.y, fast.z].enumerated() where expected[j].isFinite && bound[j].isFinite {
                    if foldable && abs(b - expected[j] * unit) > 1e-12 * bound[j] + 1e-300 {
                        v.append("\(where_): batch gives \(b), the reference \(expected[j] * unit) (axis \(j))")
                    }
                    if b == 0 && b.sign == .minus { v.append("\(where_): batch gives −0") }
                }
            }
            if let n = result.newest[k], let last = result.batch[k].last {
                if !same([n.x, n.y, n.z, n.timestamp], [last.x, last.y, last.z, last.timestamp]) {
                    v.append("sensor \(k): newest-only batch \(n) differs from the last of every sample \(last)")
                }
            } else {
                v.append("sensor \(k): no newest sample")
            }
        }
        return v
    }
}
