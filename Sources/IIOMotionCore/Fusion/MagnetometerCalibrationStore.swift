internal import Glibc

/// Where a device's magnetometer calibration is kept between runs: one small text file per
/// device (``MagnetometerCalibrator/text(extra:)``), by default under `$XDG_STATE_HOME/iiomotion`
/// (else `~/.local/state/iiomotion`), named after the device's identity. Deleting the file
/// forgets the calibration. ``MotionManager`` loads it when device motion starts and saves it
/// when device motion stops (``MotionManager/magnetometerCalibrationFolder``).
///
/// Only a file the library can read as a calibration (or no file) is ever replaced: a damaged
/// file, or one of a version this library does not know, is left as it is, and ``load(path:mount:)``
/// and ``save(_:path:device:mount:)`` say why. Files are written whole to a temporary file,
/// then renamed over the old one.
enum MagnetometerCalibrationStore {
    /// What loading a calibration found.
    enum Loaded: Sendable, Hashable {
        /// No file: nothing saved yet (or deleted).
        case none
        /// A calibration to start from.
        case calibration(MagnetometerCalibrator)
        /// A file that cannot be used, and why (a sentence fragment: "it is damaged (…)").
        case unusable(String)
    }

    /// What saving a calibration did.
    enum Saved: Sendable, Hashable {
        /// Written.
        case saved
        /// Nothing was learned, nothing written.
        case nothingToSave
        /// A file that is not a calibration this library can read is in the way: left as it is.
        case kept(String)
        /// The file could not be written (the reason).
        case failed(String)
    }

    /// The folder from an environment, or nil without a usable one (both variables must be
    /// absolute paths, as the XDG base directory specification asks).
    static func folder(environment: [String: String]) -> String? {
        if let s = environment["XDG_STATE_HOME"], s.hasPrefix("/") { return s + "/iiomotion" }
        if let h = environment["HOME"], h.hasPrefix("/") { return h + "/.local/state/iiomotion" }
        return nil
    }

    /// The folder from this process's environment.
    static func defaultFolder() -> String? {
        var env: [String: String] = [:]
        for name in ["XDG_STATE_HOME", "HOME"] {
            if let v = getenv(name) { env[name] = String(cString: v) }
        }
        return folder(environment: env)
    }

    /// The file for a device identity in `folder` (characters other than letters, digits, `-`,
    /// `_`, `.` become `_`).
    static func path(folder: String, device: String) -> String {
        let safe = String(device.map { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) ? $0 : "_" })
        return folder + "/magnetometer-" + safe + ".txt"
    }

    /// The file for a device identity under an environment's folder, or nil without one.
    static func path(device: String, environment: [String: String]) -> String? {
        folder(environment: environment).map { path(folder: $0, device: device) }
    }

    /// A device's identity for its file name: the IIO device's name, label and location (what
    /// stays the same across boots, unlike `iio:deviceN`), after the context's host when remote.
    static func identity(uri: String, name: String?, label: String?, location: String?) -> String {
        var parts: [String] = []
        if uri != "local:" { parts.append(uri) }
        parts.append(name ?? "unnamed")
        if let label, !label.isEmpty { parts.append(label) }
        if let location, !location.isEmpty { parts.append(location) }
        return parts.joined(separator: "-")
    }

    /// Why a file cannot be read.
    private struct Unreadable: Error {
        var reason: String
    }

    /// The file's text, nil when there is none, or why it cannot be read.
    private static func contents(_ path: String) -> Result<String?, Unreadable> {
        guard let f = fopen(path, "r") else {
            let e = errno
            return e == ENOENT ? .success(nil) : .failure(Unreadable(reason: "it cannot be read (\(String(cString: strerror(e))))"))
        }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, f)
            if n > 0 { bytes += buffer[0..<n] }
            if n < buffer.count { break }
            if bytes.count > 65536 { return .failure(Unreadable(reason: "it is too large to be a calibration")) }
        }
        if ferror(f) != 0 { return .failure(Unreadable(reason: "it cannot be read")) }
        return .success(String(decoding: bytes, as: UTF8.self))
    }

    /// Whether ``save(_:path:device:mount:)`` may replace the file at `path`: none there, or a
    /// calibration this library reads.
    static func isReplaceable(path: String) -> Bool {
        switch contents(path) {
        case .failure: false
        case .success(nil): true
        case .success(let text?): (try? MagnetometerCalibrator.read(text).get()) != nil
        }
    }

    /// The saved calibration at `path`, for a magnetometer with this mount matrix (`mount`, as
    /// `MountMatrix.description`; a file saved with another one is not used: its axes differ).
    static func load(path: String, mount: String? = nil) -> Loaded {
        switch contents(path) {
        case .failure(let why): return .unusable(why.reason)
        case .success(nil): return .none
        case .success(let text?):
            switch MagnetometerCalibrator.read(text) {
            case .failure(let why): return .unusable(why.description)
            case .success(let c):
                if let mount, let saved = savedMount(text), saved != mount {
                    return .unusable("it was saved with the mount matrix \(saved), not \(mount)")
                }
                return .calibration(c)
            }
        }
    }

    private static func savedMount(_ text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix("mount ") { return String(line.dropFirst(6)) }
        return nil
    }

    /// Saves a calibration that has one, with the device's identity and mount matrix, creating
    /// the folder as needed; a file at `path` that is not a calibration this library reads is
    /// kept (see ``Saved/kept(_:)``).
    @discardableResult
    static func save(_ calibration: MagnetometerCalibrator, path: String, device: String? = nil, mount: String? = nil) -> Saved {
        guard calibration.isCalibrated else { return .nothingToSave }
        switch contents(path) {
        case .failure(let why): return .kept(why.reason)
        case .success(let text?):
            if case .failure(let why) = MagnetometerCalibrator.read(text) { return .kept(why.description) }
        case .success(nil): break
        }
        if let slash = path.lastIndex(of: "/") {
            var partial = ""
            for part in path[..<slash].split(separator: "/") {
                partial += "/" + part
                mkdir(partial, 0o755)
            }
        }
        var extra: [String] = []
        if let device { extra.append("device \(device)") }
        if let mount { extra.append("mount \(mount)") }
        let temporary = path + ".tmp"
        guard let f = fopen(temporary, "w") else {
            return .failed("\(temporary) cannot be created (\(String(cString: strerror(errno))))")
        }
        let written = fputs(calibration.text(extra: extra), f) >= 0
        let closed = fclose(f) == 0
        guard written, closed, rename(temporary, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(temporary)
            return .failed("\(path) cannot be written (\(why))")
        }
        return .saved
    }
}
