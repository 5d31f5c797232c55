package import IIOScanFormat

/// The parsers and the scan decoder, reachable from the fuzzer (`Sources/iio-fuzz`, run by
/// `scripts/fuzz`) and from the test that replays its corpus, without making any internal type
/// public: thin `package` wrappers over exactly the code the library runs on attribute texts
/// and scans. Scan elements are described by IIOScanFormat's ``ScanFormat`` (its `isDecodable`
/// is the library's gate on a channel's format).
///
/// Nothing here is used by the library itself.
package enum FuzzingEntryPoints {
    // MARK: Attribute texts

    /// ``AttributeText/integer(_:)``: a `raw` file.
    package static func integer(_ text: String) -> Int64? { AttributeText.integer(text) }

    /// ``AttributeText/decimal(_:)``: `scale`, `offset`, `sampling_frequency`.
    package static func decimal(_ text: String) -> Double? { AttributeText.decimal(text) }

    /// ``AttributeText/decimalList(_:)`` of the trimmed text (as ``SamplingFrequencies`` calls it).
    package static func decimalList(_ text: String) -> [Double]? { AttributeText.decimalList(AttributeText.trimmed(text)) }

    /// ``AttributeText/trimmed(_:)``.
    package static func trimmed(_ text: String) -> String { String(AttributeText.trimmed(text)) }

    /// Whether discovery accepts `value` (already a number) as a scale or offset
    /// (``Discovery/factorLimit``); a sensor whose scale or offset it refuses is not used.
    package static func acceptsFactor(_ value: Double) -> Bool { value.isFinite && abs(value) <= Discovery.factorLimit }

    // MARK: Sampling frequency

    /// The frequency a capture would write (``FrequencyChoice/choose(available:current:interval:requested:)``)
    /// and the text it would write (``FrequencyChoice/format(_:)``), or nil when it writes nothing.
    package static func frequencyToWrite(available: SamplingFrequencies?, current: Double?, interval: Double,
                                         requested: Double?) -> (value: Double, text: String)? {
        guard let f = FrequencyChoice.choose(available: available, current: current, interval: interval, requested: requested)
        else { return nil }
        return (f, FrequencyChoice.format(f))
    }

    // MARK: Scan decoding

    /// Whether the library would stream a channel of this format through a buffer (the gate
    /// IIOMotionLibIIO's IIOContext applies, ``ScanFormat/isDecodable``); it polls the sensor, or dates scans by the
    /// read time, otherwise.
    package static func isDecodable(_ format: ScanFormat) -> Bool { format.isDecodable }

    /// One sensor of a device, as a capture's decoder sees it.
    package struct DecoderSensor: Sendable {
        package var kind: SensorKind
        /// The x, y, z elements: format and byte offset in the scan.
        package var axes: [(format: ScanFormat, offset: Int)]
        package var scale: (x: Double, y: Double, z: Double)
        package var offset: (x: Double, y: Double, z: Double)
        package var mountMatrix: MountMatrix

        /// - Parameters: the sensor's kind, its three elements, and what discovery read for it.
        package init(kind: SensorKind, axes: [(format: ScanFormat, offset: Int)], scale: (x: Double, y: Double, z: Double),
                     offset: (x: Double, y: Double, z: Double), mountMatrix: MountMatrix) {
            self.kind = kind
            self.axes = axes
            self.scale = scale
            self.offset = offset
            self.mountMatrix = mountMatrix
        }
    }

    /// One decoded sample: a vector and a timestamp (seconds).
    package typealias Decoded = (x: Double, y: Double, z: Double, timestamp: Double)

    /// Decodes `scans` scans of `step` bytes from `bytes` twice, in `units`: through
    /// ``ScanDecoder/decode(_:fallbackTime:into:)`` (the reference: the kernel's SI value, then
    /// ``Conversion``) and through ``ScanDecoder/batch(_:step:scans:everySample:readTime:period:times:)``
    /// (the capture's fast path, every sample).
    /// - Returns: per sensor, the reference samples, the batch's samples, and the newest sample of a
    ///   batch that keeps only the newest scan.
    /// - Precondition: `bytes` holds `scans × step` bytes and every element lies inside a scan.
    package static func decode(sensors: [DecoderSensor], timestamp: (format: ScanFormat, offset: Int)?, clockOffset: Int64,
                               units: MotionUnits, bytes: UnsafeRawBufferPointer, step: Int, scans: Int,
                               readTime: Double, period: Double)
        -> (reference: [[Decoded]], batch: [[Decoded]], newest: [Decoded?]) {
        precondition(scans >= 1 && step >= 1 && bytes.count >= scans * step, "the caller gives whole scans")
        let decoder = ScanDecoder(
            sensors: sensors.map { s in
                let e = s.axes.map { ScanDecoder.Element(offset: $0.offset, format: $0.format) }
                let r = s.mountMatrix.rows
                return ScanDecoder.Sensor(kind: s.kind, axes: (e[0], e[1], e[2]), scale: (s.scale.x, s.scale.y, s.scale.z),
                                          offset: (s.offset.x, s.offset.y, s.offset.z),
                                          m: (r[0][0], r[0][1], r[0][2], r[1][0], r[1][1], r[1][2], r[2][0], r[2][1], r[2][2]))
            },
            timestamp: timestamp.map { ScanDecoder.Element(offset: $0.offset, format: $0.format) },
            clockOffset: clockOffset, units: units)
        let base = bytes.baseAddress!
        var reference = [[Decoded]](repeating: [], count: sensors.count)
        let out = UnsafeMutablePointer<Sample>.allocate(capacity: max(sensors.count, 1))
        defer { out.deallocate() }
        for i in 0..<scans {
            let n = decoder.decode(base + i * step, fallbackTime: readTime, into: out)
            for k in 0..<n { reference[k].append((out[k].x, out[k].y, out[k].z, out[k].timestamp)) }
        }
        let times = UnsafeMutablePointer<Double>.allocate(capacity: scans)
        defer { times.deallocate() }
        let all = decoder.batch(base, step: step, scans: scans, everySample: true, readTime: readTime, period: period, times: times)
        let last = decoder.batch(base, step: step, scans: scans, everySample: false, readTime: readTime, period: period, times: times)
        let batch: [[Decoded]] = sensors.map { s in
            switch s.kind {
            case .accelerometer: all.accelerometer.map { ($0.acceleration.x, $0.acceleration.y, $0.acceleration.z, $0.timestamp) }
            case .gyroscope: all.gyroscope.map { ($0.rotationRate.x, $0.rotationRate.y, $0.rotationRate.z, $0.timestamp) }
            case .magnetometer: all.magnetometer.map { ($0.magneticField.x, $0.magneticField.y, $0.magneticField.z, $0.timestamp) }
            }
        }
        let newest: [Decoded?] = sensors.map { s in last.newest(s.kind).map { ($0.x, $0.y, $0.z, $0.timestamp) } }
        return (reference, batch, newest)
    }
}
