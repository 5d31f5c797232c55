#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import IIOScanFormat

/// Records real IIO devices (their sysfs folders) into a fixture that `iio-sim --fixture` loads:
/// `iio-sim record [DEVICE_FOLDER…] > board.json`.
///
/// It reads, and never writes: every readable file of each device folder (and of its `events/`)
/// becomes an attribute (with its contents then, and writable when it is), each `in_<id>_raw` and
/// scan element a channel whose raw value is pinned to what it read (so `--once` on the fixture
/// gives what the board gave), `buffer/length` and `watermark` the buffer, a `dev` file without a
/// buffer an events-only node, `trigger/current_trigger` the current trigger, and every `triggerN`
/// folder a trigger. What sysfs does not say (what the driver accepts as a sampling frequency, what
/// its buffer does without a trigger, whether it refuses raw reads while buffering) is taken from
/// what is known of the driver by its name, else left to the simulator's defaults; the
/// description says which.
public enum Recorder {
    /// The usage of `iio-sim record`.
    public static let help = """
    USAGE: iio-sim record [--description TEXT] [DEVICE_FOLDER...] > board.json

    Records IIO devices into an iio-sim fixture (default: every /sys/bus/iio/devices/iio:device*,
    with every trigger*; given device folders, the triggers beside them except other devices' own).
    Reads only: nothing on the device changes. Load it with `iio-sim --fixture board.json -- COMMAND`.

      --description TEXT   what the fixture models (default: "Recorded by iio-sim record on Linux
                           <release>: <device names>")
    """

    /// Files the kernel (or sysfs) puts in every device folder that are no IIO attributes.
    static let skipped: Set<String> = ["uevent", "dev", "name", "label", "power", "subsystem", "of_node", "driver",
                                       "firmware_node", "waiting_for_supplier", "device"]

