import Foundation
import IIOSimKit
@testable import IIOMotion
@testable import IIOMotionCore

/// iio-sim's motion script as an IMU reads it, in process and deterministically: the simulator's
/// own `MotionScript` (the same function of time it serves), with noise and bias drawn from a
/// seeded generator, hard and soft iron, and the sensors' LSBs; in Core Motion's units.
struct RenderedIMU {
    let script: MotionScript
    let imperfections: Imperfections
    /// The accelerometer's and gyroscope's rate (Hz): their noise is the density at it.
    let rate: Double
    /// LSBs: m/s², rad/s and gauss.
    let accelLSB: Double, gyroLSB: Double, magnetometerLSB: Double
    private var rng: SplitMix64

    init(script: MotionScript, imperfections: Imperfections, rate: Double,
         accelLSB: Double, gyroLSB: Double, magnetometerLSB: Double = 0.00014, seed: UInt64) {
        self.script = script
        self.imperfections = imperfections
        self.rate = rate
        self.accelLSB = accelLSB
        self.gyroLSB = gyroLSB
        self.magnetometerLSB = magnetometerLSB
        rng = SplitMix64(seed: seed)
    }

    private static func quantized(_ v: Vec3, _ lsb: Double) -> Vec3 {
        Vec3((v.x / lsb).rounded(), (v.y / lsb).rounded(), (v.z / lsb).rounded()) * lsb
    }

    private mutating func noise(_ sigma: Double) -> Vec3 { Vec3(rng.normal(), rng.normal(), rng.normal()) * sigma }

    /// The accelerometer at `t`, in g with Core Motion's sign (the kernel's proper acceleration,
    /// face up +z, is Core Motion's −g).
    mutating func acceleration(at t: Double) -> Acceleration {
        let a = Self.quantized(script.state(at: t).acceleration + noise(imperfections.accelSigma(rate: rate)), accelLSB) / -9.80665
        return Acceleration(x: a.x, y: a.y, z: a.z)
    }

    /// The gyroscope at `t`, rad/s, bias included.
    mutating func rotationRate(at t: Double) -> RotationRate {
        let w = Self.quantized(script.state(at: t).angularVelocity + imperfections.gyroBias + noise(imperfections.gyroSigma(rate: rate)), gyroLSB)
        return RotationRate(x: w.x, y: w.y, z: w.z)
    }

    /// The magnetometer at `t`, µT, hard and soft iron included.
    mutating func magneticField(at t: Double) -> MagneticField {
        let f = Self.quantized(imperfections.distortedField(script.state(at: t).magneticField) + noise(imperfections.magnNoise), magnetometerLSB) * 100
        return MagneticField(x: f.x, y: f.y, z: f.z)
    }
}
