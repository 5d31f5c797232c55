import IIOScanFormat

/// Decodes scans into samples: each element per its format (endianness, sign, bits, storage,
/// shift), then `(raw + offset) · scale`, then the sensor's calibration (``SensorCalibration``,
/// folded into the offset and the matrix), then the mount matrix. No allocation per scan.
///
/// Two entry points, both in the decoder's ``units``:
/// - ``decode(_:fallbackTime:into:)``: one scan, every sensor, element by element through the
///   general reader (``Element/value(_:)``), in the kernel's SI units, then ``Conversion``. The
///   reference.
/// - ``batch(_:step:scans:everySample:readTime:period:times:)``: what the capture thread runs on
///   each refill. Straight into the public sample type (``AccelerometerData`` …) or ``Sample``,
///   with scale, mount matrix and unit factor (``Conversion/factor(_:to:)``) folded into one 3×3
///   matrix per sensor (``Folded``), and the element reader (ElementReaders.swift) chosen once
///   per refill: specialised for `le:s16/16`, `le:s32/32`, `be:s16/16` (and `le:s64/64`
///   timestamps), the general reader for every other format. The common layouts take one pass
///   over the scans for every sensor and the timestamp (``onePass(_:step:count:into:)``, in
///   ScanDecoder+OnePass.swift); the others a pass for the timestamps, then one per sensor.
///
/// The two agree on every raw value bit for bit; converted values agree bit for bit where the
/// folded factors are exact (SI, rad/s, mount matrices of 0 and ±1), else within a few units in
/// the last place (g: the reference's values are divided by 9.80665 after the matrix, the folded
/// path multiplies by `−scale / 9.80665` inside it). A zero reads `+0`, never `−0`.
///
/// The element formats are IIOScanFormat's ``ScanFormat``, as libiio reports them.
struct ScanDecoder {
    /// One element of the scan, ready to read: where it sits, and its ``ScanFormat`` turned into
    /// the masks and byte count the per-sample reader needs (worked out once per capture).
    struct Element {
        var offset: Int
        var bytes: Int
        var shift: UInt64
        var mask: UInt64
        var signBit: UInt64
        var isSigned: Bool
        var isBigEndian: Bool

        init(offset: Int, format: ScanFormat) {
            self.offset = offset
            bytes = max(1, format.storageBits / 8)
            shift = UInt64(format.shift)
            let bits = min(max(format.realBits, 1), 64)
            mask = bits >= 64 ? ~0 : (UInt64(1) << UInt64(bits)) - 1
            signBit = UInt64(1) << UInt64(bits - 1)
            isSigned = format.isSigned
            isBigEndian = format.isBigEndian
        }

        /// The element's value in `scan`: byte order, shift right, mask to the real bits, sign-extend.
        @inline(__always)
        func value(_ scan: UnsafeRawPointer) -> Int64 {
            let p = scan + offset
            var word: UInt64
            switch bytes {
            case 1: word = UInt64(p.load(as: UInt8.self))
            case 2:
                let v = p.loadUnaligned(as: UInt16.self)
                word = UInt64(isBigEndian ? v.byteSwapped : v)
            case 4:
                let v = p.loadUnaligned(as: UInt32.self)
                word = UInt64(isBigEndian ? v.byteSwapped : v)
            default:
                let v = p.loadUnaligned(as: UInt64.self)
                word = isBigEndian ? v.byteSwapped : v
            }
            word = (word >> shift) & mask
            if isSigned && word & signBit != 0 { word |= ~mask }
            return Int64(bitPattern: word)
        }

        /// The formats with a specialised reader: signed, every stored bit used, no shift.
        enum Form: Equatable {
            case le16, le32, le64, be16
            /// Anything else: ``value(_:)``.
            case general
        }

        var form: Form {
            let storedBits = bytes * 8
            let full: UInt64 = storedBits >= 64 ? ~0 : (UInt64(1) << UInt64(storedBits)) - 1
            guard isSigned, shift == 0, mask == full else { return .general }
            switch (bytes, isBigEndian) {
            case (2, false): return .le16
            case (4, false): return .le32
            case (8, false): return .le64
            case (2, true): return .be16
            default: return .general
            }
        }
    }

