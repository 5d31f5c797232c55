#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import Foundation
import SystemSupport

extension DeviceSim {
    // MARK: Attributes

    func read(_ file: String) -> String? {
        if let nodes, let i = attributeIndex(file) { return nodes.attribute(i).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } }
        return Files.read(directory + "/" + file)
    }

    /// The first of `files` that exists, parsed as a number.
    func number(_ files: [String]) -> Double? {
        for f in files { if let t = read(f) { return Double(t) } }
        return nil
    }

    /// Re-reads scale, offset and mount matrices the way a reader must look them up: per-axis, then
    /// per-type, then device-level. Unparsable values leave the previous calibration in place (the
    /// simulator keeps producing data; a reader sees the garbage in the file).
    func reloadCalibration() {
        var scales: [Double] = [], offsets: [Double] = []
        var mounts: [String: Mat3] = [:]
        let old = state.withLock { $0.calibration }
        for (i, ch) in channels.enumerated() {
            let t = ch.typeName
            let axisName = ch.spec.id.split(separator: "_").last.map(String.init) ?? ""
            let perAxis = ch.axis != nil ? ["in_\(t)_\(axisName)"] : ["in_\(ch.spec.id)"]
            scales.append(number(perAxis.map { $0 + "_scale" } + ["in_\(t)_scale", "scale"]) ?? old.scale[i])
            offsets.append(number(perAxis.map { $0 + "_offset" } + ["in_\(t)_offset", "offset"]) ?? old.offset[i])
            if mounts[t] == nil {
                let text = ["in_\(t)_mount_matrix", "mount_matrix", "in_mount_matrix"].lazy.compactMap { self.read($0) }.first
                mounts[t] = text.flatMap { Mat3(mountMatrix: $0) } ?? .identity
            }
        }
        var shifts: [Double] = []
        for ch in channels {
            let file = "in_\(ch.spec.id)_calibbias"
            guard let model = Self.calibbiasModel(driver: spec.name, type: ch.typeName), let now = read(file).flatMap(model.si),
                  let found = spec.attributes[file].flatMap(model.si) else {
                shifts.append(0)
                continue
            }
            shifts.append(now - found)
        }
        state.withLock { $0.calibration = Calibration(scale: scales, offset: offsets, mount: mounts, calibbiasShift: shifts) }
    }

    /// The integer the IIO core passes an `IIO_VAL_INT` driver for a written value (the fraction dropped).
    @Sendable static func integerPart(_ v: Double) -> Int64 { Int64(v.rounded(.towardZero)) }

    /// A driver's calibbias as the simulator models it: what a count adds to the chip's output,
    /// and how a written value becomes the register's contents and the file's text.
    struct CalibbiasModel: Sendable {
        /// SI units (m/s², rad/s) per register count.
        var unit: Double
        /// The file shows SI values (count × unit to `decimals` places) rather than counts.
        var showsSI = false
        var decimals = 0
        /// The register's count for a written value; nil when the driver returns EINVAL.
        var store: @Sendable (Double) -> Int64?
        /// The file's text for a register count.
        func show(_ count: Int64) -> String {
            guard showsSI else { return String(count) }
            let v = Double(count) * unit
            var p = 1.0
            for _ in 0..<decimals { p *= 10 }
            let n = Int64((abs(v) * p).rounded()), ip = Int64(p)
            let fraction = String(n % ip)
            return (v < 0 && n != 0 ? "-" : "") + String(n / ip) + "." + String(repeating: "0", count: decimals - fraction.count) + fraction
        }
        /// A file's text in SI units.
        func si(_ text: String) -> Double? {
            guard let v = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)), v.isFinite else { return nil }
            return showsSI ? v : v * unit
        }
    }

    /// The calibbias of the drivers whose registers the simulator models (the chip adds
    /// `count · unit` to its output), as 6.1's drivers read and write them:
    /// - inv_mpu6050 on an MPU-6000/6050/9150: the 16-bit offset registers as they are
    ///   (`inv_mpu6050_sensor_set`), 1/2048 g per count for the accelerometer and 1/32.8 °/s for the
    ///   gyroscope, whatever range is configured (InvenSense, "MPU Hardware Offset Registers
    ///   Application Note").
    /// - adxl345/adxl375: the 8-bit OFS register shown × 4, written as `val / 4` (C division)
    ///   truncated to 8 bits without a range check (adxl345_core.c:123-133, :158-165); a count is
    ///   the data scale, 38300 or 480000 µm/s² (:55, :61).
    /// - adxl312/313/314: the same × 4, −512…508 or EINVAL (adxl313_core.c:273-316), counts of the
    ///   data scale (:100-118).
    /// - inv_icm42600 (`<chip>-accel`, `<chip>-gyro`): SI values, EINVAL outside ±10.04 m/s² or
    ///   ±1.117 rad/s, rounded to the nearest count (0.5 mg, 1/32 °/s) and clamped to 12 bits,
    ///   shown to micro or nano (inv_icm42600_accel.c:351-493, inv_icm42600_gyro.c:367-505).
    static func calibbiasModel(driver: String, type: String) -> CalibbiasModel? {
        let g = MotionScript.g
        let int = Self.integerPart
        switch (driver, type) {
        case ("mpu6050", "accel"), ("mpu6000", "accel"), ("mpu9150", "accel"):
            return CalibbiasModel(unit: g / 2048, store: { Int64(Int16(truncatingIfNeeded: int($0))) })
        case ("mpu6050", "anglvel"), ("mpu6000", "anglvel"), ("mpu9150", "anglvel"):
            return CalibbiasModel(unit: Double.pi / 180 / 32.8, store: { Int64(Int16(truncatingIfNeeded: int($0))) })
        case ("adxl345", "accel"), ("adxl375", "accel"):
            return CalibbiasModel(unit: driver == "adxl345" ? 0.0383 : 0.48,
                                  store: { Int64(Int8(truncatingIfNeeded: int($0) / 4)) * 4 })
        case ("adxl312", "accel"), ("adxl313", "accel"), ("adxl314", "accel"):
            let unit = ["adxl312": 0.028425072, "adxl313": 0.009576806, "adxl314": 0.478858719][driver]!
            return CalibbiasModel(unit: unit, store: { v in (-512...508).contains(int(v)) ? int(v) / 4 * 4 : nil })
        default:
            break
        }
        let chips = ["icm42600", "icm42602", "icm42605", "icm42622"]
        let chip = driver.split(separator: "-").first.map(String.init) ?? ""
        guard chips.contains(chip) else { return nil }
        if type == "accel", driver == chip + "-accel" {
            let unit = g * 0.0005
            return CalibbiasModel(unit: unit, showsSI: true, decimals: 6, store: { v in
                guard v >= -10.042010, v <= 10.037106 else { return nil }
                return max(-2048, min(2047, Int64((v / unit).rounded())))
            })
        }
        if type == "anglvel", driver == chip + "-gyro" {
            let unit = Double.pi / 180 / 32
            return CalibbiasModel(unit: unit, showsSI: true, decimals: 9, store: { v in
                guard v >= -1.117010721, v <= 1.116465306 else { return nil }
                return max(-2048, min(2047, Int64((v / unit).rounded())))
            })
        }
        return nil
    }

    /// The sampling frequency in force for the given channel types (the highest, as one data-ready
    /// interrupt serves them all): device-level `sampling_frequency`, else per type, else the
    /// trigger's, else the fixture's buffer rate, else 100 Hz.
    func rate(types: Set<String>, simulator: Simulator?) -> Double {
        // A test may put garbage in a frequency file (--set): the hardware keeps a sane rate.
        func sane(_ f: Double?) -> Double? { f.flatMap { $0.isFinite && $0 >= 0 && $0 <= 100_000 ? $0 : nil } }
        if let f = sane(number(["sampling_frequency"])) { return f }
        let perType = types.compactMap { sane(number(["in_\($0)_sampling_frequency"])) }
        if let m = perType.max() { return m }
        if let sim = simulator, let t = read("trigger/current_trigger"), !t.isEmpty, let r = sim.triggerRate(named: t) {
            return r
        }
        return spec.buffer?.rate ?? 100
    }

    var motionTypes: Set<String> {
        Set(channels.filter { ch in
            if case .constant = ch.source { return false }
            if case .timestamp = ch.source { return false }
            return true
        }.map(\.typeName))
    }

    func pin(_ file: String) {
        _ = state.withLock { $0.pinned.insert(file) }
    }

    /// Reacts to a write, as the driver's store() would; the kernel would have rejected a bad value
    /// with EINVAL, the simulator restores the previous one and says so on stderr.
    func attributeWritten(_ file: String, simulator: Simulator) {
        // A file given other contents with --set belongs to the test: no driver-like reaction
        // (snapping a frequency or a scale) undoes what the test writes into it.
        if state.withLock({ $0.unplugged || $0.pinned.contains(file) }) { return }
        // Served through FUSE, these were checked and settled by store() before write(2) returned.
        if attributeIndex(file) != nil && (file.hasSuffix("sampling_frequency") || file == "current_timestamp_clock"
                                           || file == "trigger/current_trigger") {
            if file.hasSuffix("sampling_frequency") { simulator.log("\(id): \(file) = \(read(file) ?? "?") Hz") }
            return
        }
        switch file {
        case "buffer/enable", "buffer/length", "buffer/watermark":
            break  // the watcher calls evaluateBuffer once the writer has finished
        case "current_timestamp_clock":
            if let v = read(file), SimClock.clock(named: v) == nil {
                simulator.warn("\(id): current_timestamp_clock = \"\(v)\" is not a clock (the kernel returns EINVAL)")
                try? write(file, spec.attributes[file] ?? "realtime")
            }
        case "trigger/current_trigger":
            if let v = read(file), !v.isEmpty, !simulator.triggerIsValid(v, for: spec.name) {
                simulator.warn("\(id) (\(spec.name)): trigger \"\(v)\" cannot drive this device (the kernel returns EINVAL)")
                try? write(file, spec.currentTrigger ?? "")
            }
        default:
            if file.hasSuffix("sampling_frequency") {
                snapFrequency(file, simulator: simulator)
            } else if file.hasSuffix("calibbias"),
                      let model = Self.calibbiasModel(driver: spec.name, type: file.hasPrefix("in_anglvel") ? "anglvel" : "accel") {
                // The IIO core parses the value (an integer driver drops a fraction), the driver
                // stores what its register holds and show() reads that back.
                if let text = read(file) {
                    let v = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)).flatMap { $0.isFinite && abs($0) < 9e18 ? $0 : nil }
                    let register = v.flatMap { model.store($0) }.map { model.show($0) }
                    if let register {
                        if register != text { try? write(file, register) }
                        state.withLock { $0.calibbias[file] = register }
                    } else {
                        simulator.warn("\(id): \(file) = \"\(text)\" is \(v == nil ? "not a number" : "out of the register's range") (the kernel returns EINVAL)")
                        try? write(file, state.withLock { $0.calibbias[file] } ?? spec.attributes[file] ?? "0")
                    }
                }
                reloadCalibration()
            } else if file.hasSuffix("scale") || file.hasSuffix("offset") || file.hasSuffix("mount_matrix") {
                if file.hasSuffix("scale"), let avail = read(file + "_available"), let v = read(file) {
                    let choices = avail.split(separator: " ").map(String.init)
                    let pick = choices.min { abs((Double($0) ?? .infinity) - (Double(v) ?? 0)) < abs((Double($1) ?? .infinity) - (Double(v) ?? 0)) }
                    if let pick, pick != v { try? write(file, pick) }
                }
                reloadCalibration()
            }
        }
    }

    /// Snaps a written frequency to what `<file>_available` allows (a list: the nearest value; a
    /// `[min step max]` range or cros-ec's `0 min max`: clamped and rounded to the step).
    func snapFrequency(_ file: String, simulator: Simulator) {
        guard let text = read(file) else { return }
        let decimals = state.withLock { $0.decimals[file] } ?? 6
        guard let requested = Double(text), requested.isFinite, requested >= 0 else {
            simulator.warn("\(id) (\(spec.name)): \(file) = \"\(text)\" is not a frequency (the kernel returns EINVAL)")
            try? write(file, spec.attributes[file] ?? "0")
            return
        }
        var value = requested
        if let avail = read(file + "_available") {
            value = Self.snap(requested, available: avail)
        }
        let formatted = String(format: "%.\(decimals)f", value)
        if formatted != text { try? write(file, formatted) }
        simulator.log("\(id): \(file) = \(formatted) Hz (requested \(text))")
    }

    static func snap(_ requested: Double, available: String) -> Double {
        let trimmed = available.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("[") {
            let v = trimmed.dropFirst().dropLast().split(separator: " ").compactMap { Double($0) }
            guard v.count == 3 else { return requested }
            let clamped = min(max(requested, v[0]), v[2])
            guard v[1] > 0 else { return clamped }
            return min(v[0] + ((clamped - v[0]) / v[1]).rounded() * v[1], v[2])
        }
        let list = trimmed.split(separator: " ").compactMap { Double($0) }
        guard !list.isEmpty else { return requested }
        if list.count == 3 && list[0] == 0 {  // cros-ec: 0 (off) or anything in [min, max]
            return requested == 0 ? 0 : min(max(requested, list[1]), list[2])
        }
        return list.min { (abs($0 - requested), -$0) < (abs($1 - requested), -$1) } ?? requested
    }
}
