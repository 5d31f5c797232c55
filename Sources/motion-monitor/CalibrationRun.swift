@preconcurrency import Glibc // stdout is a C global
import IIOMotion
import SystemSupport

/// The guided six-face calibration, step by step (see ``Calibrate``).
struct Run {
    let options: Calibrate.Options
    let manager: MotionManager
    let accel: SensorInfo
    let gyro: SensorInfo?
    let terminal: Bool
    let color: Bool
    /// Chip from device axes: the inverse of each sensor's mount matrix.
    let accelToChip: [[Double]]
    let gyroToChip: [[Double]]

    /// Samples the handlers append and the loop takes.
    let incoming = Locked<(accel: [AxisSample], gyro: [AxisSample], error: MotionError?)>(([], [], nil))
    var accelSamples: [AxisSample] = []
    var gyroSamples: [AxisSample] = []

    /// The faces measured: sensor axis up (0…2), its sign, the statistics.
    var faces: [FaceFit.Face] = []
    var gyroMeans: [(Double, Double, Double)] = []
    var accelSigma = 0.0
    var gyroSigma = 0.0
    /// The sensor axis (signed) that was up when the person said "face up", then "top edge up".
    var mountSteps: [(axis: Int, positive: Bool)] = []
    var statusShown = false

    init(options: Calibrate.Options, manager: MotionManager, accel: SensorInfo, gyro: SensorInfo?) {
        self.options = options
        self.manager = manager
        self.accel = accel
        self.gyro = gyro
        terminal = isatty(STDOUT_FILENO) == 1
        let term = getenv("TERM").map { String(cString: $0) } ?? ""
        let noColorEnv = getenv("NO_COLOR").map { String(cString: $0) } ?? ""
        color = terminal && !options.noColor && noColorEnv.isEmpty && term != "dumb" && !term.isEmpty
        accelToChip = SensorCalibration.inverse(accel.mountMatrix.rows) ?? MountMatrix.identity.rows
        gyroToChip = gyro.flatMap { SensorCalibration.inverse($0.mountMatrix.rows) } ?? MountMatrix.identity.rows
    }

    // MARK: Output

    func say(_ line: String) {
        clearStatus()
        Console.out(line)
        Console.flush()
    }

    func instruct(_ line: String) {
        say(color ? "\u{1B}[1m" + line + "\u{1B}[0m" : line)
    }

    /// The status line, rewritten in place on a terminal; nothing otherwise.
    mutating func status(_ text: String) {
        guard terminal else { return }
        fputs("\r\u{1B}[K" + text, stdout)
        fflush(stdout)
        statusShown = true
    }

    func clearStatus() {
        if terminal { fputs("\r\u{1B}[K", stdout) }
    }

    func mg(_ v: Double) -> String { Calibrate.fixed(v / standardGravity * 1000, 1) + " mg" }
    func dps(_ v: Double) -> String { Calibrate.fixed(v * 180 / Double.pi, 2) + " °/s" }

    /// A face by its sensor axis, in the board's words under `mount` (sensor → device rows).
    func faceName(axis: Int, positive: Bool, mount: [[Double]]) -> String {
        // The device axis the sensor axis maps to: column `axis` of the mount matrix.
        var best = 0
        for i in 0..<3 where abs(mount[i][axis]) > abs(mount[best][axis]) { best = i }
        let up = (mount[best][axis] >= 0) == positive
        let names = [["right edge up", "left edge up"], ["top edge up (standing on its bottom edge)", "bottom edge up"], ["face up", "face down"]]
        return names[best][up ? 0 : 1] + " (sensor \(positive ? "+" : "−")\(["x", "y", "z"][axis]) up)"
    }

    /// The mount the faces are named by: the one found by the first two steps, else the one in force.
    var namingMount: [[Double]] { proposedMount ?? accel.mountMatrix.rows }

    /// The mount matrix the first two faces imply (face up: +z; top edge up: +y), nil before them.
    var proposedMount: [[Double]]? {
        guard options.mountCheck, mountSteps.count == 2 else { return nil }
        func row(_ s: (axis: Int, positive: Bool)) -> [Double] {
            var r = [0.0, 0.0, 0.0]
            r[s.axis] = s.positive ? 1 : -1
            return r
        }
        let z = row(mountSteps[0]), y = row(mountSteps[1])
        let x = [y[1] * z[2] - y[2] * z[1], y[2] * z[0] - y[0] * z[2], y[0] * z[1] - y[1] * z[0]]
        return [x, y, z]
    }

    // MARK: The run

