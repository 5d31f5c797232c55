#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import Foundation
import SystemSupport

/// One simulated channel: its fixture entry, parsed scan type and physical quantity.
struct ChannelSim: Sendable {
    var spec: Fixture.Channel
    var scanType: ScanType?
    var typeName: String
    var axis: Int?

    /// What drives the channel's values.
    enum Source: Sendable { case accel, anglvel, magn, timestamp, constant(Int64) }
    var source: Source {
        if let v = spec.value { return .constant(v) }
        switch typeName {
        case "accel": return .accel
        case "anglvel": return .anglvel
        case "magn": return .magn
        case "timestamp": return .timestamp
        default: return .constant(0)
        }
    }
}

/// Per-channel conversion in force: SI = (raw + offset) × scale, and the chip's mount matrix.
struct Calibration: Sendable {
    var scale: [Double]
    var offset: [Double]
    var mount: [String: Mat3]
    /// Per channel: what the chip adds to its output (SI, chip axes) because its calibbias
    /// register differs from the value the fixture started with (see ``DeviceSim/calibbiasModel(driver:type:)``).
    var calibbiasShift: [Double] = []
}

/// The simulated side of one IIO device: its files, its driver-like reactions and its stream.
final class DeviceSim: Sendable {
    let number: Int
    let id: String
    let spec: Fixture.Device
    let directory: String
    let devNode: String
    let channels: [ChannelSim]
    let options: SimulationOptions
    let isNoIRQ: Bool
    /// `--stall`: when (seconds after each buffer enable) the device stops delivering, and for how
    /// long (nil: for good).
    let stall: (after: Double, duration: Double?)?
    let state: Locked<State>
    /// The fixture's triggers (which may drive this device, and at what rate).
    let triggers: [Fixture.Trigger]
    /// The device's attributes as the kernel shows them (the fixture's, plus the core's defaults).
    let attributes: [String: String]
    /// Where the attribute files the kernel answers synchronously are served (nil: they are plain
    /// files, and the simulator reacts to writes after the fact; see ``guardedFiles``).
    let nodes: FuseNodes?
    /// Path (canonical or alias) → attribute index in ``nodes``.
    let guardedIndex: [String: Int]
    /// Alias path → canonical path (`buffer0/enable` → `buffer/enable`).
    let aliases: [String: String]

    struct State: Sendable {
        var calibration: Calibration
        var unplugged = false
        var session: StreamSession?
        var stats = StreamStats()
        var noise: NoiseSource
        /// Files the raw refresher leaves alone (made unreadable, or given other contents).
        var pinned: Set<String> = []
        /// Digits after the decimal point of each frequency-like file as first written.
        var decimals: [String: Int] = [:]
        /// What each calibbias file held after the last write the driver took (restored when it
        /// refuses one).
        var calibbias: [String: String] = [:]
    }

    init(number: Int, spec: Fixture.Device, fixture: Fixture, root: String, options: SimulationOptions,
         nodes: FuseNodes? = nil, attributeBase: Int = 0) throws {
        self.number = number
        triggers = fixture.triggers
        attributes = SysfsLayout.attributes(of: spec)
        self.nodes = nodes
        aliases = SysfsLayout.aliases(of: spec)
        var index: [String: Int] = [:]
        for (i, file) in SysfsLayout.guardedFiles(of: spec).enumerated() { index[file] = attributeBase + i }
        for (alias, canonical) in aliases { index[alias] = index[canonical] }
        guardedIndex = index
        id = "iio:device\(number)"
        self.spec = spec
        directory = root + "/sys/bus/iio/devices/" + id
        devNode = root + "/dev/" + id
        self.options = options
        channels = try spec.channels.map { ch in
            ChannelSim(spec: ch, scanType: try ch.format.map { try ScanType(parsing: $0) },
                       typeName: ch.typeName, axis: ch.axis)
        }
        isNoIRQ = options.noIRQ.contains { $0 == "iio:device\(number)" || $0 == spec.name || $0 == spec.label }
        stall = options.stall.first { $0.device == "iio:device\(number)" || $0.device == spec.name || $0.device == spec.label }
            .map { ($0.after, $0.duration) }
        let cal = Calibration(scale: channels.map { _ in 1 }, offset: channels.map { _ in 0 }, mount: [:],
                              calibbiasShift: channels.map { _ in 0 })
        state = Locked(State(calibration: cal, noise: NoiseSource(seed: options.seed &+ UInt64(number) &* 7919)))
    }

