import Glibc
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// Discovery (IIOMotionCore's Device/Discovery.swift) on embedded devices, through ``DeviceIO`` as on libiio:
/// the channels it finds, the scale, offset and mount-matrix files it reads in the kernel's order,
/// udev's matrix over the kernel's, and the error naming device and file for a broken attribute.
@Suite("Discovery on embedded devices", .timeLimit(.minutes(1)))
struct DiscoveryTests {
    /// A context of one embedded BMI160 whose folder `change` edits.
    static func discover(_ change: (inout [String: String]) -> Void = { _ in }, udev: [String: [String: String]]? = nil,
                         errors: [String: Int32] = [:]) throws -> Discovery {
        let device = BMI160.device { s in
            change(&s.files)
            s.readErrors = errors
        }
        return try EmbeddedBackend([device], udev: udev).discovery()
    }

    static func plan(_ d: Discovery, _ kind: SensorKind) throws -> SensorPlan {
        try #require(d.plans.first { $0.info.kind == kind })
    }

    @Test("A BMI160: one device with an accelerometer and a gyroscope; channels, scan elements, scale, frequencies and trigger as the driver publishes them")
    func bmi160() throws {
        let d = try Self.discover()
        #expect(d.devices.map(\.id) == ["iio:device0"])
        let device = try #require(d.devices.first)
        #expect(device.name == "bmi160" && device.canBuffer && device.triggerName == "bmi160-dev0" && device.hasTimestampChannel)
        #expect(device.sensors.map(\.kind) == [.accelerometer, .gyroscope], "no magnetometer, the temperature channel ignored")

        let a = try Self.plan(d, .accelerometer)
        #expect(a.deviceIndex == 0)
        #expect(a.rawChannels.map { $0?.channel } == [0, 1, 2])
        #expect(a.rawChannels.map { $0?.file } == ["in_accel_x_raw", "in_accel_y_raw", "in_accel_z_raw"])
        #expect(a.scanElements == [0, 1, 2].map { ScanElement(channel: $0, scanIndex: $0, format: BMI160.s16) })
        #expect(a.timestampElement == ScanElement(channel: 6, scanIndex: 6, format: BMI160.s64))
        #expect(a.info.scale == AxisValues(all: BMI160.accelScale) && a.info.scaleFile == "in_accel_scale")
        #expect(a.info.offset == AxisValues(all: 0) && a.info.offsetFile == nil)
        #expect(a.info.mountMatrix == .identity && a.info.mountMatrixSource == .identity)
        #expect(a.info.samplingFrequency == 100 && a.info.samplingFrequencyFile == "in_accel_sampling_frequency")
        #expect(a.info.availableSamplingFrequencies == .discrete([25, 50, 100, 200, 400, 800, 1600]))
        #expect(a.info.isPollable && a.info.isAvailable && a.info.canBuffer)
        #expect(a.info.udevUnavailable == "an embedded context has no udev")

        let g = try Self.plan(d, .gyroscope)
        #expect(g.rawChannels.map { $0?.channel } == [3, 4, 5])
        #expect(g.info.scale == AxisValues(all: BMI160.gyroScale) && g.info.scaleFile == "in_anglvel_scale")
        #expect(g.scanElements.map { $0?.scanIndex } == [3, 4, 5])
    }

    @Test("Scale and offset: the axis's own file before the type's before the device's; each file named")
    func scaleAndOffsetOrder() throws {
        let d = try Self.discover { f in
            f["in_accel_x_scale"] = "0.5"
            f["in_accel_offset"] = "-3"
            f["scale"] = "7"
            f["in_anglvel_scale"] = nil
        }
        let a = try Self.plan(d, .accelerometer)
        #expect(a.info.scale == AxisValues(x: 0.5, y: BMI160.accelScale, z: BMI160.accelScale))
        #expect(a.info.scaleFile == "in_accel_x_scale")
        #expect(a.info.offset == AxisValues(all: -3) && a.info.offsetFile == "in_accel_offset")
        let g = try Self.plan(d, .gyroscope)
        #expect(g.info.scale == AxisValues(all: 7) && g.info.scaleFile == "scale", "the device-level file when the type has none")
    }

    @Test("Mount matrix: the kernel's per-type file, else the shared one; udev's ACCEL_MOUNT_MATRIX wins for the accelerometer and the gyroscope")
    func mountMatrix() throws {
        let swapXY = "0, 1, 0; 1, 0, 0; 0, 0, 1", flipZ = "1, 0, 0; 0, 1, 0; 0, 0, -1"
        let swapped = try MountMatrix(parsing: swapXY), flipped = try MountMatrix(parsing: flipZ)
        let kernel = try Self.discover { f in
            f["in_accel_mount_matrix"] = swapXY
            f["mount_matrix"] = flipZ
        }
        let a = try Self.plan(kernel, .accelerometer), g = try Self.plan(kernel, .gyroscope)
        #expect(a.info.mountMatrix == swapped && a.info.mountMatrixSource == .sysfs(file: "in_accel_mount_matrix"))
        #expect(g.info.mountMatrix == flipped && g.info.mountMatrixSource == .sysfs(file: "mount_matrix"))

        let withUdev = try Self.discover({ f in f["in_accel_mount_matrix"] = swapXY },
                                         udev: ["iio:device0": ["ACCEL_MOUNT_MATRIX": flipZ, "ACCEL_LOCATION": "display"]])
        for kind in [SensorKind.accelerometer, .gyroscope] {
            let p = try Self.plan(withUdev, kind)
            #expect(p.info.mountMatrix == flipped, "\(kind)")
            #expect(p.info.mountMatrixSource == .udev(property: "ACCEL_MOUNT_MATRIX"), "\(kind)")
            #expect(p.info.udevLocation == "display" && p.info.udevUnavailable == nil, "\(kind)")
        }
    }

