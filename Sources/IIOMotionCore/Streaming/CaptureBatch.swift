/// What one refill (or one poll) hands to the hub: per sensor kind, how many samples the sensor
/// made and the newest, and, when a consumer wants every sample, all of them; in the manager's units.
///
/// Every sample is kept as the public type (``AccelerometerData`` …) the decoder wrote: a batched
/// handler gets these very arrays, with nothing copied.
struct CaptureBatch: Sendable {
    /// Per kind: how many samples, and the newest.
    var counts = PerSensor(repeating: 0)
    var newest = PerSensor<Sample?>(repeating: nil)
    /// Every sample (empty unless the capture serves a batched consumer).
    var accelerometer: [AccelerometerData] = []
    var gyroscope: [GyroData] = []
    var magnetometer: [MagnetometerData] = []

    var isEmpty: Bool { counts == PerSensor(repeating: 0) }

    func count(_ kind: SensorKind) -> Int { counts[kind] }

    func newest(_ kind: SensorKind) -> Sample? { newest[kind] }

    /// Counts `count` more samples of `kind`, the newest being `sample`.
    mutating func record(_ sample: Sample?, of kind: SensorKind, count: Int) {
        guard let sample else { return }
        newest[kind] = sample
        counts[kind] += count
    }

    /// Adds one polled sample of `kind` (and, when `everySample`, to its kind's array).
    mutating func append(_ s: Sample, of kind: SensorKind, everySample: Bool) {
        record(s, of: kind, count: 1)
        guard everySample else { return }
        switch kind {
        case .accelerometer: accelerometer.append(AccelerometerData(s))
        case .gyroscope: gyroscope.append(GyroData(s))
        case .magnetometer: magnetometer.append(MagnetometerData(s))
        }
    }
}
