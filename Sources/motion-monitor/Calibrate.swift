@preconcurrency import Glibc // stdout is a C global
import IIOMotion
import SystemSupport

/// `motion-monitor calibrate`: a guided calibration of the accelerometer (offset, scale and
/// cross-axis terms, from the board laid on its six faces), the gyroscope's bias (from the
/// still periods) and a check of the mount matrix (from the first two faces: face up, then
/// standing on its bottom edge). The result is stored per device
/// (``SensorCalibration/save(for:uri:folder:)``), where every later `MotionManager` applies it.
/// `--write-kernel` moves the offsets into the driver's calibbias registers, `--restore-kernel`
/// puts back what they held (``KernelStep``).
///
/// On a terminal a status line shows stillness and progress; otherwise (a pipe, a script) every
/// event is one plain line. Colour only on a terminal without `NO_COLOR`, `TERM=dumb` or
/// `--no-color`.
enum Calibrate {
    /// EX_DATAERR: the measurement was refused (moved during a face, a face missing, residual too large).
    static let refused: Int32 = 65

    /// The command line of `calibrate`.
    struct Options: Equatable {
        var uri = "local:"
        var device: String?
        /// Seconds of stillness before a face is measured.
        var still = 1.0
        /// Seconds each face is measured for.
        var seconds = 2.0
        /// The largest accelerometer standard deviation (any axis) counted as still, m/s².
        var accelStillLimit = 10 * standardGravity / 1000
        /// The largest gyroscope standard deviation counted as still, rad/s.
        var gyroStillLimit = 1.0 * Double.pi / 180
        /// The largest residual accepted, m/s².
        var maxResidual = 15 * standardGravity / 1000
        /// Give up after this many seconds.
        var timeout = 300.0
        var mountCheck = true
        var save = true
        var noColor = false
        var help = false
        /// `--show`: print the calibrations stored for the device and exit.
        var show = false
        /// `--forget`: remove them (restoring the kernel's calibbias files first when they were written).
        var forget = false
        /// `--write-kernel`: move the offsets into the driver's calibbias files.
        var writeKernel = false
        /// `--stored`: with `--write-kernel`, the stored calibration's offsets instead of a new measurement.
        var useStored = false
        /// `--restore-kernel`: put the calibbias files back as they were found.
        var restoreKernel = false

        static let help = """
        USAGE: motion-monitor calibrate [--uri URI] [--device DEVICE] [options]

        Calibrates the accelerometer (offset, scale and cross-axis terms per axis) and the gyroscope
        (bias) of one device, and checks its mount matrix. Lay the board on each of its six faces in
        turn and keep it still on each until it is measured: first face up (display or components
        up), then standing on its bottom edge (top edge up), then the other four in any order. The
        result is stored per device and applied to every reading from then on (--uncalibrated and
        MotionManager(calibration: .uncalibrated) read without it).

        OPTIONS:
          --uri URI            the libiio context (default local:; ip:HOST for a board over the network)
          --device DEVICE      the IIO device (id, label or name; default: automatic)
          --still SECONDS      stillness needed before a face is measured (default 1)
          --seconds SECONDS    how long each face is measured (default 2)
          --still-limit MG     the largest accelerometer noise (σ, mg) counted as still (default 10)
          --gyro-still-limit DPS  the largest gyroscope noise (σ, °/s) counted as still (default 1)
          --max-residual MG    refuse a fit whose residual is larger (default 15)
          --timeout SECONDS    give up after this long (default 300)
          --no-mount-check     take the faces in any order and do not check the mount matrix
          --dry-run            measure and report, store nothing
          --show               print the calibrations stored for the device, and exit
          --forget             remove the calibrations stored for the device (restoring the
                               calibbias files first, see --restore-kernel), and exit
          --write-kernel       also move the offsets into the driver's own registers (the
                               in_accel_*_calibbias, in_anglvel_*_calibbias files: mpu6050,
                               mpu6000, mpu9150, adxl345, adxl375, adxl312/313/314, icm42600/
                               42602/42605/42622; root), keeping what they held to restore it;
                               an offset the registers cannot hold is refused before writing, and
                               if one file cannot be written those already written are put back;
                               the stored calibration keeps only what the registers did not take
          --stored             with --write-kernel: the stored calibration's offsets, no measuring
          --restore-kernel     write back the calibbias values found before --write-kernel, put
                               the offsets back into the stored calibration, and exit
          --no-color           no colour (also when NO_COLOR is set or TERM is dumb)
          -h, --help           show this help
        """

