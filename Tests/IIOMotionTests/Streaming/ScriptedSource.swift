import Dispatch
import Foundation
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore

/// A scripted device for the unit tests: a ``CaptureSource`` whose capture thread (a real
/// ``JoinableThread``, so a capture thread to the library) delivers exactly what the test sends,
/// one step at a time, and waits for the next. Every wait is bounded, so that a hang fails its
/// test within seconds instead of stalling the suite.
final class ScriptedDevice: Sendable {
    /// Every capture the hub made, in order.
    let sources = Locked<[ScriptedSource]>([])
    /// Sensors whose capture cannot start, and why (a capture serving any of them throws it).
    let brokenSensors = Locked<[SensorKind: MotionError]>([:])
    /// A fallback reason the next captures report (as a polled capture does).
    let fallbackReason = Locked<String?>(nil)
    /// The sampling frequency the captures report.
    let rate: Double
    /// When set, a capture's stop signals `entered` and waits (at most 5 s) for `release`
    /// before it winds down: to hold a race's window open.
    let stopGate = Locked<(entered: DispatchSemaphore, release: DispatchSemaphore)?>(nil)

    init(rate: Double = 100) { self.rate = rate }

    /// The factory to give the manager.
    var factory: CaptureFactory {
        { [self] settings, deliver, fail in
            let source = ScriptedSource(device: self, settings: settings, deliver: deliver, fail: fail)
            sources.withLock { $0.append(source) }
            return source
        }
    }

    /// The capture running now (started and not stopped), if any.
    var running: ScriptedSource? { sources.withLock { $0.last { $0.isRunning } } }

    /// Waits until a capture runs that serves `kinds` (default: any), for at most `seconds`.
    func waitForRunning(_ kinds: Set<SensorKind>? = nil, seconds: Double = 5) -> ScriptedSource? {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if let r = running, kinds.map({ Set(r.settings.plans.map(\.info.kind)) == $0 }) ?? true { return r }
            usleep(1000)
        }
        return nil
    }

    /// Threads the captures started and have not yet ended.
    var liveThreads: Int { sources.withLock { $0.filter { $0.threadAlive }.count } }
}

/// One capture of a ``ScriptedDevice``.
final class ScriptedSource: CaptureSource, Sendable {
    let settings: CaptureSettings
    private let device: ScriptedDevice
    private let deliverBatch: @Sendable (CaptureBatch) -> Void
    private let failSensors: @Sendable ([SensorKind], MotionError, Bool) -> Void
    private let commands = Locked<[Command]>([])
    private let wake = DispatchSemaphore(value: 0)
    private let state = Locked<(started: Bool, stopped: Bool, alive: Bool)>((false, false, false))
    private let thread = Locked<JoinableThread?>(nil)

    enum Step: Sendable {
        case batch(CaptureBatch)
        /// Reports failed sensors; `ended` ends the capture's thread afterwards.
        case fail([SensorKind], MotionError, ended: Bool)
        /// Runs on the capture thread (to check what runs there).
        case run(@Sendable () -> Void)
    }

    private struct Command: Sendable {
        var step: Step
        var done: DispatchSemaphore
        let ran = Locked(false)
    }

    init(device: ScriptedDevice, settings: CaptureSettings,
         deliver: @escaping @Sendable (CaptureBatch) -> Void,
         fail: @escaping @Sendable ([SensorKind], MotionError, Bool) -> Void) {
        self.device = device
        self.settings = settings
        self.deliverBatch = deliver
        self.failSensors = fail
    }

    var deviceText: String { settings.plans.first?.info.deviceDescription ?? "scripted" }
    var kinds: [SensorKind] { settings.plans.map(\.info.kind) }
    var isRunning: Bool { state.withLock { $0.started && !$0.stopped } }
    var isStopped: Bool { state.withLock { $0.stopped } }
    var threadAlive: Bool { state.withLock { $0.alive } }

    func start() throws(MotionError) -> CaptureStatus {
        let broken = device.brokenSensors.withLock { $0 }
        if let e = kinds.lazy.compactMap({ broken[$0] }).first { throw e }
        state.withLock { $0.alive = true }
        let t = try JoinableThread(name: "scripted") { [self] in run() }
        thread.withLock { $0 = t }
        state.withLock { $0.started = true }
        return CaptureStatus(mode: device.fallbackReason.withLock { $0 } == nil ? .buffered : .polled,
                             samplingFrequency: device.rate, fallbackReason: device.fallbackReason.withLock { $0 },
                             samplesPerWakeup: RefillSizing.samplesPerRefill(rate: device.rate, interval: settings.interval,
                                                                             everySample: settings.everySample && !settings.timely),
                             timeout: 1)
    }

    func stop() {
        if let gate = device.stopGate.withLock({ $0 }), !isStopped {
            gate.entered.signal()
            _ = gate.release.wait(timeout: .now() + 5)
        }
        state.withLock { $0.stopped = true }
        wake.signal()
        let t = thread.withLock { t -> JoinableThread? in
            defer { t = nil }
            return t
        }
        t?.join()
    }

