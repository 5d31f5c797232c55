import Dispatch
import Foundation
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// Any method of the manager may be called from any of its callbacks, including stopping the very
/// updates being delivered: no deadlock (every wait here is bounded), no crash.
@Suite("Calls from inside callbacks", .timeLimit(.minutes(1)))
struct ReentrancyTests {
    /// What a callback does with the manager: stop its own updates, start another sensor, change
    /// settings, read, and stop everything; `done` is signalled after it returned.
    static func exercise(_ m: MotionManager, stopOwn: () -> Void) {
        stopOwn()
        m.gyroUpdateInterval = 0.02
        try? m.startGyroUpdates()
        _ = m.accelerometerData
        _ = m.updateStatistics(of: .accelerometer)
        m.maximumBatchBacklog = 5000
        _ = m.mode(of: .gyroscope)
        m.stopGyroUpdates()
        m.stopAllUpdates()
    }

    enum Callback: String, CaseIterable, Sendable {
        case push, pushOnOwnQueue, batchOnQueue, batchOnCaptureThread, deviceMotion, failure, batchFailure
    }

    @Test("From every callback kind, the manager's methods run and return", arguments: Callback.allCases)
    func fromCallback(_ callback: Callback) throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        let returned = DispatchSemaphore(value: 0)
        let onCapture = Locked<Bool?>(nil)
        let queue = DispatchQueue(label: "user")
        switch callback {
        case .push, .pushOnOwnQueue:
            manager.startAccelerometerUpdates(to: callback == .push ? nil : queue) { [manager] d, _ in
                guard d != nil else { return }
                Self.exercise(manager) { manager.stopAccelerometerUpdates() }
                returned.signal()
            }
        case .batchOnQueue, .batchOnCaptureThread:
            let delivery: HandlerDelivery = callback == .batchOnQueue ? .queue(queue) : .captureThread
            manager.startAccelerometerBatches(on: delivery) { [manager] b, _ in
                guard b != nil else { return }
                onCapture.withLock { $0 = StreamHub.onCaptureThread }
                Self.exercise(manager) { manager.stopAccelerometerUpdates() }
                returned.signal()
            }
        case .deviceMotion:
            manager.startDeviceMotionUpdates { [manager] m, _ in
                guard m != nil else { return }
                Self.exercise(manager) { manager.stopDeviceMotionUpdates() }
                returned.signal()
            }
        case .failure:
            manager.startAccelerometerUpdates { [manager] _, e in
                guard e != nil else { return }
                Self.exercise(manager) { manager.startAccelerometerUpdates { _, _ in } }
                returned.signal()
            }
        case .batchFailure:
            manager.startAccelerometerBatches(on: .captureThread) { [manager] _, e in
                guard e != nil else { return }
                Self.exercise(manager) { manager.startAccelerometerBatches(on: .captureThread) { _, _ in } }
                returned.signal()
            }
        }
        let source = try #require(device.waitForRunning())
        if callback == .failure || callback == .batchFailure {
            source.send(.fail([.accelerometer], MotionError(code: .ioError, detail: "scripted"), ended: true))
        } else if callback == .deviceMotion {
            // Device motion needs a little of both sensors before its first estimate.
            for i in 0..<80 where !source.isStopped {
                source.send(.batch(scriptedBatch([.accelerometer, .gyroscope], at: times(from: Double(i) * 0.1, count: 10))), seconds: 1)
            }
        } else {
            source.send(.batch(scriptedBatch([.accelerometer, .gyroscope], at: [1])))
        }
        #expect(wait(returned), "the callback's calls returned")
        if callback == .batchOnCaptureThread { #expect(onCapture.withLock { $0 } == true) }
        #expect(eventually { !manager.isAccelerometerActive && !manager.isGyroActive && !manager.isDeviceMotionActive })
        manager.stopAllUpdates()
        #expect(eventually { device.liveThreads == 0 }, "no capture thread left")
    }

    @Test("From the notice handler (on its own queue, not the control queue), starting and stopping works")
    func fromNoticeHandler() throws {
        let device = ScriptedDevice()
        device.fallbackReason.withLock { $0 = "scripted: no buffer" }
        let manager = scriptedManager(device: device)
        let returned = DispatchSemaphore(value: 0)
        let notices = Locked<[String]>([])
        manager.noticeHandler = { [manager] text in
            notices.withLock { $0.append(text.message) }
            dispatchPrecondition(condition: .notOnQueue(manager.hub.control))
            Self.exercise(manager) { manager.stopAccelerometerUpdates() }
            try? manager.startMagnetometerUpdates()  // not available: an error, not a crash
            returned.signal()
        }
        try manager.startAccelerometerUpdates()
        #expect(wait(returned))
        #expect(notices.withLock { $0.count } == 1 && notices.withLock { $0[0] }.contains("scripted: no buffer"))
        manager.stopAllUpdates()
        #expect(eventually { device.liveThreads == 0 })
    }

    @Test("A capture-thread handler stopping its own sensor: the call returns at once, no batch follows, the thread ends")
    func captureThreadStopsItself() throws {
        let device = ScriptedDevice()
        let manager = scriptedManager(device: device)
        let calls = Locked(0)
        manager.startAccelerometerBatches(on: .captureThread) { [manager] b, _ in
            guard b != nil else { return }
            calls.withLock { $0 += 1 }
            manager.stopAccelerometerUpdates()
        }
        let source = try #require(device.waitForRunning())
        source.send(.batch(scriptedBatch([.accelerometer], at: [1])))
        source.send(.batch(scriptedBatch([.accelerometer], at: [2])))
        #expect(calls.withLock { $0 } == 1)
        #expect(!manager.isAccelerometerActive)
        #expect(eventually { device.liveThreads == 0 })
    }
}