    // MARK: Building the tree

    /// Files the kernel makes writable (0644) for this kind of device; everything else is 0444.
    func isWritable(_ file: String) -> Bool {
        if spec.writable.contains(file) { return true }
        if file.hasSuffix("sampling_frequency") || file.hasSuffix("_en") || file.hasSuffix("calibbias")
            || file.hasSuffix("calibscale") || file.hasSuffix("oversampling_ratio") { return true }
        if ["buffer/enable", "buffer/length", "buffer/watermark", "trigger/current_trigger",
            "current_timestamp_clock"].contains(file) { return true }
        if file.hasSuffix("_scale") || file == "scale" { return spec.attributes[file + "_available"] != nil }
        return false
    }

    /// The attribute index of `file` when it is served through FUSE.
    func attributeIndex(_ file: String) -> Int? { nodes == nil ? nil : guardedIndex[file] }

    /// The canonical name of a file (`buffer0/in_accel_x_en` → `scan_elements/in_accel_x_en`).
    func canonical(_ file: String) -> String { aliases[file] ?? file }

    /// Sets a file's contents as the driver would (no store() check).
    func write(_ file: String, _ value: String) throws {
        if let nodes, let i = attributeIndex(file) {
            nodes.setAttribute(i, value)
            return
        }
        // The kernel's current_trigger with no trigger set is an empty file, not a newline.
        let text = value.isEmpty && file == "trigger/current_trigger" ? "" : value + "\n"
        try Files.write(text, to: directory + "/" + file, mode: isWritable(canonical(file)) ? 0o644 : 0o444)
    }

    /// Creates `file` with `value`: a FUSE-served attribute bind-mounted onto its path, or a plain
    /// file. An alias of a plain file is a hard link to it (the same contents, as in sysfs).
    func place(_ file: String, _ value: String) throws {
        let path = directory + "/" + file
        if let slash = file.lastIndex(of: "/") { try Files.makeDirectory(directory + "/" + file[..<slash]) }
        if let nodes, let i = attributeIndex(file) {
            if !FileManager.default.fileExists(atPath: path) { try Files.write("", to: path, mode: 0o644) }
            let r = simsupport_bind(nodes.attributePath(i), path, 0)
            if r != 0 { throw Files.Failure(path: path, operation: "bind-mount the FUSE attribute on", errno: -r) }
            nodes.setAttribute(i, value)
            nodes.setAttributeMode(i, isWritable(canonical(file)) ? 0o644 : 0o444)
            return
        }
        if let target = aliases[file] {
            unlink(path)
            if link(directory + "/" + target, path) == 0 { return }
        }
        try write(file, value)
    }

    /// Gives a file other contents for a test (`--set`): writable, and left alone by the
    /// simulator's driver-like reactions from then on.
    func override(_ file: String, _ value: String) throws {
        if let nodes, let i = attributeIndex(file) {
            nodes.setAttribute(i, value)
            nodes.setAttributeMode(i, 0o644)
        } else {
            // Writable, so a test can also rewrite it (Files.write keeps an existing file's mode).
            try Files.write(value + "\n", to: directory + "/" + file, mode: 0o644)
            chmod(directory + "/" + file, 0o644)
        }
        reloadCalibration()
        pin(file)
    }