    mutating func go() -> Int32 {
        say("Calibrating the accelerometer\(gyro == nil ? "" : " and gyroscope") of \(accel.deviceDescription) at \(manager.uri).")
        if gyro == nil { say("(No gyroscope on this device: only the accelerometer is calibrated.)") }
        if let e = startUpdates() {
            say("motion-monitor calibrate: \(e)")
            return ExitStatus.of(e)
        }
        defer { manager.stopAllUpdates() }
        let deadline = monotonicSeconds() + options.timeout
        var announced = -1
        var repeatNoted = -1
        while faces.count < 6 {
            if announced != faces.count {
                announced = faces.count
                announce()
            }
            usleep(50_000)
            if let e = drain() {
                say("motion-monitor calibrate: \(e)")
                return ExitStatus.of(e)
            }
            if monotonicSeconds() > deadline {
                return refuse("timed out after \(Int(options.timeout)) s with \(faces.count) of 6 faces measured; faces missing: \(missing().joined(separator: ", "))")
            }
            guard let window = stillWindow() else { continue }
            guard let face = dominantAxis(window.mean) else {
                status("still, but no face is level (the board is tilted): lay it flat")
                continue
            }
            if faces.contains(where: { $0.axis == face.axis && $0.positive == face.positive }) {
                if repeatNoted != faces.count {
                    repeatNoted = faces.count
                    say("\(faceName(axis: face.axis, positive: face.positive, mount: namingMount)) is measured already: turn the board to another face.")
                }
                continue
            }
            if options.mountCheck && faces.count == 1, face.axis == mountSteps.first?.axis {
                if repeatNoted != faces.count {
                    repeatNoted = faces.count
                    say("That is the opposite face: stand the board on its bottom edge, top edge up.")
                }
                continue
            }
            if let failure = measure(face) { return failure }
        }
        return finish()
    }

    mutating func startUpdates() -> MotionError? {
        manager.accelerometerUpdateInterval = 0.05
        manager.requestSamplingFrequency(100, for: .accelerometer)
        let inbox = incoming
        let toChip = accelToChip
        manager.startAccelerometerBatches { batch, error in
            let chip = (batch ?? []).map { s in AxisSample(t: s.timestamp, v: Run.apply(toChip, s.acceleration)) }
            inbox.withLock { $0.accel += chip; if let error { $0.error = error } }
        }
        if gyro != nil {
            manager.gyroUpdateInterval = 0.05
            manager.requestSamplingFrequency(100, for: .gyroscope)
            let gToChip = gyroToChip
            manager.startGyroBatches { batch, error in
                let chip = (batch ?? []).map { s in AxisSample(t: s.timestamp, v: Run.apply(gToChip, s.rotationRate)) }
                inbox.withLock { $0.gyro += chip; if let error { $0.error = error } }
            }
        }
        return nil
    }

    static func apply(_ m: [[Double]], _ a: Acceleration) -> (Double, Double, Double) { apply(m, (a.x, a.y, a.z)) }
    static func apply(_ m: [[Double]], _ r: RotationRate) -> (Double, Double, Double) { apply(m, (r.x, r.y, r.z)) }
    static func apply(_ m: [[Double]], _ v: (Double, Double, Double)) -> (Double, Double, Double) {
        (m[0][0] * v.0 + m[0][1] * v.1 + m[0][2] * v.2,
         m[1][0] * v.0 + m[1][1] * v.1 + m[1][2] * v.2,
         m[2][0] * v.0 + m[2][1] * v.1 + m[2][2] * v.2)
    }

    /// Takes the new samples; keeps the last 30 s. Returns the error that stopped a sensor.
    mutating func drain() -> MotionError? {
        let (a, g, e) = incoming.withLock { s in
            defer { s.accel.removeAll(keepingCapacity: true); s.gyro.removeAll(keepingCapacity: true) }
            return (s.accel, s.gyro, s.error)
        }
        accelSamples += a
        gyroSamples += g
        for keep in [30.0] {
            if let last = accelSamples.last?.t, let cut = accelSamples.firstIndex(where: { $0.t >= last - keep }), cut > 0 {
                accelSamples.removeFirst(cut)
            }
            if let last = gyroSamples.last?.t, let cut = gyroSamples.firstIndex(where: { $0.t >= last - keep }), cut > 0 {
                gyroSamples.removeFirst(cut)
            }
        }
        return e
    }

    func samples(_ all: [AxisSample], from: Double, to: Double) -> ArraySlice<AxisSample> {
        let lo = all.firstIndex { $0.t >= from } ?? all.endIndex
        let hi = all.firstIndex { $0.t > to } ?? all.endIndex
        return all[lo..<max(lo, hi)]
    }

