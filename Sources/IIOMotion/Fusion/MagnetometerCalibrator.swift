internal import Glibc

/// The magnetometer's calibration learned online while the device moves, as Core Motion's
/// `CMCalibratedMagneticField` reports it: a hard-iron offset (the board's own field) and a
/// soft-iron scale per axis (an axis-aligned ellipsoid: the sensor's unequal gains and iron that
/// stretches the field along the device's axes), from which the field is
/// `(raw − offset) · scale`.
///
/// Samples are binned by direction (26 bins: the faces, edges and corners of a cube) and each bin
/// keeps at most ``samplesPerBin``, so a device held mostly one way does not outweigh the rest.
/// The ellipsoid `x² + B y² + C z² + D x + E y + F z + G = 0` is a linear least-squares fit over
/// them, solved again every ``refitEvery`` samples. ``accuracy`` rises with the bins covered and
/// falls with the fit's residual: ``MagneticFieldCalibrationAccuracy/uncalibrated`` before a fit,
/// then low, medium, high. Once fitted, a sample whose calibrated strength is more than
/// ``disturbanceTolerance`` from the fit's is a disturbance (a steel object passing) and is not
/// learned from.
///
/// Not done: a full (rotating) soft-iron matrix; the axis-aligned scale covers a sensor's gains,
/// not iron at an angle to the axes.
struct MagnetometerCalibrator: Sendable, Hashable {
    /// Samples kept per direction bin.
    var samplesPerBin = 40
    /// Samples between fits.
    var refitEvery = 50
    /// Relative difference in strength beyond which a sample is a disturbance.
    var disturbanceTolerance = 0.15

    /// The hard-iron offset, µT (device frame).
    private(set) var offset = Vector3.zero
    /// The soft-iron scale per axis (1 when none).
    private(set) var scale = Vector3(1, 1, 1)
    /// The calibrated field's strength, µT (0 before a fit).
    private(set) var strength = 0.0
    /// The fit's RMS relative residual.
    private(set) var residual = 1.0
    /// Direction bins holding at least a few samples.
    private(set) var coverage = 0
    /// How far the calibration can be trusted.
    private(set) var accuracy = MagneticFieldCalibrationAccuracy.uncalibrated

    // Normal equations of the fit (6×6 upper triangle, row-major, and the right-hand side), over
    // samples scaled by `unit` to keep them well conditioned.
    private var normal = [Double](repeating: 0, count: 36)
    private var rhs = [Double](repeating: 0, count: 6)
    private var targetSq = 0.0
    private var binCounts = [Int](repeating: 0, count: 26)
    private var sinceFit = 0
    private let unit = 1.0 / 50

    init() {}

    /// Whether the fit is usable (some coverage, plausible axes).
    var isCalibrated: Bool { accuracy != .uncalibrated }

    /// The calibrated field of a raw sample (µT).
    func calibrated(_ raw: Vector3) -> Vector3 {
        let d = raw - offset
        return Vector3(d.x * scale.x, d.y * scale.y, d.z * scale.z)
    }

    /// Learns from a raw sample (µT); returns whether it was taken (not a disturbance, its bin not full).
    @discardableResult
    mutating func add(_ raw: Vector3) -> Bool {
        guard raw.isFinite, raw.length > 1 else { return false }
        if strength > 0, abs(calibrated(raw).length - strength) > disturbanceTolerance * strength { return false }
        let centred = raw - offset
        let bin = Self.bin(of: centred)
        guard binCounts[bin] < samplesPerBin else { return false }
        binCounts[bin] += 1
        let p = unit * raw
        let phi = [p.y * p.y, p.z * p.z, p.x, p.y, p.z, 1]
        let target = -p.x * p.x
        targetSq += target * target
        for i in 0..<6 {
            rhs[i] += phi[i] * target
            for j in i..<6 { normal[i * 6 + j] += phi[i] * phi[j] }
        }
        sinceFit += 1
        if sinceFit >= refitEvery {
            sinceFit = 0
            fit()
        }
        return true
    }

    /// The nearest of 26 directions (each component of the direction rounded to −1, 0 or 1).
    static func bin(of v: Vector3) -> Int {
        let n = max(v.length, 1e-12)
        func q(_ c: Double) -> Int { c / n > 0.38 ? 2 : (c / n < -0.38 ? 0 : 1) }
        var k = q(v.x) * 9 + q(v.y) * 3 + q(v.z)
        if k == 13 { k = v.z >= 0 ? 14 : 12 }  // the centre is not a direction
        return k > 13 ? k - 1 : k
    }