    struct Sensor {
        var kind: SensorKind
        var axes: (Element, Element, Element)
        var scale: (Double, Double, Double)
        var offset: (Double, Double, Double)
        /// The mount matrix, row by row, as plain values (no array to retain per sample).
        var m: (Double, Double, Double, Double, Double, Double, Double, Double, Double)
    }

    /// A sensor's whole conversion to public units in one step: `out = F · (raw + offset) + 0`,
    /// where `F[i][j] = M[i][j] · scale[j] · unit` (`unit`: ``Conversion/factor(_:to:)``,
    /// −1/9.80665 for acceleration in g, 100 for gauss to µT, else 1). The `+ 0` turns `−0` into `0`.
    struct Folded {
        var kind: SensorKind
        var axes: (Element, Element, Element)
        var offset: (Double, Double, Double)
        var f: (Double, Double, Double, Double, Double, Double, Double, Double, Double)
        /// The reader for all three axes: specialised when they share one specialised form.
        var form: Element.Form
        /// When each row of `f` has a single non-zero factor (the mount matrix only swaps axes and
        /// flips signs, as nearly all do): output `i` is `factor.i · (raw(axes.i) + offset.i) + 0`,
        /// three products instead of nine, and the same bits (the other terms are exact zeros).
        var direct: (axes: (Element, Element, Element), offset: (Double, Double, Double), factor: (Double, Double, Double))?

        init(_ s: Sensor, units: MotionUnits) {
            kind = s.kind
            axes = s.axes
            offset = s.offset
            let unit = Conversion.factor(s.kind, to: units)
            let (m, c) = (s.m, s.scale)
            f = (m.0 * c.0 * unit, m.1 * c.1 * unit, m.2 * c.2 * unit,
                 m.3 * c.0 * unit, m.4 * c.1 * unit, m.5 * c.2 * unit,
                 m.6 * c.0 * unit, m.7 * c.1 * unit, m.8 * c.2 * unit)
            let forms = (s.axes.0.form, s.axes.1.form, s.axes.2.form)
            form = forms.0 == forms.1 && forms.1 == forms.2 && forms.0 != .le64 ? forms.0 : .general

            let rows = [[f.0, f.1, f.2], [f.3, f.4, f.5], [f.6, f.7, f.8]]
            let elements = [s.axes.0, s.axes.1, s.axes.2], offsets = [s.offset.0, s.offset.1, s.offset.2]
            let columns = rows.compactMap { row -> Int? in
                let nonZero = row.indices.filter { row[$0] != 0 }
                return nonZero.count == 1 ? nonZero[0] : nil
            }
            if columns.count == 3 {
                let (a, b, c) = (columns[0], columns[1], columns[2])
                direct = ((elements[a], elements[b], elements[c]), (offsets[a], offsets[b], offsets[c]),
                        (rows[0][a], rows[1][b], rows[2][c]))
            }
        }
    }

    var sensors: [Sensor]
    var timestamp: Element?
    /// Subtracted from kernel timestamps (ns) to put them on CLOCK_MONOTONIC.
    var clockOffset: Int64
    /// The units ``batch(_:step:scans:everySample:readTime:period:times:)`` produces.
    let units: MotionUnits
    /// ``sensors`` folded for ``units``.
    var folded: [Folded]

    /// A sensor's offset and matrix with its calibration folded in:
    /// `M · A · ((raw + offset) · scale − bias) = (M · A) · ((raw + offset − bias / scale) · scale)`,
    /// so the bias joins the offset and `A` the mount matrix, and every decoding path applies it
    /// with no work of its own. (An axis with a zero scale reads 0 whatever its bias.)
    static func fold(_ calibration: SensorCalibration?, scale s: AxisValues, offset: AxisValues,
                     mount: [[Double]]) -> (offset: AxisValues, rows: [[Double]]) {
        guard let c = calibration else { return (offset, mount) }
        var o = offset
        for axis in Axis.allCases where s[axis] != 0 { o[axis] -= c.bias[axis] / s[axis] }
        let rows = (0..<3).map { i in (0..<3).map { j in (0..<3).reduce(0.0) { $0 + mount[i][$1] * c.matrix[$1][j] } } }
        return (o, rows)
    }

