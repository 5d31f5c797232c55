#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import Testing
@testable import IIOSimKit

/// A simulator built into a temporary root (no namespaces, no threads: build() only).
private final class BuiltTree {
    let root: String
    let simulator: Simulator

    init(_ fixture: Fixture, options: SimulationOptions = SimulationOptions()) throws {
        root = try TestSupport.temporaryDirectory()
        do {
            simulator = try Simulator(fixture: fixture, root: root, options: options)
            try simulator.build()
        } catch {
            try? FileManager.default.removeItem(atPath: root)
            throw error
        }
    }

    convenience init(_ name: String, options: SimulationOptions = SimulationOptions()) throws {
        try self.init(Fixture.load(path: TestSupport.fixturePath(name)), options: options)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var devices: String { root + "/sys/bus/iio/devices" }
    func path(_ device: Int, _ file: String) -> String { devices + "/iio:device\(device)/" + file }
    func contents(_ device: Int, _ file: String) -> String? { TestSupport.contents(path(device, file)) }
    func permissions(_ device: Int, _ file: String) -> mode_t? { TestSupport.mode(path(device, file))?.permissions }
    func exists(_ device: Int, _ file: String) -> Bool { FileManager.default.fileExists(atPath: path(device, file)) }
}

private func options(_ edit: (inout SimulationOptions) throws -> Void) rethrows -> SimulationOptions {
    var o = SimulationOptions()
    try edit(&o)
    return o
}

@Suite("Simulator: the sysfs tree it writes", .timeLimit(.minutes(3)))
struct SimulatorTreeTests {
    @Test("bmi160: files, contents and modes")
    func bmi160Tree() throws {
        let t = try BuiltTree("bmi160")
        // (file, contents, mode)
        let expected: [(String, String, mode_t)] = [
            ("name", "bmi160\n", 0o444),
            ("in_accel_scale", "0.000598\n", 0o644),  // writable: in_accel_scale_available exists
            ("in_accel_scale_available", "0.000598 0.001197 0.002394 0.004788\n", 0o444),
            ("in_anglvel_scale", "0.001065\n", 0o644),
            ("in_accel_sampling_frequency", "100.000000\n", 0o644),
            ("in_accel_sampling_frequency_available", "0.78125 1.5625 3.125 6.25 12.5 25 50 100 200 400 800 1600\n", 0o444),
            ("in_anglvel_sampling_frequency", "100.000000\n", 0o644),
            ("in_mount_matrix", "0, 1, 0; -1, 0, 0; 0, 0, 1\n", 0o444),
            ("current_timestamp_clock", "realtime\n", 0o644),
            ("scan_elements/in_accel_x_en", "0\n", 0o644),
            ("scan_elements/in_accel_x_index", "7\n", 0o444),
            ("scan_elements/in_accel_x_type", "le:s16/16>>0\n", 0o444),
            ("scan_elements/in_anglvel_x_index", "4\n", 0o444),
            ("scan_elements/in_anglvel_z_type", "le:s16/16>>0\n", 0o444),
            ("scan_elements/in_timestamp_en", "0\n", 0o644),
            ("scan_elements/in_timestamp_index", "10\n", 0o444),
            ("scan_elements/in_timestamp_type", "le:s64/64>>0\n", 0o444),
            ("buffer/enable", "0\n", 0o644),
            ("buffer/length", "1\n", 0o644),
            ("buffer/watermark", "1\n", 0o644),
            ("buffer/data_available", "0\n", 0o444),
            ("trigger/current_trigger", "bmi160-dev0\n", 0o644),
            ("dev", "239:0\n", 0o444),
            ("uevent", "MAJOR=239\nMINOR=0\nDEVNAME=iio:device0\nDEVTYPE=iio_device\nOF_NAME=bmi160\n", 0o444),
            // Lying face up: 9.80665 / 0.000598 = 16399.08 → 16399 on z; the mount matrix keeps z on z.
            ("in_accel_x_raw", "0\n", 0o444),
            ("in_accel_y_raw", "0\n", 0o444),
            ("in_accel_z_raw", "16399\n", 0o444),
            ("in_anglvel_x_raw", "0\n", 0o444),
            ("in_anglvel_y_raw", "0\n", 0o444),
            ("in_anglvel_z_raw", "0\n", 0o444),
        ]
        for (file, text, mode) in expected {
            #expect(t.contents(0, file) == text, "\(file)")
            #expect(t.permissions(0, file) == mode, "\(file): mode \(String(t.permissions(0, file) ?? 0, radix: 8))")
            #expect(TestSupport.mode(t.path(0, file))?.isRegular == true, "\(file)")
        }
        #expect(!t.exists(0, "in_timestamp_raw"))
        #expect(!t.exists(0, "label"))
        // Each scan channel has exactly en, index and type.
        let scan = try FileManager.default.contentsOfDirectory(atPath: t.path(0, "scan_elements")).sorted()
        #expect(scan.count == 7 * 3)
        #expect(scan.filter { $0.hasPrefix("in_accel_z_") } == ["in_accel_z_en", "in_accel_z_index", "in_accel_z_type"])

        // The trigger and the device node.
        #expect(TestSupport.contents(t.devices + "/trigger0/name") == "bmi160-dev0\n")
        #expect(TestSupport.mode(t.devices + "/trigger0/name")?.permissions == 0o444)
        let node = try #require(TestSupport.mode(t.root + "/dev/iio:device0"))
        #expect(node.isFIFO)
        #expect(node.permissions == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.devices).sorted() == ["iio:device0", "trigger0"])

        #expect(t.simulator.devicesDirectory == t.root + "/sys/bus/iio/devices")
        #expect(t.simulator.devDirectory == t.root + "/dev")
        #expect(t.simulator.layout.map(\.id) == ["iio:device0", "trigger0"])
        #expect(t.simulator.layout.map(\.name) == ["bmi160", "bmi160-dev0"])
    }