    func build(devDirectory: String, scratch: String, nodes: FuseNodes?) throws {
        try Files.makeDirectory(directory)
        try write("name", spec.name)
        if let label = spec.label { try write("label", label) }
        var decimals: [String: Int] = [:]
        for (file, value) in attributes.sorted(by: { $0.key < $1.key }) {
            try place(file, value)
            if file.hasSuffix("frequency") {
                decimals[file] = value.split(separator: ".").dropFirst().first?.count ?? 0
            }
        }
        for ch in channels {
            if ch.spec.hasRaw { try place("in_\(ch.spec.id)_raw", "0") }
        }
        if let buffer = spec.buffer {
            // Since Linux 5.11 every buffer has its bufferN/ folder (buffer0/: its files and the
            // scan elements' _en, _index, _type), and the legacy buffer/ and scan_elements/
            // folders show the same attributes of buffer0.
            try Files.makeDirectory(directory + "/buffer")
            try Files.makeDirectory(directory + "/buffer0")
            try Files.makeDirectory(directory + "/scan_elements")
            for dir in ["buffer", "buffer0"] {
                try place(dir + "/enable", "0")
                try place(dir + "/length", String(buffer.length))
                try place(dir + "/watermark", String(buffer.watermark))
                try write(dir + "/data_available", "0")
            }
            try write("buffer/direction", "in")
            try write("buffer0/direction", "in")
            for (file, value) in attributes where file.hasPrefix("buffer/") {
                try write("buffer0/" + file.dropFirst(7), value)  // the driver's buffer attributes, in both
            }
            for ch in channels {
                guard let idx = ch.spec.index, let t = ch.scanType else { continue }
                for dir in ["scan_elements", "buffer0"] {
                    try place("\(dir)/in_\(ch.spec.id)_en", "0")
                    try write("\(dir)/in_\(ch.spec.id)_index", String(idx))
                    try write("\(dir)/in_\(ch.spec.id)_type", t.description)
                }
            }
            // The character device: a FUSE file bind-mounted on the node's path (see FuseNodes), or
            // a FIFO; libiio reads either with read() exactly as it reads the real node on mainline
            // kernels (no mmap "high-speed" mode there either). Mode as udev leaves it on a stock
            // system: root only.
            if let nodes {
                try Files.write("", to: devNode, mode: 0o600)
                let r = simsupport_bind(nodes.path(device: number), devNode, 0)
                if r != 0 { throw Files.Failure(path: devNode, operation: "bind-mount the FUSE node on", errno: -r) }
            } else if mkfifo(devNode, 0o600) != 0 && errno != EEXIST {
                throw Files.Failure(path: devNode, operation: "mkfifo", errno: errno)
            }
            chmod(devNode, 0o600)
            try write("dev", "\(Self.iioMajor):\(number)")
        } else if spec.eventsNode == true {
            // Events only: a node that opens and refuses reads (iio_event_fileops).
            if let nodes {
                try Files.write("", to: devNode, mode: 0o600)
                let r = simsupport_bind(nodes.path(device: number), devNode, 0)
                if r != 0 { throw Files.Failure(path: devNode, operation: "bind-mount the FUSE node on", errno: -r) }
                nodes.setEventsOnly(device: number)
            } else if mkfifo(devNode, 0o600) != 0 && errno != EEXIST {
                throw Files.Failure(path: devNode, operation: "mkfifo", errno: errno)
            }
            chmod(devNode, 0o600)
            try write("dev", "\(Self.iioMajor):\(number)")
        }
        // The IIO core's show() of current_timestamp_clock returns the string's NUL too.
        if let nodes, let i = attributeIndex("current_timestamp_clock") { nodes.setAttributeTrailingNul(i) }
        try write("uevent", "MAJOR=\(Self.iioMajor)\nMINOR=\(number)\nDEVNAME=\(id)\nDEVTYPE=iio_device\nOF_NAME=\(spec.name)")
        if let current = spec.currentTrigger {
            try Files.makeDirectory(directory + "/trigger")
            try place("trigger/current_trigger", current)
        }
        state.withLock { $0.decimals = decimals }
        reloadCalibration()
        refreshRaw(at: SimClock.now(), motionTime: 0, scratch: scratch)
    }

