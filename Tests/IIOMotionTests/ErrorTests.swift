import Testing
@testable import IIOMotion
@testable import IIOMotionCore

@Suite("Error descriptions", .timeLimit(.minutes(3)))
struct ErrorTests {
    @Test("EACCES on a raw file says the kernel makes it readable; no program's advice")
    func permission() {
        let e = MotionError.io(13, call: "iio_channel_attr_read", device: "iio:device0 (bmi160)", attribute: "in_accel_x_raw")
        #expect(e.code == .permissionDenied)
        #expect(e.description.hasPrefix("Reading in_accel_x_raw of iio:device0 (bmi160) failed: permission denied (EACCES, errno 13, from iio_channel_attr_read)."))
        #expect(e.description.contains("readable by everyone"))
        #expect(!e.description.contains("scripts/") && !e.description.contains("--"))
    }

    @Test("EACCES elsewhere says whose the files are, not which script changes that")
    func permissionBuffer() {
        let e = MotionError.io(13, call: "iio_device_create_buffer", device: "iio:device0 (bmi160)", attribute: nil)
        #expect(e.code == .permissionDenied)
        #expect(e.description.contains("belong to root unless a udev rule"))
        #expect(!e.description.contains("scripts/") && !e.description.contains("--"))
    }

    @Test("EBUSY names the usual culprits")
    func busy() {
        let e = MotionError.io(16, call: "iio_channel_attr_read", device: "iio:device3 (accel_3d)", attribute: "in_accel_x_raw")
        #expect(e.code == .deviceBusy)
        #expect(e.description.contains("iio-sensor-proxy"))
        #expect(e.description.contains("iiod"))
        #expect(e.description.contains("EBUSY"))
        #expect(!e.description.contains("systemctl"))
    }

    @Test("A refill's EINVAL names the scan layout files, not a flag")
    func refillLayout() {
        let e = MotionError.io(22, call: "iio_buffer_refill", device: "iio:device0 (bmi160)", attribute: nil)
        #expect(e.description.contains("*_index and *_type files"))
        #expect(!e.description.contains("--mode"))
    }

    @Test("ENOENT on context creation means no IIO on this machine")
    func noIIO() {
        let e = MotionError.contextFailure(uri: "local:", errno: 2)
        #expect(e.code == .contextUnavailable)
        #expect(e.description.contains("no IIO devices on this machine (/sys/bus/iio/devices does not exist)"))
    }

    @Test("A refused network context mentions iiod")
    func network() {
        let e = MotionError.contextFailure(uri: "ip:192.0.2.1", errno: 111)
        #expect(e.code == .contextUnavailable)
        #expect(e.description.hasPrefix("Cannot open the IIO context \"ip:192.0.2.1\": connection refused (ECONNREFUSED, errno 111, from iio_create_context_from_uri)."))
        #expect(e.description.contains("iiod"))
    }

    @Test("A non-numeric scale names the device, the file and the text")
    func notANumber() {
        let e = MotionError.notANumber(device: "iio:device0 (bmi160)", file: "in_accel_scale", text: "abc\n")
        #expect(e.code == .invalidAttribute)
        #expect(e.description == #"iio:device0 (bmi160): in_accel_scale contains "abc", which is not a number."#)
    }

    @Test("Codes compare by value; the errno is typed")
    func codes() {
        #expect(MotionError.Code.deviceBusy.description == "deviceBusy" && MotionError.Code.deviceBusy != .ioError)
        #expect(MotionError.code(forErrno: 110) == .timedOut)
        #expect(MotionError.code(forErrno: 5) == .ioError)
        let e = MotionError.io(5, call: "iio_channel_attr_read", device: "iio:device0 (bmi160)", attribute: "in_anglvel_z_raw")
        #expect(e.errno == MotionError.Errno(rawValue: 5) && e.errno?.name == "EIO" && e.errno?.description == "Input/output error")
        #expect(e.description == "Reading in_anglvel_z_raw of iio:device0 (bmi160) failed: input/output error (EIO, errno 5, from iio_channel_attr_read).")
    }

    @Test("A failed write says Writing, a failed read Reading")
    func writeOrRead() {
        let w = MotionError.io(30, call: "write", device: "iio:device0 (mpu6050)", attribute: "in_accel_y_calibbias")
        #expect(w.description == "Writing in_accel_y_calibbias of iio:device0 (mpu6050) failed: read-only file system (EROFS, errno 30, from write).")
        let t = MotionError.io(5, call: "iio_device_set_trigger", device: "iio:device0 (bmi160)", attribute: "trigger/current_trigger")
        #expect(t.description.hasPrefix("Writing trigger/current_trigger of iio:device0 (bmi160) failed"))
        let r = MotionError.io(5, call: "iio_device_attr_read", device: "iio:device0 (bmi160)", attribute: "sampling_frequency")
        #expect(r.description.hasPrefix("Reading sampling_frequency of iio:device0 (bmi160) failed"))
    }
}
