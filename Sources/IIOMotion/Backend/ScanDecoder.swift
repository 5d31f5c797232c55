/// Decodes scans into samples: each element per its format (endianness, sign, bits, storage,
/// shift), then `(raw + offset) · scale`, then the sensor's calibration (``SensorCalibration``,
/// folded into the offset and the matrix), then the mount matrix. No allocation per scan.
///
/// Two entry points:
/// - ``decode(_:fallbackTime:into:)``: one scan, every sensor, in the kernel's SI units, element by
///   element through the general reader (``Element/value(_:)``). The reference.
/// - ``batch(_:step:scans:everySample:readTime:period:times:)``: what the capture thread runs on
///   each refill. Straight into the public sample type (``AccelerometerData`` …), with scale,
///   mount matrix and unit factor folded into one 3×3 matrix per sensor (``Folded``), and the
///   element reader chosen once per refill: specialised for `le:s16/16`, `le:s32/32`,
///   `be:s16/16` (and `le:s64/64` timestamps), the general reader for every other format. The
///   common layouts take one pass over the scans for every sensor and the timestamp
///   (``onePass(_:step:count:into:)``); the others a pass for the timestamps, then one
///   per sensor.
///
/// The two agree on every raw value bit for bit; converted values agree bit for bit where the
/// folded factors are exact (SI, rad/s, mount matrices of 0 and ±1), else within a few units in
/// the last place (g: the reference's values are divided by 9.80665 after the matrix, the folded
/// path multiplies by `−scale / 9.80665` inside it). A zero reads `+0`, never `−0`.
struct ScanDecoder {
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
    /// where `F[i][j] = M[i][j] · scale[j] · unit` (`unit`: −1/9.80665 for acceleration in g,
    /// 100 for Gauss to µT, else 1). The `+ 0` turns `−0` into `0`.
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
            let unit: Double
            switch s.kind {
            case .accelerometer: unit = units == .coreMotion ? -1 / standardGravity : 1
            case .gyroscope: unit = 1
            case .magnetometer: unit = 100
            }
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

    /// Decodes one scan into `out` (one sample per sensor, kernel SI units); returns how many
    /// were written. The reference the capture's fast path is tested against.
    @inline(__always)
    func decode(_ scan: UnsafeRawPointer, fallbackTime: Double, into out: UnsafeMutablePointer<CapturedSample>) -> Int {
        let t = timestamp.map { Double($0.value(scan) &- clockOffset) * 1e-9 } ?? fallbackTime
        sensors.withUnsafeBufferPointer { all in
            for i in 0..<all.count {
                let s = all[i]
                let x = (Double(s.axes.0.value(scan)) + s.offset.0) * s.scale.0
                let y = (Double(s.axes.1.value(scan)) + s.offset.1) * s.scale.1
                let z = (Double(s.axes.2.value(scan)) + s.offset.2) * s.scale.2
                let m = s.m
                out[i] = CapturedSample(kind: s.kind, x: m.0 * x + m.1 * y + m.2 * z, y: m.3 * x + m.4 * y + m.5 * z,
                                        z: m.6 * x + m.7 * y + m.8 * z, timestamp: t)
            }
        }
        return sensors.count
    }

    // MARK: The capture's fast path

    /// One refill's samples in public units (``units``), per sensor: every scan's when
    /// `everySample` (one array per sensor), else only the newest scan's, with the count of scans.
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
                var one = PlainSample()
                fill(i, newest, step: step, count: 1, times: times, into: &one)
                batch.record(CapturedSample(kind: folded[i].kind, x: one.x, y: one.y, z: one.z, timestamp: one.timestamp), count: scans)
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
                batch.record(batch.accelerometer.last.map(CapturedSample.init), count: scans)
            case .gyroscope:
                batch.gyroscope = spare.gyroscope
                batch.record(batch.gyroscope.last.map(CapturedSample.init), count: scans)
            case .magnetometer:
                batch.magnetometer = spare.magnetometer
                batch.record(batch.magnetometer.last.map(CapturedSample.init), count: scans)
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

    // MARK: One pass for every sensor

