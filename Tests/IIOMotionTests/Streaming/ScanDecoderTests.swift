import IIOScanFormat
import Testing
@testable import IIOMotion
@testable import IIOMotionCore


/// `[be|le]:[s|u]bits/storage>>shift`, as the kernel writes it in `scan_elements/*_type`.
private func format(_ bigEndian: Bool, _ signed: Bool, _ bits: Int, _ storage: Int, _ shift: Int = 0) -> ScanFormat {
    ScanFormat(isBigEndian: bigEndian, isSigned: signed, realBits: bits, storageBits: storage, repeat: 1, shift: shift)
}

/// Random scans with some elements forced to the edges (all ones, sign bit only, largest positive).
private func randomScans(_ count: Int, size: Int, rng: inout SplitMix64) -> [UInt8] {
    var bytes = (0..<(count * size + 8)).map { _ in UInt8.random(in: 0...255, using: &rng) }
    for s in 0..<min(count, 6) {
        for b in 0..<size {
            switch s {
            case 0: bytes[s * size + b] = 0xFF
            case 1: bytes[s * size + b] = 0x00
            case 2: bytes[s * size + b] = b % 2 == 0 ? 0x00 : 0x80  // le: sign bit of each 16-bit word
            case 3: bytes[s * size + b] = b % 2 == 0 ? 0x80 : 0x00  // be: sign bit of each 16-bit word
            case 4: bytes[s * size + b] = b % 2 == 0 ? 0xFF : 0x7F
            default: bytes[s * size + b] = b % 2 == 0 ? 0x7F : 0xFF
            }
        }
    }
    return bytes
}

@Suite("Scan decoding: specialised readers and the folded conversion", .timeLimit(.minutes(3)))
struct ScanDecoderTests {
    @Test("Common formats get their specialised reader; every other format the general one")
    func forms() {
        typealias E = ScanDecoder.Element
        #expect(E(offset: 0, format: format(false, true, 16, 16)).form == .le16)
        #expect(E(offset: 0, format: format(false, true, 32, 32)).form == .le32)
        #expect(E(offset: 0, format: format(false, true, 64, 64)).form == .le64)
        #expect(E(offset: 0, format: format(true, true, 16, 16)).form == .be16)
        for f in [format(false, true, 12, 16, 4), format(false, true, 12, 16), format(false, false, 16, 16),
                  format(true, true, 32, 32), format(true, true, 64, 64), format(false, true, 16, 32), format(false, true, 8, 8),
                  format(false, true, 24, 32, 8), format(true, false, 16, 16), format(false, true, 16, 16, 1)] {
            #expect(E(offset: 0, format: f).form == .general, "\(f)")
        }
    }

    @Test("Specialised readers read every value as the general reader does, sign extension and byte order included")
    func readersMatchGeneral() {
        var rng = SplitMix64(seed: 0x1105)
        let bytes = randomScans(4000, size: 8, rng: &rng)
        bytes.withUnsafeBytes { raw in
            for offset in 0..<8 {
                let le16 = ScanDecoder.Element(offset: offset, format: format(false, true, 16, 16))
                let le32 = ScanDecoder.Element(offset: offset, format: format(false, true, 32, 32))
                let le64 = ScanDecoder.Element(offset: offset, format: format(false, true, 64, 64))
                let be16 = ScanDecoder.Element(offset: offset, format: format(true, true, 16, 16))
                var mismatches = 0
                for s in 0..<4000 {
                    let scan = raw.baseAddress! + s * 8
                    if LE16Reader(le16).value(scan) != le16.value(scan) { mismatches += 1 }
                    if LE32Reader(le32).value(scan) != le32.value(scan) { mismatches += 1 }
                    if LE64Reader(le64).value(scan) != le64.value(scan) { mismatches += 1 }
                    if BE16Reader(be16).value(scan) != be16.value(scan) { mismatches += 1 }
                    if GeneralReader(le16).value(scan) != le16.value(scan) { mismatches += 1 }
                }
                #expect(mismatches == 0, "offset \(offset)")
            }
            // The edges, by hand: 0xFFFF is −1, 0x8000 is −32768, 0x7FFF is 32767.
            let le16 = ScanDecoder.Element(offset: 0, format: format(false, true, 16, 16))
            let be16 = ScanDecoder.Element(offset: 0, format: format(true, true, 16, 16))
            #expect(LE16Reader(le16).value(raw.baseAddress!) == -1)
            #expect(LE16Reader(le16).value(raw.baseAddress! + 2 * 8) == -32768)
            #expect(BE16Reader(be16).value(raw.baseAddress! + 3 * 8) == -32768)
            #expect(LE16Reader(le16).value(raw.baseAddress! + 4 * 8) == 32767)
            #expect(BE16Reader(be16).value(raw.baseAddress! + 5 * 8) == 32767)
        }
    }

