/// Values Linux drivers publish that contradict the IIO sysfs ABI, and the correction applied
/// when such a value is read.
///
/// The ABI (Documentation/ABI/testing/sysfs-bus-iio) gives a magnetometer's `raw × scale` in gauss,
/// an accelerometer's in m/s², a gyroscope's in rad/s. An entry is here only when the kernel source
/// proves that a driver's published scale is not in that unit; each names the line. An entry
/// matches a device by its `name` attribute *and* by the scale it publishes being one of the
/// driver's own table values, so a kernel that fixes the driver (and publishes another value) is
/// read as it is. What the kernel suite found and left uncorrected is listed in
/// Tests/Kernel/README.md.
///
/// Besides scales, one raw-value entry: mpu3050's polled reads published unsigned by older kernels
/// (``signedRaw(_:deviceName:kind:)``).
enum KernelQuirks {
    /// A factor by which a driver's published scale must be multiplied to be in the ABI's unit.
    struct ScaleCorrection: Sendable {
        /// The IIO device names (`name` attribute) the driver gives its devices.
        let deviceNames: Set<String>
        let kind: SensorKind
        /// Every scale value the driver publishes (its `scale_available` table).
        let publishedScales: [Double]
        let factor: Double
        /// The kernel source line, short, as `--list` names it (`hmc5843_core.c:86`).
        let source: String
        /// The kernel source (Linux 6.1) that proves it.
        let evidence: String
    }

    static let scaleCorrections: [ScaleCorrection] = [
        ScaleCorrection(
            deviceNames: ["hmc5843", "hmc5883", "hmc5883l", "hmc5983"], kind: .magnetometer,
            publishedScales: [
                // hmc5843_regval_to_nanoscale, hmc5883_regval_to_nanoscale, hmc5883l_regval_to_nanoscale
                6173, 7692, 10309, 12821, 18868, 21739, 25641, 35714,
                7812, 9766, 13021, 16287, 24096, 27701, 32573, 45662,
                7299, 9174, 12195, 15152, 22727, 25641, 30303, 43478,
            ].map { Double($0) * 1e-9 },
            factor: 100,
            source: "hmc5843_core.c:86",
            evidence: """
                drivers/iio/magnetometer/hmc5843_core.c:86-97 (Linux 6.1): the scale tables are \
                "10000000/Gain" and are returned as IIO_VAL_INT_PLUS_NANO (:381), i.e. 0.01/Gain, \
                while the chips give 1/Gain gauss per count (HMC5883L: Gain 1090 counts/gauss at \
                its default ±1.3 Ga, published scale 0.000009174): 100 times too small for gauss
                """),
        ScaleCorrection(
            deviceNames: ["fxas21002c"], kind: .gyroscope,
            // 4000, 2000, 1000, 500, 250 (fxas21002c_range_values) divided by 32
            publishedScales: [125, 62.5, 31.25, 15.625, 7.8125],
            factor: Double.pi / 180_000,
            source: "fxas21002c_core.c:609",
            evidence: """
                drivers/iio/gyro/fxas21002c_core.c:609-614 (Linux 6.1): the scale is the range in °/s \
                (fxas21002c_range_values, :133) over FXAS21002C_SCALE_FRACTIONAL (32, :40), returned \
                as IIO_VAL_FRACTIONAL: 62.5 at ±2000 °/s, the datasheet's 62.5 millidegrees/s per \
                count, where the ABI's unit is rad/s
                """),
    ]

    /// The factor to apply to the published `scale` of a `kind` sensor of device `deviceName`:
    /// 1 unless a ``scaleCorrections`` entry matches both the name and the value.
    static func scaleFactor(deviceName: String?, kind: SensorKind, published scale: Double) -> Double {
        scaleCorrection(deviceName: deviceName, kind: kind, published: scale)?.factor ?? 1
    }

    /// The ``scaleCorrections`` entry that matches the device's name and the published value, if any.
    static func scaleCorrection(deviceName: String?, kind: SensorKind, published scale: Double) -> ScaleCorrection? {
        guard let deviceName else { return nil }
        return scaleCorrections.first { c in
            c.kind == kind && c.deviceNames.contains(deviceName)
                && c.publishedScales.contains(where: { abs($0 - scale) <= 1e-12 + 1e-6 * abs($0) })
        }
    }

    /// The devices whose polled gyroscope reads older kernels publish as unsigned 16-bit values.
    ///
    /// mpu3050's angular-velocity channels are signed 16-bit (`.sign = 's', .realbits = 16`,
    /// drivers/iio/gyro/mpu3050-core.c), but before upstream 6.1.188's "iio: gyro: mpu3050: fix sign
    /// of raw angular velocity readings" `mpu3050_read_raw` returned `be16_to_cpu(raw_val)` unsigned
    /// (6.1.192's `*val = (s16)be16_to_cpu(raw_val)`, mpu3050-core.c:359, is the fix). Debian 12's
    /// 6.1.0-50 kernel (6.1.176-1) is such a kernel: registers 0xF1F2 read 61938 there and -3598 on
    /// 6.1.0-57 (6.1.192-3; Debian's changelog lists the fix under 6.1.190-1). Checked on both in
    /// the kernel suite (Tests/Kernel/README.md).
    static let unsignedRawGyroscopes: Set<String> = ["mpu3050"]

    /// A polled `raw` value as the channel's signed 16-bit type holds it: for the devices of
    /// ``unsignedRawGyroscopes``, a value from 32768 to 65535 (which a signed 16-bit channel cannot
    /// hold, so only an unfixed kernel publishes it) is taken as the two's complement it is; any
    /// other value, and every value of a fixed kernel, is read as published.
    static func signedRaw(_ value: Int64, deviceName: String?, kind: SensorKind) -> Int64 {
        guard kind == .gyroscope, let deviceName, unsignedRawGyroscopes.contains(deviceName),
              (32768...65535).contains(value) else { return value }
        return value - 65536
    }
}

/// A scale IIOMotion corrects because the driver publishes it in another unit than the IIO ABI's
/// (``SensorInfo/scaleCorrection``).
public struct KernelScaleCorrection: Sendable, Hashable {
    /// The scale the driver publishes (the x axis's), in the driver's unit.
    public var published: Double
    /// The factor applied: the scale in use (``SensorInfo/scale``) is `published × factor`.
    public var factor: Double
    /// The kernel source line that proves the published unit wrong, e.g. `"hmc5843_core.c:86"`.
    public var source: String
}