    @Test("A broken attribute makes its sensor unusable with an error naming device and file; the other sensor stays usable",
          arguments: [
            ("in_accel_scale", "abc", "not a number"),
            ("in_accel_scale", "1e305", "too large"),
            ("in_accel_mount_matrix", "1, 0; 0, 1", "in_accel_mount_matrix:"),
          ])
    func brokenAttribute(file: String, text: String, says: String) throws {
        let d = try Self.discover { f in f[file] = text }
        let a = try Self.plan(d, .accelerometer)
        let problem = try #require(a.info.problem)
        #expect(problem.code == .invalidAttribute)
        #expect(problem.device == "iio:device0 (bmi160)" && problem.attribute == file)
        #expect("\(problem)".contains("iio:device0 (bmi160)") && "\(problem)".contains(file) && "\(problem)".contains(says), "\(problem)")
        #expect(try Self.plan(d, .gyroscope).info.isAvailable)
    }

    @Test("An attribute that cannot be read (EIO) names the device, the file and libiio's call; a missing axis names the channel")
    func unreadableAndMissing() throws {
        let d = try Self.discover(errors: ["in_accel_scale": EIO])
        let problem = try #require(try Self.plan(d, .accelerometer).info.problem)
        #expect(problem.code == .ioError && problem.underlyingErrno == EIO)
        #expect(problem.device == "iio:device0 (bmi160)" && problem.attribute == "in_accel_scale" && problem.call == "iio_channel_attr_read")

        var raw = BMI160.raw()
        raw.channels.removeAll { $0.id == "anglvel_z" }
        let missing = try EmbeddedBackend([BMI160.device(raw: raw)]).discovery()
        let g = try #require(try Self.plan(missing, .gyroscope).info.problem)
        #expect(g.code == .notAvailable && "\(g)".contains("in_anglvel_z") && "\(g)".contains("iio:device0 (bmi160)"), "\(g)")
    }

    @Test("Triggers and devices without motion channels are skipped; a sensor keeps its device's index in the context")
    func skipsTriggersAndOthers() throws {
        let trigger = EmbeddedDevice(raw: RawDevice(index: 0, id: "trigger0", name: "bmi160-dev2", label: nil, isTrigger: true,
                                                    canBuffer: false, channels: []), state: .init())
        var temp = BMI160.raw(name: "tmp117")
        temp.index = 1
        temp.id = "iio:device1"
        temp.channels = temp.channels.filter { $0.kind == .other }
        var imu = BMI160.raw()
        imu.index = 2
        imu.id = "iio:device2"
        let d = try EmbeddedBackend([trigger, EmbeddedDevice(raw: temp, state: .init()), BMI160.device(raw: imu)]).discovery()
        #expect(d.devices.map(\.id) == ["iio:device2"])
        #expect(d.plans.map(\.deviceIndex) == [2, 2])
    }

    @Test("A manager on embedded devices: discovery chooses the sensor, a polled read goes through it (scale, mount matrix), rediscover reads the folder again")
    func managerReads() throws {
        let device = BMI160.device { $0.files["in_accel_mount_matrix"] = "0, 1, 0; 1, 0, 0; 0, 0, 1" }
        let manager = MotionManager.embedded([device], units: .si)
        #expect(manager.isAccelerometerAvailable && manager.isGyroAvailable && !manager.isMagnetometerAvailable)
        #expect(try manager.devices.map(\.id) == ["iio:device0"])
        let a = try manager.readAccelerometer()
        // raw (100, -200, 16000) · scale, then x and y swapped by the matrix.
        #expect(a.acceleration.x == -200 * BMI160.accelScale && a.acceleration.y == 100 * BMI160.accelScale
                && a.acceleration.z == 16000 * BMI160.accelScale, "\(a)")
        #expect(a.timestamp == 1000, "the embedded device's clock")

        device.state.withLock { $0.files["in_accel_scale"] = "0.5" }
        #expect(try manager.readAccelerometer().acceleration.z == 16000 * BMI160.accelScale, "the scale discovery read")
        manager.rediscover()
        #expect(try manager.readAccelerometer().acceleration.z == 8000)
        #expect(manager.sensor(.accelerometer)?.scaleFile == "in_accel_scale")
    }
}
