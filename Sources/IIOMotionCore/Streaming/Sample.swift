/// One sensor sample inside the library: a timestamp in seconds on `CLOCK_MONOTONIC` and a vector
/// in the manager's units (``MotionUnits``), already rotated into the device's axes and
/// converted once (``Conversion``). Its sensor is where it is kept: a ``PerSensor`` slot, or the
/// kind the decoder was built for.
///
/// The path of a sample: scan bytes (or `raw` files) → `Sample` → the public value
/// (``AccelerometerData``, ``GyroData``, ``MagnetometerData``). Batches skip the middle step: the
/// decoder writes the public values straight into the arrays a batched handler gets.
struct Sample: Sendable, Equatable, DecodedSample {
    var timestamp: Double
    var x: Double
    var y: Double
    var z: Double

    @inline(__always)
    init(timestamp: Double, x: Double, y: Double, z: Double) {
        self.timestamp = timestamp
        self.x = x
        self.y = y
        self.z = z
    }
}

/// A type the decoder writes straight into: a timestamp and a vector, in the manager's units.
protocol DecodedSample {
    init(timestamp: Double, x: Double, y: Double, z: Double)
}

/// The public sample types, as the library makes them: from a ``Sample`` (push and pull
/// delivery), or as a batch's array (batched delivery).
///
/// The public types exist beside ``Sample`` because they are the Core-Motion-like API (a named
/// vector per sensor: `acceleration`, `rotationRate`, `magneticField`); ``Sample`` exists beside
/// them because the hub keeps one newest sample per sensor, whatever its kind, in one table.
protocol PublicSample: SensorSample, DecodedSample {
    /// This type's samples in a capture batch (all of them when a consumer wants every sample).
    static func all(in batch: CaptureBatch) -> [Self]
    /// The sample as the hub keeps it.
    var sample: Sample { get }
}

extension PublicSample {
    /// The public value of `s`.
    @inline(__always)
    init(_ s: Sample) {
        self.init(timestamp: s.timestamp, x: s.x, y: s.y, z: s.z)
    }
}

extension AccelerometerData: PublicSample {
    @inline(__always)
    init(timestamp: Double, x: Double, y: Double, z: Double) {
        self.init(timestamp: timestamp, acceleration: Acceleration(x: x, y: y, z: z))
    }

    static func all(in batch: CaptureBatch) -> [Self] { batch.accelerometer }

    var sample: Sample { Sample(timestamp: timestamp, x: acceleration.x, y: acceleration.y, z: acceleration.z) }
}

extension GyroData: PublicSample {
    @inline(__always)
    init(timestamp: Double, x: Double, y: Double, z: Double) {
        self.init(timestamp: timestamp, rotationRate: RotationRate(x: x, y: y, z: z))
    }

    static func all(in batch: CaptureBatch) -> [Self] { batch.gyroscope }

    var sample: Sample { Sample(timestamp: timestamp, x: rotationRate.x, y: rotationRate.y, z: rotationRate.z) }
}

extension MagnetometerData: PublicSample {
    @inline(__always)
    init(timestamp: Double, x: Double, y: Double, z: Double) {
        self.init(timestamp: timestamp, magneticField: MagneticField(x: x, y: y, z: z))
    }

    static func all(in batch: CaptureBatch) -> [Self] { batch.magnetometer }

    var sample: Sample { Sample(timestamp: timestamp, x: magneticField.x, y: magneticField.y, z: magneticField.z) }
}
