import Dispatch
import Foundation
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// Races that scenarios once found by running fifty times in a subprocess, made deterministic:
/// the scripted source holds each window open while the competing call is made.
@Suite("StreamHub races, deterministic", .timeLimit(.minutes(1)))
struct StreamHubRaceTests {
    @Test("Device motion stops while the gyroscope's own updates start in the window: the gyroscope keeps running (8749ea5)")
    func stopWhileStarting() throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        try manager.startDeviceMotionUpdates()
        let first = try #require(device.waitForRunning())
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        device.stopGate.withLock { $0 = (entered, release) }
        let stopped = DispatchSemaphore(value: 0), started = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { manager.stopDeviceMotionUpdates(); stopped.signal() }
        #expect(wait(entered), "the stop is winding the capture down")
        DispatchQueue.global().async { try? manager.startGyroUpdates(); started.signal() }
        // The start has registered its consumer and waits for the control queue.
        #expect(eventually { manager.hub.state.withLock { s in s.sensors[.gyroscope]?.consumers.values.contains { $0.owner == .user } ?? false } })
        device.stopGate.withLock { $0 = nil }
        release.signal()
        #expect(wait(stopped) && wait(started))
        #expect(first.isStopped)
        #expect(manager.isGyroActive, "the consumer added meanwhile survived the stop")
        #expect(!manager.isDeviceMotionActive && !manager.isAccelerometerActive)
        let now = try #require(device.waitForRunning([.gyroscope]))
        now.send(.batch(scriptedBatch([.gyroscope], at: [9])))
        #expect(manager.gyroData?.timestamp == 9)
        manager.stopAllUpdates()
    }

    @Test("Ending a device motion sequence after a newer run started leaves the newer run alone (db958a2)")
    func oldSequenceEndsOnlyItsRun() throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        let old = manager.deviceMotionUpdates()
        _ = try #require(device.waitForRunning())
        manager.startDeviceMotionUpdates { _, _ in }  // replaces the sequence's run
        let task = detachedTask { for try await _ in old {} }
        task.cancel()
        _ = runTask { try? await task.value }
        usleep(50_000)
        #expect(manager.isDeviceMotionActive, "the new run goes on")
        manager.stopAllUpdates()
    }

    @Test("A failure reported by a capture that was replaced does not stop its replacement")
    func staleFailureIgnored() throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        let errors = Locked(0)
        manager.startAccelerometerUpdates { _, e in if e != nil { errors.withLock { $0 += 1 } } }
        let first = try #require(device.waitForRunning())
        // The interval changes: the capture restarts. The old capture reports a failure late, after
        // its replacement started.
        manager.accelerometerUpdateInterval = 0.05
        let second = try #require(device.waitForRunning())
        #expect(second !== first)
        first.report([.accelerometer], MotionError(code: .ioError, detail: "stale"), ended: true)
        usleep(50_000)
        #expect(manager.isAccelerometerActive && errors.withLock { $0 } == 0)
        #expect(second.isRunning)
        manager.stopAllUpdates()
    }

    @Test("Start and stop from two threads 200 times: every capture thread is joined, nothing stays active")
    func startStopCycles() throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        for i in 0..<200 {
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) { manager.startAccelerometerUpdates { _, _ in } }
            DispatchQueue.global().async(group: group) { if i % 2 == 0 { try? manager.startDeviceMotionUpdates() } else { manager.stopDeviceMotionUpdates() } }
            #expect(group.wait(timeout: .now() + 5) == .success)
            manager.stopAllUpdates()
            #expect(!manager.isAccelerometerActive && !manager.isDeviceMotionActive && !manager.isGyroActive)
        }
        #expect(device.liveThreads == 0)
    }
}
