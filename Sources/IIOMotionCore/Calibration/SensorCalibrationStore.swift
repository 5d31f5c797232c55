internal import Glibc

/// Where calibrations are kept between runs: one small text file per device and sensor
/// (``SensorCalibration/text``), in the folder the magnetometer's calibration uses
/// (`$XDG_STATE_HOME/iiomotion`, else `~/.local/state/iiomotion`), named after the same device
/// identity: `accelerometer-<identity>.txt`, `gyroscope-<identity>.txt`. Deleting the file
/// forgets the calibration. Files are written whole to a temporary file, then renamed.
extension SensorCalibration {
    /// The folder calibrations are kept in for this process's environment, or nil when neither
    /// `XDG_STATE_HOME` nor `HOME` is an absolute path.
    public static var defaultFolder: String? { MagnetometerCalibrationStore.defaultFolder() }

    /// A sensor's device identity, as calibration files are named: the IIO device's name, label
    /// and location (what stays the same across boots, unlike `iio:deviceN`), after the context's
    /// URI when it is not `local:`.
    /// - Parameters:
    ///   - sensor: the sensor.
    ///   - uri: the IIO context's URI.
    /// - Returns: e.g. `"bmi160"` or `"ip:pi.local-bmi160-accel-base"`.
    public static func identity(of sensor: SensorInfo, uri: String) -> String {
        MagnetometerCalibrationStore.identity(uri: uri, name: sensor.deviceName, label: sensor.label, location: sensor.location)
    }

    /// The file holding `sensor`'s calibration (which need not exist).
    /// - Parameters:
    ///   - sensor: an accelerometer or gyroscope.
    ///   - uri: the IIO context's URI.
    ///   - folder: the folder; ``defaultFolder`` when nil.
    /// - Returns: the path, or nil without a folder.
    public static func path(for sensor: SensorInfo, uri: String, folder: String? = nil) -> String? {
        guard let folder = folder ?? defaultFolder else { return nil }
        let device = identity(of: sensor, uri: uri)
        let safe = String(device.map { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) ? $0 : "_" })
        return folder + "/" + sensor.kind.rawValue + "-" + safe + ".txt"
    }

    /// The calibration stored for `sensor`, or nil when there is none.
    /// - Parameters:
    ///   - sensor: an accelerometer or gyroscope.
    ///   - uri: the IIO context's URI.
    ///   - folder: the folder; ``defaultFolder`` when nil.
    /// - Throws: ``MotionError`` naming the file when it cannot be read, is not a calibration, or
    ///   is one of another kind of sensor.
    public static func stored(for sensor: SensorInfo, uri: String, folder: String? = nil) throws(MotionError) -> SensorCalibration? {
        guard sensor.kind != .magnetometer, let path = path(for: sensor, uri: uri, folder: folder) else { return nil }
        guard let f = fopen(path, "r") else {
            let e = errno
            if e == ENOENT { return nil }
            throw MotionError(code: .ioError, device: sensor.deviceDescription, attribute: path,
                              detail: "The calibration file \(path) cannot be read (\(String(cString: strerror(e))))")
        }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= 65536 {
            let n = fread(&buffer, 1, buffer.count, f)
            if n > 0 { bytes += buffer[0..<n] }
            if n < buffer.count { break }
        }
        do throws(MotionError) {
            let c = try SensorCalibration(parsing: String(decoding: bytes, as: UTF8.self))
            guard c.kind == sensor.kind else {
                throw MotionError(code: .invalidAttribute, detail: "it calibrates a \(c.kind), not a \(sensor.kind)")
            }
            return c
        } catch {
            throw MotionError(code: .invalidAttribute, device: sensor.deviceDescription, attribute: path,
                              detail: "The calibration file \(path) is not used: \(error.detail ?? error.description)")
        }
    }

    /// Saves this calibration as `sensor`'s, creating the folder as needed.
    /// - Parameters:
    ///   - sensor: the sensor it calibrates.
    ///   - uri: the IIO context's URI.
    ///   - folder: the folder; ``defaultFolder`` when nil.
    /// - Returns: the file written.
    /// - Throws: ``MotionError`` naming the file when it cannot be written.
    @discardableResult
    public func save(for sensor: SensorInfo, uri: String, folder: String? = nil) throws(MotionError) -> String {
        guard let path = Self.path(for: sensor, uri: uri, folder: folder) else {
            throw MotionError(code: .ioError, detail: "There is no folder for calibrations: neither XDG_STATE_HOME nor HOME is an absolute path")
        }
        if let slash = path.lastIndex(of: "/") {
            var partial = ""
            for part in path[..<slash].split(separator: "/") {
                partial += "/" + part
                mkdir(partial, 0o755)
            }
        }
        var copy = self
        copy.device = Self.identity(of: sensor, uri: uri)
        let temporary = path + ".tmp"
        guard let f = fopen(temporary, "w") else {
            throw MotionError(code: .ioError, attribute: temporary,
                              detail: "\(temporary) cannot be created (\(String(cString: strerror(errno))))")
        }
        let written = fputs(copy.text, f) >= 0
        let closed = fclose(f) == 0
        guard written, closed, rename(temporary, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(temporary)
            throw MotionError(code: .ioError, attribute: path, detail: "\(path) cannot be written (\(why))")
        }
        return path
    }
}
