import Foundation

/// The command line of `iio-sim`, parsed without side effects so tests can check it.
public struct SimCommandLine: Sendable {
    /// What to do.
    public enum Action: Sendable, Equatable { case run, listFixtures, help, version }

    public var action: Action = .run
    /// `--fixture NAME|PATH` (repeatable: devices of later fixtures are numbered after earlier ones).
    public var fixtures: [String] = []
    /// Everything that shapes the simulation.
    public var options = SimulationOptions()
    /// `--iiod`: also serve the context with the real `iiod` on 127.0.0.1.
    public var iiod = false
    /// `--iiod-port`.
    public var iiodPort = 30431
    /// `--keep-caps`: do not drop CAP_DAC_OVERRIDE from a uid-0 COMMAND.
    public var keepCaps = false
    /// `--user NAME|UID`: run COMMAND as this user (real root only).
    public var user: String?
    /// `--apply-permissions SCRIPT`: run SCRIPT (as root, in the namespace) on each device's sysfs
    /// folder and node before COMMAND starts, as udev runs `udev/iio-motion-permissions`.
    public var permissionScript: String?
    /// COMMAND and its arguments (after `--`).
    public var command: [String] = []

    /// A usage error: what is wrong, for a one-line message (exit 64).
    public struct UsageError: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// The text of `--help`.
    public static let help = """
    iio-sim: simulated IIO accelerometers and gyroscopes on the real kernel interface, for libiio

    USAGE: iio-sim --fixture NAME|PATH [OPTIONS] -- COMMAND [ARGS...]
           iio-sim --list-fixtures
           iio-sim record [DEVICE_FOLDER...] > board.json   (a real board as a fixture; see record --help)

    Runs COMMAND in private user, mount and network namespaces in which /sys/bus/iio/devices holds the
    fixture's devices and /dev/iio:deviceN exists for each device with a buffer. The host is never
    touched; no root needed. Exits with COMMAND's status.

    Files are laid out as the kernel and a stock udev leave them: owned by root, writable attributes
    0644, read-only ones 0444, the device node 0600 (really root-owned when iio-sim runs as root; owned
    by the namespace's root, i.e. you, otherwise). So a COMMAND run with --user as a normal user can
    poll the raw files but not start a buffer, unless --apply-permissions grants it, as udev would.

    OPTIONS:
      --fixture NAME|PATH     a built-in fixture (see --list-fixtures) or a JSON file; repeatable
      --list-fixtures         list the fixtures found and what they model
      --motion SPEC           still[:up=+z|-z|+y|-y|+x|-x]        lying still (default: face up)
                              rotate[:axis=z,dps=90,up=+z]        constant rotation about a device axis
                              shake[:axis=x,g=0.5,hz=3,up=+z]     linear shaking
                              tilt[:deg=30,move=1,hold=1,up=+z]   tilt about x, back, about y, back
                              faces[:order=+z/+y/-z/-y/+x/-x,hold=5,move=1.5,bump=N]
                                                     laid on each face in turn (a calibration);
                                                     bump=N knocks it during face N's hold
                              hand-held|shaking|vibration|walking[:seed=N,steel=T,steel-ut=A]
                                                     motions like a user's, drawn from seed N; steel=T:
                                                     a steel object passes, closest at T s (A µT)
                              replay:FILE                         a motion-monitor --csv log (raw
                                                     samples, or truth rows to render)
      --accel-noise SIGMA     white noise on the accelerometer, m/s² (default 0)
      --gyro-noise SIGMA      white noise on the gyroscope, rad/s (default 0)
      --gyro-bias X,Y,Z       constant gyroscope bias, rad/s
      --accel-offset X,Y,Z    the accelerometer's offset, mg, chip axes
      --accel-scale X,Y,Z     each accelerometer axis's gain, e.g. 1.01,0.995,1
      --accel-misalignment M  the accelerometer's cross-axis matrix, "a,b,c;d,e,f;g,h,i": it reads
                              diag(scale)·M·a + offset
      --accel-noise-density UG  accelerometer noise density from a datasheet, µg/√Hz (BMI160: 180);
                              the noise per sample follows the sampling frequency in force
      --gyro-noise-density DPS  gyroscope noise density, °/s/√Hz (BMI160: 0.007)
      --magn-noise UT         white noise on the magnetometer, µT
      --magn-hard-iron X,Y,Z  the magnetometer's hard-iron offset, µT (device frame)
      --magn-soft-iron M      its soft-iron matrix, "a,b,c;d,e,f;g,h,i": it reads M·field + offset
      --seed N                seed for the noise (default 1)
      --fast                  stream as fast as the reader drains (virtual time) instead of at the
                              sampling frequency
      --fifo-nodes            make /dev/iio:deviceN FIFOs instead of FUSE files (FUSE gives the
                              kernel's semantics: one reader, a kfifo emptied on enable, EBUSY)
      --raw-refresh-max HZ    rewrite raw files at most this often (default 200)
      --unplug DEV@SECONDS    remove the device's sysfs directory and node SECONDS after start
      --plug DEV@SECONDS      the device is absent at start and appears SECONDS after it (with
                              --unplug of a twin: a sensor unplugged and plugged in again, under a
                              new index as the kernel gives it)
      --no-irq DEV            the device's buffer enables but never delivers data
      --stall DEV@SECONDS[+DURATION]
                              SECONDS after its buffer is enabled the device stops delivering data,
                              for DURATION seconds (default: for good), as a sensor hub that stalls
      --unreadable DEV/FILE   make one attribute file unreadable (mode 0000)
      --read-only DEV/FILE    make one attribute file read-only (mode 0444): writes to it fail
      --set DEV/FILE=VALUE    give an attribute file other contents (e.g. garbage)
      --iiod                  also run the real iiod, so COMMAND can use ip:127.0.0.1
      --iiod-port N           iiod's port (default 30431)
      --stream-log DIR        save every stream session's bytes and a JSON summary in DIR
      --user NAME|UID         run COMMAND as this user, with its groups (when iio-sim runs as root)
      --apply-permissions SCRIPT
                              before COMMAND starts, run SCRIPT as root once per device folder
                              (/sys/bus/iio/devices/iio:deviceN) and once per node (/dev/iio:deviceN),
                              as udev runs it: e.g. udev/iio-motion-permissions (when iio-sim runs
                              as root)
      --keep-caps             let a uid-0 COMMAND bypass file modes (by default it cannot, as on sysfs)
      -v, --verbose           say what the simulator does, on stderr
      -h, --help              show this help
      --version               show the version

    DEV is a device id (iio:device0), name (bmi160) or label.
    """