    /// The major number the kernel gives IIO character devices on a typical system.
    static let iioMajor = 239

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

    // MARK: raw files

    /// The raw value of each channel at monotonic time `now` (one motion state for all channels).
    func rawValues(motionTime t: Double, noisy: Bool, rate: Double = 100) -> [Int64] {
        let m = options.motion.state(at: t)
        let imp = options.imperfections
        let accelSigma = imp.accelSigma(rate: rate), gyroSigma = imp.gyroSigma(rate: rate)
        return state.withLock { s in
            var out: [Int64] = []
            out.reserveCapacity(channels.count)
            for (i, ch) in channels.enumerated() {
                var v: Vec3
                switch ch.source {
                case let .constant(c): out.append(c); continue
                case .timestamp: out.append(0); continue
                case .accel:
                    v = m.acceleration
                    if noisy && accelSigma > 0 {
                        v += Vec3(s.noise.gaussian(), s.noise.gaussian(), s.noise.gaussian()) * accelSigma
                    }
                case .anglvel:
                    v = m.angularVelocity + imp.gyroBias
                    if noisy && gyroSigma > 0 {
                        v += Vec3(s.noise.gaussian(), s.noise.gaussian(), s.noise.gaussian()) * gyroSigma
                    }
                case .magn:
                    v = imp.distortedField(m.magneticField)
                    if noisy && imp.magnNoise > 0 {
                        v += Vec3(s.noise.gaussian(), s.noise.gaussian(), s.noise.gaussian()) * imp.magnNoise
                    }
                }
                // The chip measures in its own frame; the mount matrix M takes chip to device
                // (v_device = M·v_chip), so the chip sees Mᵀ·v_device.
                var chip = (s.calibration.mount[ch.typeName] ?? .identity).transposed * v
                if case .accel = ch.source { chip = imp.distortedAcceleration(chip) }
                let si = chip[ch.axis ?? 0] + (i < s.calibration.calibbiasShift.count ? s.calibration.calibbiasShift[i] : 0)
                let scale = s.calibration.scale[i]
                let raw = scale != 0 ? (si / scale - s.calibration.offset[i]).rounded() : 0
                let clamped = raw.isFinite ? max(min(raw, 9.2e18), -9.2e18) : 0
                let type = ch.scanType ?? ScanType(isBigEndian: false, isSigned: true, bits: 32, storageBits: 32)
                out.append(type.saturate(Int64(clamped)))
            }
            return out
        }
    }

    func refreshRaw(at now: Int64, motionTime: Double, scratch: String, rate: Double = 100) {
        let values = rawValues(motionTime: motionTime, noisy: true, rate: rate)
        let skip = state.withLock { $0.pinned }
        for (ch, v) in zip(channels, values) where ch.spec.hasRaw {
            let file = "in_\(ch.spec.id)_raw"
            if skip.contains(file) { continue }
            if let nodes, let i = attributeIndex(file) {
                nodes.setAttribute(i, "\(v)")
                continue
            }
            try? Files.replaceAtomically("\(v)\n", at: directory + "/" + file, scratch: scratch,
                                         mode: isWritable(file) ? 0o644 : 0o444)
        }
    }

    /// Makes `raw` reads of the scan elements fail with EBUSY (`busy`) or succeed again, for a
    /// driver that refuses them while its buffer is enabled (``Fixture/Device/rawBusyWhileBuffering``).
    func rawReadsBusy(_ busy: Bool) {
        guard spec.rawBusyWhileBuffering == true, let nodes else { return }
        for ch in channels where ch.spec.hasRaw && ch.spec.index != nil {
            if let i = attributeIndex("in_\(ch.spec.id)_raw") { nodes.setAttributeReadError(i, busy ? EBUSY : 0) }
        }
    }

