/// Turns kernel SI vectors (already rotated by the mount matrix) into the public units.
enum Conversion {
    /// Acceleration from m/s² (kernel sign: face up z ≈ +9.81) to the chosen units.
    static func acceleration(_ si: (x: Double, y: Double, z: Double), units: MotionUnits) -> Acceleration {
        switch units {
        case .si:
            Acceleration(x: si.x, y: si.y, z: si.z)
        case .coreMotion:
            // Core Motion reports the reaction to gravity with the opposite sign, in g.
            // `0 - v` rather than `-v` so that a zero reads 0, not -0.
            Acceleration(x: 0 - si.x / standardGravity, y: 0 - si.y / standardGravity, z: 0 - si.z / standardGravity)
        }
    }

    /// Rotation rate: rad/s with the right-hand rule in both conventions.
    static func rotationRate(_ si: (x: Double, y: Double, z: Double), units: MotionUnits) -> RotationRate {
        RotationRate(x: si.x, y: si.y, z: si.z)
    }

    /// Magnetic field from Gauss to µT in both conventions.
    static func magneticField(_ gauss: (x: Double, y: Double, z: Double), units: MotionUnits) -> MagneticField {
        MagneticField(x: gauss.x * 100, y: gauss.y * 100, z: gauss.z * 100)
    }
}
