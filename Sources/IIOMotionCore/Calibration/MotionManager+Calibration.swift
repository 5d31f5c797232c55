extension MotionManager {
    /// Which calibrations a manager applies to accelerometer and gyroscope readings.
    public enum CalibrationChoice: Sendable, Hashable {
        /// The ones stored for each device (``SensorCalibration/stored(for:uri:folder:)``, written
        /// by `motion-monitor calibrate`); a sensor without one reads uncalibrated.
        case stored
        /// None: the readings as the kernel gives them, as Android's uncalibrated sensors.
        case uncalibrated
        /// These, by sensor kind; the kinds left out read uncalibrated.
        case supplied([SensorKind: SensorCalibration])
    }

    /// The calibration applied to readings of `kind`, nil when none is.
    /// - Parameter kind: ``SensorKind/accelerometer`` or ``SensorKind/gyroscope``.
    /// - Returns: the calibration in force.
    public func calibration(for kind: SensorKind) -> SensorCalibration? {
        sensor(kind)?.calibration
    }

    /// Applies `calibration` to readings of `kind` from now on (nil: none): polled reads at once,
    /// streams from their next start (stop and start the updates to apply it to a running one).
    /// Kept across ``rediscover()``. Nothing is stored: see ``SensorCalibration/save(for:uri:folder:)``.
    /// - Parameters:
    ///   - calibration: the calibration, or nil for uncalibrated readings.
    ///   - kind: ``SensorKind/accelerometer`` or ``SensorKind/gyroscope``.
    /// - Throws: ``MotionError`` (``MotionError/Code/invalidAttribute``) when the calibration is of
    ///   another kind, or unusable (``SensorCalibration/problem``).
    public func setCalibration(_ calibration: SensorCalibration?, for kind: SensorKind) throws(MotionError) {
        if let calibration {
            guard calibration.kind == kind else {
                throw MotionError(code: .invalidAttribute, detail: "a \(calibration.kind) calibration cannot calibrate the \(kind)")
            }
            if let problem = calibration.problem {
                throw MotionError(code: .invalidAttribute, detail: "the \(kind) calibration is unusable: \(problem)")
            }
        }
        let settings = calibrationSettings.withLock { s in
            s.explicit[kind] = .some(calibration)
            return s
        }
        state.withLock { s in
            guard var plan = s.chosen[kind] else { return }
            settings.apply(to: &plan.info, uri: uri, context: try? s.discovery.get().context)
            s.chosen[kind] = plan
        }
    }
}

/// A manager's calibration choice, and what ``MotionManager/setCalibration(_:for:)`` set since.
struct CalibrationSettings: Sendable {
    var choice: MotionManager.CalibrationChoice
    /// Set by kind (a nil value: explicitly none).
    var explicit: [SensorKind: SensorCalibration?] = [:]
    /// The folder stored calibrations are read from; ``SensorCalibration/defaultFolder`` when nil.
    var folder: String?

    init(choice: MotionManager.CalibrationChoice) {
        self.choice = choice
    }

    /// A calibration whose offsets were partly written into the driver's calibbias files, with its
    /// bias made right for what the files hold now: a chip resets them at power-up, and then the
    /// software takes back the part the registers no longer take. Unchanged when they cannot be read
    /// (or there is no `context` to read them in).
    static func followingRegisters(_ c: SensorCalibration, info: SensorInfo, context: (any DeviceContext)?) -> SensorCalibration {
        guard let k = c.kernel, let context, let now = try? KernelOffsets.read(info, in: context), now.count == 3,
              now != k.written
        else { return c }
        var adjusted = c
        adjusted.bias = AxisValues(x: c.bias.x + Double(now[0] - k.written[0]) * k.unit,
                                   y: c.bias.y + Double(now[1] - k.written[1]) * k.unit,
                                   z: c.bias.z + Double(now[2] - k.written[2]) * k.unit)
        return adjusted
    }

    /// Puts the calibration for `info`'s sensor (or none) into `info`.
    /// - Parameters:
    ///   - info: the sensor.
    ///   - uri: the context's URI, which stored calibrations are filed under.
    ///   - context: the open context the sensor was discovered in, where its calibbias files are read.
    func apply(to info: inout SensorInfo, uri: String, context: (any DeviceContext)?) {
        info.calibration = nil
        info.calibrationProblem = nil
        guard info.kind != .magnetometer else { return }
        if let set = explicit[info.kind] {
            info.calibration = set
            return
        }
        switch choice {
        case .uncalibrated: return
        case .supplied(let all): info.calibration = all[info.kind].flatMap { $0.kind == info.kind && $0.problem == nil ? $0 : nil }
        case .stored:
            do throws(MotionError) {
                info.calibration = try SensorCalibration.stored(for: info, uri: uri, folder: folder).map {
                    Self.followingRegisters($0, info: info, context: context)
                }
            } catch {
                info.calibrationProblem = error
            }
        }
    }
}
