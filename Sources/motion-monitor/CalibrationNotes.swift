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
    static func csvComment(_ manager: MotionManager, kinds logged: [SensorKind], uncalibrated: Bool) -> String? {
        let states = logged.compactMap { state($0, manager.sensor($0), uncalibrated: uncalibrated) }
        let any = logged.contains { manager.sensor($0)?.calibration != nil }
        guard any || (uncalibrated && !states.isEmpty) else { return nil }
        // No comma: a reader splitting rows on commas never takes the comment for a row.
        return states.joined(separator: "; ")
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
