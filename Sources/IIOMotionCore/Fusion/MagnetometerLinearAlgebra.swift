/// The linear algebra of the magnetometer's calibration: a small dense solver, a symmetric 3×3
/// eigen-decomposition, and the 3×3 matrix operations its fits use.
extension MagnetometerCalibrator {
    /// Solves the `size`×`size` system (row-major) by Gaussian elimination with partial pivoting.
    static func solve(_ matrix: [Double], _ rhs: [Double], size: Int) -> [Double]? {
        var a = matrix, b = rhs
        for c in 0..<size {
            var p = c
            for r in (c + 1)..<max(size, c + 1) where abs(a[r * size + c]) > abs(a[p * size + c]) { p = r }
            guard abs(a[p * size + c]) > 1e-13 else { return nil }
            if p != c {
                for k in 0..<size { a.swapAt(c * size + k, p * size + k) }
                b.swapAt(c, p)
            }
            for r in 0..<size where r != c {
                let f = a[r * size + c] / a[c * size + c]
                if f != 0 {
                    for k in c..<size { a[r * size + k] -= f * a[c * size + k] }
                    b[r] -= f * b[c]
                }
            }
        }
        let x = (0..<size).map { b[$0] / a[$0 * size + $0] }
        return x.allSatisfy(\.isFinite) ? x : nil
    }

    /// The eigenvalues and eigenvectors (the columns of `vectors`) of a symmetric matrix, by
    /// Jacobi rotations; nil if it does not converge.
    static func symmetricEigen(_ m: Matrix3) -> (values: Vector3, vectors: Matrix3)? {
        var a = [[m.r0.x, m.r0.y, m.r0.z], [m.r1.x, m.r1.y, m.r1.z], [m.r2.x, m.r2.y, m.r2.z]]
        guard a.allSatisfy({ $0.allSatisfy(\.isFinite) }) else { return nil }
        var v: [[Double]] = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
        for _ in 0..<50 {
            let off = a[0][1] * a[0][1] + a[0][2] * a[0][2] + a[1][2] * a[1][2]
            let scale = a[0][0] * a[0][0] + a[1][1] * a[1][1] + a[2][2] * a[2][2]
            if off <= 1e-24 * max(scale, 1e-300) {
                return (Vector3(a[0][0], a[1][1], a[2][2]),
                        Matrix3(r0: Vector3(v[0][0], v[0][1], v[0][2]), r1: Vector3(v[1][0], v[1][1], v[1][2]),
                                r2: Vector3(v[2][0], v[2][1], v[2][2])))
            }
            for (p, q) in [(0, 1), (0, 2), (1, 2)] where a[p][q] != 0 {
                // The rotation in the (p, q) plane that zeroes a[p][q].
                let theta = (a[q][q] - a[p][p]) / (2 * a[p][q])
                let t = (theta >= 0 ? 1.0 : -1.0) / (abs(theta) + (theta * theta + 1).squareRoot())
                let c = 1 / (t * t + 1).squareRoot(), s = t * c
                for k in 0..<3 {
                    let akp = a[k][p], akq = a[k][q]
                    a[k][p] = c * akp - s * akq
                    a[k][q] = s * akp + c * akq
                }
                for k in 0..<3 {
                    let apk = a[p][k], aqk = a[q][k]
                    a[p][k] = c * apk - s * aqk
                    a[q][k] = s * apk + c * aqk
                }
                for k in 0..<3 {
                    let vkp = v[k][p], vkq = v[k][q]
                    v[k][p] = c * vkp - s * vkq
                    v[k][q] = s * vkp + c * vkq
                }
            }
        }
        return nil
    }
}

extension Matrix3 {
    static func * (s: Double, m: Matrix3) -> Matrix3 { Matrix3(r0: s * m.r0, r1: s * m.r1, r2: s * m.r2) }

    static func * (a: Matrix3, b: Matrix3) -> Matrix3 {
        let t = b.transposed
        return Matrix3(r0: Vector3(a.r0.dot(t.r0), a.r0.dot(t.r1), a.r0.dot(t.r2)),
                       r1: Vector3(a.r1.dot(t.r0), a.r1.dot(t.r1), a.r1.dot(t.r2)),
                       r2: Vector3(a.r2.dot(t.r0), a.r2.dot(t.r1), a.r2.dot(t.r2)))
    }

    var transposed: Matrix3 {
        Matrix3(r0: Vector3(r0.x, r1.x, r2.x), r1: Vector3(r0.y, r1.y, r2.y), r2: Vector3(r0.z, r1.z, r2.z))
    }

    /// The matrix with its columns multiplied by `s`'s components.
    func scaledColumns(_ s: Vector3) -> Matrix3 {
        Matrix3(r0: Vector3(r0.x * s.x, r0.y * s.y, r0.z * s.z), r1: Vector3(r1.x * s.x, r1.y * s.y, r1.z * s.z),
                r2: Vector3(r2.x * s.x, r2.y * s.y, r2.z * s.z))
    }

    var determinant: Double { r0.dot(r1.cross(r2)) }

    /// The inverse, or nil when singular.
    var inverse: Matrix3? {
        let d = determinant
        guard abs(d) > 1e-15, d.isFinite else { return nil }
        // Columns of the inverse are the rows' cross products over the determinant.
        let c0 = r1.cross(r2), c1 = r2.cross(r0), c2 = r0.cross(r1)
        return (1 / d) * Matrix3(r0: c0, r1: c1, r2: c2).transposed
    }
}
