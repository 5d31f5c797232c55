import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// A sensor description for selection tests.
func sensor(
    _ id: String, name: String? = nil, label: String? = nil, location: String? = nil,
    kind: SensorKind = .accelerometer, problem: MotionError? = nil
) -> SensorInfo {
    SensorInfo(
        kind: kind, deviceID: id, deviceName: name, label: label, location: location,
        scale: AxisValues(all: 0.000598), scaleFile: "in_accel_scale", offset: AxisValues(all: 0), offsetFile: nil,
        mountMatrix: .identity, mountMatrixSource: .identity, samplingFrequency: nil,
        samplingFrequencyFile: nil, availableSamplingFrequencies: nil, isPollable: true,
        problem: problem, canBuffer: false, triggerName: nil, hasTimestampChannel: false)
}

@Suite("Device selection", .timeLimit(.minutes(3)))
struct SelectionTests {
    @Test("The display's accelerometer wins over the base's (label)")
    func displayLabelWins() {
        let c = [sensor("iio:device4", name: "cros-ec-accel", label: "accel-base"),
                 sensor("iio:device5", name: "cros-ec-accel", label: "accel-display")]
        #expect(DeviceSelector.automatic.choose(from: c)?.deviceID == "iio:device5")
    }

    @Test("The lid's accelerometer wins over the base's (older kernels' location file)")
    func lidLocationWins() {
        let c = [sensor("iio:device0", location: "base"), sensor("iio:device1", location: "lid")]
        #expect(DeviceSelector.automatic.choose(from: c)?.deviceID == "iio:device1")
    }

    @Test("An unlabelled accelerometer wins over a base one")
    func unlabelledBeatsBase() {
        let c = [sensor("iio:device0", label: "accel-base"), sensor("iio:device3")]
        #expect(DeviceSelector.automatic.choose(from: c)?.deviceID == "iio:device3")
    }

    @Test("Ties go to the lowest device number, numerically (device2 before device10)")
    func numericTieBreak() {
        let c = [sensor("iio:device10"), sensor("iio:device2")]
        #expect(DeviceSelector.automatic.choose(from: c)?.deviceID == "iio:device2")
    }

    @Test("An available sensor wins over a broken one")
    func availableFirst() {
        let broken = MotionError(code: .invalidAttribute, detail: "x")
        let c = [sensor("iio:device0", label: "accel-display", problem: broken), sensor("iio:device1")]
        #expect(DeviceSelector.automatic.choose(from: c)?.deviceID == "iio:device1")
    }

    @Test("A gyroscope on the chosen accelerometer's device is preferred")
    func sameDevice() {
        let c = [sensor("iio:device0", kind: .gyroscope), sensor("iio:device6", kind: .gyroscope)]
        #expect(DeviceSelector.automatic.choose(from: c, sameDeviceAs: "iio:device6")?.deviceID == "iio:device6")
    }

    @Test("Explicit selectors: id, name, label, matching")
    func explicit() {
        let c = [sensor("iio:device1", name: "lsm6dso_accel"),
                 sensor("iio:device4", name: "cros-ec-accel", label: "accel-base"),
                 sensor("iio:device5", name: "cros-ec-accel", label: "accel-display")]
        #expect(DeviceSelector.id("iio:device4").choose(from: c)?.deviceID == "iio:device4")
        #expect(DeviceSelector.name("cros-ec-accel").choose(from: c)?.deviceID == "iio:device4")
        #expect(DeviceSelector.label("accel-base").choose(from: c)?.deviceID == "iio:device4")
        #expect(DeviceSelector.matching("lsm6dso_accel").choose(from: c)?.deviceID == "iio:device1")
        #expect(DeviceSelector.matching("accel-display").choose(from: c)?.deviceID == "iio:device5")
        #expect(DeviceSelector.name("bmi160").choose(from: c) == nil)
    }
}
