import IIOMotion

/// What `--list`, `-v` and the `--csv` log say about the calibrations in force.
enum CalibrationNotes {
    /// The kinds a ``SensorCalibration`` applies to.
    static let kinds: [SensorKind] = [.accelerometer, .gyroscope]

    /// `accelerometer calibrated 2026-12-06 05:12:40 UTC`, `accelerometer uncalibrated`.
    static func state(_ kind: SensorKind, _ sensor: SensorInfo?, uncalibrated: Bool) -> String? {
        guard kinds.contains(kind), let sensor else { return nil }
        if let c = sensor.calibration { return "\(kind) calibrated \(c.createdDescription)" }
        return uncalibrated ? "\(kind) uncalibrated (--uncalibrated)" : "\(kind) uncalibrated"
    }

    /// The `# …` line under the log's header: which of the logged sensors are calibrated, and
    /// since when; nil when none has a calibration and `--uncalibrated` was not given (the rows
    /// are then as the kernel gives them, as in logs written before calibrations existed).
    /// `appending` (`--append`): said whenever an accelerometer or gyroscope is logged, since the
    /// rows already in the file may have been logged otherwise.
    static func csvComment(_ manager: MotionManager, kinds logged: [SensorKind], uncalibrated: Bool,
                           appending: Bool = false) -> String? {
        let states = logged.compactMap { state($0, manager.sensor($0), uncalibrated: uncalibrated) }
        let any = logged.contains { manager.sensor($0)?.calibration != nil }
        guard any || ((uncalibrated || appending) && !states.isEmpty) else { return nil }
        // No comma: a reader splitting rows on commas never takes the comment for a row.
        return states.joined(separator: "; ")
    }

    /// The first record of the JSON lines (`--json`), said when ``csvComment(_:kinds:uncalibrated:)``
    /// would write the log's comment, and with the same facts:
    /// `{"calibration":{"accelerometer":{"calibrated":true,"created":"2026-12-06 05:12:40 UTC"},"gyroscope":{"calibrated":false}}}`
    /// (`"uncalibrated":true` added where `--uncalibrated` left a stored calibration out). Readers
    /// tell it from a reading by its `calibration` key (readings have `sensor`).
    static func jsonRecord(_ manager: MotionManager, kinds logged: [SensorKind], uncalibrated: Bool) -> String? {
        guard csvComment(manager, kinds: logged, uncalibrated: uncalibrated) != nil else { return nil }
        let fields: [(key: String, value: JSONValue)] = logged.compactMap { kind in
            guard kinds.contains(kind), let sensor = manager.sensor(kind) else { return nil }
            return (kind.rawValue, state(sensor, uri: manager.uri, uncalibrated: uncalibrated, file: false))
        }
        return JSONValue.object([("calibration", .object(fields))]).text
    }

    /// A sensor's calibration as `--list --json` and the JSON record say it: `{"calibrated":false}`,
    /// or `{"calibrated":true,"created":"…","file":"…"}` (`file` when `file` is true), with
    /// `"uncalibrated":true` when `--uncalibrated` leaves a stored one out (`calibrated` is then
    /// false), or `"problem":"…"` when the stored one cannot be used.
    static func state(_ sensor: SensorInfo, uri: String, uncalibrated: Bool, file: Bool) -> JSONValue {
        if let problem = sensor.calibrationProblem {
            return .object([("calibrated", .bool(false)), ("problem", .string("\(problem)"))])
        }
        var stored = sensor.calibration
        if stored == nil {
            do throws(MotionError) {
                stored = try SensorCalibration.stored(for: sensor, uri: uri)
            } catch {
                return .object([("calibrated", .bool(false)), ("problem", .string("\(error)"))])
            }
        }
        guard let c = stored else { return .object([("calibrated", .bool(false))]) }
        var fields: [(key: String, value: JSONValue)] = [("calibrated", .bool(!uncalibrated)), ("created", .string(c.createdDescription))]
        if file { fields.append(("file", .string(SensorCalibration.path(for: sensor, uri: uri)))) }
        if uncalibrated { fields.append(("uncalibrated", .bool(true))) }
        return .object(fields)
    }

    /// `--list --json`'s `calibration` of a device: its accelerometer's and gyroscope's ``state(_:uri:uncalibrated:file:)``.
    static func json(_ device: DeviceInfo, uri: String, uncalibrated: Bool) -> JSONValue {
        .object(device.sensors.filter { kinds.contains($0.kind) }.map {
            ($0.kind.rawValue, state($0, uri: uri, uncalibrated: uncalibrated, file: true))
        })
    }

    /// The `-v` line for a sensor: its calibration and file, why a stored one is not used, or
    /// that `--uncalibrated` leaves it out; nil when none is stored.
    static func verbose(_ kind: SensorKind, manager: MotionManager, uncalibrated: Bool) -> String? {
        guard kinds.contains(kind), let sensor = manager.sensor(kind) else { return nil }
        if let problem = sensor.calibrationProblem { return "\(kind): not calibrated: \(problem)" }
        if let c = sensor.calibration {
            let file = SensorCalibration.path(for: sensor, uri: manager.uri).map { " (\($0))" } ?? ""
            return "\(kind): calibrated \(c.createdDescription)\(file)"
        }
        // Without a calibration stored there is nothing to say (the readings are the kernel's, as always).
        return uncalibrated ? "\(kind): uncalibrated (--uncalibrated)" : nil
    }

    /// Lines after `--list`'s table: each accelerometer and gyroscope with a stored calibration,
    /// and each whose calibration file cannot be used.
    static func list(_ devices: [DeviceInfo], uri: String, uncalibrated: Bool) -> [String] {
        var lines: [String] = []
        for device in devices {
            for sensor in device.sensors where kinds.contains(sensor.kind) {
                do throws(MotionError) {
                    guard let c = try SensorCalibration.stored(for: sensor, uri: uri) else { continue }
                    lines.append("\(sensor.deviceDescription) \(sensor.kind): calibrated \(c.createdDescription)"
                        + (uncalibrated ? " (not applied: --uncalibrated)" : ""))
                } catch {
                    lines.append("\(sensor.deviceDescription) \(sensor.kind): not calibrated: \(error)")
                }
            }
        }
        return lines
    }
}
