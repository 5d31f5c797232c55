import Dispatch
import Foundation
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// Every async sequence ends when its updates end; cancelling its task stops them; batch
/// sequences keep to ``MotionManager/maximumBatchBacklog``.
@Suite("Async sequences end with their updates", .timeLimit(.minutes(1)))
struct SequenceTests {
    static let forms = ["updates", "batches", "deviceMotion"]

    /// Starts `form`, waits until it runs, then `end`s it; returns how the loop ended.
    func outcome(_ form: String, _ end: (MotionManager, ScriptedDevice) -> Void) throws -> String? {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        let ended = DispatchSemaphore(value: 0)
        let result = Locked<String?>(nil)
        let task = sequenceTask(form, manager) { _, r in result.withLock { $0 = r }; ended.signal() }
        defer { task.cancel() }
        _ = try #require(device.waitForRunning())
        end(manager, device)
        guard wait(ended) else { return nil }
        return result.withLock { $0 }
    }

    @Test("stop… ends the sequence", arguments: forms)
    func stopEnds(_ form: String) throws {
        let r = try outcome(form) { m, _ in
            if form == "deviceMotion" { m.stopDeviceMotionUpdates() } else { m.stopAccelerometerUpdates() }
        }
        #expect(r == "finished")
    }

    @Test("stopAllUpdates ends the sequence", arguments: forms)
    func stopAllEnds(_ form: String) throws {
        #expect(try outcome(form) { m, _ in m.stopAllUpdates() } == "finished")
    }

    @Test("A failure ends the sequence by throwing it", arguments: forms)
    func failureThrows(_ form: String) throws {
        let r = try outcome(form) { _, device in
            let error = MotionError(code: .ioError, device: "iio:device0 (scripted)", detail: "scripted failure")
            device.running?.send(.fail([.accelerometer], error, ended: true))
        }
        #expect(r?.hasPrefix("threw:") == true && r?.contains("scripted failure") == true, "\(String(describing: r))")
    }

    @Test("A competing start that replaces it ends the sequence", arguments: forms)
    func replacementEnds(_ form: String) throws {
        let r = try outcome(form) { m, _ in
            switch form {
            case "updates": m.startAccelerometerUpdates { _, _ in }
            case "batches": m.startAccelerometerBatches { _, _ in }
            default: m.startDeviceMotionUpdates { _, _ in }
            }
        }
        #expect(r == "finished")
    }

    @Test("Cancelling the task stops the updates", arguments: forms)
    func cancelStops(_ form: String) throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        let ended = DispatchSemaphore(value: 0)
        let task = sequenceTask(form, manager) { _, _ in ended.signal() }
        let source = try #require(device.waitForRunning())
        task.cancel()
        #expect(wait(ended))
        #expect(eventually { source.isStopped }, "the capture stopped")
        #expect(!manager.isAccelerometerActive && !manager.isDeviceMotionActive)
        #expect(eventually { device.liveThreads == 0 })
    }

    @Test("Values already handed over reach the loop before the end")
    func drainsBeforeEnd() throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        let count = Locked(0)
        let ended = DispatchSemaphore(value: 0)
        let task = consume(manager.accelerometerBatches(), "batches", { count.withLock { $0 += 1 } }) { _, _ in ended.signal() }
        defer { task.cancel() }
        let source = try #require(device.waitForRunning())
        for i in 0..<5 { source.send(.batch(scriptedBatch([.accelerometer], at: times(from: Double(i), count: 10)))) }
        manager.stopAccelerometerUpdates()
        #expect(wait(ended))
        #expect(count.withLock { $0 } == 5)
    }

    @Test("A slow batch loop holds at most maximumBatchBacklog samples; the rest is dropped and counted")
    func batchBacklog() throws {
        let device = ScriptedDevice(rate: 1600)
        let manager = scriptedManager(device: device)
        manager.maximumBatchBacklog = 1000
        let stream = manager.accelerometerBatches()
        let source = try #require(device.waitForRunning())
        // 17 batches of 1,000 samples (about 10 s at 1.6 kHz) while the loop takes none.
        for i in 0..<17 {
            source.send(.batch(scriptedBatch([.accelerometer], at: times(from: Double(i), count: 1000, period: 1 / 1600))))
        }
        let stats = manager.updateStatistics(of: .accelerometer)
        #expect(stats.samples == 17_000)
        #expect(stats.dropped == 16_000, "\(stats)")
        // The loop gets what was kept, then, once it has taken it, new batches again.
        let first = runTask { () -> Int in
            var it = stream.makeAsyncIterator()
            return try await it.next()?.count ?? -1
        }
        #expect(try first?.get() == 1000)
        source.send(.batch(scriptedBatch([.accelerometer], at: times(from: 100, count: 1000, period: 1 / 1600))))
        #expect(manager.updateStatistics(of: .accelerometer).dropped == 16_000, "room again after the loop took a batch")
        manager.stopAllUpdates()
    }

    @Test("Dropping a sequence without iterating it stops its updates", arguments: ["updates", "batches"])
    func droppedStops(_ form: String) throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        do {
            if form == "updates" { _ = manager.accelerometerUpdates() } else { _ = manager.accelerometerBatches() }
        }
        #expect(eventually { !manager.isAccelerometerActive })
        #expect(eventually { device.liveThreads == 0 })
    }
}
