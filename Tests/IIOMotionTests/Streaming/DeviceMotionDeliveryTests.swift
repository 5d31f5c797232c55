import Dispatch
import Foundation
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// Device motion delivered as Core Motion does: the newest estimate, at most once per interval, at
/// the interval's cadence, through a one-pending-job mailbox.
@Suite("Device motion delivery", .timeLimit(.minutes(1)))
struct DeviceMotionDeliveryTests {
    /// Runs device motion at `interval` over a 100 Hz scripted IMU fed in refills of `scans`,
    /// waiting after each refill until the handler is idle; returns each refill's newest sample time
    /// and the estimates delivered (their times), with the statistics.
    func run(interval: Double, scans: Int, refills: Int) throws -> (newest: [Double], delivered: [[Double]], stats: UpdateStatistics, settings: CaptureSettings) {
        let device = ScriptedDevice(rate: 100)
        let manager = scriptedManager(device: device)
        manager.deviceMotionUpdateInterval = interval
        let got = Locked<[Double]>([]), total = Locked(0)
        manager.startDeviceMotionUpdates { m, _ in
            if let m { got.withLock { $0.append(m.timestamp) }; total.withLock { $0 += 1 } }
        }
        let source = try #require(device.waitForRunning())
        var newest: [Double] = [], delivered: [[Double]] = []
        for r in 0..<refills {
            let t = times(from: 1 + Double(r * scans) * 0.01, count: scans)
            source.send(.batch(scriptedBatch([.accelerometer, .gyroscope], at: t)))
            #expect(eventually { total.withLock { $0 } == manager.deviceMotionUpdateStatistics.delivered })
            newest.append(t.last!)
            delivered.append(got.withLock { a in defer { a = [] }; return a })
        }
        let stats = manager.deviceMotionUpdateStatistics
        manager.stopAllUpdates()
        return (newest, delivered, stats, source.settings)
    }

    @Test("The sensors are read at the interval; each delivery is the newest estimate, at most one per refill, one per interval",
          arguments: [(0.1, 10), (0.02, 2), (0.01, 1)])
    func newestAtCadence(_ interval: Double, _ scans: Int) throws {
        let r = try run(interval: interval, scans: scans, refills: 300 / scans)
        #expect(abs(r.settings.interval - interval) < 1e-9 && r.settings.timely, "refills follow device motion's interval: \(r.settings)")
        #expect(r.settings.requestedRate == 100)
        let firstDelivery = try #require(r.delivered.firstIndex { !$0.isEmpty })
        #expect(firstDelivery < 100 / scans, "estimates start within a second")
        for (i, d) in r.delivered.enumerated() where i > firstDelivery {
            #expect(d.count == 1, "one delivery per refill (no bursts), refill \(i): \(d)")
            if let t = d.first { #expect(r.newest[i] - t <= 0.01 + 1e-9, "the newest estimate (age \(r.newest[i] - t) s)") }
        }
        let all = r.delivered.flatMap { $0 }
        let gaps = zip(all, all.dropFirst()).map { $1 - $0 }
        #expect(gaps.allSatisfy { $0 >= interval - 0.005 - 1e-9 }, "at most one per interval: \(gaps.min() ?? -1)")
    }

    @Test("A blocked handler holds one pending estimate; the rest is counted as coalesced; it then gets the newest")
    func blockedHandler() throws {
        let device = ScriptedDevice(rate: 100)
        let manager = scriptedManager(device: device)
        manager.deviceMotionUpdateInterval = 0.01
        let gate = DispatchSemaphore(value: 0)
        let got = Locked<[Double]>([])
        manager.startDeviceMotionUpdates { m, _ in
            guard let m else { return }
            if got.withLock({ $0.append(m.timestamp); return $0.count }) == 1 { _ = gate.wait(timeout: .now() + 10) }
        }
        let source = try #require(device.waitForRunning())
        var last = 0.0
        for r in 0..<300 {
            let t = times(from: 1 + Double(r) * 0.01, count: 1)
            source.send(.batch(scriptedBatch([.accelerometer, .gyroscope], at: t)))
            last = t[0]
        }
        let blocked = manager.deviceMotionUpdateStatistics
        #expect(got.withLock { $0.count } == 1)
        #expect(blocked.delivered <= 2, "one running, one pending: \(blocked)")
        #expect(blocked.coalesced > 200, "\(blocked)")
        gate.signal()
        #expect(eventually { got.withLock { $0.count } == 2 })
        #expect(got.withLock { $0.last } == last, "the pending estimate is the newest")
        manager.stopAllUpdates()
    }

    @Test("Changing deviceMotionUpdateInterval while running restarts the sensors at the new interval")
    func intervalChange() throws {
        let device = ScriptedDevice(rate: 100)
        let manager = scriptedManager(device: device)
        manager.deviceMotionUpdateInterval = 0.02
        manager.startDeviceMotionUpdates { _, _ in }
        let first = try #require(device.waitForRunning())
        #expect(abs(first.settings.interval - 0.02) < 1e-9)
        manager.deviceMotionUpdateInterval = 0.005
        #expect(first.isStopped)
        let second = try #require(device.waitForRunning())
        #expect(abs(second.settings.interval - 0.005) < 1e-9)
        #expect(second.settings.requestedRate == 200, "the filter's rate follows: 1 / 0.005 s")
        manager.stopAllUpdates()
    }

    @Test("deviceMotion (pull) is at most one sample period older than the newest sample")
    func pullAge() throws {
        let device = ScriptedDevice(rate: 100)
        let manager = scriptedManager(device: device)
        manager.deviceMotionUpdateInterval = 0.05
        try manager.startDeviceMotionUpdates()
        let source = try #require(device.waitForRunning())
        var ages: [Double] = []
        for r in 0..<100 {
            let t = times(from: 1 + Double(r * 5) * 0.01, count: 5)
            source.send(.batch(scriptedBatch([.accelerometer, .gyroscope], at: t)))
            if let m = manager.deviceMotion { ages.append(t.last! - m.timestamp) }
        }
        #expect(ages.count > 50)
        #expect(ages.allSatisfy { $0 <= 0.01 + 1e-9 }, "max age \(ages.max() ?? -1)")
        manager.stopAllUpdates()
    }
}