    /// The fixture for the device folders given (each `…/iio:deviceN`), with `triggerFolders`.
    public static func record(devices: [String], triggers triggerFolders: [String], description: String? = nil) throws -> Fixture {
        var devices_: [Fixture.Device] = []
        var notes: [String] = []
        for dir in devices {
            guard let name = read(dir + "/name") else { throw Fixture.LoadError(description: "\(dir): no name file (not an IIO device folder?)") }
            var attributes: [String: String] = [:]
            var rawValues: [String: Int64] = [:]
            var unreadable: [String: String] = [:]
            for file in files(in: dir) where !skipped.contains(file) {
                guard let text = read(dir + "/" + file) else {
                    if !file.hasSuffix("_raw"), let e = Files.readErrno(dir + "/" + file), let name = Files.errnoName(e) {
                        unreadable[file] = name
                    }
                    continue
                }
                if file.hasPrefix("in_") && file.hasSuffix("_raw") {
                    rawValues[String(file.dropFirst(3).dropLast(4))] = Int64(text)
                } else {
                    attributes[file] = text
                }
            }
            // The driver's own buffer attributes (hwfifo_*), not the IIO core's.
            let coreBuffer: Set<String> = ["enable", "length", "watermark", "data_available", "direction"]
            for file in files(in: dir + "/buffer") where !coreBuffer.contains(file) {
                if let text = read(dir + "/buffer/" + file) { attributes["buffer/" + file] = text }
            }
            // Event attributes (thresholds, rates of change, their enables).
            for file in files(in: dir + "/events") {
                if let text = read(dir + "/events/" + file) { attributes["events/" + file] = text }
            }
            // Scan elements: scan_elements/ (every kernel), else buffer0/.
            let scanDir = FileManager.default.fileExists(atPath: dir + "/scan_elements") ? dir + "/scan_elements" : dir + "/buffer0"
            var channels: [Fixture.Channel] = []
            var seen = Set<String>()
            for file in files(in: scanDir).sorted() where file.hasPrefix("in_") && file.hasSuffix("_index") {
                let id = String(file.dropFirst(3).dropLast(6))
                guard let index = read(scanDir + "/" + file).flatMap({ Int($0) }),
                      let format = read(scanDir + "/in_\(id)_type") else { continue }
                seen.insert(id)
                let raw: Bool? = rawValues[id] != nil ? nil : (id == "timestamp" ? nil : false)
                var channel = Fixture.Channel(id: id, index: index, format: format, raw: raw, value: rawValues[id])
                if knownFrequencyRule(name) == .hid, channel.axis != nil, let t = try? ScanFormat(parsing: format),
                   t.realBits + t.shift < t.storageBits {
                    channel.upperBits = .nextField  // HID drivers copy 32 bits out of 16-bit report fields
                }
                channels.append(channel)
            }
            for (id, value) in rawValues.sorted(by: { $0.key < $1.key }) where !seen.contains(id) {
                channels.append(Fixture.Channel(id: id, value: value))
            }
            channels.sort { ($0.index ?? Int.max, $0.id) < ($1.index ?? Int.max, $1.id) }
            var buffer: Fixture.Buffer?
            if FileManager.default.fileExists(atPath: dir + "/buffer") || FileManager.default.fileExists(atPath: dir + "/buffer0") {
                let b = FileManager.default.fileExists(atPath: dir + "/buffer") ? dir + "/buffer" : dir + "/buffer0"
                buffer = Fixture.Buffer(triggered: FileManager.default.fileExists(atPath: dir + "/trigger"),
                                        length: read(b + "/length").flatMap { Int($0) } ?? 1,
                                        watermark: read(b + "/watermark").flatMap { Int($0) } ?? 1,
                                        withoutTrigger: knownWithoutTrigger(name))
            }
            let currentTrigger = FileManager.default.fileExists(atPath: dir + "/trigger/current_trigger")
                ? (read(dir + "/trigger/current_trigger") ?? "") : nil
            var writable: [String] = []
            for file in attributes.keys.sorted() where isWritable(dir + "/" + file) { writable.append(file) }
            // Drivers with a write_raw callback make every channel attribute writable, raw included.
            for id in rawValues.keys.sorted() where isWritable(dir + "/in_\(id)_raw") { writable.append("in_\(id)_raw") }
            // A file listed but unreadable keeps its mode too (dmard09's in_accel_scale before 6.1.190: 0644, EINVAL).
            for file in unreadable.keys.sorted() where isWritable(dir + "/" + file) { writable.append(file) }
            let hasBuffer = buffer != nil
            let eventsNode: Bool? = !hasBuffer && FileManager.default.fileExists(atPath: dir + "/dev") ? true : nil
            let rule = knownFrequencyRule(name, magnetometer: channels.contains { $0.id.hasPrefix("magn_") })
            if rule == nil && attributes.keys.contains(where: { $0.hasSuffix("sampling_frequency") }) {
                notes.append("\(name): sampling_frequency taken as the nearest available (driver not known)")
            }
            var device = Fixture.Device(name: name, label: read(dir + "/label"), attributes: attributes, channels: channels,
                                        buffer: buffer, currentTrigger: currentTrigger, writable: writable, frequencyRule: rule,
                                        eventsNode: eventsNode, rawBusyWhileBuffering: hasBuffer ? knownRawBusy(name) : nil)
            device.unreadable = unreadable.isEmpty ? nil : unreadable
            devices_.append(device)
        }
        var triggers: [Fixture.Trigger] = []
        for dir in triggerFolders {
            guard let name = read(dir + "/name") else { continue }
            var attributes: [String: String] = [:]
            for file in files(in: dir) where !skipped.contains(file) {
                if let text = read(dir + "/" + file) { attributes[file] = text }
            }
            // Drivers accept only their own data-ready trigger (iio_trigger_validate_own_device).
            let owner = devices_.first { name == "\($0.name)-trigger" || name.hasPrefix("\($0.name)-dev") }?.name
            triggers.append(Fixture.Trigger(name: name, attributes: attributes, owner: owner))
        }
        // A current trigger the recording does not hold would not load: keep the name, drop the link.
        for i in devices_.indices {
            if let t = devices_[i].currentTrigger, !t.isEmpty, !triggers.contains(where: { $0.name == t }) {
                triggers.append(Fixture.Trigger(name: t))
            }
        }
        var uname = utsname()
        _ = Glibc.uname(&uname)
        let release = withUnsafeBytes(of: uname.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let names: String = devices_.map(\.name).joined(separator: ", ")
        let extra: String = notes.isEmpty ? "" : " (" + notes.joined(separator: "; ") + ")"
        let text: String = description ?? ("Recorded by iio-sim record on Linux " + release + ": " + names + extra)
        let fixture = Fixture(description: text, devices: devices_, triggers: triggers)
        try fixture.validate()
        return fixture
    }

    /// `record` of every device and trigger under `root` (default `/sys/bus/iio/devices`).
    public static func recordAll(root: String = "/sys/bus/iio/devices", description: String? = nil) throws -> Fixture {
        let names = files(in: root, directories: true).sorted { numbered($0) < numbered($1) }
        return try record(devices: names.filter { $0.hasPrefix("iio:device") }.map { root + "/" + $0 },
                          triggers: names.filter { $0.hasPrefix("trigger") }.map { root + "/" + $0 },
                          description: description)
    }

    /// The trigger folders beside `devices` (device folders) that those devices may use: every
    /// `triggerN` there except another device's own data-ready trigger, which drivers name after
    /// their device (`<name>-dev<N>` for iio:deviceN, or `<name>-trigger`) and accept no other
    /// device on.
    public static func triggerFolders(usableBy devices: [String]) -> [String] {
        let chosen = Set(devices.map { URL(fileURLWithPath: $0).standardized.lastPathComponent })
        var out: [String] = []
        for parent in Set(devices.map { URL(fileURLWithPath: $0).standardized.deletingLastPathComponent().path }).sorted() {
            let entries = files(in: parent, directories: true)
            let others = entries.filter { $0.hasPrefix("iio:device") && !chosen.contains($0) }
            let chosenNames = Set(entries.filter { chosen.contains($0) }.compactMap { read(parent + "/" + $0 + "/name") })
            let otherNames = Set(others.compactMap { read(parent + "/" + $0 + "/name") })
            for t in entries.filter({ $0.hasPrefix("trigger") }).sorted(by: { numbered($0) < numbered($1) }) {
                guard let name = read(parent + "/" + t + "/name") else { continue }
                if let owner = ownerNumber(ofTrigger: name) {
                    if !chosen.contains("iio:device\(owner)") && others.contains("iio:device\(owner)") { continue }
                } else if let base = name.hasSuffix("-trigger") ? String(name.dropLast(8)) : nil,
                          otherNames.contains(base) && !chosenNames.contains(base) {
                    continue
                }
                out.append(parent + "/" + t)
            }
        }
        return out
    }

    /// N of a trigger named `<name>-dev<N>` (the data-ready trigger of iio:deviceN).
    static func ownerNumber(ofTrigger name: String) -> Int? {
        guard let r = name.range(of: "-dev", options: .backwards) else { return nil }
        let digits = name[r.upperBound...]
        return !digits.isEmpty && digits.allSatisfy(\.isNumber) ? Int(digits) : nil
    }

    /// The fixture as JSON, keys sorted, one per line.
    public static func json(_ fixture: Fixture) throws -> String {
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try enc.encode(fixture), as: UTF8.self)
    }