    /// The last ``Calibrate/Options/still`` seconds when the board was still through them, with a
    /// status line saying how still it is otherwise.
    mutating func stillWindow() -> SampleStatistics? {
        guard let last = accelSamples.last?.t else {
            status("waiting for samples…")
            return nil
        }
        let window = SampleStatistics(samples(accelSamples, from: last - options.still, to: last))
        let g = gyro == nil ? nil : SampleStatistics(samples(gyroSamples, from: last - options.still, to: last))
        let magnitudeOK = abs(window.magnitude - standardGravity) < 0.2 * standardGravity
        let accelOK = window.sigma <= options.accelStillLimit
        let gyroOK = g.map { $0.sigma <= options.gyroStillLimit } ?? true
        if window.span < options.still * 0.9 || !accelOK || !gyroOK || !magnitudeOK {
            var text = "waiting for the board to be still: σ \(mg(window.sigma)) (limit \(mg(options.accelStillLimit)))"
            if let g { text += ", gyroscope σ \(dps(g.sigma))" }
            status(text)
            return nil
        }
        return window
    }

    /// The signed sensor axis within 20° of the mean, if one is.
    func dominantAxis(_ v: (Double, Double, Double)) -> (axis: Int, positive: Bool)? {
        let c = [v.0, v.1, v.2]
        let n = (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).squareRoot()
        guard n > 0 else { return nil }
        var best = 0
        for i in 0..<3 where abs(c[i]) > abs(c[best]) { best = i }
        guard abs(c[best]) / n > cos(20 * Double.pi / 180) else { return nil }
        return (best, c[best] > 0)
    }

    /// What to do next.
    func announce() {
        switch (options.mountCheck, faces.count) {
        case (true, 0):
            instruct("Step 1 of 6: lay the board face up (display or components up) on a level table, and keep it still.")
        case (true, 1):
            instruct("Step 2 of 6: stand the board on its bottom edge (top edge up), and keep it still.")
        default:
            instruct("Step \(faces.count + 1) of 6: lay the board on one of the faces left, and keep it still: \(missing().joined(separator: "; ")).")
        }
    }

    /// The faces not measured yet, in the board's words.
    func missing() -> [String] {
        var out: [String] = []
        for axis in [2, 1, 0] {
            for positive in [true, false] where !faces.contains(where: { $0.axis == axis && $0.positive == positive }) {
                out.append(faceName(axis: axis, positive: positive, mount: namingMount))
            }
        }
        return out
    }

