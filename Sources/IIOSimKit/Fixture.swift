import Foundation
public import IIOScanFormat

/// A description of simulated IIO hardware, laid out the way the kernel lays it out in sysfs.
///
/// A fixture is JSON. Each device lists the files of its directory under
/// `/sys/bus/iio/devices/iio:deviceN/` (`attributes`, relative paths, exact contents), its channels
/// (which produce `in_<id>_raw` and, when they have a scan `index`, `scan_elements/in_<id>_{en,index,type}`),
/// whether it has a buffer (`buffer/{enable,length,watermark}`, the same files in `buffer0/` with the
/// scan elements, and `/dev/iio:deviceN`) and a trigger (`trigger/current_trigger`), what its driver
/// accepts as a sampling frequency (`frequency_rule`) and what its buffer does without a trigger
/// (`buffer.without_trigger`). Triggers become `triggerN` directories with a `name`.
///
/// ```json
/// { "description": "…",
///   "devices": [ { "name": "bmi160",
///                  "attributes": { "in_accel_scale": "0.000598", "in_accel_sampling_frequency": "100" },
///                  "channels": [ { "id": "accel_x", "index": 0, "format": "le:s16/16>>0" }, … ],
///                  "buffer": { "triggered": true }, "current_trigger": "bmi160-dev0" } ],
///   "triggers": [ { "name": "bmi160-dev0" } ] }
/// ```
public struct Fixture: Codable, Sendable {
    /// What real hardware this models, and its source.
    public var description: String
    /// IIO devices, numbered `iio:device0…` in this order.
    public var devices: [Device]
    /// Trigger devices, numbered `trigger0…` in this order.
    public var triggers: [Trigger]

    public init(description: String, devices: [Device], triggers: [Trigger] = []) {
        self.description = description
        self.devices = devices
        self.triggers = triggers
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        description = try c.decodeIfPresent(String.self, forKey: .description) ?? ""
        devices = try c.decode([Device].self, forKey: .devices)
        triggers = try c.decodeIfPresent([Trigger].self, forKey: .triggers) ?? []
    }

    /// One IIO device.
    public struct Device: Codable, Sendable {
        /// The `name` file (the driver's name for the device, e.g. `bmi160`, `lsm6dso_accel`).
        public var name: String
        /// The optional `label` file (e.g. `accel-display`).
        public var label: String?
        /// Other files of the device directory, by path relative to it, with their contents.
        public var attributes: [String: String]
        /// Channels, each with its `raw` file and, when it has a scan index, its scan element.
        public var channels: [Channel]
        /// Present when the device can buffer.
        public var buffer: Buffer?
        /// When present, `trigger/current_trigger` exists with this content ("" for none set).
        public var currentTrigger: String?
        /// Files that are writable (mode 0644) beyond the ones the simulator knows to be writable.
        public var writable: [String]
        /// What the driver accepts as a `*sampling_frequency` (default ``FrequencyRule/nearest``).
        public var frequencyRule: FrequencyRule?
        /// True when the device has `/dev/iio:deviceN` without a buffer, for its events (st_lsm6dsx's
        /// accelerometer without an interrupt line): the node opens, one user at a time, and reads
        /// fail with EINVAL. A device with a buffer always has its node.
        public var eventsNode: Bool?
        /// True when the driver refuses `raw` reads of its scan elements with EBUSY while the buffer
        /// is enabled (bmc150_accel's accelerometer axes, even when the buffer delivers nothing; its
        /// temperature still reads).
        public var rawBusyWhileBuffering: Bool?
        /// Files of the device directory whose read fails, with the errno it fails with (`EINVAL`,
        /// `EBUSY`, `EIO`, `ENODATA`, `EOPNOTSUPP`): stk8ba50's `in_accel_sampling_frequency_available`
        /// on Linux 6.1, listed by the IIO core for a driver that has no `read_avail`.
        public var unreadable: [String: String]?

        enum CodingKeys: String, CodingKey {
            case name, label, attributes, channels, buffer, writable, unreadable
            case currentTrigger = "current_trigger"
            case frequencyRule = "frequency_rule"
            case eventsNode = "events_node"
            case rawBusyWhileBuffering = "raw_busy_while_buffering"
        }

        public init(name: String, label: String? = nil, attributes: [String: String] = [:], channels: [Channel],
                    buffer: Buffer? = nil, currentTrigger: String? = nil, writable: [String] = [],
                    frequencyRule: FrequencyRule? = nil, eventsNode: Bool? = nil, rawBusyWhileBuffering: Bool? = nil) {
            self.name = name
            self.label = label
            self.attributes = attributes
            self.channels = channels
            self.buffer = buffer
            self.currentTrigger = currentTrigger
            self.writable = writable
            self.frequencyRule = frequencyRule
            self.eventsNode = eventsNode
            self.rawBusyWhileBuffering = rawBusyWhileBuffering
        }

