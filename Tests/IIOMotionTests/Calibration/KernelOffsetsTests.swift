import Glibc
import Testing
@testable import IIOMotionCore

/// KernelOffsets (Calibration/KernelOffsets.swift) reading and writing a sensor's calibbias files
/// through its context's ``DeviceIO``, on an embedded MPU-6050: what `motion-monitor calibrate
/// --write-kernel` does on libiio (IntegrationTests' CalibrationTests), in-process.
@Suite("Kernel offsets on an embedded device", .timeLimit(.minutes(1)))
struct KernelOffsetsTests {
    static let files = ["in_accel_x_calibbias", "in_accel_y_calibbias", "in_accel_z_calibbias"]

    /// A context of one MPU-6050 (a driver whose calibbias layout is known) whose files hold
    /// 10, -20, 30, changed by `change`; the device, and its accelerometer as discovery finds it.
    static func mpu6050(_ change: (inout EmbeddedDevice.State) -> Void = { _ in }) throws
        -> (context: EmbeddedContext, device: EmbeddedDevice, accelerometer: SensorInfo) {
        let device = BMI160.device(raw: BMI160.raw(name: "mpu6050")) { s in
            for (file, value) in zip(files, ["10", "-20", "30"]) { s.files[file] = value }
            change(&s)
        }
        let context = EmbeddedContext([device])
        let discovery = Discovery(context: context, udev: UdevDatabase(unavailable: "none"))
        let info = try #require(discovery.plans.first { $0.info.kind == .accelerometer }).info
        return (context, device, info)
    }

    /// The error `body` throws; nil when it throws none.
    static func error(_ body: () throws(MotionError) -> Void) -> MotionError? {
        do throws(MotionError) {
            try body()
            return nil
        } catch {
            return error
        }
    }

    static func held(_ device: EmbeddedDevice) -> [String?] { files.map { device.file($0) } }

    @Test("Read, write and read back: the files hold what was written")
    func roundTrip() throws {
        let (context, device, info) = try Self.mpu6050()
        #expect(try KernelOffsets.read(info, in: context) == [10, -20, 30])
        try KernelOffsets.write([12, -22, 32], to: info, in: context)
        #expect(Self.held(device) == ["12", "-22", "32"])
        #expect(try KernelOffsets.read(info, in: context) == [12, -22, 32])
    }

    @Test("The second axis cannot be written: the first is put back as found, and the error names the device and file and says so")
    func secondAxisRefused() throws {
        let (context, device, info) = try Self.mpu6050 { $0.writeErrors["in_accel_y_calibbias"] = EACCES }
        let error = try #require(Self.error { () throws(MotionError) in try KernelOffsets.write([12, -22, 32], to: info, in: context) })
        #expect(error.code == .permissionDenied)
        #expect(error.device == "iio:device0 (mpu6050)" && error.attribute == "in_accel_y_calibbias")
        let detail = error.detail ?? ""
        #expect(detail.contains("(writing it needs root)") && detail.contains("put back as found: in_accel_x_calibbias = 10"), "\(detail)")
        #expect(Self.held(device) == ["10", "-20", "30"])
    }

    @Test("A register that keeps its value: the error says what it reads after the write, and every file is put back")
    func writeNotKept() throws {
        let (context, device, info) = try Self.mpu6050 { $0.ignoredWrites = ["in_accel_z_calibbias"] }
        let error = try #require(Self.error { () throws(MotionError) in try KernelOffsets.write([12, -22, 32], to: info, in: context) })
        #expect(error.code == .invalidAttribute && error.attribute == "in_accel_z_calibbias")
        let detail = error.detail ?? ""
        #expect(detail.contains("reads 30 after 32 was written") && detail.contains("in_accel_x_calibbias = 10, in_accel_y_calibbias = -20"),
                "\(detail)")
        #expect(Self.held(device) == ["10", "-20", "30"])
    }

    @Test("Refused before anything is written: a value outside the register, a file that is missing or not a number, a device that is gone")
    func refusals() throws {
        let (context, device, info) = try Self.mpu6050()
        let tooLarge = try #require(Self.error { () throws(MotionError) in try KernelOffsets.write([40000, 0, 0], to: info, in: context) })
        #expect(tooLarge.code == .invalidAttribute && (tooLarge.detail ?? "").contains("40000 does not fit in_accel_x_calibbias"))
        #expect(device.state.withLock { $0.writes.isEmpty })

        let missing = try Self.mpu6050 { $0.files["in_accel_y_calibbias"] = nil }
        let notThere = try #require(Self.error { () throws(MotionError) in
            _ = try KernelOffsets.read(missing.accelerometer, in: missing.context)
        })
        #expect(notThere.code == .notAvailable && notThere.attribute == "in_accel_y_calibbias")

        let garbled = try Self.mpu6050 { $0.files["in_accel_z_calibbias"] = "twelve" }
        let notANumber = try #require(Self.error { () throws(MotionError) in
            _ = try KernelOffsets.read(garbled.accelerometer, in: garbled.context)
        })
        #expect(notANumber.code == .invalidAttribute && notANumber.attribute == "in_accel_z_calibbias")

        var elsewhere = info
        elsewhere.deviceID = "iio:device7"
        let gone = try #require(Self.error { () throws(MotionError) in try KernelOffsets.write([12, -22, 32], to: elsewhere, in: context) })
        #expect(gone.code == .notAvailable && (gone.detail ?? "").contains("iio:device7 is gone from embedded:"))
        #expect(device.state.withLock { $0.writes.isEmpty })
    }
}
