/// The one conversion from the kernel's units to the public ones. Every value the library hands
/// out goes through ``fromSI(_:_:to:)``: the polled reads and polled captures per component, the
/// scan decoder through ``factor(_:to:)`` folded into its matrix, and device motion, which takes
/// a manager's SI acceleration back to g.
///
/// The kernel's units, after `(raw + offset) · scale` and the mount matrix: m/s² with the kernel's
/// sign (face up reads z ≈ +9.81), rad/s, gauss. The public ones are ``MotionUnits``.
enum Conversion {
    /// One component of a `kind` vector, from the kernel's units to `units`:
    /// - acceleration: in ``MotionUnits/coreMotion``, g with Core Motion's sign, `0 − v / 9.80665`
    ///   (`0 −` rather than `−` so that a zero reads +0, not −0); in ``MotionUnits/si``, m/s² as is;
    /// - rotation rate: rad/s with the right-hand rule in both, as is;
    /// - magnetic field: gauss to µT in both, `v · 100`.
    @inline(__always)
    static func fromSI(_ v: Double, _ kind: SensorKind, to units: MotionUnits) -> Double {
        switch kind {
        case .accelerometer: units == .coreMotion ? 0 - v / standardGravity : v
        case .gyroscope: v
        case .magnetometer: v * 100
        }
    }

    /// The conversion as a factor, `fromSI(1)`: what the scan decoder multiplies into its matrix
    /// (−1 / 9.80665, 1 or 100). A product with it agrees with ``fromSI(_:_:to:)`` within a unit
    /// in the last place (exactly where the factor is 1 or 100).
    static func factor(_ kind: SensorKind, to units: MotionUnits) -> Double { fromSI(1, kind, to: units) }

    /// A vector from the kernel's units to `units` (``fromSI(_:_:to:)`` per component).
    @inline(__always)
    static func fromSI(_ v: (x: Double, y: Double, z: Double), _ kind: SensorKind, to units: MotionUnits) -> (x: Double, y: Double, z: Double) {
        (fromSI(v.x, kind, to: units), fromSI(v.y, kind, to: units), fromSI(v.z, kind, to: units))
    }

    /// Acceleration from m/s² (kernel sign: face up z ≈ +9.81) to `units`.
    static func acceleration(_ si: (x: Double, y: Double, z: Double), units: MotionUnits) -> Acceleration {
        let v = fromSI(si, .accelerometer, to: units)
        return Acceleration(x: v.x, y: v.y, z: v.z)
    }

    /// Rotation rate: rad/s with the right-hand rule in both conventions.
    static func rotationRate(_ si: (x: Double, y: Double, z: Double), units: MotionUnits) -> RotationRate {
        let v = fromSI(si, .gyroscope, to: units)
        return RotationRate(x: v.x, y: v.y, z: v.z)
    }

    /// Magnetic field from gauss to µT in both conventions.
    static func magneticField(_ gauss: (x: Double, y: Double, z: Double), units: MotionUnits) -> MagneticField {
        let v = fromSI(gauss, .magnetometer, to: units)
        return MagneticField(x: v.x, y: v.y, z: v.z)
    }
}

extension Sample {
    /// A sample read in the kernel's units (already rotated), in `units`: what polled captures
    /// deliver, by the same conversion as ``MotionManager/readAccelerometer()``.
    init(si v: (x: Double, y: Double, z: Double), _ kind: SensorKind, timestamp: Double, units: MotionUnits) {
        let c = Conversion.fromSI(v, kind, to: units)
        self.init(timestamp: timestamp, x: c.x, y: c.y, z: c.z)
    }
}