        init(arguments: [String]) throws(UsageError) {
            var args = arguments[...]
            func value(_ flag: String) throws(UsageError) -> String {
                guard let v = args.popFirst() else { throw UsageError("calibrate: \(flag) needs a value") }
                return v
            }
            func number(_ flag: String) throws(UsageError) -> Double {
                let v = try value(flag)
                guard let d = MonitorOptions.decimal(v), d.isFinite, d > 0 else {
                    throw UsageError("calibrate: \(flag): \"\(v)\" is not a positive number")
                }
                return d
            }
            while let a = args.popFirst() {
                switch a {
                case "--uri": uri = try value(a)
                case "--device": device = try value(a)
                case "--still": still = try number(a)
                case "--seconds": seconds = try number(a)
                case "--still-limit": accelStillLimit = try number(a) * standardGravity / 1000
                case "--gyro-still-limit": gyroStillLimit = try number(a) * Double.pi / 180
                case "--max-residual": maxResidual = try number(a) * standardGravity / 1000
                case "--timeout": timeout = try number(a)
                case "--no-mount-check": mountCheck = false
                case "--dry-run": save = false
                case "--show": show = true
                case "--forget": forget = true
                case "--write-kernel": writeKernel = true
                case "--stored": useStored = true
                case "--restore-kernel": restoreKernel = true
                case "--no-color": noColor = true
                case "-h", "--help": help = true
                default: throw UsageError("calibrate: unknown option \(a) (see motion-monitor calibrate --help)")
                }
            }
            if useStored && !writeKernel { throw UsageError("calibrate: --stored goes with --write-kernel") }
            if writeKernel && !save && !useStored { throw UsageError("calibrate: --write-kernel stores the calibration; it cannot go with --dry-run") }
            if [show || forget, restoreKernel, writeKernel].filter({ $0 }).count > 1 {
                throw UsageError("calibrate: --show/--forget, --restore-kernel and --write-kernel are separate steps; give one")
            }
        }
    }