    /// Rewrites the `raw` files at the sampling frequency (at most `rawRefreshMax`, at least 10 Hz,
    /// so a device stopped at 0 Hz still answers polled reads the way the hardware would).
    func refreshRawLoop(stopFD: Int32, simulator: Simulator) {
        let types = motionTypes
        while !simulator.isStopping {
            if state.withLock({ $0.unplugged }) { return }
            let deviceRate = rate(types: types, simulator: simulator)
            let hz = min(max(deviceRate, 10), options.rawRefreshMax)
            if simulator.waitForStop(nanoseconds: Int64(1e9 / hz)) { return }
            let now = SimClock.now()
            refreshRaw(at: now, motionTime: simulator.motionTime(now), scratch: simulator.scratch, rate: max(deviceRate, 10))
        }
    }

    // MARK: Faults

    /// The device goes away as the kernel removes it: its stream stops, its sysfs folder leaves
    /// the tree in one step (renamed into `scratch`, then deleted there, so that a `raw` refresh
    /// still in flight cannot keep a folder with the device's name), then its node goes.
    func unplug(devDirectory: String, scratch: String, nodes: FuseNodes?) {
        state.withLock { $0.unplugged = true }
        stopStream(wait: true)
        if let nodes {
            for (file, i) in guardedIndex {
                _ = simsupport_umount_lazy(directory + "/" + file)
                nodes.unplugAttribute(i)
            }
        }
        let removed = scratch + "/unplugged-" + id
        Files.removeTree(rename(directory, removed) == 0 ? removed : directory)
        if let nodes {
            nodes.unplug(device: number)
            _ = simsupport_umount_lazy(devNode)
        }
        unlink(devNode)
    }

    // MARK: Streaming

    var streamStats: StreamStats { state.withLock { $0.stats } }

    /// The scan layout from the `_en` files as they are now.
    func enabledLayout() -> (ScanLayout, [Int]) {
        var entries: [(channel: String, index: Int, type: ScanType)] = []
        var channelIndex: [String: Int] = [:]
        for (i, ch) in channels.enumerated() {
            guard let idx = ch.spec.index, let t = ch.scanType else { continue }
            if read("scan_elements/in_\(ch.spec.id)_en") == "1" {
                entries.append((ch.spec.id, idx, t))
                channelIndex[ch.spec.id] = i
            }
        }
        let layout = ScanLayout(channels: entries)
        return (layout, layout.elements.map { channelIndex[$0.channel]! })
    }

    /// What a look at the buffer's files concluded (see ``evaluateBuffer(simulator:final:)``).
    enum BufferCheck: Equatable { case settled, unsettled }

    /// Files whose writes change what the buffer streams: the watcher re-evaluates the buffer after
    /// any of them is written.
    static func affectsBuffer(_ file: String) -> Bool {
        // (`file` is canonical: buffer0/ writes arrive as buffer/ and scan_elements/ ones.)
        file == "buffer/enable" || file == "buffer/length" || file == "buffer/watermark"
            || file == "trigger/current_trigger" || (file.hasPrefix("scan_elements/") && file.hasSuffix("_en"))
    }

    /// Brings the stream in line with the buffer's files, as the kernel's `enable` store() would.
    ///
    /// The kernel checks a buffer's configuration synchronously, inside the writer's `write(2)`;
    /// the simulator learns of writes through inotify, after the fact, while the writer may still be
    /// writing (libiio writes `enable` 0, the `_en` files, `length`, then `enable` 1 within
    /// microseconds, and closing a buffer writes `enable` 0 again). So the watcher calls this only
    /// when no further event is queued, the files are read twice and must agree, and a
    /// configuration the kernel would refuse (no scan element, no trigger) is refused only when
    /// `final`, i.e. after it has stayed that way with no write for a while. Acting on a half-written
    /// state once refused a good buffer (the writer's `enable` 1 was overwritten with 0) under load.
    /// - Returns: `.unsettled` when the watcher should look again later.
    func evaluateBuffer(simulator: Simulator, final: Bool) -> BufferCheck {
        if state.withLock({ $0.unplugged }) { return .settled }
        let stamp = enableStamp()
        guard read("buffer/enable") == "1" else {
            stopStream(wait: true)
            return .settled
        }
        let configuration = bufferConfiguration()
        let clockName = read("current_timestamp_clock") ?? "realtime"
        guard read("buffer/enable") == "1", bufferConfiguration() == configuration,
              let stamp, let again = enableStamp(), Self.same(stamp, again) else { return .unsettled }
        // Every write of `enable` is a new buffer session for the kernel (its kfifo is emptied),
        // even with the same configuration: keep a session only when nothing was written since.
        if let running = state.withLock({ $0.session }), !running.finished.load(ordering: .acquiring),
           running.configuration == configuration, Self.same(running.enableStamp, stamp) {
            return .settled
        }
        if let problem = bufferProblem(simulator: simulator) {
            guard final else { return .unsettled }
            stopStream(wait: true)
            simulator.warn("\(id) (\(spec.name)): \(problem)")
            try? write("buffer/enable", "0")
            rawReadsBusy(false)
            return .settled
        }
        startStream(simulator: simulator, enableStamp: stamp, clockName: clockName)
        return .settled
    }