    /// Runs `step` on the capture thread and waits until it is done; false when the capture
    /// stopped first (or the step took more than `seconds`).
    @discardableResult
    func send(_ step: Step, seconds: Double = 5) -> Bool {
        let command = Command(step: step, done: DispatchSemaphore(value: 0))
        guard state.withLock({ !$0.stopped }) else { return false }
        commands.withLock { $0.append(command) }
        wake.signal()
        return command.done.wait(timeout: .now() + seconds) == .success && command.ran.withLock { $0 }
    }

    /// Calls the hub's failure callback from the calling thread, as a late report of a capture
    /// that is going.
    func report(_ kinds: [SensorKind], _ error: MotionError, ended: Bool) {
        failSensors(kinds, error, ended)
    }

    /// The capture thread: one step per command, until stopped.
    private func run() {
        defer {
            // What was sent and not run is answered, so no sender waits for a stopped capture.
            let left = commands.withLock { c -> [Command] in
                defer { c = [] }
                return c
            }
            for c in left { c.done.signal() }
            state.withLock { $0.alive = false }
        }
        while true {
            wake.wait()
            if state.withLock({ $0.stopped }) { return }
            let next = commands.withLock { c -> Command? in c.isEmpty ? nil : c.removeFirst() }
            guard let command = next else { continue }
            command.ran.withLock { $0 = true }
            switch command.step {
            case .batch(let b):
                deliverBatch(b)
            case .fail(let kinds, let error, let ended):
                failSensors(kinds, error, ended)
                if ended {
                    command.done.signal()
                    return
                }
            case .run(let body):
                body()
            }
            command.done.signal()
        }
    }
}

/// A batch holding samples of `kinds` at `times` (every sample, as a batched capture makes them).
func scriptedBatch(_ kinds: [SensorKind], at times: [Double], value: Double = 1) -> CaptureBatch {
    var b = CaptureBatch()
    for t in times {
        for k in kinds {
            let z = k == .accelerometer ? -value : 0
            b.append(Sample(timestamp: t, x: 0, y: 0, z: z), of: k, everySample: true)
        }
    }
    return b
}

/// Sample times from `start`, `count` of them, `period` apart.
func times(from start: Double, count: Int, period: Double = 0.01) -> [Double] {
    (0..<count).map { start + Double($0) * period }
}

/// A plan for a scripted sensor on `device`.
func scriptedPlan(_ kind: SensorKind, device: String = "iio:device0") -> SensorPlan {
    var info = sensor(device, name: "scripted", kind: kind)
    info.canBuffer = true
    info.availableSamplingFrequencies = .discrete([25, 50, 100, 200, 400, 800, 1600])
    return SensorPlan(info: info, deviceIndex: 0, rawChannels: [], scanElements: [], timestampElement: nil)
}

/// A manager over scripted sensors (accelerometer and gyroscope on one device by default).
func scriptedManager(_ kinds: [SensorKind] = [.accelerometer, .gyroscope], device: ScriptedDevice,
                     devices: [SensorKind: String] = [:]) -> MotionManager {
    MotionManager(plans: kinds.map { scriptedPlan($0, device: devices[$0] ?? "iio:device0") }, units: .coreMotion,
                  makeCapture: device.factory)
}

/// Waits until `condition` holds, for at most `seconds`; returns whether it did.
func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

/// Waits for `semaphore`, for at most `seconds`.
func wait(_ semaphore: DispatchSemaphore, _ seconds: Double = 5) -> Bool {
    semaphore.wait(timeout: .now() + seconds) == .success
}

/// Runs the tests' tasks on a dispatch queue of their own: the tests block their threads (bounded
/// waits on semaphores, as a synchronous caller of the library does), and those are the
/// cooperative pool's, which would then have no thread left for the loops they wait for.
final class QueueExecutor: TaskExecutor, @unchecked Sendable { // the queue is its only state
    static let shared = QueueExecutor()
    private let queue = DispatchQueue(label: "tests.tasks", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.async { unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// A detached task on ``QueueExecutor``.
@discardableResult
func detachedTask<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Task<T, any Error> {
    Task.detached(executorPreference: QueueExecutor.shared) { try await body() }
}

/// Runs `body` in a task and waits for it, for at most `seconds`; nil when it did not finish.
func runTask<T: Sendable>(_ seconds: Double = 5, _ body: @escaping @Sendable () async throws -> T) -> Result<T, any Error>? {
    let result = Locked<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let task = Task.detached(executorPreference: QueueExecutor.shared) {
        let r: Result<T, any Error>
        do { r = .success(try await body()) } catch { r = .failure(error) }
        result.withLock { $0 = r }
        done.signal()
    }
    guard done.wait(timeout: .now() + seconds) == .success else {
        task.cancel()
        return nil
    }
    return result.withLock { $0 }
}