    /// A sensor's ``Folded/direct`` mapping.
    typealias DirectMap = (axes: (Element, Element, Element), offset: (Double, Double, Double), factor: (Double, Double, Double))

    /// Decodes every sensor of `count` scans from `start` into `spare`'s arrays, and dates them,
    /// in a single pass over the scans: each scan read once, its timestamp converted once, no
    /// scratch array of timestamps written and read back. For the layouts nearly every device
    /// has: one sensor, or an accelerometer and a gyroscope (and a magnetometer), each with a
    /// ``Folded/direct`` mapping and no offset, all axes of one specialised form, and a `le:s64`
    /// timestamp. Returns false, having done nothing, for any other layout (the general path
    /// then runs).
    ///
    /// The arithmetic of ``fill(_:_:step:count:times:into:)`` and ``timestamps(_:step:count:dating:into:)``,
    /// so the same bits: ``DirectReaders`` leaves out only the add of a zero offset, which changes no
    /// value (`Double(raw)` is never −0, and `+0 + −0` is `+0`).
    func onePass(_ start: UnsafeRawPointer, step: Int, count: Int, into spare: inout CaptureBatch) -> Bool {
        guard let timestamp, timestamp.form == .le64 else { return false }
        var form: Element.Form?
        var maps: (a: DirectMap?, g: DirectMap?, m: DirectMap?) = (nil, nil, nil)
        for s in folded {
            guard let direct = s.direct, direct.offset == (0, 0, 0), s.form != .general, form == nil || form == s.form else { return false }
            form = s.form
            switch s.kind {
            case .accelerometer where maps.a == nil: maps.a = direct
            case .gyroscope where maps.g == nil: maps.g = direct
            case .magnetometer where maps.m == nil: maps.m = direct
            default: return false  // two sensors of one kind: the general path (the later one's array wins)
            }
        }
        let time = KernelTime(reader: LE64Reader(timestamp), clockOffset: clockOffset)
        switch form {
        case .le16: return Self.onePass(LE16Reader.self, time, maps, start, step: step, count: count, into: &spare)
        case .le32: return Self.onePass(LE32Reader.self, time, maps, start, step: step, count: count, into: &spare)
        case .be16: return Self.onePass(BE16Reader.self, time, maps, start, step: step, count: count, into: &spare)
        case .le64, .general, nil: return false
        }
    }

    /// ``onePass(_:step:count:into:)`` for one reader: a loop per set of sensors, each writing
    /// straight into its arrays.
    private static func onePass<R: ElementReader>(
        _: R.Type, _ time: KernelTime, _ maps: (a: DirectMap?, g: DirectMap?, m: DirectMap?), _ start: UnsafeRawPointer, step: Int,
        count: Int, into spare: inout CaptureBatch
    ) -> Bool {
        let readers = (a: maps.a.map { DirectReaders<R>($0) }, g: maps.g.map { DirectReaders<R>($0) }, m: maps.m.map { DirectReaders<R>($0) })
        switch readers {
        case let (la?, nil, nil):
            overwrite(&spare.accelerometer, count: count) { pass(la, time, start, step: step, count: count, into: $0) }
        case let (nil, lg?, nil):
            overwrite(&spare.gyroscope, count: count) { pass(lg, time, start, step: step, count: count, into: $0) }
        case let (nil, nil, lm?):
            overwrite(&spare.magnetometer, count: count) { pass(lm, time, start, step: step, count: count, into: $0) }
        case let (la?, lg?, lm):
            // Out of `spare` while they are refilled, so that each closure below holds one array
            // (and `overwrite` finds it uniquely held when no consumer holds it).
            var a: [AccelerometerData] = [], g: [GyroData] = [], m: [MagnetometerData] = []
            swap(&a, &spare.accelerometer)
            swap(&g, &spare.gyroscope)
            swap(&m, &spare.magnetometer)
            defer {
                swap(&a, &spare.accelerometer)
                swap(&g, &spare.gyroscope)
                swap(&m, &spare.magnetometer)
            }
            overwrite(&a, count: count) { pa in
                overwrite(&g, count: count) { pg in
                    if let lm {
                        overwrite(&m, count: count) { pass(la, lg, lm, time, start, step: step, count: count, into: pa, pg, $0) }
                    } else {
                        pass(la, lg, time, start, step: step, count: count, into: pa, pg)
                    }
                }
            }
        default:
            return false  // no sensor, or a magnetometer with only one of the others
        }
        return true
    }

