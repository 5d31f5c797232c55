/// A three-component vector for the fusion arithmetic (internal: the public types say what
/// they measure, this one only computes).
struct Vector3: Sendable, Hashable {
    var x: Double
    var y: Double
    var z: Double

    init(_ x: Double, _ y: Double, _ z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }

    static let zero = Vector3(0, 0, 0)

    init(_ a: Acceleration) { self.init(a.x, a.y, a.z) }
    init(_ r: RotationRate) { self.init(r.x, r.y, r.z) }
    init(_ m: MagneticField) { self.init(m.x, m.y, m.z) }

    var acceleration: Acceleration { Acceleration(x: x, y: y, z: z) }
    var rotationRate: RotationRate { RotationRate(x: x, y: y, z: z) }
    var magneticField: MagneticField { MagneticField(x: x, y: y, z: z) }

    static func + (a: Vector3, b: Vector3) -> Vector3 { Vector3(a.x + b.x, a.y + b.y, a.z + b.z) }
    static func - (a: Vector3, b: Vector3) -> Vector3 { Vector3(a.x - b.x, a.y - b.y, a.z - b.z) }
    static prefix func - (a: Vector3) -> Vector3 { Vector3(-a.x, -a.y, -a.z) }
    static func * (s: Double, a: Vector3) -> Vector3 { Vector3(s * a.x, s * a.y, s * a.z) }
    static func += (a: inout Vector3, b: Vector3) { a = a + b }

    func dot(_ b: Vector3) -> Double { x * b.x + y * b.y + z * b.z }

    func cross(_ b: Vector3) -> Vector3 {
        Vector3(y * b.z - z * b.y, z * b.x - x * b.z, x * b.y - y * b.x)
    }

    var length: Double { dot(self).squareRoot() }

    var isFinite: Bool { x.isFinite && y.isFinite && z.isFinite }

    func minimum(_ b: Vector3) -> Vector3 { Vector3(Swift.min(x, b.x), Swift.min(y, b.y), Swift.min(z, b.z)) }
    func maximum(_ b: Vector3) -> Vector3 { Vector3(Swift.max(x, b.x), Swift.max(y, b.y), Swift.max(z, b.z)) }
}

/// A 3×3 matrix for the bias filter's covariance (rows).
struct Matrix3: Sendable, Hashable {
    var r0: Vector3
    var r1: Vector3
    var r2: Vector3

    static func diagonal(_ v: Double) -> Matrix3 {
        Matrix3(r0: Vector3(v, 0, 0), r1: Vector3(0, v, 0), r2: Vector3(0, 0, v))
    }

    /// a·bᵀ.
    static func outer(_ a: Vector3, _ b: Vector3) -> Matrix3 {
        Matrix3(r0: a.x * b, r1: a.y * b, r2: a.z * b)
    }

    static func * (m: Matrix3, v: Vector3) -> Vector3 { Vector3(m.r0.dot(v), m.r1.dot(v), m.r2.dot(v)) }
    static func + (a: Matrix3, b: Matrix3) -> Matrix3 { Matrix3(r0: a.r0 + b.r0, r1: a.r1 + b.r1, r2: a.r2 + b.r2) }
    static func - (a: Matrix3, b: Matrix3) -> Matrix3 { Matrix3(r0: a.r0 - b.r0, r1: a.r1 - b.r1, r2: a.r2 - b.r2) }

    var trace: Double { r0.x + r1.y + r2.z }
    /// Σᵢⱼ aᵢⱼ·bᵢⱼ.
    func frobeniusProduct(_ b: Matrix3) -> Double { r0.dot(b.r0) + r1.dot(b.r1) + r2.dot(b.r2) }
}