    /// The modification time of `buffer/enable`. On kernels with multigrain timestamps (tmpfs since
    /// Linux 6.13) every write that follows a look at it gets a new one, however soon.
    func enableStamp() -> timespec? {
        var st = stat()
        guard stat(directory + "/buffer/enable", &st) == 0 else { return nil }
        return st.st_mtim
    }

    static func same(_ a: timespec, _ b: timespec) -> Bool { a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec }

    /// Why the kernel would refuse to enable the buffer as its files are now, if it would.
    func bufferProblem(simulator: Simulator) -> String? {
        if let b = spec.buffer, b.triggered, (b.withoutTrigger ?? .refuse) == .refuse, !hasValidTrigger {
            return "buffer not started: no trigger (the kernel returns EINVAL; set trigger/current_trigger)"
        }
        if enabledLayout().0.elements.isEmpty {
            return "buffer enabled with no scan element enabled (the kernel returns EINVAL)"
        }
        return nil
    }

    /// Whether a trigger that may drive this device is set.
    var hasValidTrigger: Bool {
        let trig = read("trigger/current_trigger") ?? ""
        return !trig.isEmpty && triggers.contains { $0.name == trig && ($0.owner == nil || $0.owner == spec.name) }
    }

    /// Whether an enabled buffer delivers nothing: no data-ready interrupt (`--no-irq`), or a
    /// triggered buffer running without its trigger whose driver then never reads the chip.
    var isSilent: Bool {
        if isNoIRQ { return true }
        guard let b = spec.buffer, b.triggered, !hasValidTrigger else { return false }
        return (b.withoutTrigger ?? .refuse) == .silent
    }

    /// What a stream session depends on: enabled channels, `buffer/length`, `buffer/watermark`.
    func bufferConfiguration() -> [String] {
        enabledLayout().0.elements.map(\.channel) + [read("buffer/length") ?? "", read("buffer/watermark") ?? ""]
    }

    /// Starts a session for the configuration in force (checked by the caller), replacing any.
    func startStream(simulator: Simulator, enableStamp: timespec, clockName: String) {
        stopStream(wait: true)
        let (layout, map) = enabledLayout()
        let sessionNumber = state.withLock { s -> Int in
            s.stats.sessions += 1
            return s.stats.sessions
        }
        let session = StreamSession(device: self, simulator: simulator, layout: layout, channelMap: map,
                                    number: sessionNumber, configuration: bufferConfiguration(), enableStamp: enableStamp,
                                    clockName: clockName)
        state.withLock { $0.session = session }
        session.start()
    }

    func stopStream(wait: Bool) {
        let s = state.withLock { st -> StreamSession? in
            let s = st.session
            st.session = nil
            return s
        }
        s?.stop(wait: wait)
    }

    func record(written: Int64 = 0, dropped: Int64 = 0, unread: Int64 = 0) {
        state.withLock {
            $0.stats.scansWritten += written
            $0.stats.scansDropped += dropped
            $0.stats.scansUnreadAtClose += unread
        }
    }
}
