/// The six-face fit of an accelerometer calibration: the sensor laid on each face, its mean
/// reading on each, and the affine map that takes those readings to ±1 g along the axis that
/// was up.
///
/// With each axis up and down once, per axis `offset = (up + down) / 2` and
/// `gain = (up − down) / 2g` (the six-position tumble calibration). This fit solves the general
/// form, `truth = A · reading + d` for a 3×3 `A` and a 3-vector `d` (the 12-parameter model of ST's
/// application note AN4508, "Parameters and calibration of a low-g 3-axis accelerometer", 2014,
/// section 2 and appendix A; see also NXP/Freescale AN4399, M. Pedley, "High-Precision Calibration
/// of a Three-Axis Accelerometer", 2015), by least squares,
/// row by row (four unknowns from six faces): with six faces it finds the same offsets and
/// gains, plus the cross-axis terms the four side faces show, and the residual measures how far
/// the data is from any such map (a face not flat, a reading taken while moving).
package enum FaceFit {
    /// One face: the sensor axis that was up (0, 1, 2 for x, y, z), its sign, and the mean
    /// reading there, in the sensor's axes, m/s² (kernel sign: the up axis reads about +g).
    package struct Face: Sendable, Equatable {
        package var axis: Int
        package var positive: Bool
        package var mean: (Double, Double, Double)
        package init(axis: Int, positive: Bool, mean: (Double, Double, Double)) {
            self.axis = axis
            self.positive = positive
            self.mean = mean
        }
        package static func == (a: Face, b: Face) -> Bool {
            a.axis == b.axis && a.positive == b.positive && a.mean == b.mean
        }
        /// What it should read: ±g along its axis.
        package var truth: [Double] {
            var t = [0.0, 0.0, 0.0]
            t[axis] = positive ? standardGravity : -standardGravity
            return t
        }
    }

    /// A fitted calibration and its residual (root mean square over the faces of the distance
    /// between the calibrated mean and ±g along the face's axis, m/s²).
    package struct Result: Sendable {
        package var calibration: SensorCalibration
        package var residual: Double
    }

    /// Fits the faces; nil when they do not determine the map (fewer than four faces, or faces
    /// that do not span the axes).
    package static func fit(_ faces: [Face]) -> Result? {
        guard faces.count >= 4 else { return nil }
        var a = [[Double]](repeating: [0, 0, 0], count: 3)
        var d = [0.0, 0.0, 0.0]
        for row in 0..<3 {
            // Normal equations of  truth[row] = a[row] · mean + d[row]  over the faces.
            var n = [[Double]](repeating: [0, 0, 0, 0], count: 4)
            var y = [0.0, 0.0, 0.0, 0.0]
            for f in faces {
                let x = [f.mean.0, f.mean.1, f.mean.2, 1]
                let t = f.truth[row]
                for i in 0..<4 {
                    for j in 0..<4 { n[i][j] += x[i] * x[j] }
                    y[i] += x[i] * t
                }
            }
            guard let s = solve(n, y) else { return nil }
            a[row] = [s[0], s[1], s[2]]
            d[row] = s[3]
        }
        guard let inverse = SensorCalibration.inverse(a) else { return nil }
        // truth = A · (reading − bias) with bias = −A⁻¹ · d.
        let bias = (0..<3).map { i in -(inverse[i][0] * d[0] + inverse[i][1] * d[1] + inverse[i][2] * d[2]) }
        var calibration = SensorCalibration(kind: .accelerometer, bias: AxisValues(x: bias[0], y: bias[1], z: bias[2]), matrix: a)
        var sum = 0.0
        for f in faces {
            let c = calibration.apply((x: f.mean.0, y: f.mean.1, z: f.mean.2))
            let t = f.truth
            sum += (c.x - t[0]) * (c.x - t[0]) + (c.y - t[1]) * (c.y - t[1]) + (c.z - t[2]) * (c.z - t[2])
        }
        let residual = (sum / Double(faces.count)).squareRoot()
        calibration.residual = residual
        return Result(calibration: calibration, residual: residual)
    }

    /// Solves `m · x = y` (4×4) by Gaussian elimination with partial pivoting; nil when singular.
    static func solve(_ m: [[Double]], _ y: [Double]) -> [Double]? {
        let n = y.count
        var a = m, b = y
        for col in 0..<n {
            guard let pivot = (col..<n).max(by: { abs(a[$0][col]) < abs(a[$1][col]) }), abs(a[pivot][col]) > 1e-12 else { return nil }
            a.swapAt(col, pivot)
            b.swapAt(col, pivot)
            for r in (col + 1)..<n {
                let k = a[r][col] / a[col][col]
                for c in col..<n { a[r][c] -= k * a[col][c] }
                b[r] -= k * b[col]
            }
        }
        var x = [Double](repeating: 0, count: n)
        for r in stride(from: n - 1, through: 0, by: -1) {
            var s = b[r]
            for c in (r + 1)..<n { s -= a[r][c] * x[c] }
            x[r] = s / a[r][r]
        }
        return x
    }
}
