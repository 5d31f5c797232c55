// motion-truth: device motion against iio-sim's ground truth, run inside iio-sim (which exports
// the scripted motion and its time zero as IIO_SIM_MOTION and IIO_SIM_MOTION_START_NS).
//
//   motion-truth SECONDS [arbitrary|corrected|north] [RATE] [--record FILE] [--calibration-folder DIR]
//
// Prints one JSON object: estimates, rate, convergence time, roll/pitch/tilt RMS error (degrees,
// after the first 2 s), yaw drift per minute (least-squares slope from 10 s on), heading RMS and
// worst error (north frame).
// `--record FILE` also writes every sample the manager delivered (accelerometer, gyroscope,
// magnetometer: the samples device motion fused, in Core Motion's units), the true attitude at each
// gyroscope sample (`attitude,truth`) and each estimate (`attitude,IIOMotion`), as rotation vectors
// (device to east-north-up for the truth, device to the reference frame for the estimates), in the
// rows of `motion-monitor --csv`: what `scripts/fusion-accuracy --peers` runs the other filters on,
// and what `iio-sim --motion replay:FILE` streams again.
// Separate from motion-scenarios so that the benchmarks' scenarios do not load the simulator's
// engine (and Foundation) at start-up.
import Dispatch
import Foundation
@preconcurrency import Glibc
import IIOMotion
import IIOSimKit
import SystemSupport