    /// What Linux 6.1's drivers accept as a sampling frequency, by device name (and, for kmx61,
    /// whose two devices share one, whether it is the magnetometer).
    static func knownFrequencyRule(_ name: String, magnetometer: Bool = false) -> Fixture.FrequencyRule? {
        if name == "adxl372" { return .clampUp }
        // kmx61 (its i2c_device_id kmx611021, or its ACPI device's name): kmx61_convert_freq_to_bit,
        // the table's values only; the magnetometer's then always reads 12.5 (``Fixture/FrequencyRule/exactUnchanged``).
        if name.lowercased().hasPrefix("kmx61") { return magnetometer ? .exactUnchanged : .exact }
        // bma400, bmc150_magn (bmc150_magn_set_odr), mag3110 (mag3110_get_samp_freq_index),
        // mma7455 (250 and 125 only), mmc35240 (mmc35240_get_samp_freq_index): their table's values only.
        if ["bma400", "bmc150_magn", "mag3110", "mma7455", "mmc35240"].contains(name) { return .exact }
        if name == "bmi160" || name.hasPrefix("kxcj") || name.hasPrefix("kxtj") || name.hasPrefix("fxos8700")
            || knownWithoutTrigger(name) == .silent { return .exact }
        if name == "mpu3050" { return .mpu3050 }
        if name == "fxas21002c" { return .integerExact }
        if name.hasPrefix("mpu") || name.hasPrefix("icm20") || name.hasPrefix("iam20") { return .divider }
        if name.hasSuffix("_3d") || name.hasPrefix("hid-") { return .hid }
        if name.hasPrefix("lsm6d") || name.hasPrefix("ism330") || name.hasPrefix("asm330") || name.hasPrefix("lsm9ds1") { return .roundUp }
        // st_accel, st_gyro, st_magn (st_sensors_set_odr: the table's values only), hmc5843
        // (hmc5843_get_samp_freq_index: value and fraction), bmg160 (its bandwidth table).
        if name.hasPrefix("lis") || name.hasPrefix("lsm303") || name.hasPrefix("lsm330") || name.hasPrefix("l3g")
            || name.hasPrefix("hmc58") || name == "bmg160" { return .exact }
        return nil
    }

    /// What a triggered buffer without its trigger does, by device name (Linux 6.1).
    static func knownWithoutTrigger(_ name: String) -> Fixture.Buffer.WithoutTrigger? {
        // bma400 and bmc150_magn have no software mode (EINVAL); adxl372 enables its buffer and, without its
        // interrupt, never reads its FIFO, refusing raw reads meanwhile (iio_device_claim_direct_mode).
        if name == "bma400" || name == "bmc150_magn" { return .refuse }
        if name == "adxl372" { return .silent }
        if name.hasPrefix("bma") || name.hasPrefix("bmc150") || name.hasPrefix("bmi055") { return .silent }
        return nil
    }

    /// Whether the driver refuses `raw` reads with EBUSY while its buffer is enabled, by device
    /// name (Linux 6.1: bmc150_accel, adxl372).
    static func knownRawBusy(_ name: String) -> Bool? {
        knownWithoutTrigger(name) == .silent ? true : nil
    }

    static func numbered(_ name: String) -> (String, Int) {
        let digits = name.reversed().prefix { $0.isNumber }
        return (String(name.dropLast(digits.count)), Int(String(digits.reversed())) ?? 0)
    }

    /// Names of the regular files (or directories) in `dir` ("" when unreadable).
    static func files(in dir: String, directories: Bool = false) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return [] }
        return names.filter { n in
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir + "/" + n, isDirectory: &isDir) else { return false }
            return directories ? isDir.boolValue : !isDir.boolValue
        }
    }

    /// A file's text, trimmed; nil when it cannot be read (write-only, or the driver refuses).
    static func read(_ path: String) -> String? { Files.read(path) }

    static func isWritable(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & 0o200 != 0
    }
}
