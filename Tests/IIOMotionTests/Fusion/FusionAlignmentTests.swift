import Testing
@testable import IIOMotion
@testable import IIOMotionCore
import Glibc

// MARK: - Alignment of separate devices

@Suite("Fusion: aligning accelerometer and gyroscope by timestamp", .timeLimit(.minutes(5)))
struct FusionAlignmentTests {
    private static func accel(_ t: Double, _ x: Double) -> AccelerometerData {
        AccelerometerData(timestamp: t, acceleration: Acceleration(x: x, y: 2 * x, z: -1))
    }
    private static func gyro(_ t: Double) -> GyroData {
        GyroData(timestamp: t, rotationRate: RotationRate(x: t, y: 0, z: 0))
    }

    /// A linear signal is interpolated exactly at each gyroscope timestamp, whichever stream
    /// arrives first.
    @Test func interpolates() {
        var aligner = SampleAligner()
        var pairs: [SampleAligner.Pair] = []
        // Gyroscope first: both wait for the accelerometer.
        aligner.add(gyro: Self.gyro(0.0025)) { pairs.append($0) }
        aligner.add(gyro: Self.gyro(0.0075)) { pairs.append($0) }
        #expect(pairs.isEmpty && aligner.pendingCount == 2)
        aligner.add(accelerometer: Self.accel(0, 0)) { pairs.append($0) }
        aligner.add(accelerometer: Self.accel(0.01, 1)) { pairs.append($0) }
        #expect(pairs.count == 2)
        #expect(abs(pairs[0].acceleration!.x - 0.25) < 1e-12 && abs(pairs[1].acceleration!.y - 1.5) < 1e-12)
        // Accelerometer ahead: a gyroscope sample pairs at once.
        aligner.add(accelerometer: Self.accel(0.02, 2)) { pairs.append($0) }
        aligner.add(gyro: Self.gyro(0.0125)) { pairs.append($0) }
        #expect(pairs.count == 3 && abs(pairs[2].acceleration!.x - 1.25) < 1e-12)
        #expect(pairs.map(\.timestamp) == [0.0025, 0.0075, 0.0125])
    }

    /// The accelerometer stalls: gyroscope samples go out after at most `maximumWait` with the
    /// newest acceleration held, and after `maximumHold` with none; memory stays bounded.
    @Test func accelerometerStalls() {
        var aligner = SampleAligner(capacity: 64, maximumWait: 0.1, maximumHold: 0.5)
        var pairs: [SampleAligner.Pair] = []
        aligner.add(accelerometer: Self.accel(0, 0.5)) { pairs.append($0) }
        for i in 1...10_000 { aligner.add(gyro: Self.gyro(Double(i) * 0.001)) { pairs.append($0) } }
        #expect(aligner.pendingCount <= 101)
        #expect(pairs.count >= 10_000 - 101)
        #expect(pairs.first?.acceleration?.x == 0.5)
        #expect(pairs.last?.acceleration == nil)
        let held = pairs.filter { $0.acceleration != nil }.count
        #expect((499...500).contains(held))
        // Timestamps stay in order.
        #expect(zip(pairs, pairs.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp })
        // A pending ring smaller than the wait: never more than its capacity is kept.
        var small = SampleAligner(capacity: 8, maximumWait: 10, maximumHold: 0.5)
        var n = 0
        for i in 1...1000 { small.add(gyro: Self.gyro(Double(i) * 0.001)) { _ in n += 1 } }
        #expect(small.pendingCount == 8 && n == 992)
    }

    /// The gyroscope stalls: nothing goes out and old accelerometer samples are overwritten.
    @Test func gyroscopeStalls() {
        var aligner = SampleAligner(capacity: 32)
        var n = 0
        for i in 0..<5000 { aligner.add(accelerometer: Self.accel(Double(i) * 0.001, 0)) { _ in n += 1 } }
        #expect(n == 0 && aligner.bufferedAccelerometerCount == 32)
        aligner.add(gyro: Self.gyro(4.9985)) { _ in n += 1 }
        #expect(n == 1)
    }

    /// Out-of-order and repeated timestamps are dropped; flush empties the queue.
    @Test func orderAndFlush() {
        var aligner = SampleAligner()
        var pairs: [SampleAligner.Pair] = []
        aligner.add(gyro: Self.gyro(1)) { pairs.append($0) }
        aligner.add(gyro: Self.gyro(1)) { pairs.append($0) }
        aligner.add(gyro: Self.gyro(0.5)) { pairs.append($0) }
        #expect(aligner.pendingCount == 1)
        aligner.flush { pairs.append($0) }
        #expect(pairs.count == 1 && pairs[0].acceleration == nil && aligner.pendingCount == 0)
    }

    /// Two devices as an LSM6DSx presents them: gyroscope at 208 Hz, accelerometer at 104 Hz with
    /// its own clock phase, each delivered in batches of 50 ms at different moments; tilting
    /// about x and y. Fusion stays within 1° RMS.
    @Test func separateDevicesEndToEnd() {
        let traj = Trajectory(attitude: { t in
            TQ.euler(roll: 25 * sin(0.8 * t), pitch: 30 * sin(0.5 * t), yaw: 0)
        })
        var noise = Noise(seed: 7)
        var fusion = DeviceMotionFusion()
        var outputs: [DeviceMotion] = []
        let gRate = 208.0, aRate = 104.0, aPhase = 0.0031
        var gyros: [GyroData] = [], accels: [AccelerometerData] = []
        let bias = deg * SensorModel.bmi160.gyroBias
        for i in 0..<Int(12 * gRate) {
            let t = Double(i) / gRate
            let w = traj.rate(t) + bias + noise.vector(0.007 * deg * (gRate / 2).squareRoot())
            gyros.append(GyroData(timestamp: t, rotationRate: RotationRate(x: w.x, y: w.y, z: w.z)))
        }
        for i in 0..<Int(12 * aRate) {
            let t = Double(i) / aRate + aPhase
            let a = traj.attitude(t).unrotate(V(0, 0, -1)) + noise.vector(180e-6 * (aRate / 2).squareRoot())
            accels.append(AccelerometerData(timestamp: t, acceleration: Acceleration(x: a.x, y: a.y, z: a.z)))
        }
        // Deliver in 50 ms batches; the accelerometer's batch lands 20 ms after the gyroscope's.
        var gi = 0, ai = 0
        var clock = 0.05
        while gi < gyros.count || ai < accels.count {
            while gi < gyros.count, gyros[gi].timestamp < clock { fusion.add(gyro: gyros[gi]) { outputs.append($0) }; gi += 1 }
            while ai < accels.count, accels[ai].timestamp < clock - 0.02 { fusion.add(accelerometer: accels[ai]) { outputs.append($0) }; ai += 1 }
            clock += 0.05
        }
        fusion.flush { outputs.append($0) }
        #expect(outputs.count >= gyros.count - 2)
        #expect(zip(outputs, outputs.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp })
        var sum = 0.0
        for m in outputs {
            let e = traj.attitude(m.timestamp).euler
            sum += pow(wrap(m.attitude.roll - e.roll), 2) + pow(wrap(m.attitude.pitch - e.pitch), 2)
        }
        let rms = (sum / Double(2 * outputs.count)).squareRoot() / deg
        figure("separate devices (208 Hz gyro, 104 Hz accel, batched, tilting): roll/pitch RMS \(fmt(rms, 3))°")
        #expect(rms < 1)
    }
}