func emit(_ fields: [(String, String)]) {
    print("{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    fflush(nil)
}

/// One row of a record, in `motion-monitor --csv`'s columns.
func recordRow(_ t: Double, _ sensor: String, _ device: String, _ v: Vec3) -> String {
    String(format: "%.9f,%@,%@,", t, sensor, device) + "\(v.x),\(v.y),\(v.z)\n"
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(1)
}

let commandLine = Array(CommandLine.arguments)

// `motion-truth --render MOTION SEED OUT [SECONDS] [bmi160|sense-hat]`: iio-sim's MOTION
// (`hand-held`, `shaking`, …) drawn from SEED, rendered in process as an IMU reads it, with no
// simulator or clock: a BMI160 at 200 Hz (6-axis), or a Sense HAT (LSM9DS1: accelerometer and
// gyroscope at 238 Hz, the gyroscope at ±2000 °/s, magnetometer at 80 Hz with 0.4 µT of noise).
// Both with a BMI160's datasheet noise densities (accelerometer 180 µg/√Hz, gyroscope
// 0.007 °/s/√Hz, drawn from a generator seeded by SEED), a gyroscope bias of (0.30, −0.20, 0.25)
// °/s and the sensors' LSBs. OUT is a record as `--record` writes one, without estimates
// (`--offline` adds them): the samples and the true attitude at each gyroscope sample. Many seeds'
// records take seconds, where recording takes real time.
if commandLine.count >= 5, commandLine[1] == "--render" {
    guard let seed = UInt64(commandLine[3]), let script = try? MotionScript(parsing: "\(commandLine[2]):seed=\(seed)") else {
        fail("motion-truth --render MOTION SEED OUT [SECONDS] [bmi160|sense-hat]: not a motion and seed: \(commandLine[2]) \(commandLine[3])")
    }
    let seconds = commandLine.count > 5 ? Double(commandLine[5]) ?? 60 : 60
    let imu = commandLine.count > 6 ? commandLine[6] : "bmi160"
    guard imu == "bmi160" || imu == "sense-hat" else { fail("motion-truth --render: no such IMU: \(imu) (bmi160 or sense-hat)") }
    let nine = imu == "sense-hat"
    // Rates (Hz) and LSBs (m/s², rad/s, gauss); the magnetometer's rate 0 for none.
    let rate = nine ? 238.0 : 200.0, magnetometerRate = nine ? 80.0 : 0
    let accelLSB = 0.000598, gyroLSB = nine ? 0.001222 : 0.001065, magnetometerLSB = 0.00014
    let imperfections = Imperfections(gyroBias: Vec3(0.0052, -0.0035, 0.0044), accelNoiseDensity: 180 * 9.80665e-6,
                                      gyroNoiseDensity: 0.007 * .pi / 180, magnNoise: nine ? 0.004 : 0)
    var noise = NoiseSource(seed: seed)
    func read(_ v: Vec3, sigma: Double, lsb: Double) -> Vec3 {
        let n = Vec3(v.x + sigma * noise.gaussian(), v.y + sigma * noise.gaussian(), v.z + sigma * noise.gaussian())
        return Vec3((n.x / lsb).rounded(), (n.y / lsb).rounded(), (n.z / lsb).rounded()) * lsb
    }
    var out = "timestamp,sensor,device,x,y,z\n", truth = ""
    var nextField = 0
    for k in 0..<Int(seconds * rate) {
        let t = Double(k) / rate
        while magnetometerRate > 0, Double(nextField) / magnetometerRate <= t {
            let tm = Double(nextField) / magnetometerRate
            let field = read(imperfections.distortedField(script.state(at: tm).magneticField), sigma: imperfections.magnNoise, lsb: magnetometerLSB)
            out += recordRow(tm, "magnetometer", "render", field * 100)
            nextField += 1
        }
        let state = script.state(at: t)
        // Core Motion's sign: the kernel's proper acceleration, face up +z, is Core Motion's −g.
        out += recordRow(t, "accelerometer", "render", read(state.acceleration, sigma: imperfections.accelSigma(rate: rate), lsb: accelLSB) * (-1 / 9.80665))
        out += recordRow(t, "gyroscope", "render", read(state.angularVelocity + imperfections.gyroBias, sigma: imperfections.gyroSigma(rate: rate), lsb: gyroLSB))
        truth += recordRow(t, "attitude", "truth", Recording.rotationVector(state.attitude))
    }
    guard FileManager.default.createFile(atPath: commandLine[4], contents: Data((out + truth).utf8)) else { fail("cannot write \(commandLine[4])") }
    exit(0)
}

// `motion-truth --offline RECORD OUT [arbitrary|corrected|north]`: the filter re-run on a record's
// samples (no simulator); OUT is RECORD with this build's estimates. `motion-truth --cost RECORD
// [REPEATS] [fusion9]`: nanoseconds per filter update on the record's samples, 6-axis and (when
// the record has a magnetometer) 9-axis (the filter learning its own calibration in place, and the
// filter applying a fixed one as device motion's does), per magnetometer sample for the
// calibrator's learning alone, and per gyroscope sample for the whole of device motion (wall time,
// and in the sample thread's CPU time, 9-axis also in the process's), as JSON; with `fusion9`,
// the whole 9-axis path alone (for a profiler); with `cpu`, every figure timed in the calling
// thread's CPU time (less disturbed by other processes; the refits' thread not counted).
if commandLine.count >= 3, commandLine[1] == "--offline" || commandLine[1] == "--cost" {
    guard let data = FileManager.default.contents(atPath: commandLine[2]) else { fail("cannot read \(commandLine[2])") }
    var samples: [FusionEntryPoints.Sample] = []
    var kept: [String] = []
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
        let f = line.split(separator: ",", omittingEmptySubsequences: false)
        guard f.count == 6, let t = Double(f[0]), let x = Double(f[3]), let y = Double(f[4]), let z = Double(f[5]) else {
            kept.append(String(line)); continue
        }
        if f[2] == "IIOMotion" { continue }
        kept.append(String(line))
        if let k = ["accelerometer", "gyroscope", "magnetometer"].firstIndex(of: String(f[1])), f[2] != "truth" {
            samples.append(.init(timestamp: t, sensor: k, x: x, y: y, z: z))
        }
    }
    samples.sort { ($0.timestamp, $0.sensor) < ($1.timestamp, $1.sensor) }
    if commandLine[1] == "--cost" {
        // Pairs as the aligner makes them on a one-device IMU: the same timestamps.
        // The field at the update after each magnetometer sample (nil at the others).
        var times: [Double] = [], gyro: [SIMD3<Double>] = [], accel: [SIMD3<Double>] = [], field: [SIMD3<Double>?] = []
        var lastAccel = SIMD3<Double>(0, 0, -1), newField: SIMD3<Double>?
        for s in samples {
            switch s.sensor {
            case 0: lastAccel = SIMD3(s.x, s.y, s.z)
            case 2: newField = SIMD3(s.x, s.y, s.z)
            default:
                times.append(s.timestamp); gyro.append(SIMD3(s.x, s.y, s.z)); accel.append(lastAccel)
                field.append(newField)
                newField = nil
            }
        }
        let repeats = commandLine.count > 3 ? Int(commandLine[3]) ?? 20 : 20
        func cpu(_ id: clockid_t) -> Double { var ts = timespec(); clock_gettime(id, &ts); return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9 }
        let threadClock: () -> Double = { cpu(CLOCK_THREAD_CPUTIME_ID) }
        let wallClock: () -> Double = { monotonicSeconds() }
        let timer = commandLine.count > 4 && commandLine[4] == "cpu" ? threadClock : wallClock
        if commandLine.count > 4, commandLine[4] == "fusion9" {
            let whole9 = FusionEntryPoints.fusionCost(samples, frame: .xMagneticNorthZVertical, repeats: repeats, clock: timer, callClock: wallClock)
            emit([("fusionNs9", "\(whole9.nanoseconds)"), ("checksum", "\(whole9.checksum)")])
            exit(0)
        }
        let six = FusionEntryPoints.cost(times: times, gyro: gyro, accel: accel, field: nil, repeats: repeats, clock: timer)
        let hasField = samples.contains { $0.sensor == 2 }
        let nine = hasField ? FusionEntryPoints.cost(times: times, gyro: gyro, accel: accel, field: field, repeats: repeats, clock: timer) : nil
        // The 9-axis path's parts alone: the filter applying a fixed calibration (as in device
        // motion), and the calibrator learning one (per magnetometer sample).
        let applied9 = hasField ? FusionEntryPoints.appliedFilterCost(samples, times: times, gyro: gyro, accel: accel, field: field,
                                                                      repeats: repeats, clock: timer) : nil
        let calibrator = hasField ? FusionEntryPoints.calibratorCost(samples, repeats: repeats, clock: timer) : nil
        // The whole of device motion (aligner, merge, calibration feed, filter): per gyroscope
        // sample, and the longest single call (a calibration refit runs inside one).
        let whole6 = FusionEntryPoints.fusionCost(samples, frame: .xArbitraryZVertical, repeats: max(1, repeats / 4), clock: timer, callClock: wallClock)
        let whole9 = hasField ? FusionEntryPoints.fusionCost(samples, frame: .xMagneticNorthZVertical, repeats: max(1, repeats / 4), clock: timer, callClock: wallClock) : nil
        // Again, timed in CPU time: the sample path's thread alone (the calibration's
        // refits run on a thread of their own; waiting for one costs the sample path no CPU), and
        // the whole process (refits included).
        let thread6 = FusionEntryPoints.fusionCost(samples, frame: .xArbitraryZVertical, repeats: max(1, repeats / 4),
                                                   clock: { cpu(CLOCK_THREAD_CPUTIME_ID) }, callClock: wallClock)
        let thread9 = hasField ? FusionEntryPoints.fusionCost(samples, frame: .xMagneticNorthZVertical, repeats: max(1, repeats / 4),
                                                              clock: { cpu(CLOCK_THREAD_CPUTIME_ID) }, callClock: wallClock) : nil
        let process9 = hasField ? FusionEntryPoints.fusionCost(samples, frame: .xMagneticNorthZVertical, repeats: max(1, repeats / 4),
                                                               clock: { cpu(CLOCK_PROCESS_CPUTIME_ID) }, callClock: wallClock) : nil
        // Summed one term at a time (one long expression of optionals is slow to type-check).
        var checksum = six.checksum + whole6.checksum
        checksum += nine?.checksum ?? 0
        checksum += whole9?.checksum ?? 0
        checksum += applied9?.checksum ?? 0
        checksum += calibrator?.checksum ?? 0
        emit([("updates", "\(times.count)"), ("ns6", "\(six.nanoseconds)"), ("ns9", "\(nine?.nanoseconds ?? -1)"),
              ("filterNs9", "\(applied9?.nanoseconds ?? -1)"), ("calibratorAddNs", "\(calibrator?.nanoseconds ?? -1)"),
              ("calibratorRefits", "\(calibrator?.refits ?? -1)"),
              ("fusionNs6", "\(whole6.nanoseconds)"), ("fusionNs9", "\(whole9?.nanoseconds ?? -1)"),
              ("longestCallNs6", "\(whole6.longestCall)"), ("longestCallNs9", "\(whole9?.longestCall ?? -1)"),
              ("fusionThreadCpuNs6", "\(thread6.nanoseconds)"), ("fusionThreadCpuNs9", "\(thread9?.nanoseconds ?? -1)"),
              ("fusionProcessCpuNs9", "\(process9?.nanoseconds ?? -1)"),
              ("checksum", "\(checksum)")])
        exit(0)
    }
    guard commandLine.count >= 4 else { fail("motion-truth --offline RECORD OUT [frame]") }
    let frame: AttitudeReferenceFrame = switch commandLine.count > 4 ? commandLine[4] : "arbitrary" {
    case "north": .xMagneticNorthZVertical
    case "corrected": .xArbitraryCorrectedZVertical
    default: .xArbitraryZVertical
    }
    var out = kept.joined(separator: "\n") + "\n"
    // FUSION_PARAMS="name=value,…": the filter's parameters by name, in the units of their
    // documentation (seconds, degrees, degrees per second, g), for studying them; "refill" and
    // "phase0"…"phase2" replay the samples in refills (FusionEntryPoints.run). An unknown name or
    // a value that is not a number is an error.
    var configuration = AttitudeFilter.Configuration()
    var refill = 0.0
    var phases: [Double] = [0, 1.0 / 3, 2.0 / 3]
    let deg = Double.pi / 180
    let parameters: [String: (WritableKeyPath<AttitudeFilter.Configuration, Double>, Double)] = [
        "tauAcc": (\.accelerometerTimeConstant, 1), "tauAccFast": (\.fastAccelerometerTimeConstant, 1),
        "fastBelow": (\.fastGravityBelow, 1), "slowAbove": (\.slowGravityAbove, 1), "tauMag": (\.magnetometerTimeConstant, 1),
        "biasInit": (\.initialBiasDeviation, deg), "biasForget": (\.biasForgettingTime, 1),
        "biasMotion": (\.biasMotionNoise, deg), "biasVertical": (\.verticalBiasForgettingFactor, 1),
        "biasHeading": (\.biasHeadingNoise, deg), "biasRest": (\.biasRestNoise, deg), "biasLimit": (\.biasLimit, deg),
        "restTime": (\.restMinimumDuration, 1), "restTau": (\.restFilterTimeConstant, 1),
        "restGyro": (\.restGyroThreshold, deg), "restAcc": (\.restAccelerationThreshold, 1),
        "magStrength": (\.magneticStrengthTolerance, 1), "magDip": (\.magneticDipTolerance, deg),
        "magNew": (\.newFieldTime, 1), "magFirst": (\.firstFieldTime, 1), "magReject": (\.maximumRejectionTime, 1),
        "recoveryAngle": (\.recoveryAngle, deg), "recoveryMagnitude": (\.recoveryMagnitudeTolerance, 1),
    ]
    for kv in (ProcessInfo.processInfo.environment["FUSION_PARAMS"] ?? "").split(separator: ",") {
        let p = kv.split(separator: "=", omittingEmptySubsequences: false)
        guard p.count == 2, let v = Double(p[1]) else { fail("FUSION_PARAMS: \"\(kv)\" is not name=number") }
        let name = String(p[0])
        if let (path, unit) = parameters[name] {
            configuration[keyPath: path] = v * unit
        } else if name == "magcal" {
            configuration.calibratesMagnetometer = v != 0
        } else if name == "refill" {
            refill = v
        } else if name.hasPrefix("phase"), let k = Int(name.dropFirst(5)), phases.indices.contains(k) {
            phases[k] = v
        } else {
            fail("FUSION_PARAMS: unknown parameter \"\(name)\" (known: \((parameters.keys.sorted() + ["magcal", "refill", "phase0", "phase1", "phase2"]).joined(separator: ", ")))")
        }
    }
    // FUSION_TRACE=PATH: each estimate's bias-corrected rate (t, x, y, z), calibrated field (x, y, z) and its
    // accuracy, for the study of the bias and the calibration.
    var trace = ""
    let tracePath = ProcessInfo.processInfo.environment["FUSION_TRACE"]
    // FUSION_MAGNETOMETER_DELAY=SECONDS: each field sample handed over that much after its time.
    let delay = ProcessInfo.processInfo.environment["FUSION_MAGNETOMETER_DELAY"].flatMap(Double.init) ?? 0
    FusionEntryPoints.run(samples, frame: frame, configuration: configuration, refill: refill, phases: phases,
                          magnetometerDelay: delay) { m in
        if tracePath != nil { trace += String(format: "%.9f,", m.timestamp) + "\(m.rotationRate.x),\(m.rotationRate.y),\(m.rotationRate.z),\(m.magneticField.field.x),\(m.magneticField.field.y),\(m.magneticField.field.z),\(m.magneticField.accuracy.rawValue)\n" }
        let r = RotationMatrix(m.attitude.quaternion)
        let v = Recording.rotationVector(Mat3(Vec3(r.m11, r.m12, r.m13), Vec3(r.m21, r.m22, r.m23), Vec3(r.m31, r.m32, r.m33)))
        out += String(format: "%.9f,attitude,IIOMotion,", m.timestamp) + "\(v.x),\(v.y),\(v.z)\n"
    }
    guard FileManager.default.createFile(atPath: commandLine[3], contents: Data(out.utf8)) else { fail("cannot write \(commandLine[3])") }
    if let tracePath, !FileManager.default.createFile(atPath: tracePath, contents: Data(trace.utf8)) { fail("cannot write \(tracePath)") }
    exit(0)
}
let recordAt = commandLine.firstIndex(of: "--record").flatMap { $0 + 1 < commandLine.count ? $0 : nil }
let recordPath = recordAt.map { commandLine[$0 + 1] }
let (args, calibrationFolder): ([String], String?) = {
    var a = recordAt.map { Array(commandLine[..<$0] + commandLine[($0 + 2)...]) } ?? commandLine
    guard let i = a.firstIndex(of: "--calibration-folder"), i + 1 < a.count else { return (a, nil) }
    let folder = a[i + 1]
    a.removeSubrange(i...(i + 1))
    return (a, folder)
}()
func number(_ i: Int, _ def: Double) -> Double { args.count > i ? Double(args[i]) ?? def : def }
let environment = ProcessInfo.processInfo.environment
let manager = MotionManager(uri: environment["MOTION_URI"] ?? "local:")
manager.magnetometerCalibrationFolder = calibrationFolder