    @Test("Never started: stop() returns zero counters per device")
    func stopWithoutStart() throws {
        let t = try BuiltTree("bmi160")
        #expect(t.simulator.stop() == ["iio:device0": StreamStats()])
    }

    @Test("Building twice over the same root succeeds (the FIFO already exists)")
    func rebuild() throws {
        let t = try BuiltTree("bmi160")
        try t.simulator.build()
        #expect(TestSupport.mode(t.root + "/dev/iio:device0")?.isFIFO == true)
        #expect(t.contents(0, "in_accel_z_raw") == "16399\n")
    }

    @Test("The chip sees the device's motion through the mount matrix (v_chip = Mᵀ·v_device)", arguments: [
        // bmi160 M = [0 1 0; -1 0 0; 0 0 1], Mᵀ = [0 -1 0; 1 0 0; 0 0 1].
        // up=+x: device (g, 0, 0) → chip (0, g, 0).  up=+y: device (0, g, 0) → chip (-g, 0, 0).
        ("still:up=+x", ["0\n", "16399\n", "0\n"]),
        ("still:up=+y", ["-16399\n", "0\n", "0\n"]),
        ("still:up=-z", ["0\n", "0\n", "-16399\n"]),
        ("still:up=-x", ["0\n", "-16399\n", "0\n"]),
    ])
    func mountMatrix(motion: String, raw: [String]) throws {
        let t = try BuiltTree("bmi160", options: options { $0.motion = try MotionScript(parsing: motion) })
        #expect([t.contents(0, "in_accel_x_raw"), t.contents(0, "in_accel_y_raw"), t.contents(0, "in_accel_z_raw")] == raw)
    }

    @Test("Gyro raw values: rotation and bias, through the mount matrix")
    func gyro() throws {
        // rotate about z at 90 °/s: (π/2) / 0.001065 = 1474.93 → 1475 on z (Mᵀ keeps z).
        let r = try BuiltTree("bmi160", options: options { $0.motion = try MotionScript(parsing: "rotate:axis=z,dps=90") })
        #expect(r.contents(0, "in_anglvel_z_raw") == "1475\n")
        #expect(r.contents(0, "in_anglvel_x_raw") == "0\n")
        #expect(r.contents(0, "in_accel_z_raw") == "16399\n")
        // A bias of 0.1065 rad/s on device x is 100 LSB on chip y (Mᵀ·(b, 0, 0) = (0, b, 0)).
        let b = try BuiltTree("bmi160", options: options { $0.imperfections.gyroBias = Vec3(0.1065, 0, 0) })
        #expect(b.contents(0, "in_anglvel_x_raw") == "0\n")
        #expect(b.contents(0, "in_anglvel_y_raw") == "100\n")
        #expect(b.contents(0, "in_anglvel_z_raw") == "0\n")
    }

    @Test("Accelerometer noise is repeatable for a seed")
    func noise() throws {
        func raws(seed: UInt64) throws -> [String?] {
            let t = try BuiltTree("bmi160", options: options {
                $0.imperfections.accelNoise = 0.05  // ≈ 84 LSB
                $0.seed = seed
            })
            return ["x", "y", "z"].map { t.contents(0, "in_accel_\($0)_raw") }
        }
        let a = try raws(seed: 7), b = try raws(seed: 7), c = try raws(seed: 8)
        #expect(a == b)
        #expect(a != c)
        #expect(a != ["0\n", "0\n", "16399\n"])
    }

