#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation

/// Where the kernel puts a device's files, beyond what the fixture lists.
enum SysfsLayout {
    /// The device's attributes as the kernel shows them: the fixture's, plus
    /// `current_timestamp_clock` (`realtime`, the kernel's default) on a device with a timestamp
    /// channel (the IIO core adds it to every such device).
    static func attributes(of spec: Fixture.Device) -> [String: String] {
        var a = spec.attributes
        if a["current_timestamp_clock"] == nil && spec.channels.contains(where: { $0.typeName == "timestamp" }) {
            a["current_timestamp_clock"] = "realtime"
        }
        return a
    }

    /// The files whose writes the kernel answers synchronously (EBUSY while the buffer runs,
    /// EINVAL for what the driver refuses), by their canonical path: served through FUSE inside
    /// the simulator's namespaces. Their aliases (``aliases(of:)``) are the same files.
    static func guardedFiles(of spec: Fixture.Device) -> [String] {
        var files: [String] = []
        if spec.buffer != nil {
            files += ["buffer/enable", "buffer/length", "buffer/watermark"]
            files += spec.channels.filter { $0.index != nil }.map { "scan_elements/in_\($0.id)_en" }
        }
        if spec.currentTrigger != nil { files.append("trigger/current_trigger") }
        let attrs = attributes(of: spec)
        if attrs["current_timestamp_clock"] != nil { files.append("current_timestamp_clock") }
        files += attrs.keys.filter { $0.hasSuffix("sampling_frequency") && !$0.contains("/") }.sorted()
        files += (spec.unreadable ?? [:]).keys.sorted()
        if spec.buffer != nil && spec.rawBusyWhileBuffering == true {
            files += spec.channels.filter { $0.hasRaw && $0.index != nil }.map { "in_\($0.id)_raw" }
        }
        return files
    }

    /// `buffer0/` paths that are the same attribute as a legacy `buffer/` or `scan_elements/` one.
    static func aliases(of spec: Fixture.Device) -> [String: String] {
        guard spec.buffer != nil else { return [:] }
        var a: [String: String] = [:]
        for f in ["enable", "length", "watermark"] { a["buffer0/" + f] = "buffer/" + f }
        for ch in spec.channels where ch.index != nil { a["buffer0/in_\(ch.id)_en"] = "scan_elements/in_\(ch.id)_en" }
        return a
    }
}

/// How the kernel parses what is written to an attribute.
enum KernelParse {
    /// `kstrtobool`: y/Y/t/T/1, n/N/f/F/0, on/off; nil (EINVAL) otherwise.
    static func bool(_ s: String) -> Bool? {
        let c = Array(s.utf8)
        guard let first = c.first else { return nil }
        switch first {
        case UInt8(ascii: "y"), UInt8(ascii: "Y"), UInt8(ascii: "t"), UInt8(ascii: "T"), UInt8(ascii: "1"): return true
        case UInt8(ascii: "n"), UInt8(ascii: "N"), UInt8(ascii: "f"), UInt8(ascii: "F"), UInt8(ascii: "0"): return false
        case UInt8(ascii: "o"), UInt8(ascii: "O"):
            guard c.count > 1 else { return nil }
            switch c[1] {
            case UInt8(ascii: "n"), UInt8(ascii: "N"): return true
            case UInt8(ascii: "f"), UInt8(ascii: "F"): return false
            default: return nil
            }
        default: return nil
        }
    }

    /// `kstrtoint(…, 10)`: decimal digits after an optional `+` or `-`, an optional trailing newline.
    static func integer(_ s: String) -> Int64? {
        var t = Substring(s)
        if t.hasSuffix("\n") { t = t.dropLast() }
        var negative = false
        if t.hasPrefix("-") { negative = true; t = t.dropFirst() } else if t.hasPrefix("+") { t = t.dropFirst() }
        guard !t.isEmpty, t.count <= 10, t.allSatisfy({ $0.isASCII && $0.isNumber }), let v = Int64(t), v <= Int64(Int32.max) else { return nil }
        return negative ? -v : v
    }

    /// `kstrtouint(…, 10)`: decimal digits, an optional `+`, an optional trailing newline.
    static func unsigned(_ s: String) -> UInt32? {
        var t = Substring(s)
        if t.hasSuffix("\n") { t = t.dropLast() }
        if t.hasPrefix("+") { t = t.dropFirst() }
        guard !t.isEmpty, t.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt32(t)
    }