    /// Measures one face for ``Calibrate/Options/seconds``; a refusal status when it moved.
    mutating func measure(_ face: (axis: Int, positive: Bool)) -> Int32? {
        guard let start = accelSamples.last?.t else { return nil }
        let name = faceName(axis: face.axis, positive: face.positive, mount: namingMount)
        say("Measuring \(name): keep it still for \(Calibrate.fixed(options.seconds, 1)) s.")
        let deadline = monotonicSeconds() + options.seconds + 10
        while (accelSamples.last?.t ?? start) < start + options.seconds {
            usleep(50_000)
            if let e = drain() {
                say("motion-monitor calibrate: \(e)")
                return ExitStatus.of(e)
            }
            if monotonicSeconds() > deadline {
                return refuse("the accelerometer stopped delivering samples while \(name) was measured")
            }
            let done = ((accelSamples.last?.t ?? start) - start) / options.seconds
            let filled = Int(min(max(done, 0), 1) * 20)
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled)
            status("measuring \(name) [\(bar)] \(filled * 5) %")
        }
        let a = SampleStatistics(samples(accelSamples, from: start, to: start + options.seconds))
        let g = gyro == nil ? nil : SampleStatistics(samples(gyroSamples, from: start, to: start + options.seconds))
        guard a.count >= 10 else {
            return refuse("only \(a.count) accelerometer samples arrived in the \(Calibrate.fixed(options.seconds, 1)) s \(name) was measured")
        }
        if a.sigma > options.accelStillLimit || (g.map { $0.sigma > options.gyroStillLimit } ?? false) || !sameFace(dominantAxis(a.mean), face) {
            var why = "the board moved while \(name) was measured: accelerometer σ \(mg(a.sigma)) (limit \(mg(options.accelStillLimit)))"
            if let g { why += ", gyroscope σ \(dps(g.sigma)) (limit \(dps(options.gyroStillLimit)))" }
            return refuse(why + ". Keep it still on each face until it is measured")
        }
        faces.append(FaceFit.Face(axis: face.axis, positive: face.positive, mean: a.mean))
        accelSigma = max(accelSigma, a.sigma)
        if let g {
            gyroMeans.append(g.mean)
            gyroSigma = max(gyroSigma, g.sigma)
        }
        if options.mountCheck && mountSteps.count < 2 { mountSteps.append(face) }
        say("Measured \(name): \(faces.count) of 6 (σ \(mg(a.sigma))).")
        return nil
    }

    func sameFace(_ a: (axis: Int, positive: Bool)?, _ b: (axis: Int, positive: Bool)) -> Bool {
        a.map { $0.axis == b.axis && $0.positive == b.positive } ?? false
    }

    func refuse(_ why: String) -> Int32 {
        say("motion-monitor calibrate: refused: \(why). Nothing was stored.")
        return Calibrate.refused
    }

    // MARK: The result

    mutating func finish() -> Int32 {
        guard let fit = FaceFit.fit(faces) else {
            return refuse("the six faces do not determine a calibration (they do not span the three axes)")
        }
        var accelCal = fit.calibration
        accelCal.stillness = accelSigma
        say("")
        say("Accelerometer of \(accel.deviceDescription):")
        for line in Calibrate.describe(accelCal) { say("  " + line) }
        var gyroCal: SensorCalibration?
        if gyro != nil, !gyroMeans.isEmpty {
            let n = Double(gyroMeans.count)
            let m = gyroMeans.reduce((0.0, 0.0, 0.0)) { ($0.0 + $1.0 / n, $0.1 + $1.1 / n, $0.2 + $1.2 / n) }
            var c = SensorCalibration(kind: .gyroscope, bias: AxisValues(x: m.0, y: m.1, z: m.2), created: accelCal.created)
            c.stillness = gyroSigma
            gyroCal = c
            say("Gyroscope of \(accel.deviceDescription):")
            for line in Calibrate.describe(c) { say("  " + line) }
        }
        let mountOK = mountReport()
        if fit.residual > options.maxResidual {
            return refuse("the residual \(mg(fit.residual)) is larger than \(mg(options.maxResidual)): a face was not flat, or the sensor is not linear")
        }
        guard options.save else {
            say("Dry run: nothing stored.")
            return ExitStatus.success
        }
        if options.writeKernel {
            let accelFound = try? KernelOffsets.read(accel, uri: options.uri)
            do throws(MotionError) {
                accelCal = try KernelStep.move(accelCal, sensor: accel, previous: try SensorCalibration.stored(for: accel, uri: options.uri)?.kernel,
                                               uri: options.uri, say: { say($0) })
                if let c = gyroCal, let gyro {
                    gyroCal = try KernelStep.move(c, sensor: gyro, previous: try SensorCalibration.stored(for: gyro, uri: options.uri)?.kernel,
                                                  uri: options.uri, say: { say($0) })
                }
            } catch {
                say("motion-monitor calibrate: \(error)")
                if accelCal.kernel != nil, let accelFound {
                    say((try? KernelOffsets.write(accelFound, to: accel, uri: options.uri)) != nil
                        ? "The accelerometer's calibbias files were put back as found."
                        : "The accelerometer's calibbias files could not be put back to \(accelFound.map(String.init).joined(separator: " ")).")
                }
                say("Nothing was stored.")
                return ExitStatus.of(error)
            }
        }
        do throws(MotionError) {
            let path = try accelCal.save(for: accel, uri: options.uri)
            say("Stored \(path)")
            if let gyroCal, let gyro {
                say("Stored \(try gyroCal.save(for: gyro, uri: options.uri))")
            }
        } catch {
            say("motion-monitor calibrate: \(error)")
            return ExitStatus.cannotCreate
        }
        say("Every reading of this device is calibrated from now on (--uncalibrated reads without it; calibrate --forget removes it).")
        _ = mountOK
        return ExitStatus.success
    }

    /// Compares the mount matrix in force with the one the first two faces imply; true when they agree.
    func mountReport() -> Bool {
        guard let proposed = proposedMount else { return true }
        let current = accel.mountMatrix.rows
        let agrees = (0..<3).allSatisfy { i in (0..<3).allSatisfy { j in abs(current[i][j] - proposed[i][j]) < 0.05 } }
        let text = proposed.map { $0.map { Calibrate.fixed($0, 0) }.joined(separator: ",") }.joined(separator: ";")
        if agrees {
            say("Mount matrix: right (\(accel.mountMatrix), \(accel.mountMatrixSource)): face up reads +z, top edge up +y.")
        } else {
            say("Mount matrix: the one in force (\(accel.mountMatrix), \(accel.mountMatrixSource)) does not match how the board lay:")
            say("  with the board face up, then top edge up, the matrix that reads +z then +y is \(text)")
            say("  (udev hwdb: ACCEL_MOUNT_MATRIX=\(text); or MotionManager(mountMatrixOverrides:)). The calibration does not depend on it.")
        }
        return agrees
    }
}
