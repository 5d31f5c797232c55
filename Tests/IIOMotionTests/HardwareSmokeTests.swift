import Testing
import IIOMotion
import Glibc

/// Runs against whatever `IIOMOTION_URI` (default `local:`) provides. Off unless
/// `IIOMOTION_HARDWARE=1`, because CI machines have no IIO devices; the simulator-based
/// integration tests cover the same paths on every run.
@Suite("Hardware smoke test (IIOMOTION_HARDWARE=1)",
       .enabled(if: Environment.hardware, "set IIOMOTION_HARDWARE=1 to run against real (or namespaced fake) IIO devices"),
       .timeLimit(.minutes(3)))
struct HardwareSmokeTests {
    @Test func discoverAndReadEverything() throws {
        let manager = MotionManager(
            uri: Environment.uri,
            accelerometer: Environment.selector("IIOMOTION_ACCELEROMETER"),
            gyroscope: Environment.selector("IIOMOTION_GYROSCOPE"))
        let devices = try manager.devices
        print("IIOMotion devices at \(Environment.uri):")
        for d in devices {
            print("  \(d.id) name=\(d.name ?? "-") label=\(d.label ?? "-") location=\(d.location ?? "-") buffer=\(d.canBuffer) trigger=\(d.triggerName ?? "-") timestamp=\(d.hasTimestampChannel)")
            for s in d.sensors {
                let scale = s.scale.map { "(\($0.x), \($0.y), \($0.z))" } ?? "-"
                print("    \(s.kind): scale=\(scale) from \(s.scaleFile ?? "-") offset=(\(s.offset.x), \(s.offset.y), \(s.offset.z)) from \(s.offsetFile ?? "-")")
                print("      mount=\(s.mountMatrix) from \(s.mountMatrixSource) rate=\(s.samplingFrequency.map { "\($0)" } ?? "-") from \(s.samplingFrequencyFile ?? "-") available=\(s.availableSamplingFrequencies?.description ?? "-") pollable=\(s.isPollable)")
                if let p = s.problem { print("      problem: \(p)") }
            }
        }
        for kind in SensorKind.allCases {
            print("selected \(kind): \(manager.sensor(kind)?.deviceDescription ?? "none")")
        }
        if manager.sensor(.accelerometer) != nil {
            let a = try manager.readAccelerometer()
            print("accelerometer: t=\(a.timestamp) g=(\(a.acceleration.x), \(a.acceleration.y), \(a.acceleration.z))")
        }
        if manager.sensor(.gyroscope) != nil {
            let g = try manager.readGyro()
            print("gyro: t=\(g.timestamp) rad/s=(\(g.rotationRate.x), \(g.rotationRate.y), \(g.rotationRate.z))")
        }
        if manager.sensor(.magnetometer) != nil {
            let m = try manager.readMagnetometer()
            print("magnetometer: t=\(m.timestamp) µT=(\(m.magneticField.x), \(m.magneticField.y), \(m.magneticField.z))")
        } else {
            #expect(throws: MotionError.self) { try manager.readMagnetometer() }
        }
    }
}

enum Environment {
    static var hardware: Bool { getenvString("IIOMOTION_HARDWARE") == "1" }
    static var uri: String { getenvString("IIOMOTION_URI") ?? "local:" }
    /// A device id, label or name from the environment, else automatic selection.
    static func selector(_ variable: String) -> DeviceSelector {
        getenvString(variable).map { DeviceSelector.matching($0) } ?? .automatic
    }
}

private func getenvString(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}