    /// A decoder of `buffer`'s scans, or nil when libiio did not enable one of the channels.
    init?(layout: DeviceLayout, buffer: some DeviceBuffer, clockOffset: Int64, units: MotionUnits = .si) {
        var sensors: [Sensor] = []
        for (plan, channels) in zip(layout.plans, layout.scanChannels) {
            guard let channels, channels.count == 3 else { return nil }
            var elements: [Element] = []
            for c in channels {
                guard let off = buffer.offset(ofChannel: c), let f = layout.formats[c] else { return nil }
                elements.append(Element(offset: off, format: f))
            }
            let s = plan.info.scale ?? AxisValues(all: 1)
            let (o, r) = Self.fold(plan.info.calibration, scale: s, offset: plan.info.offset, mount: plan.info.mountMatrix.rows)
            sensors.append(Sensor(kind: plan.info.kind, axes: (elements[0], elements[1], elements[2]),
                                  scale: (s.x, s.y, s.z), offset: (o.x, o.y, o.z),
                                  m: (r[0][0], r[0][1], r[0][2], r[1][0], r[1][1], r[1][2], r[2][0], r[2][1], r[2][2])))
        }
        var timestamp: Element?
        if let t = layout.timestampChannel, let off = buffer.offset(ofChannel: t), let f = layout.formats[t] {
            timestamp = Element(offset: off, format: f)
        }
        self.init(sensors: sensors, timestamp: timestamp, clockOffset: clockOffset, units: units)
    }

    /// A decoder of scans laid out as `sensors` and `timestamp` say (tests build one without libiio).
    init(sensors: [Sensor], timestamp: Element?, clockOffset: Int64, units: MotionUnits = .si) {
        self.sensors = sensors
        self.timestamp = timestamp
        self.clockOffset = clockOffset
        self.units = units
        folded = sensors.map { Folded($0, units: units) }
    }

    /// Decodes one scan into `out` (one sample per sensor, in ``sensors``' order, in ``units``);
    /// returns how many were written. The reference the capture's fast path is tested against:
    /// the kernel's SI value `M · ((raw + offset) · scale)` first, then ``Conversion/fromSI(_:_:to:)``.
    @inline(__always)
    func decode(_ scan: UnsafeRawPointer, fallbackTime: Double, into out: UnsafeMutablePointer<Sample>) -> Int {
        let t = timestamp.map { Double($0.value(scan) &- clockOffset) * 1e-9 } ?? fallbackTime
        sensors.withUnsafeBufferPointer { all in
            for i in 0..<all.count {
                let s = all[i]
                let x = (Double(s.axes.0.value(scan)) + s.offset.0) * s.scale.0
                let y = (Double(s.axes.1.value(scan)) + s.offset.1) * s.scale.1
                let z = (Double(s.axes.2.value(scan)) + s.offset.2) * s.scale.2
                let m = s.m
                let v = Conversion.fromSI((m.0 * x + m.1 * y + m.2 * z, m.3 * x + m.4 * y + m.5 * z, m.6 * x + m.7 * y + m.8 * z),
                                          s.kind, to: units)
                out[i] = Sample(timestamp: t, x: v.x, y: v.y, z: v.z)
            }
        }
        return sensors.count
    }

    // MARK: The capture's fast path