    /// `iio_str_to_fixpoint` with micro precision, as `write_raw` attributes get their value:
    /// an optional sign, digits, at most one `.`, an optional trailing newline; digits past the
    /// sixth decimal are ignored; an empty string is 0. Returns the value in micro-units.
    static func fixpointMicro(_ s: String) -> Int64? {
        var integer: Int64 = 0, fraction: Int64 = 0, multiplier: Int64 = 100_000
        var inInteger = true, negative = false
        var chars = Array(s.utf8)[...]
        if chars.first == UInt8(ascii: "-") { negative = true; chars = chars.dropFirst() }
        else if chars.first == UInt8(ascii: "+") { chars = chars.dropFirst() }
        var i = chars.startIndex
        while i < chars.endIndex {
            let c = chars[i]
            if c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") {
                let d = Int64(c - UInt8(ascii: "0"))
                if inInteger {
                    integer = integer &* 10 &+ d
                    if integer > Int64(Int32.max) { return nil }  // the kernel's int overflows: garbage, not a rate
                } else {
                    fraction += multiplier * d
                    multiplier /= 10
                }
            } else if c == UInt8(ascii: "\n") {
                if i == chars.index(before: chars.endIndex) { break }
                return nil
            } else if c == UInt8(ascii: ".") && inInteger {
                inInteger = false
            } else {
                return nil
            }
            i = chars.index(after: i)
        }
        let micro = integer * 1_000_000 + fraction
        return negative ? -micro : micro
    }

    /// The values of an `*_available` list, in micro-units (a `[min step max]` range gives nil).
    static func availableMicro(_ text: String) -> [Int64]? {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard !t.hasPrefix("[") else { return nil }
        return t.split(separator: " ").compactMap { fixpointMicro(String($0)) }
    }
}

extension DeviceSim {
    /// A write to a FUSE-served attribute, decided as the kernel's store() would, before write(2)
    /// returns: EBUSY for what cannot change while the buffer runs, EINVAL for what the driver
    /// refuses, or what the file holds from then on. Runs on the FUSE thread: reads only the
    /// attributes it serves (and the fixture), never a mounted path.
    func store(_ file: String, _ written: String) -> Result<String, FuseNodes.Errno> {
        let value = written.hasSuffix("\n") ? String(written.dropLast()) : written
        if state.withLock({ $0.pinned.contains(file) || $0.unplugged }) { return .success(value) }
        let enabled = read("buffer/enable") == "1"
        let busy = FuseNodes.Errno(code: EBUSY), invalid = FuseNodes.Errno(code: EINVAL)
        switch file {
        case "buffer/enable":
            guard let on = KernelParse.bool(value) else { return .failure(invalid) }
            if on && !enabled, let problem = enableRefusal() {
                FileHandle.standardError.write(Data("iio-sim: \(id) (\(spec.name)): buffer not started: \(problem) (the kernel returns EINVAL)\n".utf8))
                return .failure(invalid)
            }
            rawReadsBusy(on)
            return .success(on ? "1" : "0")
        case "buffer/length":
            guard let n = KernelParse.unsigned(value) else { return .failure(invalid) }
            if String(n) == read(file) { return .success(String(n)) }
            if enabled { return .failure(busy) }
            if n > 0, let w = read("buffer/watermark").flatMap({ UInt32($0) }), w > n, let i = attributeIndex("buffer/watermark") {
                nodes?.setAttribute(i, String(n))  // the kernel lowers the watermark to the length
            }
            return .success(String(n))
        case "buffer/watermark":
            guard let n = KernelParse.unsigned(value), n > 0 else { return .failure(invalid) }
            if String(n) == read(file) { return .success(String(n)) }
            if enabled { return .failure(busy) }
            if let length = read("buffer/length").flatMap({ UInt32($0) }), n > length { return .failure(invalid) }
            return .success(String(n))
        case "current_timestamp_clock":
            guard SimClock.clock(named: value) != nil else { return .failure(invalid) }
            if enabled { return .failure(busy) }
            return .success(value)
        case "trigger/current_trigger":
            let old = read(file) ?? ""
            if enabled && !old.isEmpty { return .failure(busy) }  // the buffer runs on that trigger
            guard let t = triggers.first(where: { $0.name == value }) else {
                // No trigger of that name (or ""): the kernel detaches the current one, if any,
                // and succeeds, also when there was none.
                return .success("")
            }
            if let owner = t.owner, owner != spec.name { return .failure(invalid) }  // validate_trigger
            return .success(value)
        default:
            if file.hasPrefix("scan_elements/") && file.hasSuffix("_en") {
                guard let on = KernelParse.bool(value) else { return .failure(invalid) }
                if enabled { return .failure(busy) }
                return .success(on ? "1" : "0")
            }
            if file.hasSuffix("sampling_frequency") { return storeFrequency(file, value) }
            return .success(value)
        }
    }

