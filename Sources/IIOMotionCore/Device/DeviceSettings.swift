/// What a capture changes on a device, as the device had it before, so that the capture leaves
/// the device as it found it: after a normal stop, an error, or a release.
///
/// A capture writes `sampling_frequency` (device level or per type), `current_timestamp_clock`
/// and sometimes `trigger/current_trigger`; creating a libiio buffer writes `buffer/length`,
/// `buffer/watermark` and every scan element's `_en` file (destroying it sets all `_en` to 0).
/// The kernel refuses writes to `buffer*/length`, `_en` and `current_timestamp_clock` with EBUSY
/// while the buffer is enabled, so ``restore(_:device:)`` runs after the buffer is destroyed.
///
/// Only what the capture itself wrote is put back, and only while it still reads what the capture
/// left there: a value another program changed since is that program's, and stays.
struct DeviceSettings {
    /// The groups of files, restored separately (a capture that falls back to polling puts the
    /// buffer's files back at once and keeps its sampling frequency until it ends).
    enum Group { case buffer, frequency }

    private struct Entry {
        var path: String
        var group: Group
        /// The text the file held before the capture (trimmed).
        var prior: String
        /// Whether the capture wrote it.
        var touched = false
        /// What the capture left in it (read back after its write), or nil when only libiio knows
        /// (the buffer's own files, which nobody else can change while the buffer runs).
        var left: String?
    }

    private var entries: [Entry] = []

    /// Reads the files a capture of `layout`'s sensors may change.
    init(device: some DeviceIO, layout: DeviceLayout, frequencyFiles: [String]) {
        var paths: [(String, Group)] = layout.scanElementIDs.map { ("scan_elements/in_\($0)_en", .buffer) }
        paths += [("buffer/length", .buffer), ("buffer/watermark", .buffer),
                  ("current_timestamp_clock", .buffer), ("trigger/current_trigger", .buffer)]
        var seen = Set<String>()
        for file in frequencyFiles where seen.insert(file).inserted { paths.append((file, .frequency)) }
        for (path, group) in paths {
            guard case .success(let text) = device.readFile(path) else { continue }
            entries.append(Entry(path: path, group: group, prior: Self.normalized(text)))
        }
    }

    /// Records that the capture wrote `path` (through whichever libiio call), and what it now holds.
    mutating func wrote(_ path: String, device: some DeviceIO) {
        guard let i = entries.firstIndex(where: { $0.path == path }) else { return }
        entries[i].touched = true
        entries[i].left = (try? device.readFile(path).get()).map(Self.normalized)
    }

    /// Records that libiio set the buffer up (or tried to): its length, watermark and `_en` files.
    mutating func bufferCreated() {
        for i in entries.indices where entries[i].path.hasPrefix("scan_elements/") || entries[i].path.hasPrefix("buffer/") {
            entries[i].touched = true
            entries[i].left = nil
        }
    }

    /// Puts back what the capture changed in `group`: each file it wrote that still holds what it
    /// left there and differs from what it held before. Failures (a device unplugged, a value the
    /// driver refuses now) leave that file as it is. Idempotent.
    mutating func restore(_ group: Group, device: some DeviceIO) {
        // In order: `_en` files and the length before the watermark (the kernel refuses a watermark
        // above the length), the clock and trigger, then the frequencies.
        for i in entries.indices where entries[i].group == group && entries[i].touched {
            entries[i].touched = false
            let entry = entries[i]
            guard case .success(let text) = device.readFile(entry.path) else { continue }
            let now = Self.normalized(text)
            if now == entry.prior { continue }
            if let left = entry.left, left != now { continue }  // changed by someone else since
            _ = device.writeFile(entry.path, entry.prior)
        }
    }

    /// The files the capture changed and has not put back yet (for tests and diagnostics).
    var changedFiles: [String] { entries.filter(\.touched).map(\.path) }

    private static func normalized(_ text: String) -> String { String(AttributeText.trimmed(text)) }
}