    /// One refill's samples in public units (``units``), per sensor: every scan's when
    /// `everySample` (one array of the public type per sensor), else only the newest scan's (a
    /// ``Sample``), with the count of scans.
    ///
    /// - Parameters:
    ///   - start: the first scan; `step` bytes from one scan to the next; `scans` scans.
    ///   - readTime, period: for devices without a timestamp channel, scan `i` is dated
    ///   `readTime − (scans − 1 − i) · period`.
    ///   - times: scratch room for `scans` timestamps (`everySample`) or one.
    ///   - spare: the arrays of the previous batch, overwritten in place when no consumer holds
    ///     them any more (no allocation), else left to their holders and replaced by new arrays
    ///     (nothing copied): an allocation per refill and sensor at most.
    func batch(_ start: UnsafeRawPointer, step: Int, scans: Int, everySample: Bool,
               readTime: Double, period: Double, times: UnsafeMutablePointer<Double>,
               reusing spare: inout CaptureBatch) -> CaptureBatch {
        var batch = CaptureBatch()
        guard scans > 0 else { return batch }
        guard everySample else {
            let newest = start + (scans - 1) * step
            timestamps(newest, step: step, count: 1, dating: (readTime, period, 0), into: times)
            for i in folded.indices {
                var one = Sample(timestamp: 0, x: 0, y: 0, z: 0)
                fill(i, newest, step: step, count: 1, times: times, into: &one)
                batch.record(one, of: folded[i].kind, count: scans)
            }
            return batch
        }
        if !onePass(start, step: step, count: scans, into: &spare) {
            timestamps(start, step: step, count: scans, dating: (readTime, period, scans - 1), into: times)
            for i in folded.indices {
                switch folded[i].kind {
                case .accelerometer: Self.overwrite(&spare.accelerometer, count: scans) { fill(i, start, step: step, count: scans, times: times, into: $0) }
                case .gyroscope: Self.overwrite(&spare.gyroscope, count: scans) { fill(i, start, step: step, count: scans, times: times, into: $0) }
                case .magnetometer: Self.overwrite(&spare.magnetometer, count: scans) { fill(i, start, step: step, count: scans, times: times, into: $0) }
                }
            }
        }
        for s in folded {
            switch s.kind {
            case .accelerometer:
                batch.accelerometer = spare.accelerometer
                batch.record(batch.accelerometer.last?.sample, of: .accelerometer, count: scans)
            case .gyroscope:
                batch.gyroscope = spare.gyroscope
                batch.record(batch.gyroscope.last?.sample, of: .gyroscope, count: scans)
            case .magnetometer:
                batch.magnetometer = spare.magnetometer
                batch.record(batch.magnetometer.last?.sample, of: .magnetometer, count: scans)
            }
        }
        return batch
    }

    /// ``batch(_:step:scans:everySample:readTime:period:times:reusing:)`` into new arrays.
    func batch(_ start: UnsafeRawPointer, step: Int, scans: Int, everySample: Bool,
               readTime: Double, period: Double, times: UnsafeMutablePointer<Double>) -> CaptureBatch {
        var spare = CaptureBatch()
        return batch(start, step: step, scans: scans, everySample: everySample, readTime: readTime, period: period,
                     times: times, reusing: &spare)
    }

    /// Makes `samples` the `count` samples `body` initialises at the pointer it is given: in
    /// `samples`' own storage when nobody else holds it, else in a new array, never copying the
    /// old samples (Swift's copy on write would, only for `body` to overwrite them all).
    ///
    /// `removeAll(keepingCapacity:)` is what tells the two apart: it empties a uniquely held
    /// array in place and gives a shared one a new, empty buffer of the same capacity, leaving
    /// the holders theirs. Reusing matters: a new 128 KB array per refill and sensor is freed on
    /// the handler's thread, and glibc gives such memory back to the kernel and faults it in
    /// again, page by page.
    @inline(__always)
    static func overwrite<T: DecodedSample>(_ samples: inout [T], count: Int, _ body: (UnsafeMutablePointer<T>) -> Void) {
        if samples.capacity < count || samples.capacity > 2 * count {
            samples = []  // too small, or far bigger than refills are now: sized afresh below
        } else {
            samples.removeAll(keepingCapacity: true)
        }
        #if compiler(>=6.2)
        samples.append(addingCapacity: count) { span in
            span.withUnsafeMutableBufferPointer { room, initialized in
                guard let base = room.baseAddress else { return }  // count == 0
                body(base)
                initialized = count
            }
        }
        #else
        // No `append(addingCapacity:)` before Swift 6.2: the room is filled with zero samples
        // first (in the storage kept above, uniquely held now, so nothing is allocated or
        // copied), which `body` overwrites; the samples are plain values.
        samples.append(contentsOf: repeatElement(T(timestamp: 0, x: 0, y: 0, z: 0), count: count))
        samples.withUnsafeMutableBufferPointer { room in
            guard let base = room.baseAddress else { return }  // count == 0
            body(base)
        }
        #endif
    }

