#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import IIOScanFormat
import Foundation
import SystemSupport

/// One simulated channel: its fixture entry, parsed scan type and physical quantity.
struct ChannelSim: Sendable {
    var spec: Fixture.Channel
    var scanType: ScanFormat?
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
            ChannelSim(spec: ch, scanType: try ch.format.map { try ScanFormat(parsing: $0) },
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
        // Files whose read the driver refuses (served through FUSE; a plain file without it).
        for (file, name) in (spec.unreadable ?? [:]).sorted(by: { $0.key < $1.key }) {
            try place(file, "")
            if let nodes, let i = attributeIndex(file), let code = Files.errnoValue(name) { nodes.setAttributeReadError(i, code) }
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
}