    /// Why the kernel refuses to enable the buffer now (`iio_verify_update`), if it does.
    func enableRefusal() -> String? {
        if enabledLayout().0.elements.isEmpty { return "no scan element enabled" }
        if let b = spec.buffer, b.triggered, (b.withoutTrigger ?? .refuse) == .refuse, !hasValidTrigger {
            return "no trigger set, and the driver cannot buffer without one"
        }
        return nil
    }

    /// A `*sampling_frequency` write, by the device's ``Fixture/FrequencyRule``.
    func storeFrequency(_ file: String, _ value: String) -> Result<String, FuseNodes.Errno> {
        let invalid = FuseNodes.Errno(code: EINVAL)
        guard let micro = KernelParse.fixpointMicro(value) else { return .failure(invalid) }
        let decimals = state.withLock { $0.decimals[file] } ?? 6
        func formatted(_ micro: Int64) -> String { String(format: "%.\(decimals)f", Double(micro) / 1e6) }
        // The file's own list, else the device-level one (bmc150_accel: in_accel_sampling_frequency
        // beside sampling_frequency_available).
        let available = read(file + "_available") ?? read("sampling_frequency_available")
        switch spec.frequencyRule ?? .nearest {
        case .exact:
            guard let list = available.flatMap(KernelParse.availableMicro), list.contains(micro) else { return .failure(invalid) }
            return .success(formatted(micro))
        case .exactUnchanged:
            guard let list = available.flatMap(KernelParse.availableMicro), list.contains(micro) else { return .failure(invalid) }
            return .success(read(file) ?? formatted(micro))
        case .roundUp:
            guard micro >= 0, let list = available.flatMap(KernelParse.availableMicro)?.sorted(),
                  let pick = list.first(where: { $0 >= micro }) else { return .failure(invalid) }
            return .success(formatted(pick))
        case .divider:
            // inv_mpu6050_fifo_rate_store: kstrtoint, 4…1000 Hz, divider = 1000 / Hz − 1.
            guard let hz = KernelParse.integer(value), hz >= 4, hz <= 1000 else { return .failure(invalid) }
            return .success(String(1000 / (1000 / hz)))
        case .hid:
            // hid_sensor_write_samp_freq_value: a report interval of 1e9 / µHz ms (truncated),
            // read back as 1000 / interval with one significant decimal (simple_div).
            // A rate whose µHz overflow the driver's 32-bit int is sent to the hub as garbage and
            // refused (the kernel logs "implement() called with too large value").
            guard micro >= 0, micro <= Int64(Int32.max) else { return .failure(invalid) }
            let interval = micro == 0 ? 0 : 1_000_000_000 / micro
            return .success(Self.hidFrequency(intervalMilliseconds: interval))
        case .integerExact:
            guard micro % 1_000_000 == 0, let list = available.flatMap(KernelParse.availableMicro), list.contains(micro)
            else { return .failure(invalid) }
            return .success(formatted(micro))
        case .mpu3050:
            // write_raw gets the whole part (truncated toward zero) and ignores the fraction.
            let hz = micro / 1_000_000
            guard hz >= 4, hz <= 8000 else { return .failure(invalid) }
            let base: Int64 = hz > 1000 ? 8000 : 1000
            let divisor = (base + hz / 2) / hz - 1
            return .success(String(base / (divisor + 1)))
        case .clampUp:
            guard let list = available.flatMap(KernelParse.availableMicro)?.sorted(), let last = list.last else {
                return .failure(invalid)
            }
            let whole = micro / 1_000_000 * 1_000_000
            return .success(formatted(list.first(where: { whole <= $0 }) ?? last))
        case .nearest:
            guard micro >= 0 else { return .failure(invalid) }
            let requested = Double(micro) / 1e6
            let v = available.map { Self.snap(requested, available: $0) } ?? requested
            return .success(String(format: "%.\(decimals)f", v))
        }
    }

    /// What a HID sensor's `sampling_frequency` reads for a report interval in milliseconds
    /// (`hid_sensor_read_samp_freq_value`, `simple_div(1000, interval)`: 30 ms → `33.300000`).
    static func hidFrequency(intervalMilliseconds interval: Int64) -> String {
        guard interval > 0 else { return "0.000000" }
        let whole = 1000 / interval
        var rem = 1000 % interval
        var micro: Int64 = 0
        if rem != 0 {
            var exp = 0
            while rem <= interval { rem *= 10; exp += 1 }
            var p: Int64 = 1
            for _ in 0..<max(0, 6 - exp) { p *= 10 }
            micro = (rem / interval) * p
        }
        return String(format: "%lld.%06lld", whole, micro)
    }

    static func log(_ options: SimulationOptions, _ message: String) {
        if options.verbose { FileHandle.standardError.write(Data("iio-sim: \(message)\n".utf8)) }
    }
}