    /// One sensor's samples of `count` scans.
    @inline(__always)
    private static func pass<R, T: DecodedSample>(_ a: DirectReaders<R>, _ time: KernelTime, _ start: UnsafeRawPointer, step: Int,
                                                  count: Int, into pa: UnsafeMutablePointer<T>) {
        var scan = start
        for i in 0..<count {
            (pa + i).initialize(to: a.sample(scan, time: time.seconds(scan)))
            scan += step
        }
    }

    /// Two sensors' samples of `count` scans.
    @inline(__always)
    private static func pass<R, T: DecodedSample, U: DecodedSample>(
        _ a: DirectReaders<R>, _ b: DirectReaders<R>, _ time: KernelTime, _ start: UnsafeRawPointer, step: Int, count: Int,
        into pa: UnsafeMutablePointer<T>, _ pb: UnsafeMutablePointer<U>
    ) {
        var scan = start
        for i in 0..<count {
            let t = time.seconds(scan)
            (pa + i).initialize(to: a.sample(scan, time: t))
            (pb + i).initialize(to: b.sample(scan, time: t))
            scan += step
        }
    }

    /// Three sensors' samples of `count` scans.
    @inline(__always)
    private static func pass<R, T: DecodedSample, U: DecodedSample, V: DecodedSample>(
        _ a: DirectReaders<R>, _ b: DirectReaders<R>, _ c: DirectReaders<R>, _ time: KernelTime, _ start: UnsafeRawPointer, step: Int, count: Int,
        into pa: UnsafeMutablePointer<T>, _ pb: UnsafeMutablePointer<U>, _ pc: UnsafeMutablePointer<V>
    ) {
        var scan = start
        for i in 0..<count {
            let t = time.seconds(scan)
            (pa + i).initialize(to: a.sample(scan, time: t))
            (pb + i).initialize(to: b.sample(scan, time: t))
            (pc + i).initialize(to: c.sample(scan, time: t))
            scan += step
        }
    }
}

/// A ``ScanDecoder/DirectMap`` mapping without offsets, with its readers: output `i` is
/// `factor.i · raw(axes.i) + 0` (the `+ 0` turns `−0` into `0`).
struct DirectReaders<R: ElementReader> {
    let x: R, y: R, z: R
    let factor: (Double, Double, Double)

    init(_ direct: ScanDecoder.DirectMap) {
        (x, y, z) = (R(direct.axes.0), R(direct.axes.1), R(direct.axes.2))
        factor = direct.factor
    }

    @inline(__always)
    func sample<T: DecodedSample>(_ scan: UnsafeRawPointer, time: Double) -> T {
        T(timestamp: time,
          x: factor.0 * Double(x.value(scan)) + 0,
          y: factor.1 * Double(y.value(scan)) + 0,
          z: factor.2 * Double(z.value(scan)) + 0)
    }
}

/// A scan's `le:s64` timestamp in seconds on `CLOCK_MONOTONIC`, as ``ScanDecoder/timestamps(_:step:count:dating:into:)`` has it.
struct KernelTime {
    let reader: LE64Reader
    let clockOffset: Int64
    @inline(__always) func seconds(_ scan: UnsafeRawPointer) -> Double {
        Double(reader.value(scan) &- clockOffset) * 1e-9
    }
}

// MARK: Element readers

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

// MARK: Outputs

/// A sample type the decoder writes straight into: a timestamp and a vector in public units.
protocol DecodedSample {
    init(timestamp: Double, x: Double, y: Double, z: Double)
}

/// A sample of no particular kind (the newest scan, before it becomes a ``CapturedSample``).
struct PlainSample: DecodedSample {
    var timestamp = 0.0, x = 0.0, y = 0.0, z = 0.0
    init() {}
    init(timestamp: Double, x: Double, y: Double, z: Double) {
        self.timestamp = timestamp
        self.x = x
        self.y = y
        self.z = z
    }
}