    /// Parses `arguments` (without the program name).
    /// - Throws: ``UsageError`` for anything malformed.
    public init(arguments: [String]) throws {
        var args = arguments[...]
        func value(_ flag: String) throws -> String {
            guard let v = args.popFirst() else { throw UsageError(description: "\(flag) needs a value") }
            return v
        }
        func number(_ flag: String) throws -> Double {
            let v = try value(flag)
            guard let d = Double(v), d.isFinite else { throw UsageError(description: "\(flag): \"\(v)\" is not a number") }
            return d
        }
        func deviceFile(_ flag: String, _ text: String) throws -> (String, String) {
            guard let slash = text.firstIndex(of: "/"), slash != text.startIndex, text.index(after: slash) != text.endIndex else {
                throw UsageError(description: "\(flag) expects DEV/FILE, e.g. iio:device0/in_accel_x_raw")
            }
            return (String(text[..<slash]), String(text[text.index(after: slash)...]))
        }
        while let a = args.popFirst() {
            switch a {
            case "--":
                command = Array(args)
                args = []
            case "-h", "--help": action = .help
            case "--version": action = .version
            case "--list-fixtures": action = .listFixtures
            case "--fixture": fixtures.append(try value(a))
            case "--motion":
                let spec = try value(a)
                do { options.motion = try MotionScript(parsing: spec) } catch {
                    throw UsageError(description: "\(error)")
                }
            case "--accel-noise": options.imperfections.accelNoise = try number(a)
            case "--gyro-noise": options.imperfections.gyroNoise = try number(a)
            case "--gyro-bias":
                let v = try value(a)
                let parts = v.split(separator: ",").compactMap { Double($0) }
                guard parts.count == 3 else { throw UsageError(description: "--gyro-bias expects X,Y,Z in rad/s") }
                options.imperfections.gyroBias = Vec3(parts[0], parts[1], parts[2])
            case "--accel-offset", "--accel-scale":
                let v = try value(a)
                let parts = v.split(separator: ",").compactMap { Double($0) }
                guard parts.count == 3, parts.allSatisfy(\.isFinite) else { throw UsageError(description: "\(a) expects X,Y,Z") }
                if a == "--accel-offset" {
                    options.imperfections.accelOffset = Vec3(parts[0], parts[1], parts[2]) * (MotionScript.g / 1000)
                } else {
                    options.imperfections.accelScale = Vec3(parts[0], parts[1], parts[2])
                }
            case "--accel-misalignment":
                let v = try value(a)
                guard let m = Mat3(mountMatrix: v) else { throw UsageError(description: "--accel-misalignment expects a,b,c;d,e,f;g,h,i") }
                options.imperfections.accelMisalignment = m
            case "--accel-noise-density":
                options.imperfections.accelNoiseDensity = try number(a) * 1e-6 * MotionScript.g
            case "--gyro-noise-density":
                options.imperfections.gyroNoiseDensity = try number(a) * Double.pi / 180
            case "--magn-noise":
                options.imperfections.magnNoise = try number(a) / 100
            case "--magn-hard-iron":
                let v = try value(a)
                let parts = v.split(separator: ",").compactMap { Double($0) }
                guard parts.count == 3 else { throw UsageError(description: "--magn-hard-iron expects X,Y,Z in µT") }
                options.imperfections.magnHardIron = Vec3(parts[0], parts[1], parts[2]) / 100
            case "--magn-soft-iron":
                let v = try value(a)
                guard let m = Mat3(mountMatrix: v) else { throw UsageError(description: "--magn-soft-iron expects a,b,c;d,e,f;g,h,i") }
                options.imperfections.magnSoftIron = m
            case "--seed":
                let v = try value(a)
                guard let s = UInt64(v) else { throw UsageError(description: "--seed: \"\(v)\" is not a non-negative integer") }
                options.seed = s
            case "--fast": options.fast = true
            case "--fifo-nodes": options.fifoNodes = true
            case "--raw-refresh-max":
                options.rawRefreshMax = try number(a)
                guard options.rawRefreshMax > 0 else { throw UsageError(description: "--raw-refresh-max must be > 0") }
            case "--unplug":
                let v = try value(a)
                guard let at = v.lastIndex(of: "@"), let t = Double(v[v.index(after: at)...]), t >= 0 else {
                    throw UsageError(description: "--unplug expects DEV@SECONDS, e.g. iio:device0@2.5")
                }
                options.unplug.append((String(v[..<at]), t))
            case "--plug":
                let v = try value(a)
                guard let at = v.lastIndex(of: "@"), let t = Double(v[v.index(after: at)...]), t >= 0 else {
                    throw UsageError(description: "--plug expects DEV@SECONDS, e.g. iio:device1@3")
                }
                options.plug.append((String(v[..<at]), t))
            case "--no-irq": options.noIRQ.append(try value(a))
            case "--stall":
                // DEV@SECONDS or DEV@SECONDS+DURATION
                let v = try value(a)
                let usage = UsageError(description: "--stall expects DEV@SECONDS[+DURATION], e.g. iio:device0@0.5+1.5")
                guard let at = v.lastIndex(of: "@") else { throw usage }
                let times = v[v.index(after: at)...].split(separator: "+", omittingEmptySubsequences: false)
                guard (1...2).contains(times.count), let after = Double(times[0]), after >= 0 else { throw usage }
                var duration: Double?
                if times.count == 2 {
                    guard let d = Double(times[1]), d > 0 else { throw usage }
                    duration = d
                }
                options.stall.append((String(v[..<at]), after, duration))
            case "--read-only":
                let (d, f) = try deviceFile(a, try value(a))
                options.readOnly.append((d, f))
            case "--unreadable":
                let (d, f) = try deviceFile(a, try value(a))
                options.unreadable.append((d, f))
            case "--set":
                let v = try value(a)
                guard let eq = v.firstIndex(of: "=") else { throw UsageError(description: "--set expects DEV/FILE=VALUE") }
                let (d, f) = try deviceFile(a, String(v[..<eq]))
                options.overrides.append((d, f, String(v[v.index(after: eq)...])))
            case "--iiod": iiod = true
            case "--iiod-port":
                let v = try value(a)
                guard let p = Int(v), (1...65535).contains(p) else { throw UsageError(description: "--iiod-port: \"\(v)\" is not a port") }
                iiodPort = p
            case "--stream-log": options.streamLog = try value(a)
            case "--user": user = try value(a)
            case "--apply-permissions": permissionScript = try value(a)
            case "--keep-caps": keepCaps = true
            case "-v", "--verbose": options.verbose = true
            default:
                throw UsageError(description: "unknown option \(a)")
            }
        }
        if action == .run {
            if fixtures.isEmpty { throw UsageError(description: "--fixture NAME|PATH is required (see --list-fixtures)") }
            if command.isEmpty { throw UsageError(description: "no COMMAND: put it after --, e.g. iio-sim --fixture bmi160 -- iio_info") }
        }
    }

    /// The fixtures named on the command line, merged in order into one context.
    /// - Throws: ``Fixture/LoadError`` when one cannot be found or read.
    public func loadFixture() throws -> Fixture {
        var merged = Fixture(description: "", devices: [], triggers: [])
        var descriptions: [String] = []
        for name in fixtures {
            let f = try Fixture.resolve(name)
            merged.devices += f.devices
            merged.triggers += f.triggers
            descriptions.append(f.description)
        }
        merged.description = descriptions.joined(separator: " + ")
        try merged.validate()
        return merged
    }
}
