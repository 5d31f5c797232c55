import Dispatch
import Foundation
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// Releasing a manager stops everything it runs; no thread outlives it. Driven through a scripted
/// source, so each step is deterministic; every wait is bounded.
@Suite("MotionManager lifecycle", .timeLimit(.minutes(1)))
struct LifecycleTests {
    @Test("Releasing a manager while it streams stops its capture and joins the thread before the release returns")
    func releaseWhileStreaming() throws {
        let device = ScriptedDevice()
        var manager: MotionManager? = scriptedManager(device: device)
        let got = DispatchSemaphore(value: 0)
        manager!.startAccelerometerUpdates { d, _ in if d != nil { got.signal() } }
        manager!.startGyroBatches(on: .captureThread) { _, _ in }
        let source = try #require(device.waitForRunning())
        #expect(source.send(.batch(scriptedBatch([.accelerometer, .gyroscope], at: [1]))))
        #expect(wait(got))
        manager = nil
        #expect(source.isStopped, "the release stopped the capture")
        #expect(device.liveThreads == 0, "and joined its thread")
        #expect(!source.send(.batch(scriptedBatch([.accelerometer], at: [2]))), "nothing runs any more")
    }

    @Test("A manager released from inside a capture-thread handler (the handler held the last reference) ends its thread")
    func releaseOnCaptureThread() throws {
        let device = ScriptedDevice()
        let holder = Locked<MotionManager?>(scriptedManager(device: device))
        let manager = try #require(holder.withLock { $0 })
        let released = DispatchSemaphore(value: 0)
        // The handler holds the manager (as a user's handler may); it stops its own updates and
        // drops the last other reference, so the manager is released on the capture thread.
        manager.startAccelerometerBatches(on: .captureThread) { [manager] b, _ in
            guard b != nil else { return }
            manager.stopAccelerometerUpdates()
            released.signal()
        }
        holder.withLock { $0 = nil }
        let source = try #require(device.waitForRunning())
        #expect(source.send(.batch(scriptedBatch([.accelerometer], at: [1]))))
        #expect(wait(released))
        #expect(eventually { device.liveThreads == 0 }, "the capture thread ended")
        #expect(eventually { source.isStopped })
    }

    @Test("Releasing a manager ends its async sequences", arguments: ["updates", "batches", "deviceMotion"])
    func releaseEndsSequences(_ form: String) throws {
        let device = ScriptedDevice()
        var manager: MotionManager? = scriptedManager(device: device)
        let ended = DispatchSemaphore(value: 0)
        let outcome = Locked<String>("running")
        let task = sequenceTask(form, manager!) { _, r in outcome.withLock { $0 = r }; ended.signal() }
        defer { task.cancel() }
        _ = try #require(device.waitForRunning())
        manager = nil
        #expect(wait(ended), "the loop ended")
        #expect(outcome.withLock { $0 } == "finished")
        #expect(device.liveThreads == 0)
    }

    @Test("A new manager can capture what a released one captured, at once")
    func newManagerAfterRelease() throws {
        let device = ScriptedDevice()
        do {
            let first = scriptedManager(device: device)
            try first.startAccelerometerUpdates()
            _ = try #require(device.waitForRunning())
        }
        #expect(device.liveThreads == 0)
        let second = scriptedManager(device: device)
        try second.startAccelerometerUpdates()
        let source = try #require(device.waitForRunning())
        #expect(source.send(.batch(scriptedBatch([.accelerometer], at: [5]))))
        #expect(second.accelerometerData?.timestamp == 5)
        second.stopAllUpdates()
        #expect(device.liveThreads == 0)
    }
}

/// Starts one form of async sequence on `manager` and iterates it in a task (which does not hold
/// the manager); `done(form, outcome)` is called with "finished" or "threw: …" when the loop ends.
func sequenceTask(_ form: String, _ manager: MotionManager, onValue: (@Sendable () -> Void)? = nil,
                  _ done: @escaping @Sendable (String, String) -> Void) -> Task<Void, Never> {
    switch form {
    case "updates": consume(manager.accelerometerUpdates(), form, onValue, done)
    case "batches": consume(manager.accelerometerBatches(), form, onValue, done)
    default: consume(manager.deviceMotionUpdates(), form, onValue, done)
    }
}

func consume<T: Sendable>(_ stream: AsyncThrowingStream<T, any Error>, _ form: String, _ onValue: (@Sendable () -> Void)?,
                          _ done: @escaping @Sendable (String, String) -> Void) -> Task<Void, Never> {
    Task.detached(executorPreference: QueueExecutor.shared) {
        do {
            for try await _ in stream { onValue?() }
            done(form, "finished")
        } catch {
            done(form, "threw: \(error)")
        }
    }
}