extension AccelerometerData: DecodedSample {
    @inline(__always)
    init(timestamp: Double, x: Double, y: Double, z: Double) {
        self.init(timestamp: timestamp, acceleration: Acceleration(x: x, y: y, z: z))
    }
}

extension GyroData: DecodedSample {
    @inline(__always)
    init(timestamp: Double, x: Double, y: Double, z: Double) {
        self.init(timestamp: timestamp, rotationRate: RotationRate(x: x, y: y, z: z))
    }
}

extension MagnetometerData: DecodedSample {
    @inline(__always)
    init(timestamp: Double, x: Double, y: Double, z: Double) {
        self.init(timestamp: timestamp, magneticField: MagneticField(x: x, y: y, z: z))
    }
}

extension CapturedSample {
    init(_ d: AccelerometerData) {
        self.init(kind: .accelerometer, x: d.acceleration.x, y: d.acceleration.y, z: d.acceleration.z, timestamp: d.timestamp)
    }

    init(_ d: GyroData) {
        self.init(kind: .gyroscope, x: d.rotationRate.x, y: d.rotationRate.y, z: d.rotationRate.z, timestamp: d.timestamp)
    }

    init(_ d: MagnetometerData) {
        self.init(kind: .magnetometer, x: d.magneticField.x, y: d.magneticField.y, z: d.magneticField.z, timestamp: d.timestamp)
    }

    /// A sample read in the kernel's SI units (rotated), in public `units`: what polled captures
    /// deliver, by the same ``Conversion`` as ``MotionManager/readAccelerometer()``.
    init(kind: SensorKind, si v: (x: Double, y: Double, z: Double), timestamp: Double, units: MotionUnits) {
        switch kind {
        case .accelerometer:
            let a = Conversion.acceleration(v, units: units)
            self.init(kind: kind, x: a.x, y: a.y, z: a.z, timestamp: timestamp)
        case .gyroscope:
            let r = Conversion.rotationRate(v, units: units)
            self.init(kind: kind, x: r.x, y: r.y, z: r.z, timestamp: timestamp)
        case .magnetometer:
            let m = Conversion.magneticField(v, units: units)
            self.init(kind: kind, x: m.x, y: m.y, z: m.z, timestamp: timestamp)
        }
    }
}

/// What one refill (or one poll) hands to the hub: per sensor kind, how many samples the sensor
/// made and the newest, and, when a consumer wants every sample, all of them; in public units.
struct CaptureBatch: Sendable {
    /// Per kind: how many samples, and the newest.
    var counts = PerSensor(repeating: 0)
    var newest = PerSensor<CapturedSample?>(repeating: nil)
    /// Every sample (empty unless the capture serves a batched consumer).
    var accelerometer: [AccelerometerData] = []
    var gyroscope: [GyroData] = []
    var magnetometer: [MagnetometerData] = []

    var isEmpty: Bool { counts == PerSensor(repeating: 0) }

    func count(_ kind: SensorKind) -> Int { counts[kind] }

    func newest(_ kind: SensorKind) -> CapturedSample? { newest[kind] }

    /// Counts `count` more samples of the sample's kind, the newest being `sample`.
    mutating func record(_ sample: CapturedSample?, count: Int) {
        guard let sample else { return }
        newest[sample.kind] = sample
        counts[sample.kind] += count
    }

    /// Adds one polled sample (and, when `everySample`, to its kind's array).
    mutating func append(_ s: CapturedSample, everySample: Bool) {
        record(s, count: 1)
        guard everySample else { return }
        switch s.kind {
        case .accelerometer: accelerometer.append(AccelerometerData(timestamp: s.timestamp, x: s.x, y: s.y, z: s.z))
        case .gyroscope: gyroscope.append(GyroData(timestamp: s.timestamp, x: s.x, y: s.y, z: s.z))
        case .magnetometer: magnetometer.append(MagnetometerData(timestamp: s.timestamp, x: s.x, y: s.y, z: s.z))
        }
    }
}