        /// Whether the device has `/dev/iio:deviceN` (a buffer, or events).
        public var hasNode: Bool { buffer != nil || eventsNode == true }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            label = try c.decodeIfPresent(String.self, forKey: .label)
            attributes = try c.decodeIfPresent([String: String].self, forKey: .attributes) ?? [:]
            channels = try c.decodeIfPresent([Channel].self, forKey: .channels) ?? []
            buffer = try c.decodeIfPresent(Buffer.self, forKey: .buffer)
            currentTrigger = try c.decodeIfPresent(String.self, forKey: .currentTrigger)
            writable = try c.decodeIfPresent([String].self, forKey: .writable) ?? []
            frequencyRule = try c.decodeIfPresent(FrequencyRule.self, forKey: .frequencyRule)
            eventsNode = try c.decodeIfPresent(Bool.self, forKey: .eventsNode)
            rawBusyWhileBuffering = try c.decodeIfPresent(Bool.self, forKey: .rawBusyWhileBuffering)
            unreadable = try c.decodeIfPresent([String: String].self, forKey: .unreadable)
            for (file, name) in unreadable ?? [:] where Files.errnoValue(name) == nil {
                throw DecodingError.dataCorruptedError(forKey: .unreadable, in: c,
                    debugDescription: "\(self.name): unreadable \(file): unknown errno \(name) (EINVAL, EBUSY, EIO, ENODATA, EOPNOTSUPP)")
            }
        }
    }

    /// How a driver answers a write to its `*sampling_frequency` (the value parsed as the IIO core
    /// parses it, `iio_str_to_fixpoint`: digits, one `.`, an optional sign, a trailing newline;
    /// anything else is EINVAL).
    public enum FrequencyRule: String, Codable, Sendable {
        /// The available value nearest to the one written (any number ≥ 0; the simulator's rule
        /// before it learnt the drivers').
        case nearest
        /// Only the values of `*_available` (the file's own, else the device-level one), exactly
        /// (bmi160, bmc150_accel, kxcjk1013, fxos8700: `12.50` and `0.78125` accepted by bmi160,
        /// `101`, `0.78`, `0` refused with EINVAL).
        case exact
        /// The lowest available value at or above the one written; EINVAL above the highest or
        /// below 0 (st_lsm6dsx).
        case roundUp = "round-up"
        /// HID sensor hubs: any value ≥ 0 becomes a report interval of whole milliseconds
        /// (1000 / Hz, truncated), read back as the hub's rounding (`33` → `33.300000`); 0 is
        /// accepted (interval 0).
        case hid
        /// InvenSense (inv_mpu6050): a whole number of Hz from 4 to 1000 (`kstrtoint`: `12.5`,
        /// `" 50"` EINVAL) becomes a divider of the 1 kHz rate, read back as the rate it gives, an
        /// integer (`101` → `111`, `400` → `500`).
        case divider
        /// Only whole numbers (a fraction is EINVAL: `if (val2) return -EINVAL`) and among those
        /// only the values of `*_available` (fxas21002c, fxas21002c_core.c:641: `12.5` refused
        /// although listed).
        case integerExact = "integer-exact"
        /// mpu3050: the whole part of the value (the fraction ignored), 4 to 8000 Hz, becomes a
        /// divider `DIV_ROUND_CLOSEST(base, Hz) - 1` of a 1 kHz base (8 kHz above 1000 Hz), read
        /// back as `base / (divider + 1)` (mpu3050-core.c:408-428, :180-191: `101` → `100`,
        /// `400` → `333`, `12.5` → `12`).
        case mpu3050
        /// adxl372: the whole part of the value (any sign; the fraction ignored) becomes the first
        /// available value at or above it, the highest when it is above them all
        /// (`adxl372_find_closest_match`, adxl372.c:398-409: `1000` → `1600`, `-5` → `400`).
        case clampUp = "clamp-up"
        /// Only the values of `*_available`, exactly, and the file then reads what it read before:
        /// kmx61's magnetometer, whose `kmx61_get_odr` shifts its bits of ODCNTL down and then masks
        /// them with the unshifted mask (`(odr_bits >> KMX61_MAG_ODR_SHIFT) & KMX61_MAG_ODR_MASK`,
        /// 0xF0, kmx61.c:467-468), so it always reads the table's first rate, 12.5 Hz.
        case exactUnchanged = "exact-unchanged"
    }

    /// One input channel.
    public struct Channel: Codable, Sendable {
        /// The channel id as in file names: `accel_x`, `anglvel_z`, `magn_y`, `temp`, `timestamp`.
        public var id: String
        /// Scan index; nil when the channel is not a scan element.
        public var index: Int?
        /// Scan type string, e.g. `le:s16/16>>0`; required with `index`.
        public var format: String?
        /// Whether `in_<id>_raw` exists (default: true except for the timestamp).
        public var raw: Bool?
        /// A constant raw value for channels with no motion behind them (e.g. `temp`).
        public var value: Int64?
        /// How unused storage bits are filled in the stream (default `sign`).
        public var upperBits: ScanFormat.UpperBits?

        enum CodingKeys: String, CodingKey {
            case id, index, format, raw, value
            case upperBits = "upper_bits"
        }

        public init(id: String, index: Int? = nil, format: String? = nil, raw: Bool? = nil, value: Int64? = nil,
                    upperBits: ScanFormat.UpperBits? = nil) {
            self.id = id
            self.index = index
            self.format = format
            self.raw = raw
            self.value = value
            self.upperBits = upperBits
        }

        /// The channel's type prefix: `accel`, `anglvel`, `magn`, `temp`, `timestamp`, …
        public var typeName: String {
            if let u = id.firstIndex(of: "_") { return String(id[..<u]) }
            return String(id.prefix { !$0.isNumber })
        }

        /// `x`, `y` or `z` for a per-axis channel.
        public var axis: Int? {
            switch id.split(separator: "_").last {
            case "x": return 0
            case "y": return 1
            case "z": return 2
            default: return nil
            }
        }

        /// Whether a `raw` file is generated.
        public var hasRaw: Bool { raw ?? (typeName != "timestamp") }
    }

    /// The device's buffer.
    public struct Buffer: Codable, Sendable {
        /// True when the buffer only runs with a trigger set in `trigger/current_trigger` (the kernel
        /// refuses `buffer/enable` with EINVAL otherwise). False for hardware-FIFO drivers.
        public var triggered: Bool
        /// Initial `buffer/length`.
        public var length: Int
        /// Initial `buffer/watermark`.
        public var watermark: Int
        /// Stream rate when no sampling-frequency attribute decides it (Hz).
        public var rate: Double?
        /// What a triggered buffer does when enabled with no trigger set (default ``WithoutTrigger/refuse``).
        public var withoutTrigger: WithoutTrigger?

        /// A triggered buffer with no trigger, as the kernel's `iio_verify_update` decides.
        public enum WithoutTrigger: String, Codable, Sendable {
            /// `buffer/enable` fails with EINVAL (bmi160, mxc4005, kxcjk1013 without an interrupt:
            /// the driver has no software mode).
            case refuse
            /// The buffer enables (software mode) and never delivers (bmc150_accel without an
            /// interrupt: its FIFO is never read).
            case silent
            /// The buffer enables and streams (a hardware FIFO read on its own interrupt).
            case stream
        }

        enum CodingKeys: String, CodingKey {
            case triggered, length, watermark, rate
            case withoutTrigger = "without_trigger"
        }

        public init(triggered: Bool, length: Int = 1, watermark: Int = 1, rate: Double? = nil,
                    withoutTrigger: WithoutTrigger? = nil) {
            self.triggered = triggered
            self.length = length
            self.watermark = watermark
            self.rate = rate
            self.withoutTrigger = withoutTrigger
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            triggered = try c.decodeIfPresent(Bool.self, forKey: .triggered) ?? false
            length = try c.decodeIfPresent(Int.self, forKey: .length) ?? 1
            watermark = try c.decodeIfPresent(Int.self, forKey: .watermark) ?? 1
            rate = try c.decodeIfPresent(Double.self, forKey: .rate)
            withoutTrigger = try c.decodeIfPresent(WithoutTrigger.self, forKey: .withoutTrigger)
        }
    }

    /// A trigger device (`/sys/bus/iio/devices/triggerN`).
    public struct Trigger: Codable, Sendable {
        /// Its `name` file, e.g. `bmi160-dev0`.
        public var name: String
        /// Other files (e.g. `sampling_frequency` for an hrtimer trigger).
        public var attributes: [String: String]
        /// When set, only the device with this name may use the trigger (drivers' `validate_trigger`).
        public var owner: String?

        public init(name: String, attributes: [String: String] = [:], owner: String? = nil) {
            self.name = name
            self.attributes = attributes
            self.owner = owner
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            attributes = try c.decodeIfPresent([String: String].self, forKey: .attributes) ?? [:]
            owner = try c.decodeIfPresent(String.self, forKey: .owner)
        }
    }

    /// Errors loading or checking a fixture.
    public struct LoadError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Checks what JSON cannot: scan formats parse, indices are unique, trigger names resolve.
    /// - Throws: ``LoadError`` naming the device and channel at fault.
    public func validate() throws {
        for (n, d) in devices.enumerated() {
            var seen: [Int: String] = [:]
            for ch in d.channels {
                if let idx = ch.index {
                    guard let f = ch.format else {
                        throw LoadError(description: "iio:device\(n) (\(d.name)): channel \(ch.id) has a scan index but no format")
                    }
                    do { _ = try ScanFormat(parsing: f) } catch {
                        throw LoadError(description: "iio:device\(n) (\(d.name)): channel \(ch.id): \(error)")
                    }
                    if let other = seen[idx] {
                        throw LoadError(description: "iio:device\(n) (\(d.name)): channels \(other) and \(ch.id) share scan index \(idx)")
                    }
                    seen[idx] = ch.id
                    if d.buffer == nil {
                        throw LoadError(description: "iio:device\(n) (\(d.name)): channel \(ch.id) is a scan element but the device has no buffer")
                    }
                }
            }
            if let t = d.currentTrigger, !t.isEmpty, !triggers.contains(where: { $0.name == t }) {
                throw LoadError(description: "iio:device\(n) (\(d.name)): current_trigger \"\(t)\" names no trigger of the fixture")
            }
        }
    }

    /// Reads a fixture file.
    /// - Throws: ``LoadError`` with the path and what is wrong.
    public static func load(path: String) throws -> Fixture {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LoadError(description: "cannot read fixture file \(path)")
        }
        do {
            let f = try JSONDecoder().decode(Fixture.self, from: data)
            try f.validate()
            return f
        } catch let e as LoadError {
            throw LoadError(description: "\(path): \(e.description)")
        } catch {
            throw LoadError(description: "\(path): not a valid fixture: \(error)")
        }
    }

    /// Resolves `--fixture NAME|PATH`: a path when it ends in `.json` or names a file, else a name
    /// looked up in ``fixtureDirectories`` (`bmi160`, or one in a folder there: `kernel-6.1/bma255`).
    /// - Throws: ``LoadError`` listing the fixtures there are.
    public static func resolve(_ nameOrPath: String) throws -> Fixture {
        if nameOrPath.hasSuffix(".json") || FileManager.default.fileExists(atPath: nameOrPath) {
            return try load(path: nameOrPath)
        }
        if !nameOrPath.hasPrefix("/") && !nameOrPath.hasPrefix(".") {
            for dir in fixtureDirectories {
                let p = dir + "/" + nameOrPath + ".json"
                if FileManager.default.fileExists(atPath: p) { return try load(path: p) }
            }
        }
        let names = available().map(\.name).joined(separator: ", ")
        throw LoadError(description: "no fixture named \"\(nameOrPath)\" (available: \(names); or give a path to a .json file)")
    }

    /// Where named fixtures are looked up: `$IIO_SIM_FIXTURES` (colon-separated), then the
    /// `fixtures/` folder shipped with the package.
    public static var fixtureDirectories: [String] {
        var dirs: [String] = []
        if let env = ProcessInfo.processInfo.environment["IIO_SIM_FIXTURES"] {
            dirs += env.split(separator: ":").map(String.init)
        }
        // Installed next to the binary (share/iio-sim/fixtures), or the source tree this was built from.
        let exe = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
        dirs.append(exe.deletingLastPathComponent().appendingPathComponent("../share/iio-sim/fixtures").standardized.path)
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../fixtures").standardized.path
        dirs.append(source)
        return dirs
    }

    /// Every fixture found in ``fixtureDirectories`` and their folders (one level: `kernel-6.1/…`):
    /// name, path and description.
    public static func available() -> [(name: String, path: String, description: String)] {
        var out: [(String, String, String)] = []
        var seen = Set<String>()
        for dir in fixtureDirectories {
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: dir) else { continue }
            var files = entries.filter { $0.hasSuffix(".json") }.sorted()
            for sub in entries.sorted() where !sub.hasSuffix(".json") {
                let inner = (try? FileManager.default.contentsOfDirectory(atPath: dir + "/" + sub)) ?? []
                files += inner.filter { $0.hasSuffix(".json") }.sorted().map { sub + "/" + $0 }
            }
            for f in files {
                let name = String(f.dropLast(5))
                guard seen.insert(name).inserted else { continue }
                let path = dir + "/" + f
                let desc = (try? load(path: path))?.description ?? "(invalid fixture)"
                out.append((name, path, desc))
            }
        }
        return out
    }
}