    private mutating func fit() {
        coverage = binCounts.filter { $0 >= 3 }.count
        guard coverage >= 6 else { return }
        // Solve (ΦᵀΦ) θ = Φᵀt by Gaussian elimination with partial pivoting.
        var a = [[Double]](repeating: [Double](repeating: 0, count: 7), count: 6)
        for i in 0..<6 {
            for j in 0..<6 { a[i][j] = i <= j ? normal[i * 6 + j] : normal[j * 6 + i] }
            a[i][6] = rhs[i]
        }
        for c in 0..<6 {
            var p = c
            for r in (c + 1)..<6 where abs(a[r][c]) > abs(a[p][c]) { p = r }
            guard abs(a[p][c]) > 1e-12 else { return }
            a.swapAt(c, p)
            for r in 0..<6 where r != c {
                let f = a[r][c] / a[c][c]
                if f != 0 { for k in c...6 { a[r][k] -= f * a[c][k] } }
            }
        }
        let th = (0..<6).map { a[$0][6] / a[$0][$0] }
        let (B, C, D, E, F, G) = (th[0], th[1], th[2], th[3], th[4], th[5])
        guard B > 0, C > 0 else { return }
        let centre = Vector3(-D / 2, -E / (2 * B), -F / (2 * C))
        let k = D * D / 4 + E * E / (4 * B) + F * F / (4 * C) - G
        guard k > 0 else { return }
        let radii = Vector3(k.squareRoot(), (k / B).squareRoot(), (k / C).squareRoot())
        let mean = cbrt(radii.x * radii.y * radii.z)
        let s = Vector3(mean / radii.x, mean / radii.y, mean / radii.z)
        // A plausible ellipsoid: axes within a factor 2 of each other.
        guard max(s.x, s.y, s.z) / min(s.x, s.y, s.z) < 2 else { return }
        // The residual from the normal equations: Σ(φ·θ − t)² = θᵀNθ − 2θᵀr + Σt²; an error e
        // in the equation is about 2k times the relative error of the radius.
        let n = Double(binCounts.reduce(0, +))
        var q = targetSq
        for i in 0..<6 {
            for j in 0..<6 { q += th[i] * th[j] * (i <= j ? normal[i * 6 + j] : normal[j * 6 + i]) }
            q -= 2 * th[i] * rhs[i]
        }
        let rms = (max(0, q) / max(n, 1)).squareRoot() / (2 * k)
        offset = (1 / unit) * centre
        scale = s
        strength = mean / unit
        residual = rms
        accuracy = coverage >= 20 && rms < 0.02 ? .high : (coverage >= 14 && rms < 0.05 ? .medium : .low)
    }

    // MARK: Persistence

    /// The calibration as text (one line: a version, then offset, scale, strength, residual,
    /// coverage): what ``init(text:)`` reads back. A file of it, per device, lets a board start
    /// calibrated; deleting the file forgets the calibration.
    var text: String {
        let v = [offset.x, offset.y, offset.z, scale.x, scale.y, scale.z, strength, residual, Double(coverage)]
        return "iiomotion-magnetometer-calibration-1 " + v.map { "\($0)" }.joined(separator: " ") + "\n"
    }

    /// A saved calibration (see ``text``), starting at most at
    /// ``MagneticFieldCalibrationAccuracy/medium`` (it is verified again as the device moves);
    /// nil for anything else.
    init?(text: String) {
        let f = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard f.count == 10, f[0] == "iiomotion-magnetometer-calibration-1" else { return nil }
        let v = f[1...].compactMap { Double($0) }
        guard v.count == 9, v.allSatisfy(\.isFinite), v[3] > 0, v[4] > 0, v[5] > 0, v[6] > 0 else { return nil }
        self.init()
        offset = Vector3(v[0], v[1], v[2])
        scale = Vector3(v[3], v[4], v[5])
        strength = v[6]
        residual = v[7]
        coverage = Int(v[8])
        accuracy = coverage >= 14 && residual < 0.05 ? .medium : .low
    }
}

/// Where a device's magnetometer calibration is kept between runs: one small text file per
/// device under `$XDG_STATE_HOME/iiomotion` (else `~/.local/state/iiomotion`), named after the
/// device's identity (e.g. its IIO name and label). Deleting the file forgets the calibration.
///
/// Not wired into ``MotionManager`` yet: a manager would ``load(device:)`` when device motion
/// starts (handing it to ``DeviceMotionFusion``) and ``save(_:device:)`` when it stops.
enum MagnetometerCalibrationStore {
    /// The folder, or nil without a home.
    static func folder(environment: [String: String]) -> String? {
        if let s = environment["XDG_STATE_HOME"], s.hasPrefix("/") { return s + "/iiomotion" }
        if let h = environment["HOME"], h.hasPrefix("/") { return h + "/.local/state/iiomotion" }
        return nil
    }

    /// The file for a device identity (characters other than letters, digits, `-`, `_`, `.` become `_`).
    static func path(device: String, environment: [String: String]) -> String? {
        let safe = String(device.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" })
        return folder(environment: environment).map { $0 + "/magnetometer-" + safe + ".txt" }
    }

    /// The saved calibration, or nil (no file, unreadable, not a calibration).
    static func load(path: String) -> MagnetometerCalibrator? {
        guard let f = fopen(path, "r") else { return nil }
        defer { fclose(f) }
        var buffer = [CChar](repeating: 0, count: 512)
        guard fgets(&buffer, Int32(buffer.count), f) != nil else { return nil }
        return MagnetometerCalibrator(text: String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Saves a calibration that has one (atomically: a temporary file renamed); false on failure.
    @discardableResult
    static func save(_ calibration: MagnetometerCalibrator, path: String) -> Bool {
        guard calibration.isCalibrated else { return false }
        if let slash = path.lastIndex(of: "/") {
            let dir = String(path[..<slash])
            var partial = ""
            for part in dir.split(separator: "/") {
                partial += "/" + part
                mkdir(partial, 0o755)
            }
        }
        let temporary = path + ".tmp"
        guard let f = fopen(temporary, "w") else { return false }
        let ok = fputs(calibration.text, f) >= 0
        fclose(f)
        guard ok, rename(temporary, path) == 0 else { unlink(temporary); return false }
        return true
    }
}
