import Testing
@testable import IIOMotion
@testable import IIOMotionCore

@Suite("Accelerometer and gyroscope calibration", .timeLimit(.minutes(3)))
struct SensorCalibrationTests {
    /// A sensor reading `diag(gain) · K · truth + offset`.
    static func faces(offset: [Double], gain: [Double], k: [[Double]]) -> [FaceFit.Face] {
        var out: [FaceFit.Face] = []
        for axis in 0..<3 {
            for positive in [true, false] {
                var t = [0.0, 0.0, 0.0]
                t[axis] = positive ? standardGravity : -standardGravity
                let r = (0..<3).map { i in gain[i] * (k[i][0] * t[0] + k[i][1] * t[1] + k[i][2] * t[2]) + offset[i] }
                out.append(FaceFit.Face(axis: axis, positive: positive, mean: (r[0], r[1], r[2])))
            }
        }
        return out
    }

    @Test("Six faces give back the offset, the gains and the cross-axis terms, with no residual")
    func sixFaces() throws {
        let offset = [0.29, -0.49, 0.2], gain = [1.01, 0.99, 1.002]
        let k = [[1, 0.004, 0], [0, 1, -0.003], [0.002, 0, 1]]
        let fit = try #require(FaceFit.fit(Self.faces(offset: offset, gain: gain, k: k)))
        let c = fit.calibration
        #expect(abs(c.bias.x - offset[0]) < 1e-9 && abs(c.bias.y - offset[1]) < 1e-9 && abs(c.bias.z - offset[2]) < 1e-9, "\(c.bias)")
        let scale = try #require(c.scale)
        #expect(abs(scale.x - gain[0]) < 1e-9 && abs(scale.y - gain[1]) < 1e-9 && abs(scale.z - gain[2]) < 1e-9, "\(scale)")
        #expect(fit.residual < 1e-9)
        // Any reading is taken back to the truth.
        let truth = (x: 3.0, y: -4.0, z: 7.5)
        let t = [truth.x, truth.y, truth.z]
        let r = (0..<3).map { i in gain[i] * (k[i][0] * t[0] + k[i][1] * t[1] + k[i][2] * t[2]) + offset[i] }
        let back = c.apply((r[0], r[1], r[2]))
        #expect(abs(back.x - truth.x) < 1e-9 && abs(back.y - truth.y) < 1e-9 && abs(back.z - truth.z) < 1e-9)
    }