    static func main(arguments: [String]) -> Int32 {
        let options: Options
        do { options = try Options(arguments: arguments) } catch {
            Console.error(error.report)
            return ExitStatus.usage
        }
        if options.help {
            Console.out(Options.help)
            return ExitStatus.success
        }
        let selector: DeviceSelector = options.device.map { .matching($0) } ?? .automatic
        let manager = MotionManager(uri: options.uri, units: .si, accelerometer: selector, gyroscope: selector,
                                    magnetometer: selector, calibration: .uncalibrated)
        guard let accel = manager.sensor(.accelerometer), accel.isAvailable else {
            let why = manager.sensor(.accelerometer)?.problem?.description
                ?? "No accelerometer\(options.device.map { " matching \"\($0)\"" } ?? "") at \(options.uri)."
            Console.error("motion-monitor calibrate: \(why)")
            return ExitStatus.unavailable
        }
        let gyro = manager.sensor(.gyroscope).flatMap { $0.isAvailable && sameChip(accel, $0) ? $0 : nil }
        let sensors = [accel] + (gyro.map { [$0] } ?? [])
        if options.restoreKernel {
            return KernelStep.restore(sensors, options: options)
        }
        if options.writeKernel && options.useStored {
            return KernelStep.writeStored(sensors, options: options)
        }
        if options.show || options.forget {
            return showOrForget(sensors, options: options)
        }
        var run = Run(options: options, manager: manager, accel: accel, gyro: gyro)
        return run.go()
    }

    /// Whether a gyroscope belongs to the accelerometer's chip: the same IIO device, or the two
    /// devices a driver makes of one chip (inv_icm42600's `icm42605-accel` and `icm42605-gyro`,
    /// st_lsm6dsx's `lsm6dso_accel` and `lsm6dso_gyro`).
    static func sameChip(_ accel: SensorInfo, _ gyro: SensorInfo) -> Bool {
        if accel.deviceID == gyro.deviceID { return true }
        guard let a = accel.deviceName, let g = gyro.deviceName else { return false }
        for (sa, sg) in [("-accel", "-gyro"), ("_accel", "_gyro")] where a.hasSuffix(sa) && g.hasSuffix(sg) {
            return a.dropLast(sa.count) == g.dropLast(sg.count)
        }
        return false
    }

    static func showOrForget(_ sensors: [SensorInfo], options: Options) -> Int32 {
        var status = ExitStatus.success
        for s in sensors {
            guard let path = SensorCalibration.path(for: s, uri: options.uri) else {
                Console.error("motion-monitor calibrate: no folder for calibrations (neither XDG_STATE_HOME nor HOME is an absolute path)")
                return ExitStatus.cannotCreate
            }
            if options.forget {
                if !KernelStep.restoreBeforeForgetting(s, options: options) {
                    status = ExitStatus.ioError
                    continue
                }
                if unlink(path) == 0 {
                    Console.out("removed \(path)")
                } else if errno != ENOENT {
                    Console.error("motion-monitor calibrate: \(path) cannot be removed (\(String(cString: strerror(errno))))")
                    status = ExitStatus.ioError
                } else {
                    Console.out("no \(s.kind) calibration stored for \(s.deviceDescription)")
                }
                continue
            }
            do throws(MotionError) {
                if let c = try SensorCalibration.stored(for: s, uri: options.uri) {
                    Console.out("\(s.kind) of \(s.deviceDescription): calibrated \(c.createdDescription) (\(path))")
                    for line in describe(c) { Console.out("  " + line) }
                    if let k = c.kernel { Console.out("  " + KernelStep.describe(k, sensor: s, uri: options.uri)) }
                } else {
                    Console.out("\(s.kind) of \(s.deviceDescription): not calibrated (no \(path))")
                }
            } catch {
                Console.error("motion-monitor calibrate: \(error)")
                status = ExitStatus.ioError
            }
        }
        return status
    }

    /// A calibration's values as a person reads them.
    static func describe(_ c: SensorCalibration) -> [String] {
        func signed(_ v: Double, _ digits: Int) -> String { (v >= 0 ? "+" : "") + fixed(v, digits) }
        switch c.kind {
        case .accelerometer:
            let g = standardGravity / 1000
            var lines = ["offset (sensor axes): x \(signed(c.bias.x / g, 1)) mg, y \(signed(c.bias.y / g, 1)) mg, z \(signed(c.bias.z / g, 1)) mg"]
            if let s = c.scale { lines.append("scale (sensor axes): x \(fixed(s.x, 4)), y \(fixed(s.y, 4)), z \(fixed(s.z, 4))") }
            if let inv = SensorCalibration.inverse(c.matrix) {
                let cross = [inv[0][1], inv[0][2], inv[1][0], inv[1][2], inv[2][0], inv[2][1]].map(abs).max() ?? 0
                lines.append("cross-axis: largest \(fixed(cross * 100, 2)) %")
            }
            if let r = c.residual { lines.append("residual: \(fixed(r / g, 2)) mg") }
            if let s = c.stillness { lines.append("stillness: σ \(fixed(s / g, 2)) mg") }
            return lines
        default:
            let d = Double.pi / 180
            var lines = ["bias (sensor axes): x \(signed(c.bias.x / d, 3)) °/s, y \(signed(c.bias.y / d, 3)) °/s, z \(signed(c.bias.z / d, 3)) °/s"]
            if let s = c.stillness { lines.append("stillness: σ \(fixed(s / d, 3)) °/s") }
            return lines
        }
    }

    static func fixed(_ v: Double, _ digits: Int) -> String {
        var p = 1.0
        for _ in 0..<digits { p *= 10 }
        let r = (abs(v) * p).rounded()
        let whole = Int64(r / p), frac = Int64(r) - whole * Int64(p)
        var f = String(frac)
        while f.count < digits { f = "0" + f }
        return (v < 0 && r != 0 ? "-" : "") + String(whole) + (digits > 0 ? "." + f : "")
    }
}

/// One sample in the sensor's axes, SI units.
struct AxisSample {
    var t: Double
    var v: (Double, Double, Double)
}

/// Mean and largest per-axis standard deviation of samples.
struct SampleStatistics {
    var count = 0
    var mean = (0.0, 0.0, 0.0)
    var sigma = 0.0
    var span = 0.0

    init(_ samples: ArraySlice<AxisSample>) {
        count = samples.count
        guard let first = samples.first, let last = samples.last else { return }
        span = last.t - first.t
        var s = (0.0, 0.0, 0.0)
        for x in samples { s.0 += x.v.0; s.1 += x.v.1; s.2 += x.v.2 }
        let n = Double(count)
        mean = (s.0 / n, s.1 / n, s.2 / n)
        var q = (0.0, 0.0, 0.0)
        for x in samples {
            q.0 += (x.v.0 - mean.0) * (x.v.0 - mean.0)
            q.1 += (x.v.1 - mean.1) * (x.v.1 - mean.1)
            q.2 += (x.v.2 - mean.2) * (x.v.2 - mean.2)
        }
        sigma = (max(q.0, max(q.1, q.2)) / n).squareRoot()
    }

    var magnitude: Double { (mean.0 * mean.0 + mean.1 * mean.1 + mean.2 * mean.2).squareRoot() }
}
