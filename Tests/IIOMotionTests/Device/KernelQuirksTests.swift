import Testing
@testable import IIOMotion
@testable import IIOMotionCore

@Suite("Kernel quirks: scales published in another unit than the ABI's", .timeLimit(.minutes(1)))
struct KernelQuirksTests {
    @Test("HMC5843-family scales (0.01/Gain) are corrected to gauss", arguments: [
        ("hmc5883l", 0.000009174), ("hmc5883l", 0.000043478), ("hmc5843", 0.000007692),
        ("hmc5883", 0.000009766), ("hmc5983", 0.000007299),
    ])
    func hmcCorrected(name: String, scale: Double) {
        #expect(KernelQuirks.scaleFactor(deviceName: name, kind: .magnetometer, published: scale) == 100)
    }

    @Test("HMC5883L at its default gain reads the datasheet's 1/1090 gauss per count")
    func hmcDatasheet() {
        let published = 0.000009174
        let corrected = published * KernelQuirks.scaleFactor(deviceName: "hmc5883l", kind: .magnetometer,
                                                               published: published)
        // The kernel's table is 10^7/Gain rounded to an integer: 9174 for 1090.
        #expect(abs(corrected - 1.0 / 1090) < 1e-4 / 1090)
    }

    @Test("Anything else is read as published", arguments: [
        ("hmc5883l", SensorKind.magnetometer, 0.000917431),   // a kernel that publishes gauss
        ("hmc5883l", SensorKind.magnetometer, 1.0),
        ("lis3mdl", SensorKind.magnetometer, 0.000146),
        ("ak8975", SensorKind.magnetometer, 0.003),
        ("hmc5883l", SensorKind.accelerometer, 0.000009174),
        ("bmi160", SensorKind.accelerometer, 0.000598),
        ("fxas21002c", SensorKind.gyroscope, 0.001090831),    // a kernel that publishes rad/s
        ("l3gd20", SensorKind.gyroscope, 62.5),
    ])
    func others(name: String, kind: SensorKind, scale: Double) {
        #expect(KernelQuirks.scaleFactor(deviceName: name, kind: kind, published: scale) == 1)
    }

    @Test("A device without a name is read as published")
    func unnamed() {
        #expect(KernelQuirks.scaleFactor(deviceName: nil, kind: .magnetometer, published: 0.000009174) == 1)
    }

    @Test("FXAS21002C's millidegrees per second are corrected to rad/s", arguments: [125.0, 62.5, 31.25, 15.625, 7.8125])
    func fxasCorrected(scale: Double) {
        let f = KernelQuirks.scaleFactor(deviceName: "fxas21002c", kind: .gyroscope, published: scale)
        #expect(abs(scale * f - scale / 1000 * Double.pi / 180) < 1e-15)
    }

    @Test("FXAS21002C at ±2000 °/s reads 2000 °/s at full scale")
    func fxasFullScale() {
        let f = KernelQuirks.scaleFactor(deviceName: "fxas21002c", kind: .gyroscope, published: 62.5)
        #expect(abs(32768 * 62.5 * f - 2048 * Double.pi / 180) < 1e-9)
    }

    @Test("mpu3050's unsigned raw reads (older 6.1 kernels) are taken as signed 16-bit; signed ones and other devices as published")
    func mpu3050Sign() {
        #expect(KernelQuirks.signedRaw(61938, deviceName: "mpu3050", kind: .gyroscope) == -3598)
        #expect(KernelQuirks.signedRaw(32768, deviceName: "mpu3050", kind: .gyroscope) == -32768)
        #expect(KernelQuirks.signedRaw(65535, deviceName: "mpu3050", kind: .gyroscope) == -1)
        #expect(KernelQuirks.signedRaw(32767, deviceName: "mpu3050", kind: .gyroscope) == 32767)
        #expect(KernelQuirks.signedRaw(-3598, deviceName: "mpu3050", kind: .gyroscope) == -3598)
        #expect(KernelQuirks.signedRaw(65536, deviceName: "mpu3050", kind: .gyroscope) == 65536)
        #expect(KernelQuirks.signedRaw(61938, deviceName: "l3gd20", kind: .gyroscope) == 61938)
        #expect(KernelQuirks.signedRaw(61938, deviceName: nil, kind: .gyroscope) == 61938)
        #expect(KernelQuirks.signedRaw(61938, deviceName: "mpu3050", kind: .accelerometer) == 61938)
    }

    @Test("A corrected scale names its kernel line")
    func correctionSource() {
        let c = KernelQuirks.scaleCorrection(deviceName: "hmc5883l", kind: .magnetometer, published: 0.000009174)
        #expect(c?.source == "hmc5843_core.c:86" && c?.factor == 100)
        #expect(KernelQuirks.scaleCorrection(deviceName: "lis3mdl", kind: .magnetometer, published: 0.000146) == nil)
    }

    @Test("Every entry cites the kernel source")
    func entriesCite() {
        for c in KernelQuirks.scaleCorrections {
            #expect(c.evidence.contains("drivers/iio/") && c.evidence.contains(".c:"))
            #expect(!c.publishedScales.isEmpty && !c.deviceNames.isEmpty && c.factor > 0)
        }
    }
}