// Every device motion estimate for SECONDS, compared with the simulator's scripted motion at
// the estimate's timestamp (iio-sim exports the script and its time zero).
let seconds = number(1, 20)
let frameName = args.count > 2 ? args[2] : "arbitrary"
let frame: AttitudeReferenceFrame = switch frameName {
case "north": .xMagneticNorthZVertical
case "corrected": .xArbitraryCorrectedZVertical
default: .xArbitraryZVertical
}
if args.count > 3 {
    for kind in [SensorKind.accelerometer, .gyroscope] { manager.requestSamplingFrequency(number(3, 100), for: kind) }
}
guard let text = environment["IIO_SIM_MOTION"], let start = environment["IIO_SIM_MOTION_START_NS"].flatMap({ Int64($0) }),
      let script = try? MotionScript(parsing: text) else {
    fail("device-motion needs iio-sim's IIO_SIM_MOTION and IIO_SIM_MOTION_START_NS")
}
let collected = Locked<[DeviceMotion]>([])
let failure = Locked<String?>(nil)
struct Raw: Sendable { var t: Double; var sensor: Int; var x: Double; var y: Double; var z: Double }
let raws = Locked<[Raw]>([])
if recordPath != nil {
    // The same capture as device motion's: every sample the filter is fed.
    manager.accelerometerUpdateInterval = 0.05
    manager.gyroUpdateInterval = 0.05
    manager.startAccelerometerBatches(on: .captureThread) { b, _ in
        raws.withLock { r in for s in b ?? [] { r.append(Raw(t: s.timestamp, sensor: 0, x: s.acceleration.x, y: s.acceleration.y, z: s.acceleration.z)) } }
    }
    manager.startGyroBatches(on: .captureThread) { b, _ in
        raws.withLock { r in for s in b ?? [] { r.append(Raw(t: s.timestamp, sensor: 1, x: s.rotationRate.x, y: s.rotationRate.y, z: s.rotationRate.z)) } }
    }
    if frame != .xArbitraryZVertical {
        manager.magnetometerUpdateInterval = 0.05
        manager.startMagnetometerBatches(on: .captureThread) { b, _ in
            raws.withLock { r in for s in b ?? [] { r.append(Raw(t: s.timestamp, sensor: 2, x: s.magneticField.x, y: s.magneticField.y, z: s.magneticField.z)) } }
        }
    }
}
manager.deviceMotionUpdateInterval = 0
manager.startDeviceMotionUpdates(using: frame, to: DispatchQueue(label: "scenario")) { m, e in
    if let m { collected.withLock { $0.append(m) } }
    if let e { failure.withLock { $0 = "\(e)" } }
}
usleep(UInt32(seconds * 1e6))
let active = manager.isDeviceMotionActive
let pulled = manager.deviceMotion != nil
let rate = manager.samplingFrequency(of: .gyroscope) ?? 0
manager.stopDeviceMotionUpdates()
manager.stopAccelerometerUpdates()
manager.stopGyroUpdates()
manager.stopMagnetometerUpdates()
if let f = failure.withLock({ $0 }) { fail("device motion failed: \(f)") }
let motions = collected.withLock { $0 }
guard let first = motions.first, let last = motions.last else { fail("no device motion estimate") }
let degrees = 180 / Double.pi
func wrap(_ a: Double) -> Double { var x = a.truncatingRemainder(dividingBy: 360); if x > 180 { x -= 360 }; if x < -180 { x += 360 }; return x }
struct Row { var t: Double; var tilt: Double; var roll: Double; var pitch: Double; var yawChange: Double; var heading: Double
    var calibration: MagneticFieldCalibrationAccuracy }
