import Testing
import IIOMotion

@Suite("MotionManager without a usable context", .timeLimit(.minutes(3)))
struct ManagerFailureTests {
    @Test("An unreachable iiod means no sensors, not a crash or a throw")
    func unreachable() {
        // Port 1 on loopback refuses at once.
        let manager = MotionManager(uri: "ip:127.0.0.1:1")
        #expect(!manager.isAccelerometerAvailable)
        #expect(!manager.isGyroAvailable)
        #expect(!manager.isMagnetometerAvailable)
        #expect(manager.sensor(.accelerometer) == nil)
        do {
            _ = try manager.devices
            Issue.record("expected devices to throw")
        } catch {
            #expect(error.code == .contextUnavailable)
            #expect(error.uri == "ip:127.0.0.1:1")
            #expect(error.call == "iio_create_context_from_uri")
        }
        #expect(throws: MotionError.self) { try manager.readAccelerometer() }
    }

    @Test("A nonsense URI is an error, not a crash")
    func badURI() {
        let manager = MotionManager(uri: "nonsense:")
        #expect(!manager.isAccelerometerAvailable)
        #expect(throws: MotionError.self) { try manager.devices }
    }
}