    /// A device like the fixtures: gyro and accel of one format each, then a timestamp.
    private struct Layout {
        var name: String
        var axis: ScanFormat
        var axisBytes: Int
        var timestamp: ScanFormat?
        var scale: (Double, Double, Double)
        var offset: (Double, Double, Double)
        var m: (Double, Double, Double, Double, Double, Double, Double, Double, Double)
    }

    private static let rotated = (0.0, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    private static let skewed = (0.36, 0.48, -0.8, -0.8, 0.6, 0.0, 0.48, 0.64, 0.6)
    private static let layouts: [Layout] = [
        Layout(name: "bmi160 le:s16/16", axis: format(false, true, 16, 16), axisBytes: 2, timestamp: format(false, true, 64, 64),
               scale: (0.000598, 0.000598, 0.000598), offset: (0, 0, 0), m: rotated),
        Layout(name: "hid le:s32/32 with offset", axis: format(false, true, 32, 32), axisBytes: 4, timestamp: format(false, true, 64, 64),
               scale: (0.0980665, 0.0980665, 0.0980665), offset: (2, -3, 0.5), m: skewed),
        Layout(name: "mpu6050 be:s16/16", axis: format(true, true, 16, 16), axisBytes: 2, timestamp: format(false, true, 64, 64),
               scale: (0.000598, 0.000599, 0.0006), offset: (0, 0, 0), m: (-1, 0, 0, 0, -1, 0, 0, 0, 1)),
        Layout(name: "le:s12/16>>4, no timestamp", axis: format(false, true, 12, 16, 4), axisBytes: 2, timestamp: nil,
               scale: (0.0383, 0.0383, 0.0383), offset: (0, 0, 0), m: (1, 0, 0, 0, 1, 0, 0, 0, 1)),
        Layout(name: "be:u16/16, be:s64 timestamp", axis: format(true, false, 16, 16), axisBytes: 2, timestamp: format(true, true, 64, 64),
               scale: (0.001, 0.002, 0.003), offset: (-32768, -32768, -32768), m: skewed),
        Layout(name: "mixed forms within a sensor", axis: format(false, true, 16, 16), axisBytes: 2, timestamp: format(false, true, 64, 64),
               scale: (1, 1, 1), offset: (0, 0, 0), m: rotated),
    ]

    private func decoder(_ l: Layout, units: MotionUnits, kinds: [SensorKind], clockOffset: Int64) -> (ScanDecoder, step: Int) {
        var sensors: [ScanDecoder.Sensor] = []
        var offset = 0
        for (k, kind) in kinds.enumerated() {
            var axes: [ScanDecoder.Element] = []
            for a in 0..<3 {
                // The last layout gives one axis of each sensor another format: the general reader then.
                let f = l.name.hasPrefix("mixed") && a == 1 ? format(false, true, 32, 32) : l.axis
                let bytes = f.storageBits / 8
                offset = (offset + bytes - 1) / bytes * bytes
                axes.append(ScanDecoder.Element(offset: offset, format: f))
                offset += bytes
            }
            let sign = k == 0 ? 1.0 : -1.0
            sensors.append(ScanDecoder.Sensor(kind: kind, axes: (axes[0], axes[1], axes[2]),
                                              scale: (l.scale.0 * sign, l.scale.1, l.scale.2), offset: l.offset, m: l.m))
        }
        var timestamp: ScanDecoder.Element?
        if let t = l.timestamp {
            offset = (offset + 7) / 8 * 8
            timestamp = ScanDecoder.Element(offset: offset, format: t)
            offset += 8
        }
        let step = (offset + 7) / 8 * 8
        return (ScanDecoder(sensors: sensors, timestamp: timestamp, clockOffset: clockOffset, units: units), step)
    }

    /// A reference sample and its sensor.
    private struct Reference {
        var kind: SensorKind
        var x: Double, y: Double, z: Double
        var timestamp: Double
    }

    /// The reference decode: the kernel's SI value, then `Conversion` to the decoder's units.
    private func reference(_ d: ScanDecoder, _ scan: UnsafeRawPointer, time: Double) -> [Reference] {
        var out = [Sample](repeating: Sample(timestamp: 0, x: 0, y: 0, z: 0), count: d.sensors.count)
        _ = out.withUnsafeMutableBufferPointer { d.decode(scan, fallbackTime: time, into: $0.baseAddress!) }
        return zip(d.sensors, out).map { Reference(kind: $0.kind, x: $1.x, y: $1.y, z: $1.z, timestamp: $1.timestamp) }
    }

    /// The last of `kind`'s samples in `batch`'s arrays, as the hub keeps it.
    private func last(_ batch: CaptureBatch, _ kind: SensorKind) -> Sample? {
        switch kind {
        case .accelerometer: batch.accelerometer.last?.sample
        case .gyroscope: batch.gyroscope.last?.sample
        case .magnetometer: batch.magnetometer.last?.sample
        }
    }

    /// Within a few units in the last place of the vector's largest component (the folded factors
    /// round differently; the mount matrices are orthonormal, so no term exceeds that component).
    private func close(_ got: (Double, Double, Double), _ want: Reference) -> Bool {
        let tolerance = 16 * max(abs(want.x), abs(want.y), abs(want.z)).ulp
        return abs(got.0 - want.x) <= tolerance && abs(got.1 - want.y) <= tolerance && abs(got.2 - want.z) <= tolerance
    }

    @Test("The capture's fast path gives the reference decode's samples, every fixture-like format, both unit systems",
          arguments: [MotionUnits.coreMotion, .si])
    func fastPathMatchesReference(units: MotionUnits) throws {
        var rng = SplitMix64(seed: 0xF00D)
        for l in Self.layouts {
            for kinds in [[SensorKind.gyroscope, .accelerometer], [.accelerometer], [.magnetometer, .gyroscope, .accelerometer]] {
                let clockOffset: Int64 = l.timestamp == nil ? 0 : Int64.random(in: -1_000_000...1_000_000, using: &rng)
                let (d, step) = decoder(l, units: units, kinds: kinds, clockOffset: clockOffset)
                let scans = 1000
                let bytes = randomScans(scans, size: step, rng: &rng)
                let readTime = 1234.5, period = 1.0 / 1600
                try bytes.withUnsafeBytes { raw in
                    let start = raw.baseAddress!
                    let times = UnsafeMutablePointer<Double>.allocate(capacity: scans)
                    defer { times.deallocate() }
                    let all = d.batch(start, step: step, scans: scans, everySample: true, readTime: readTime, period: period, times: times)
                    var exactBits = 0, total = 0
                    for s in 0..<scans {
                        let want = reference(d, start + s * step, time: readTime - Double(scans - 1 - s) * period)
                        for w in want {
                            let got: (Double, Double, Double, Double)
                            switch w.kind {
                            case .accelerometer:
                                let a = all.accelerometer[s]
                                got = (a.timestamp, a.acceleration.x, a.acceleration.y, a.acceleration.z)
                            case .gyroscope:
                                let g = all.gyroscope[s]
                                got = (g.timestamp, g.rotationRate.x, g.rotationRate.y, g.rotationRate.z)
                            case .magnetometer:
                                let m = all.magnetometer[s]
                                got = (m.timestamp, m.magneticField.x, m.magneticField.y, m.magneticField.z)
                            }
                            #expect(got.0 == w.timestamp, "\(l.name) \(w.kind) scan \(s): timestamp")
                            let ok = close((got.1, got.2, got.3), w)
                            #expect(ok, "\(l.name) \(w.kind) scan \(s): \(got) vs \(w)")
                            if !ok { return }
                            total += 1
                            if got.1 == w.x && got.2 == w.y && got.3 == w.z { exactBits += 1 }
                            // Exact factors (SI or rad/s, matrices of 0 and ±1): bit for bit, zeros included.
                            let exactFactors = (w.kind == .gyroscope || (w.kind == .accelerometer && units == .si))
                                && l.m.0.magnitude != 0.36
                            if exactFactors {
                                #expect(got.1 == w.x && got.2 == w.y && got.3 == w.z, "\(l.name) \(w.kind) scan \(s)")
                            }
                        }
                    }
                    #expect(all.count(.accelerometer) == scans)
                    #expect(kinds.contains(.gyroscope) ? all.count(.gyroscope) == scans : all.gyroscope.isEmpty)
                    #expect(total == scans * kinds.count && exactBits > 0)

                    // Only the newest scan when no consumer wants every sample: the same values, the same counts.
                    let newest = d.batch(start, step: step, scans: scans, everySample: false, readTime: readTime, period: period, times: times)
                    #expect(newest.accelerometer.isEmpty && newest.gyroscope.isEmpty && newest.magnetometer.isEmpty)
                    for kind in kinds {
                        #expect(newest.count(kind) == scans)
                        let n = try #require(newest.newest(kind))
                        let a = try #require(all.newest(kind))
                        #expect(n.x == a.x && n.y == a.y && n.z == a.z && n.timestamp == a.timestamp && a == last(all, kind))
                    }
                }
            }
        }
    }

    @Test("Mount matrices that only swap axes and flip signs take three products, with the full product's bits")
    func loneFactors() {
        var rng = SplitMix64(seed: 0x10E)
        for l in Self.layouts {
            for units in [MotionUnits.coreMotion, .si] {
                let (d, step) = decoder(l, units: units, kinds: [.gyroscope, .accelerometer, .magnetometer], clockOffset: 0)
                #expect(d.folded.allSatisfy { ($0.direct != nil) == (l.m.0.magnitude != 0.36) }, "\(l.name)")
                var full = d
                for i in full.folded.indices { full.folded[i].direct = nil }
                let scans = 500
                let bytes = randomScans(scans, size: step, rng: &rng)
                bytes.withUnsafeBytes { raw in
                    let times = UnsafeMutablePointer<Double>.allocate(capacity: scans)
                    defer { times.deallocate() }
                    let a = d.batch(raw.baseAddress!, step: step, scans: scans, everySample: true, readTime: 1, period: 0.01, times: times)
                    let b = full.batch(raw.baseAddress!, step: step, scans: scans, everySample: true, readTime: 1, period: 0.01, times: times)
                    let same = a.accelerometer == b.accelerometer && a.gyroscope == b.gyroscope && a.magnetometer == b.magnetometer
                    let signs = zip(a.accelerometer, b.accelerometer).allSatisfy {
                        $0.acceleration.x.sign == $1.acceleration.x.sign && $0.acceleration.y.sign == $1.acceleration.y.sign
                            && $0.acceleration.z.sign == $1.acceleration.z.sign
                    }
                    #expect(same && signs, "\(l.name) \(units)")
                }
            }
        }
    }

    /// Where an array's elements are (to tell storage reused in place from a new array).
    private func storage<T>(_ a: [T]) -> UnsafeRawPointer? { a.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) } }

    @Test("A reused batch is overwritten in place when nobody holds it, else replaced by new arrays: a held batch never changes")
    func reuse() {
        var rng = SplitMix64(seed: 0x5EED)
        let (d, step) = decoder(Self.layouts[0], units: .coreMotion, kinds: [.gyroscope, .accelerometer], clockOffset: 0)
        let scans = 300
        let one = randomScans(scans, size: step, rng: &rng), two = randomScans(scans, size: step, rng: &rng)
        let times = UnsafeMutablePointer<Double>.allocate(capacity: scans)
        defer { times.deallocate() }
        func batch(_ bytes: [UInt8], scans: Int = scans, reusing spare: inout CaptureBatch) -> CaptureBatch {
            bytes.withUnsafeBytes {
                d.batch($0.baseAddress!, step: step, scans: scans, everySample: true, readTime: 1, period: 0.01, times: times, reusing: &spare)
            }
        }
        var none = CaptureBatch()
        let fresh1 = batch(one, reusing: &none)
        none = CaptureBatch()
        let fresh2 = batch(two, reusing: &none)

        // Held by a consumer: the next batch gets new arrays, and the held one keeps its samples.
        var spare = CaptureBatch()
        let held = batch(one, reusing: &spare)
        let second = batch(two, reusing: &spare)
        #expect(held.accelerometer == fresh1.accelerometer && held.gyroscope == fresh1.gyroscope)
        #expect(second.accelerometer == fresh2.accelerometer && second.gyroscope == fresh2.gyroscope)
        #expect(storage(second.accelerometer) != storage(held.accelerometer) && storage(second.gyroscope) != storage(held.gyroscope))
        let third = batch(one, reusing: &spare)  // `second` is still held (by this test)
        #expect(third.accelerometer == fresh1.accelerometer && second.accelerometer == fresh2.accelerometer)
        #expect(storage(third.accelerometer) != storage(second.accelerometer))

        // Held by nobody but `spare`: overwritten in place (also with somewhat fewer scans), and
        // replaced by an array of the right size when refills become much smaller.
        var mine = CaptureBatch()
        let first = batch(one, reusing: &mine)
        let places = (storage(first.accelerometer), storage(first.gyroscope))
        _ = consume first
        let again = batch(two, reusing: &mine)
        #expect(again.accelerometer == fresh2.accelerometer && again.gyroscope == fresh2.gyroscope)
        #expect(storage(again.accelerometer) == places.0 && storage(again.gyroscope) == places.1)
        _ = consume again
        let fewer = batch(one, scans: 200, reusing: &mine)
        #expect(fewer.accelerometer == Array(fresh1.accelerometer.prefix(200)) && fewer.gyroscope.count == 200)
        #expect(storage(fewer.accelerometer) == places.0)
        _ = consume fewer
        let few = batch(one, scans: 100, reusing: &mine)
        #expect(few.accelerometer == Array(fresh1.accelerometer.prefix(100)) && few.accelerometer.capacity < 200)
    }

    /// The bits of every sample (`==` would take −0 for +0).
    private func bits<T: DecodedSample>(_ samples: [T], _ values: (T) -> (Double, Double, Double, Double)) -> [UInt64] {
        samples.flatMap { s in
            let v = values(s)
            return [v.0.bitPattern, v.1.bitPattern, v.2.bitPattern, v.3.bitPattern]
        }
    }

    @Test("One pass over the scans gives the general path's bits: every set of sensors it takes, specialised reader and units")
    func onePassMatchesGeneralPath() throws {
        var rng = SplitMix64(seed: 0x0E9A55)
        let kindSets: [[SensorKind]] = [[.accelerometer], [.gyroscope], [.magnetometer], [.gyroscope, .accelerometer],
                                        [.magnetometer, .gyroscope, .accelerometer]]
        for axis in [format(false, true, 16, 16), format(false, true, 32, 32), format(true, true, 16, 16)] {
            for kinds in kindSets {
                for units in [MotionUnits.coreMotion, .si] {
                    let l = Layout(name: "one pass", axis: axis, axisBytes: axis.storageBits / 8, timestamp: format(false, true, 64, 64),
                                   scale: (0.000598, 0.0011, 0.0383), offset: (0, -0.0, 0), m: Self.rotated)
                    let (d, step) = decoder(l, units: units, kinds: kinds, clockOffset: Int64.random(in: -1_000_000...1_000_000, using: &rng))
                    let scans = 257
                    let bytes = randomScans(scans, size: step, rng: &rng)
                    try bytes.withUnsafeBytes { raw in
                        let start = raw.baseAddress!
                        var spare = CaptureBatch()
                        try #require(d.onePass(start, step: step, count: scans, into: &spare), "\(axis) \(kinds) \(units): the layout qualifies")
                        // The general path, by hand: the timestamps, then each sensor over every scan.
                        let times = UnsafeMutablePointer<Double>.allocate(capacity: scans)
                        defer { times.deallocate() }
                        d.timestamps(start, step: step, count: scans, dating: (0, 0, scans - 1), into: times)
                        for (i, s) in d.folded.enumerated() {
                            func general<T: DecodedSample>(_: T.Type) -> [T] {
                                [T](unsafeUninitializedCapacity: scans) { out, n in
                                    d.fill(i, start, step: step, count: scans, times: times, into: out.baseAddress!)
                                    n = scans
                                }
                            }
                            let same = switch s.kind {
                            case .accelerometer:
                                bits(spare.accelerometer) { ($0.timestamp, $0.acceleration.x, $0.acceleration.y, $0.acceleration.z) }
                                    == bits(general(AccelerometerData.self)) { ($0.timestamp, $0.acceleration.x, $0.acceleration.y, $0.acceleration.z) }
                            case .gyroscope:
                                bits(spare.gyroscope) { ($0.timestamp, $0.rotationRate.x, $0.rotationRate.y, $0.rotationRate.z) }
                                    == bits(general(GyroData.self)) { ($0.timestamp, $0.rotationRate.x, $0.rotationRate.y, $0.rotationRate.z) }
                            case .magnetometer:
                                bits(spare.magnetometer) { ($0.timestamp, $0.magneticField.x, $0.magneticField.y, $0.magneticField.z) }
                                    == bits(general(MagnetometerData.self)) { ($0.timestamp, $0.magneticField.x, $0.magneticField.y, $0.magneticField.z) }
                            }
                            #expect(same, "\(axis) \(kinds) \(units): \(s.kind)")
                        }
                        #expect(spare.accelerometer.count == (kinds.contains(.accelerometer) ? scans : 0))
                        #expect(spare.gyroscope.count == (kinds.contains(.gyroscope) ? scans : 0))
                        #expect(spare.magnetometer.count == (kinds.contains(.magnetometer) ? scans : 0))
                    }
                }
            }
        }
    }

    @Test("Layouts one pass does not take are left to the general path")
    func onePassDeclines() {
        let bytes = [UInt8](repeating: 0, count: 64)
        func declines(_ l: Layout, _ kinds: [SensorKind] = [.gyroscope, .accelerometer]) -> Bool {
            let (d, step) = decoder(l, units: .si, kinds: kinds, clockOffset: 0)
            var spare = CaptureBatch()
            return bytes.withUnsafeBytes { !d.onePass($0.baseAddress!, step: step, count: 1, into: &spare) }
                && spare.accelerometer.isEmpty && spare.gyroscope.isEmpty && spare.magnetometer.isEmpty
        }
        #expect(declines(Self.layouts[1]))  // offsets
        #expect(declines(Self.layouts[3]))  // le:s12/16>>4: the general reader, and no timestamp
        #expect(declines(Self.layouts[4]))  // be:s64 timestamp
        #expect(declines(Self.layouts[5]))  // two forms within a sensor
        var skewed = Self.layouts[0]
        skewed.m = Self.skewed
        #expect(declines(skewed))  // no lone mapping
        var untimed = Self.layouts[0]
        untimed.timestamp = nil
        #expect(declines(untimed))
        #expect(declines(Self.layouts[0], [.accelerometer, .accelerometer]))  // two of a kind
        #expect(declines(Self.layouts[0], [.accelerometer, .magnetometer]) && declines(Self.layouts[0], [.magnetometer, .gyroscope]))
        #expect(declines(Self.layouts[0], []))
        #expect(!declines(Self.layouts[0]) && !declines(Self.layouts[2]))
    }

    @Test("A zero reads +0, never −0 (as Core Motion's `0 − v` did)")
    func noNegativeZero() {
        let l = Self.layouts[0]
        let (d, step) = decoder(l, units: .coreMotion, kinds: [.gyroscope, .accelerometer], clockOffset: 0)
        let bytes = [UInt8](repeating: 0, count: step)
        bytes.withUnsafeBytes { raw in
            let times = UnsafeMutablePointer<Double>.allocate(capacity: 1)
            defer { times.deallocate() }
            let b = d.batch(raw.baseAddress!, step: step, scans: 1, everySample: true, readTime: 0, period: 0, times: times)
            let a = b.accelerometer[0].acceleration
            #expect(a.x.sign == .plus && a.y.sign == .plus && a.z.sign == .plus, "\(a)")
        }
    }
}
