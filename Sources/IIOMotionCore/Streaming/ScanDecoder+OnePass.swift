/// The capture's single pass over a refill for the layouts nearly every device has (see
/// ``ScanDecoder/onePass(_:step:count:into:)``).
extension ScanDecoder {
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