    @Test("A face off by 20 mg shows in the residual; too few faces fit nothing")
    func residualAndMissing() throws {
        var faces = Self.faces(offset: [0, 0, 0], gain: [1, 1, 1], k: [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
        faces[0].mean.0 += 0.02 * standardGravity
        let fit = try #require(FaceFit.fit(faces))
        #expect(fit.residual > 0.002 * standardGravity, "\(fit.residual)")
        #expect(FaceFit.fit(Array(faces.prefix(3))) == nil)
    }

    @Test("Text round trip; a damaged or foreign file is refused with the reason")
    func text() throws {
        var c = SensorCalibration(kind: .accelerometer, bias: AxisValues(x: 0.1, y: -0.2, z: 1e-5),
                                  matrix: [[1.01, 0.001, 0], [0, 0.99, 0], [0, 0, 1]], created: 1_796_532_814.5)
        c.residual = 0.001
        c.stillness = 0.02
        c.device = "bmi160"
        let back = try SensorCalibration(parsing: c.text)
        #expect(back == c)
        #expect(c.createdDescription == "2026-12-06 04:53:34 UTC")
        #expect(throws: MotionError.self) { try SensorCalibration(parsing: "version 2\nkind accelerometer\nbias 0 0 0\nmatrix 1 0 0 0 1 0 0 0 1\n") }
        #expect(throws: MotionError.self) { try SensorCalibration(parsing: "version 1\nkind accelerometer\nbias 0 x 0\nmatrix 1 0 0 0 1 0 0 0 1\n") }
        #expect(throws: MotionError.self) { try SensorCalibration(parsing: "version 1\nkind gyroscope\nbias 0 0 0\nmatrix 0 0 0 0 0 0 0 0 0\n") }
        #expect(throws: MotionError.self) { try SensorCalibration(parsing: "version 1\nkind magnetometer\nbias 0 0 0\nmatrix 1 0 0 0 1 0 0 0 1\n") }
    }

    @Test("Folded into the decoder, a calibration gives what applying it to the kernel's value and then the mount matrix gives")
    func folded() {
        let c = SensorCalibration(kind: .accelerometer, bias: AxisValues(x: 0.3, y: -0.5, z: 0.2),
                                  matrix: [[0.99, 0.002, 0], [0.001, 1.01, -0.003], [0, 0.002, 0.998]])
        let scale = AxisValues(x: 0.000598, y: 0.000598, z: 0.000598), offset = AxisValues(x: 3, y: 0, z: -2)
        let mount: [[Double]] = [[0, 1, 0], [-1, 0, 0], [0, 0, 1]]
        let (o, rows) = ScanDecoder.fold(c, scale: scale, offset: offset, mount: mount)
        let raw = [1234.0, -16000, 8000]
        let folded = (0..<3).map { i in (0..<3).reduce(0.0) { $0 + rows[i][$1] * (raw[$1] + o[Axis(rawValue: $1)!]) * scale[Axis(rawValue: $1)!] } }
        let kernel = (x: (raw[0] + offset.x) * scale.x, y: (raw[1] + offset.y) * scale.y, z: (raw[2] + offset.z) * scale.z)
        let calibrated = c.apply(kernel)
        let expected = (try? MountMatrix(rows: mount))!.apply(calibrated)
        #expect(abs(folded[0] - expected.x) < 1e-12 && abs(folded[1] - expected.y) < 1e-12 && abs(folded[2] - expected.z) < 1e-12)
        #expect(ScanDecoder.fold(nil, scale: scale, offset: offset, mount: mount).offset == offset)
    }

    @Test("Offsets moved into inv_mpu6050's calibbias: even accelerometer steps of 1/2048 g, 1/32.8 °/s, the rest kept in software; the record reads back; other drivers refused")
    func kernelOffsets() throws {
        let unit = 9.80665 / 2048
        let c = SensorCalibration(kind: .accelerometer, bias: AxisValues(x: 61.2 * unit, y: -101.4 * unit, z: 3.1 * unit),
                                  matrix: [[1.01, 0, 0], [0, 0.99, 0], [0, 0, 1]], created: 5)
        let plan = try KernelOffsets.plan(c, current: [-2838, 1703, 0], previous: nil, driver: "mpu6050")
        #expect(plan.offsets.written == [-2838 - 62, 1703 + 102, -4])
        #expect(plan.offsets.original == [-2838, 1703, 0])
        #expect(plan.offsets.files == ["in_accel_x_calibbias", "in_accel_y_calibbias", "in_accel_z_calibbias"])
        #expect(abs(plan.calibration.bias.x - (-0.8 * unit)) < 1e-12 && abs(plan.calibration.bias.y - 0.6 * unit) < 1e-12
                && abs(plan.calibration.bias.z - (-0.9 * unit)) < 1e-12)
        #expect(plan.calibration.matrix == c.matrix)
        // The hardware's part plus the software's is the whole offset.
        #expect(abs(plan.offsets.bias.x + plan.calibration.bias.x - c.bias.x) < 1e-12)
        // A second write keeps what was found before the first.
        let again = try KernelOffsets.plan(plan.calibration, current: plan.offsets.written, previous: plan.offsets, driver: "mpu6050")
        #expect(again.offsets.original == [-2838, 1703, 0] && again.offsets.written == plan.offsets.written)
        let back = try SensorCalibration(parsing: plan.calibration.text)
        #expect(back == plan.calibration)
        let gyro = try KernelOffsets.plan(SensorCalibration(kind: .gyroscope, bias: AxisValues(x: 0.01, y: 0, z: -0.02)),
                                          current: [25, 0, 0], previous: nil, driver: "mpu9150")
        #expect(gyro.offsets.written == [25 - 19, 0, 38])
        #expect(throws: MotionError.self) { try KernelOffsets.plan(c, current: [0, 0, 0], previous: nil, driver: "bmi160") }
        #expect(throws: MotionError.self) { try KernelOffsets.plan(c, current: [-32767, 0, 0], previous: nil, driver: "mpu6050") }
        #expect(throws: MotionError.self) {
            try SensorCalibration(parsing: "version 1\nkind gyroscope\nbias 0 0 0\nmatrix 1 0 0 0 1 0 0 0 1\nkernel-original 1 2 3\n")
        }
    }