    @Test("mpu6050: big-endian types, a constant temperature, device-level sampling_frequency")
    func mpu6050() throws {
        let t = try BuiltTree("mpu6050")
        #expect(t.contents(0, "scan_elements/in_accel_x_type") == "be:s16/16>>0\n")
        #expect(t.contents(0, "scan_elements/in_timestamp_index") == "7\n")
        #expect(t.contents(0, "in_temp_raw") == "-2150\n")
        #expect(!t.exists(0, "scan_elements/in_temp_en"))
        #expect(t.contents(0, "in_accel_z_raw") == "16399\n")
        #expect(t.contents(0, "sampling_frequency") == "50\n")
        #expect(t.permissions(0, "sampling_frequency") == 0o644)
        #expect(t.permissions(0, "sampling_frequency_available") == 0o444)
        #expect(t.permissions(0, "in_temp_scale") == 0o444)  // no _available: read-only
        #expect(t.contents(0, "trigger/current_trigger") == "mpu6050-dev0\n")
    }

    @Test("hid-sensor-hub: s16 in 32 bits, scale 0.0980665 → 100 LSB for 1 g, fixture-listed writable files")
    func hid() throws {
        let t = try BuiltTree("hid-sensor-hub")
        #expect(t.contents(0, "name") == "accel_3d\n")
        #expect(t.contents(0, "scan_elements/in_accel_x_type") == "le:s16/32>>0\n")
        #expect(t.contents(0, "in_accel_z_raw") == "100\n")
        #expect(t.permissions(0, "in_accel_hysteresis") == 0o644)  // "writable" in the fixture
        #expect(t.permissions(0, "in_accel_offset") == 0o444)
        #expect(t.permissions(0, "in_accel_scale") == 0o444)       // no _available
        #expect(t.contents(1, "name") == "gyro_3d\n")
        #expect(t.contents(1, "trigger/current_trigger") == "gyro_3d-dev1\n")
        #expect(t.contents(1, "dev") == "239:1\n")
        #expect(TestSupport.contents(t.devices + "/trigger1/name") == "gyro_3d-dev1\n")
        #expect(TestSupport.mode(t.root + "/dev/iio:device1")?.isFIFO == true)
    }

