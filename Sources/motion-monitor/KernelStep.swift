@preconcurrency import Glibc
import IIOMotion

/// `calibrate --write-kernel`, `--restore-kernel` and the restore `--forget` does: moving a
/// calibration's offsets into the driver's calibbias files and back (see ``KernelOffsets``).
enum KernelStep {
    /// `calibration` (measured with the calibbias files as they are now) with its offsets moved into
    /// the files: writes them, and returns the calibration whose bias is what they did not take.
    /// The `original` of an earlier write (`previous`) is kept, so a restore still puts back what
    /// was there before motion-monitor first wrote.
    static func move(_ calibration: SensorCalibration, sensor: SensorInfo, previous: KernelOffsets?,
                     uri: String, say: (String) -> Void) throws(MotionError) -> SensorCalibration {
        _ = try KernelOffsets.knownUnit(driver: sensor.deviceName, kind: sensor.kind)
        let current = try KernelOffsets.read(sensor, uri: uri)
        let plan = try KernelOffsets.plan(calibration, current: current, previous: previous, driver: sensor.deviceName)
        try KernelOffsets.write(plan.offsets.written, to: sensor, uri: uri)
        say("Wrote \(sensor.kind)'s offsets to the kernel: \(listing(plan.offsets.files, plan.offsets.written)) (found "
            + "\(current.map(String.init).joined(separator: " "))\(previous.map { _ in "; as found before the first write: " + plan.offsets.original.map(String.init).joined(separator: " ") } ?? ""))")
        return plan.calibration
    }

    /// `calibrate --write-kernel --stored`.
    static func writeStored(_ sensors: [SensorInfo], options: Calibrate.Options) -> Int32 {
        var wrote = false
        for s in sensors {
            do throws(MotionError) {
                guard var c = try SensorCalibration.stored(for: s, uri: options.uri) else {
                    Console.out("no \(s.kind) calibration stored for \(s.deviceDescription): nothing to write")
                    continue
                }
                _ = try KernelOffsets.knownUnit(driver: s.deviceName, kind: s.kind)
                let current = try KernelOffsets.read(s, uri: options.uri)
                if let k = c.kernel {
                    // The stored bias is relative to the registers at `written`; make it relative to now.
                    c.bias = AxisValues(x: c.bias.x + Double(current[0] - k.written[0]) * k.unit,
                                        y: c.bias.y + Double(current[1] - k.written[1]) * k.unit,
                                        z: c.bias.z + Double(current[2] - k.written[2]) * k.unit)
                }
                let moved = try move(c, sensor: s, previous: c.kernel, uri: options.uri, say: { Console.out($0) })
                do throws(MotionError) {
                    Console.out("Stored \(try moved.save(for: s, uri: options.uri))")
                } catch {
                    _ = try? KernelOffsets.write(current, to: s, uri: options.uri)
                    throw error
                }
                wrote = true
            } catch {
                Console.error("motion-monitor calibrate: \(error)")
                return ExitStatus.of(error)
            }
        }
        if !wrote { return ExitStatus.unavailable }
        return ExitStatus.success
    }

    /// `calibrate --restore-kernel`: the calibbias files back to `original`, the offsets back into
    /// the stored calibration.
    static func restore(_ sensors: [SensorInfo], options: Calibrate.Options) -> Int32 {
        for s in sensors {
            do throws(MotionError) {
                guard var c = try SensorCalibration.stored(for: s, uri: options.uri), let k = c.kernel else {
                    Console.out("\(s.kind) of \(s.deviceDescription): no calibbias values were written by motion-monitor")
                    continue
                }
                try KernelOffsets.write(k.original, to: s, uri: options.uri)
                let b = k.bias
                c.bias = AxisValues(x: c.bias.x + b.x, y: c.bias.y + b.y, z: c.bias.z + b.z)
                c.kernel = nil
                Console.out("Restored \(listing(k.files, k.original)) of \(s.deviceDescription)")
                Console.out("Stored \(try c.save(for: s, uri: options.uri)) (the offsets are corrected in software again)")
            } catch {
                Console.error("motion-monitor calibrate: \(error)")
                return ExitStatus.of(error)
            }
        }
        return ExitStatus.success
    }

    /// Before `--forget` removes `sensor`'s calibration: restores the calibbias files it wrote.
    /// False (and the error on stderr) when they cannot be restored; the file is then kept.
    static func restoreBeforeForgetting(_ sensor: SensorInfo, options: Calibrate.Options) -> Bool {
        guard let c = try? SensorCalibration.stored(for: sensor, uri: options.uri), let k = c.kernel else { return true }
        do throws(MotionError) {
            try KernelOffsets.write(k.original, to: sensor, uri: options.uri)
            Console.out("Restored \(listing(k.files, k.original)) of \(sensor.deviceDescription)")
            return true
        } catch {
            Console.error("motion-monitor calibrate: \(error); the calibration is kept, it records the values to restore")
            return false
        }
    }

    /// One line for `--show`: what was written, what was found, whether the files still hold it.
    static func describe(_ k: KernelOffsets, sensor: SensorInfo, uri: String) -> String {
        let now = try? KernelOffsets.read(sensor, uri: uri)
        let state: String
        switch now {
        case k.written?: state = "they hold it"
        case k.original?: state = "they hold the values found again (reset at power-up?): calibrate --write-kernel --stored writes it again"
        case let v?: state = "they now hold " + v.map(String.init).joined(separator: " ")
        case nil: state = "they cannot be read"
        }
        return "kernel: \(listing(k.files, k.written)) written (found \(k.original.map(String.init).joined(separator: " "))); \(state)"
    }

    static func listing(_ files: [String], _ values: [Int]) -> String {
        zip(files, values).map { "\($0) = \($1)" }.joined(separator: ", ")
    }
}