    @Test("The other drivers' calibbias layouts, from 6.1's source: adxl345/375 and adxl312/313/314 in steps of 4 data counts within -512…508, icm42600 in SI to 12 bits; mpu3050, mma8452 and MPU-6500 refused with the reason")
    func kernelLayouts() throws {
        // adxl345: 60 mg is 15.4 counts of 38300 µm/s², 4 counts to a register step: 16.
        let adxl = SensorCalibration(kind: .accelerometer, bias: AxisValues(x: 0.06 * 9.80665, y: -0.045 * 9.80665, z: 0), created: 1)
        let plan = try KernelOffsets.plan(adxl, current: [8, -4, 0], previous: nil, driver: "adxl345")
        #expect(plan.offsets.written == [8 - 16, -4 + 12, 0])
        #expect(abs(plan.offsets.unit - 0.0383) < 1e-12)
        #expect(abs(plan.offsets.bias.x + plan.calibration.bias.x - adxl.bias.x) < 1e-12)
        // What the 8-bit register cannot hold is refused before anything is written.
        let big = SensorCalibration(kind: .accelerometer, bias: AxisValues(x: 2.5 * 9.80665, y: 0, z: 0), created: 1)
        #expect(throws: MotionError.self) { try KernelOffsets.plan(big, current: [0, 0, 0], previous: nil, driver: "adxl345") }
        #expect(try KernelOffsets.plan(big, current: [0, 0, 0], previous: nil, driver: "adxl375").offsets.written == [-52, 0, 0])
        #expect(KernelOffsets.layout(driver: "adxl313", kind: .accelerometer)?.unit == 0.009576806)
        #expect(KernelOffsets.layout(driver: "adxl345", kind: .gyroscope) == nil)
        // inv_icm42600: counts of 0.5 mg and 1/32 °/s, the files in SI to micro and nano.
        let accel = try #require(KernelOffsets.layout(driver: "icm42605-accel", kind: .accelerometer))
        #expect(accel.showsSI && accel.range == -2048...2047 && abs(accel.unit - 0.004903325) < 1e-12)
        #expect(KernelOffsets.text(1, layout: accel) == "0.004903" && KernelOffsets.text(-2048, layout: accel) == "-10.042010")
        #expect(KernelOffsets.count("-10.042010", layout: accel) == -2048 && KernelOffsets.count("0.004903\n", layout: accel) == 1)
        let gyro = try #require(KernelOffsets.layout(driver: "icm42600-gyro", kind: .gyroscope))
        #expect(KernelOffsets.text(2047, layout: gyro) == "1.116465306" && KernelOffsets.text(-1, layout: gyro) == "-0.000545415")
        #expect(KernelOffsets.count("1.116465306", layout: gyro) == 2047)
        #expect(KernelOffsets.layout(driver: "icm42605-accel", kind: .gyroscope) == nil)
        #expect(KernelOffsets.layout(driver: "icm42605", kind: .accelerometer) == nil)
        let g = try KernelOffsets.plan(SensorCalibration(kind: .gyroscope, bias: AxisValues(x: 0.01, y: 0, z: -0.02)),
                                       current: [0, 3, 0], previous: nil, driver: "icm42622-gyro")
        #expect(g.offsets.written == [-18, 3, 37])
        // Refused, each with its reason.
        for (driver, kind, why) in [("mpu3050", SensorKind.gyroscope, "next power-up"), ("mma8452", .accelerometer, "without saying its unit"),
                                    ("mpu6500", .accelerometer, "3 bytes apart"), ("adxl355", .accelerometer, "without saying its unit")] {
            #expect(KernelOffsets.layout(driver: driver, kind: kind) == nil)
            do {
                _ = try KernelOffsets.knownLayout(driver: driver, kind: kind)
                Issue.record("\(driver) not refused")
            } catch {
                #expect("\(error)".contains(why), "\(driver): \(error)")
            }
        }
    }
}