    @Test("cros-ec: three devices, labels, device-level scale, no trigger directory")
    func crosEC() throws {
        let t = try BuiltTree("cros-ec")
        #expect(t.contents(0, "label") == "accel-base\n")
        #expect(t.contents(1, "label") == "accel-display\n")
        #expect(t.contents(2, "name") == "cros-ec-gyro\n")
        // 9.80665 / 0.000598550 = 16384.01 → 16384
        #expect(t.contents(0, "in_accel_z_raw") == "16384\n")
        #expect(t.contents(1, "in_accel_z_raw") == "16384\n")
        #expect(t.contents(2, "in_anglvel_z_raw") == "0\n")
        #expect(t.contents(0, "sampling_frequency") == "0.000000\n")
        #expect(t.permissions(0, "sampling_frequency") == 0o644)
        #expect(t.permissions(0, "scale") == 0o444)
        #expect(!t.exists(0, "trigger"))
        for n in 0..<3 { #expect(TestSupport.mode(t.root + "/dev/iio:device\(n)")?.isFIFO == true) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.devices).sorted() == ["iio:device0", "iio:device1", "iio:device2"])
    }

    @Test("lsm6dsx: its mount matrix, attributes in buffer/")
    func lsm6dsx() throws {
        // M = [-1 0 0; 0 -1 0; 0 0 1]: device +x up reads -g on the chip's x.
        let t = try BuiltTree("lsm6dsx", options: options { $0.motion = try MotionScript(parsing: "still:up=+x") })
        #expect(t.contents(0, "in_accel_x_raw") == "-16399\n")
        #expect(t.contents(0, "in_accel_z_raw") == "0\n")
        #expect(t.contents(0, "buffer/hwfifo_watermark_max") == "512\n")
        #expect(t.permissions(0, "buffer/hwfifo_watermark_max") == 0o444)
        #expect(t.contents(0, "sampling_frequency") == "12.500000\n")
        #expect(t.contents(1, "name") == "lsm6dso_gyro\n")
    }

    @Test("Raw values: (raw + offset) × scale = SI, saturated to the scan type, scale 1 when absent")
    func conversion() throws {
        let f = Fixture(description: "t", devices: [
            Fixture.Device(name: "offset", attributes: ["in_accel_scale": "0.01", "in_accel_offset": "100"],
                           channels: [Fixture.Channel(id: "accel_z")]),
            Fixture.Device(name: "narrow", attributes: ["in_accel_scale": "0.01"],
                           channels: [Fixture.Channel(id: "accel_z", index: 0, format: "le:s8/8>>0"),
                                      Fixture.Channel(id: "accel_y", index: 1, format: "le:u4/8>>0")],
                           buffer: Fixture.Buffer(triggered: false)),
            Fixture.Device(name: "unscaled", channels: [Fixture.Channel(id: "accel_z"), Fixture.Channel(id: "humidity")]),
        ])
        let t = try BuiltTree(f, options: options { $0.motion = try MotionScript(parsing: "still:up=-y") })
        // up=-y: device (0, -g, 0).
        // 0 / 0.01 - 100 = -100
        #expect(t.contents(0, "in_accel_z_raw") == "-100\n")
        // z: 0 → 0; y: -980.665 saturates to the u4 floor, 0.
        #expect(t.contents(1, "in_accel_z_raw") == "0\n")
        #expect(t.contents(1, "in_accel_y_raw") == "0\n")
        #expect(TestSupport.mode(t.root + "/dev/iio:device1")?.isFIFO == true)
        #expect(TestSupport.mode(t.root + "/dev/iio:device2") == nil)
        let up = try BuiltTree(f)
        // face up: 9.80665 / 0.01 - 100 = 880.665 → 881; s8 saturates at 127; scale 1 → round(9.80665) = 10.
        #expect(up.contents(0, "in_accel_z_raw") == "881\n")
        #expect(up.contents(1, "in_accel_z_raw") == "127\n")
        #expect(up.contents(2, "in_accel_z_raw") == "10\n")
        #expect(up.contents(2, "in_humidity_raw") == "0\n")  // no motion behind it
        // Devices without a buffer get neither scan_elements nor a node.
        #expect(!up.exists(0, "scan_elements"))
        #expect(!up.exists(0, "buffer"))
        #expect(!FileManager.default.fileExists(atPath: up.root + "/dev/iio:device0"))
    }

    @Test("--set gives files other contents (writable), creating them if needed")
    func overrides() throws {
        let t = try BuiltTree("bmi160", options: options {
            $0.overrides = [("bmi160", "in_accel_scale", "garbage"), ("iio:device0", "in_mount_matrix", "1, 0; 0, 1"),
                            ("bmi160", "in_extra_attribute", ""), ("iio:device0", "name", "impostor")]
        })
        #expect(t.contents(0, "in_accel_scale") == "garbage\n")
        #expect(t.permissions(0, "in_accel_scale") == 0o644)
        #expect(t.contents(0, "in_mount_matrix") == "1, 0; 0, 1\n")
        #expect(t.contents(0, "in_extra_attribute") == "\n")
        #expect(t.contents(0, "name") == "impostor\n")
        #expect(t.permissions(0, "in_mount_matrix") == 0o644)
        // The rest is untouched.
        #expect(t.contents(0, "in_anglvel_scale") == "0.001065\n")
    }

    @Test("--unreadable gives mode 0, to existing and new files; devices are found by id, name or label")
    func unreadable() throws {
        let t = try BuiltTree("bmi160", options: options {
            $0.unreadable = [("bmi160", "in_accel_x_raw"), ("iio:device0", "in_not_there"), ("bmi160", "buffer/enable")]
        })
        #expect(t.permissions(0, "in_accel_x_raw") == 0)
        #expect(t.permissions(0, "in_not_there") == 0)
        #expect(t.permissions(0, "buffer/enable") == 0)
        #expect(t.permissions(0, "in_accel_y_raw") == 0o444)

        let c = try BuiltTree("cros-ec", options: options {
            $0.unreadable = [("accel-display", "scale"), ("cros-ec-gyro", "id")]
        })
        #expect(c.permissions(0, "scale") == 0o444)
        #expect(c.permissions(1, "scale") == 0)   // label accel-display is iio:device1
        #expect(c.permissions(2, "id") == 0)      // name cros-ec-gyro is iio:device2
    }

    /// Options that each name a device bmi160's fixture lacks. A property, not closures written in
    /// `@Test(arguments:)`: Swift 6.0's compiler crashes expanding the macro over those.
    static let unknownDeviceOptions: [SimulationOptions] = [
        options { $0.overrides = [("nope", "name", "x")] },
        options { $0.unreadable = [("iio:device1", "name")] },
        options { $0.unplug = [("bmi161", 1)] },
        options { $0.noIRQ = ["accel-display"] },
    ]

    @Test("Options naming a device the fixture lacks are rejected", arguments: unknownDeviceOptions)
    func unknownDevice(o: SimulationOptions) throws {
        let f = try Fixture.load(path: TestSupport.fixturePath("bmi160"))
        #expect(throws: Fixture.LoadError.self) { try Simulator(fixture: f, root: "/nonexistent-root", options: o) }
    }

    @Test("An invalid fixture is rejected before anything is written")
    func invalidFixture() throws {
        let f = Fixture(description: "", devices: [Fixture.Device(name: "d", channels: [Fixture.Channel(id: "accel_x", index: 0)])])
        let root = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(throws: Fixture.LoadError.self) { try Simulator(fixture: f, root: root, options: SimulationOptions()) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).isEmpty)
    }
}

/// Writes `text` into an existing file in place (open, truncate, write, close), as `echo >` does,
/// so the simulator's inotify watch sees IN_CLOSE_WRITE.
private func writeInPlace(_ path: String, _ text: String) -> Bool {
    let fd = open(path, O_WRONLY | O_TRUNC)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    return bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count
}

/// Polls `condition` every 20 ms for up to `seconds`.
private func eventually(within seconds: Double = 3, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

@Suite("Simulator: running (threads started and stopped)", .serialized)
struct SimulatorRunTests {
    @Test("--set on a raw file survives the raw refresher; so does --unreadable", .timeLimit(.minutes(1)))
    func overriddenRawStays() throws {
        let t = try BuiltTree("bmi160", options: options {
            $0.overrides = [("bmi160", "in_accel_x_raw", "garbage")]
            $0.unreadable = [("bmi160", "in_accel_y_raw")]
        })
        try t.simulator.start()
        defer { t.simulator.stop() }
        usleep(400_000)  // the refresher runs at ≥ 10 Hz
        #expect(t.contents(0, "in_accel_x_raw") == "garbage\n")
        #expect(t.permissions(0, "in_accel_y_raw") == 0)
        #expect(t.contents(0, "in_accel_z_raw") == "16399\n")
        #expect(t.permissions(0, "in_accel_z_raw") == 0o444)
    }

    @Test("raw files follow the motion: rotating about x, the chip sees gravity leave z", .timeLimit(.minutes(1)))
    func rawFollowsMotion() throws {
        let t = try BuiltTree("bmi160", options: options { $0.motion = try MotionScript(parsing: "rotate:axis=x,dps=90") })
        try t.simulator.start()
        defer { t.simulator.stop() }
        // Device (0, g·sin θ, g·cos θ); chip = Mᵀ·device = (−g·sin θ, 0, g·cos θ): x goes negative.
        #expect(eventually { (t.contents(0, "in_accel_x_raw").flatMap { Int($0.dropLast()) } ?? 0) < -100 })
        let x = try #require(t.contents(0, "in_accel_x_raw").flatMap { Double($0.dropLast()) })
        let z = try #require(t.contents(0, "in_accel_z_raw").flatMap { Double($0.dropLast()) })
        // Both files come from one refresh, or from two ~10 ms apart: |(x, z)| stays ≈ 16399 LSB.
        #expect(abs((x * x + z * z).squareRoot() - 16399) < 400)
        // (π/2) / 0.001065 = 1474.93; on the chip, Mᵀ·(ω, 0, 0) = (0, ω, 0).
        #expect(t.contents(0, "in_anglvel_x_raw") == "0\n")
        #expect(t.contents(0, "in_anglvel_y_raw") == "1475\n")
        #expect(t.simulator.stop() == ["iio:device0": StreamStats()])
    }

    @Test("Writes snap like the driver: frequency to the available list, scale to the nearest choice", .timeLimit(.minutes(1)))
    func snapsWrites() throws {
        let t = try BuiltTree("bmi160")
        try t.simulator.start()
        defer { t.simulator.stop() }
        // 150 Hz is between 100 and 200: the tie goes up, printed with the file's 6 decimals.
        #expect(writeInPlace(t.path(0, "in_accel_sampling_frequency"), "150"))
        #expect(eventually { t.contents(0, "in_accel_sampling_frequency") == "200.000000\n" })
        #expect(writeInPlace(t.path(0, "in_accel_scale"), "0.0012"))
        #expect(eventually { t.contents(0, "in_accel_scale") == "0.001197\n" })
        // The new scale reaches the raw files: 9.80665 / 0.001197 = 8192.69 → 8193.
        #expect(eventually { t.contents(0, "in_accel_z_raw") == "8193\n" })
    }
}
