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
}