    /// The timestamps of `count` scans from `start`, seconds on `CLOCK_MONOTONIC`: the kernel's,
    /// else `dating.readTime − (dating.last − i) · dating.period` (scan `last` was read last).
    func timestamps(_ start: UnsafeRawPointer, step: Int, count: Int, dating: (readTime: Double, period: Double, last: Int),
                    into times: UnsafeMutablePointer<Double>) {
        guard let timestamp else {
            for i in 0..<count { times[i] = dating.readTime - Double(dating.last - i) * dating.period }
            return
        }
        switch timestamp.form {
        case .le64: Self.timestamps(LE64Reader(timestamp), start, step: step, count: count, clockOffset: clockOffset, into: times)
        default: Self.timestamps(GeneralReader(timestamp), start, step: step, count: count, clockOffset: clockOffset, into: times)
        }
    }

    @inline(__always)
    private static func timestamps<R: ElementReader>(_ reader: R, _ start: UnsafeRawPointer, step: Int, count: Int,
                                                      clockOffset: Int64, into times: UnsafeMutablePointer<Double>) {
        var scan = start
        for i in 0..<count {
            times[i] = Double(reader.value(scan) &- clockOffset) * 1e-9
            scan += step
        }
    }

    /// Decodes sensor `index` of `count` scans from `start` into `out`, dated by `times`.
    func fill<T: DecodedSample>(_ index: Int, _ start: UnsafeRawPointer, step: Int, count: Int,
                                times: UnsafePointer<Double>, into out: UnsafeMutablePointer<T>) {
        let s = folded[index]
        if let direct = s.direct {
            switch s.form {
            case .le16: Self.fill(LE16Reader.self, direct, start, step: step, count: count, times: times, into: out)
            case .le32: Self.fill(LE32Reader.self, direct, start, step: step, count: count, times: times, into: out)
            case .be16: Self.fill(BE16Reader.self, direct, start, step: step, count: count, times: times, into: out)
            case .le64, .general: Self.fill(GeneralReader.self, direct, start, step: step, count: count, times: times, into: out)
            }
            return
        }
        switch s.form {
        case .le16: Self.fill(LE16Reader.self, s, start, step: step, count: count, times: times, into: out)
        case .le32: Self.fill(LE32Reader.self, s, start, step: step, count: count, times: times, into: out)
        case .be16: Self.fill(BE16Reader.self, s, start, step: step, count: count, times: times, into: out)
        case .le64, .general: Self.fill(GeneralReader.self, s, start, step: step, count: count, times: times, into: out)
        }
    }

    /// The hot loop when each output reads one axis: three reads, adds and products, one store.
    @inline(__always)
    private static func fill<R: ElementReader, T: DecodedSample>(
        _: R.Type, _ direct: DirectMap, _ start: UnsafeRawPointer, step: Int, count: Int, times: UnsafePointer<Double>,
        into out: UnsafeMutablePointer<T>
    ) {
        let rx = R(direct.axes.0), ry = R(direct.axes.1), rz = R(direct.axes.2)
        let o = direct.offset
        let f = direct.factor
        var scan = start
        for i in 0..<count {
            (out + i).initialize(to: T(timestamp: times[i],
                                       x: f.0 * (Double(rx.value(scan)) + o.0) + 0,
                                       y: f.1 * (Double(ry.value(scan)) + o.1) + 0,
                                       z: f.2 * (Double(rz.value(scan)) + o.2) + 0))
            scan += step
        }
    }

    /// The hot loop: three reads, three adds, a 3×3 product, one store per sample.
    @inline(__always)
    private static func fill<R: ElementReader, T: DecodedSample>(_: R.Type, _ s: Folded, _ start: UnsafeRawPointer, step: Int,
                                                                 count: Int, times: UnsafePointer<Double>,
                                                                 into out: UnsafeMutablePointer<T>) {
        let rx = R(s.axes.0), ry = R(s.axes.1), rz = R(s.axes.2)
        let o = s.offset
        let f = s.f
        var scan = start
        for i in 0..<count {
            let x = Double(rx.value(scan)) + o.0
            let y = Double(ry.value(scan)) + o.1
            let z = Double(rz.value(scan)) + o.2
            (out + i).initialize(to: T(timestamp: times[i],
                                       x: f.0 * x + f.1 * y + f.2 * z + 0,
                                       y: f.3 * x + f.4 * y + f.5 * z + 0,
                                       z: f.6 * x + f.7 * y + f.8 * z + 0))
            scan += step
        }
    }
}