var rows: [Row] = []
var firstYaw = 0.0, firstHeadingTrue = 0.0
for (i, m) in motions.enumerated() {
    let truth = script.state(at: m.timestamp - Double(start) / 1e9)
    let toDevice = truth.attitude.transposed
    let g = toDevice * Vec3(0, 0, -1)  // gravity in the device frame, g, Core Motion's sign
    let est = Vec3(m.gravity.x, m.gravity.y, m.gravity.z)
    let cosine = max(-1, min(1, (g * est).sum() / ((est * est).sum().squareRoot())))
    let top = truth.attitude * Vec3(0, 1, 0)  // the device's top edge in east-north-up
    let headingTrue = (atan2(top.x, top.y) * degrees + 360).truncatingRemainder(dividingBy: 360)
    if i == 0 { firstYaw = m.attitude.yaw * degrees; firstHeadingTrue = headingTrue }
    // Yaw grows counter-clockwise seen from above; a heading clockwise: Δyaw = −Δheading.
    let yawChange = wrap((m.attitude.yaw * degrees - firstYaw) + wrap(headingTrue - firstHeadingTrue))
    rows.append(Row(t: m.timestamp - first.timestamp, tilt: acos(cosine) * degrees,
                    roll: wrap(m.attitude.roll * degrees - atan2(g.x, -g.z) * degrees),
                    pitch: wrap(m.attitude.pitch * degrees - asin(max(-1, min(1, -g.y))) * degrees),
                    yawChange: yawChange, heading: wrap(m.heading - headingTrue), calibration: m.magneticField.accuracy))
}
if let recordPath {
    // Rotation vectors through IIOSimKit's Mat3 (device → frame).
    func vector(_ q: Quaternion) -> Vec3 {
        let m = RotationMatrix(q)
        return Recording.rotationVector(Mat3(Vec3(m.m11, m.m12, m.m13), Vec3(m.m21, m.m22, m.m23), Vec3(m.m31, m.m32, m.m33)))
    }
    let names = ["accelerometer", "gyroscope", "magnetometer"]
    var out = "timestamp,sensor,device,x,y,z\n"
    for r in raws.withLock({ $0 }).sorted(by: { ($0.t, $0.sensor) < ($1.t, $1.sensor) }) {
        out += recordRow(r.t, names[r.sensor], "sim", Vec3(r.x, r.y, r.z))
    }
    for m in motions {
        let truth = script.state(at: m.timestamp - Double(start) / 1e9)
        out += recordRow(m.timestamp, "attitude", "truth", Recording.rotationVector(truth.attitude))
        out += recordRow(m.timestamp, "attitude", "IIOMotion", vector(m.attitude.quaternion))
    }
    guard FileManager.default.createFile(atPath: recordPath, contents: Data(out.utf8)) else { fail("cannot write \(recordPath)") }
}
let converged = (rows.last(where: { $0.tilt >= 1 })?.t ?? 0)
let settled = rows.filter { $0.t >= 2 }
let calibratedAt = rows.first { $0.calibration.rawValue >= MagneticFieldCalibrationAccuracy.medium.rawValue }?.t
func rms(_ v: [Double]) -> Double { v.isEmpty ? -1 : (v.map { $0 * $0 }.reduce(0, +) / Double(v.count)).squareRoot() }
let span = last.timestamp - first.timestamp
let tail = rows.filter { $0.t >= min(10, span / 2) }
// The least-squares slope of the relative yaw error over the tail (unwrapped), per minute: the measure
// the peers' tables use, and one that a single noisy sample at either end does not move.
var unwrapped: [Double] = []
for r in tail { unwrapped.append(unwrapped.last.map { $0 + wrap(r.yawChange - $0) } ?? r.yawChange) }
let meanT = tail.map(\.t).reduce(0, +) / Double(max(tail.count, 1))
let meanYaw = unwrapped.reduce(0, +) / Double(max(unwrapped.count, 1))
let sxy = zip(tail, unwrapped).map { ($0.t - meanT) * ($1 - meanYaw) }.reduce(0, +)
let sxx = tail.map { ($0.t - meanT) * ($0.t - meanT) }.reduce(0, +)
let drift = tail.count > 10 && sxx > 0 ? sxy / sxx * 60 : 0
emit([("samples", "\(motions.count)"), ("seconds", "\(span)"), ("active", "\(active)"), ("pulled", "\(pulled)"),
      ("rate", "\(rate)"),
      ("convergence", "\(converged)"), ("tiltRMS", "\(rms(settled.map(\.tilt)))"),
      ("rollRMS", "\(rms(settled.map(\.roll)))"), ("pitchRMS", "\(rms(settled.map(\.pitch)))"),
      ("yawDriftPerMinute", "\(abs(drift))"),
      ("headingRMS", "\(frame == .xMagneticNorthZVertical ? rms(settled.map(\.heading)) : -1)"),
      ("headingMax", "\(frame == .xMagneticNorthZVertical ? settled.map { abs($0.heading) }.max() ?? -1 : -1)"),
      ("firstCalibration", "\(rows.first?.calibration.rawValue ?? -1)"),
      ("calibratedAt", "\(calibratedAt ?? -1)"),
      ("headingRMSCalibrated", "\(frame == .xMagneticNorthZVertical && calibratedAt != nil ? rms(rows.filter { $0.t >= calibratedAt! }.map(\.heading)) : -1)")])
