// Scenarios exercising IIOMotion's streaming API, for the integration tests, which run them inside
// iio-sim and check what they print: one JSON object per line on stdout.
//
//   motion-scenarios every-sample SECONDS [RATE]   batched delivery at interval 0: every sample
//   motion-scenarios capped SECONDS INTERVAL RATE   push delivery: how many, how new
//   motion-scenarios pull SECONDS                   accelerometerData from a tight loop on another thread
//   motion-scenarios start-stop COUNT               start and stop with handlers running, COUNT times
//   motion-scenarios blocking-handler [RATE] [BACKLOG]  handlers that block for a second
//   motion-scenarios failure SECONDS [capture-thread]  wait for a handler error (e.g. under --unplug)
//   motion-scenarios capture-thread SECONDS [RATE]  batches on the capture thread; a handler stops its own sensor
//   motion-scenarios stop-while-starting COUNT      one owner stops a sensor while another starts it
//   motion-scenarios device-motion-sharing           device motion and the accelerometer's own updates side by side
//   motion-scenarios bench-motion-age SECONDS INTERVAL  device motion's delivered estimate against the newest sample
//   motion-scenarios release [capture-thread]       a manager released while it streams; a new one streams the device at once
//
// Over 500 lines: one `switch` over the scenarios, each a few dozen lines run as a script with
// the one manager of this process; the helpers they share are in Support.swift.
import Dispatch
@preconcurrency import Glibc
import IIOMotion
import SystemSupport
import Synchronization

let args = Array(CommandLine.arguments.dropFirst())
guard let scenario = args.first else { fail("usage: motion-scenarios SCENARIO ARGS...") }
func number(_ i: Int, _ def: Double) -> Double { args.count > i ? Double(args[i]) ?? def : def }

// MOTION_URI picks the context (e.g. ip:127.0.0.1), MOTION_MODE the preferred mode.
/// The process environment (no Foundation here: the benchmarks measure start-up too).
let environment = Environment()
// SI for every scenario but the throughput benchmark, which converts to g as most users would (one
// manager: a second one would discover the sensors again, start-up cost the benchmark counts).
let manager = MotionManager(uri: environment["MOTION_URI"] ?? "local:", units: scenario == "bench-throughput" ? .coreMotion : .si)
manager.noticeHandler = { warn("notice: \($0)") }
if let mode = environment["MOTION_MODE"].flatMap(SensorMode.Preference.init(rawValue:)) { manager.preferredMode = mode }

switch scenario {
case "every-sample":
    let seconds = number(1, 2)
    if args.count > 2 { manager.requestSamplingFrequency(number(2, 100), for: .accelerometer) }
    manager.accelerometerUpdateInterval = 0
    let samples = Locked<[Double]>([])
    let failure = Locked<MotionError?>(nil)
    manager.startAccelerometerBatches { batch, error in
        if let batch { samples.withLock { $0 += batch.map(\.timestamp) } }
        if let error { failure.withLock { $0 = error } }
    }
    let mode = manager.mode(of: .accelerometer)?.description ?? "stopped"
    let fallback = manager.fallbackReason(of: .accelerometer).map { "\"\($0)\"" } ?? "null"
    let rate = manager.samplingFrequency(of: .accelerometer) ?? 0
    usleep(UInt32(seconds * 1e6))
    manager.stopAllUpdates()
    let t = samples.withLock { $0 }
    let gaps = zip(t, t.dropFirst()).filter { $1 <= $0 }.count
    emit([("samples", "\(t.count)"), ("nonIncreasing", "\(gaps)"), ("mode", "\"\(mode)\""), ("fallback", fallback), ("rate", "\(rate)"),
          ("first", "\(t.first ?? -1)"), ("last", "\(t.last ?? -1)"),
          ("error", failure.withLock { $0 }.map { "\"\($0)\"" } ?? "null")])
case "capped":
    let seconds = number(1, 2), interval = number(2, 0.05)
    manager.requestSamplingFrequency(number(3, 800), for: .accelerometer)
    manager.accelerometerUpdateInterval = interval
    let deliveries = Locked<[(Double, Double)]>([])
    manager.startAccelerometerUpdates { data, _ in
        if let data { deliveries.withLock { $0.append((monotonicSeconds(), data.timestamp)) } }
    }
    let rate = manager.samplingFrequency(of: .accelerometer) ?? 0
    usleep(UInt32(seconds * 1e6))
    let stats = manager.updateStatistics(of: .accelerometer)
    manager.stopAllUpdates()
    let d = deliveries.withLock { $0 }
    let ages = d.map { $0.0 - $0.1 }.sorted()
    emit([("deliveries", "\(d.count)"), ("rate", "\(rate)"), ("samples", "\(stats.samples)"), ("coalesced", "\(stats.coalesced)"),
          ("maxAge", "\(ages.last ?? -1)"), ("medianAge", "\(ages.isEmpty ? -1 : ages[ages.count / 2])")])
case "pull":
    let seconds = number(1, 2)
    manager.accelerometerUpdateInterval = 0
    do { try manager.startAccelerometerUpdates() } catch { fail("\(error)") }
    let result = Locked<(reads: Int, distinct: Int, badMagnitude: Int, backwards: Int)>((0, 0, 0, 0))
    let done = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
        var reads = 0, distinct = 0, bad = 0, backwards = 0
        var last = -1.0
        let end = monotonicSeconds() + seconds
        while monotonicSeconds() < end {
            guard let d = manager.accelerometerData else { continue }
            reads += 1
            if d.timestamp != last {
                if d.timestamp < last { backwards += 1 }
                last = d.timestamp
                distinct += 1
                let a = d.acceleration
                let m = (a.x * a.x + a.y * a.y + a.z * a.z).squareRoot()
                if abs(m - 9.80665) > 0.05 { bad += 1 }
            }
        }
        result.withLock { $0 = (reads, distinct, bad, backwards) }
        done.signal()
    }
    done.wait()
    manager.stopAllUpdates()
    let r = result.withLock { $0 }
    emit([("reads", "\(r.reads)"), ("distinct", "\(r.distinct)"), ("badMagnitude", "\(r.badMagnitude)"), ("backwards", "\(r.backwards)")])
case "start-stop":
    // COUNT cycles of start and stop with handlers running; descriptors and threads are counted
    // after a first cycle (which creates the handler queues' threads) and at the end.
    let count = Int(number(1, 200))
    let delivered = Atomic<Int>(0)
    var errors = 0
    func cycle() {
        manager.accelerometerUpdateInterval = 0.01
        manager.startAccelerometerUpdates { d, e in if d != nil { delivered.add(1, ordering: .relaxed) }; _ = e }
        if manager.isGyroAvailable {
            manager.startGyroUpdates { _, _ in }
        }
        usleep(2000)
        manager.stopAccelerometerUpdates()
        manager.stopGyroUpdates()
        if manager.isAccelerometerActive || manager.isGyroActive { errors += 1 }
    }
    cycle()
    usleep(200_000)
    let before = processCounts()
    let t0 = monotonicSeconds()
    for _ in 1..<count { cycle() }
    let seconds = monotonicSeconds() - t0
    // Dispatch's worker threads linger a little after their last job; ours must be gone at once.
    var after = processCounts()
    for _ in 0..<50 where after.threads > before.threads {
        usleep(100_000)
        after = processCounts()
    }
    emit([("cycles", "\(count)"), ("stillActive", "\(errors)"), ("delivered", "\(delivered.load(ordering: .relaxed))"),
          ("seconds", "\(seconds)"), ("fdsBefore", "\(before.fds)"), ("fdsAfter", "\(after.fds)"),
          ("threadsBefore", "\(before.threads)"), ("threadsAfter", "\(after.threads)"),
          ("captureThreadsAfter", "\(after.captureThreads)")])
case "blocking-handler":
    // The accelerometer's push handler blocks for 1 s at its first sample; its batched handler
    // blocks for 1 s at its first batch. Meanwhile the gyroscope's handler (on its own queue),
    // the capture (pull reads stay fresh) and memory (one pending sample; a bounded backlog) must
    // not suffer.
    let rate = number(1, 800)
    let backlog = Int(number(2, 100_000))
    for kind in [SensorKind.accelerometer, .gyroscope] { manager.requestSamplingFrequency(rate, for: kind) }
    manager.accelerometerUpdateInterval = 0.01
    manager.gyroUpdateInterval = 0.01
    manager.maximumBatchBacklog = backlog
    let pushCalls = Atomic<Int>(0), gyroCalls = Atomic<Int>(0), batchSamples = Atomic<Int>(0)
    manager.startAccelerometerUpdates { d, _ in
        if d != nil, pushCalls.add(1, ordering: .relaxed).newValue == 1 { usleep(1_000_000) }
    }
    let firstBatch = Atomic<Bool>(true)
    manager.startAccelerometerBatches { b, _ in
        if let b {
            if firstBatch.exchange(false, ordering: .relaxed) { usleep(1_000_000) }
            batchSamples.add(b.count, ordering: .relaxed)
        }
    }
    manager.startGyroUpdates { d, _ in if d != nil { gyroCalls.add(1, ordering: .relaxed) } }
    let t0 = monotonicSeconds()
    var maxAge = 0.0
    while monotonicSeconds() - t0 < 2.5 {
        if let a = manager.accelerometerData, monotonicSeconds() - t0 > 0.3 { maxAge = max(maxAge, monotonicSeconds() - a.timestamp) }
        usleep(5000)
    }
    // The counts after the stop (they are kept until the next start), so that a refill arriving
    // between reading them and stopping is in both the batches and the counts.
    manager.stopAllUpdates()
    usleep(100_000)
    let stats = manager.updateStatistics(of: .accelerometer)
    let gyroStats = manager.updateStatistics(of: .gyroscope)
    emit([("pushCalls", "\(pushCalls.load(ordering: .relaxed))"), ("gyroCalls", "\(gyroCalls.load(ordering: .relaxed))"),
          ("batchSamples", "\(batchSamples.load(ordering: .relaxed))"), ("samples", "\(stats.samples)"),
          ("coalesced", "\(stats.coalesced)"), ("dropped", "\(stats.dropped)"), ("delivered", "\(stats.delivered)"),
          ("gyroSamples", "\(gyroStats.samples)"), ("maxPullAge", "\(maxAge)")])
case "failure":
    let seconds = number(1, 5)
    let t0 = monotonicSeconds()
    let got = Locked<(Double, String)?>(nil)
    let sem = DispatchSemaphore(value: 0)
    manager.accelerometerUpdateInterval = 0.05
    if args.count > 2 && args[2] == "capture-thread" {
        manager.startAccelerometerBatches(on: .captureThread) { _, e in
            if let e { got.withLock { $0 = (monotonicSeconds() - t0, "\(e)") }; sem.signal() }
        }
    } else {
        manager.startAccelerometerUpdates { _, e in
            if let e { got.withLock { $0 = (monotonicSeconds() - t0, "\(e)") }; sem.signal() }
        }
    }
    let r = sem.wait(timeout: .now() + seconds)
    let stop0 = monotonicSeconds()
    manager.stopAllUpdates()
    let g = got.withLock { $0 }
    emit([("error", r == .success ? "true" : "false"), ("after", "\(g?.0 ?? -1)"), ("stopSeconds", "\(monotonicSeconds() - stop0)"),
          ("message", g.map { "\"\(String($0.1.map { $0 == "\"" ? "'" : $0 }))\"" } ?? "null")])
case "capture-thread":
    // Batches on the capture thread: every sample, on the thread named after the device. Then the
    // accelerometer's handler stops its own updates from inside itself: the call returns, no
    // accelerometer batch follows, the gyroscope goes on; at the end no capture thread is left.
    let seconds = number(1, 2)
    manager.requestSamplingFrequency(number(2, 800), for: .accelerometer)
    manager.accelerometerUpdateInterval = 0
    manager.gyroUpdateInterval = 0
    struct Seen: Sendable {
        var accel: [Double] = [], gyro = 0, gyroAfterStop = 0, accelAfterStop = 0
        var threads: Set<String> = [], stopped = false, stopSeconds = -1.0
        var restartWanted = false, restartSeconds = -1.0
    }
    let seen = Locked(Seen())
    let stoppedSignal = DispatchSemaphore(value: 0)
    let before = processCounts()
    let stopAt = monotonicSeconds() + seconds
    manager.startAccelerometerBatches(on: .captureThread) { batch, _ in
        guard let batch else { return }
        let name = firstLine("/proc/thread-self/comm")
        let stopNow = seen.withLock { s -> Bool in
            if s.stopped { s.accelAfterStop += batch.count; return false }
            s.accel += batch.map(\.timestamp)
            s.threads.insert(name)
            return monotonicSeconds() >= stopAt
        }
        guard stopNow else { return }
        let t = monotonicSeconds()
        manager.stopAccelerometerUpdates()
        seen.withLock { $0.stopped = true; $0.stopSeconds = monotonicSeconds() - t }
        stoppedSignal.signal()
    }
    let restarted = DispatchSemaphore(value: 0)
    manager.startGyroBatches(on: .captureThread) { batch, _ in
        guard let batch else { return }
        let name = firstLine("/proc/thread-self/comm")
        let restart = seen.withLock { s -> Bool in
            if s.stopped { s.gyroAfterStop += batch.count } else { s.gyro += batch.count }
            s.threads.insert(name)
            defer { s.restartWanted = false }
            return s.restartWanted
        }
        guard restart else { return }
        // Starting from a capture-thread handler (this device's capture restarts) must not block.
        let t = monotonicSeconds()
        do { try manager.startAccelerometerUpdates() } catch { warn("start from the handler: \(error)") }
        seen.withLock { $0.restartSeconds = monotonicSeconds() - t }
        restarted.signal()
    }
    let rate = manager.samplingFrequency(of: .accelerometer) ?? 0
    let stopped = stoppedSignal.wait(timeout: .now() + seconds + 5) == .success
    usleep(500_000)
    let accelActive = manager.isAccelerometerActive, gyroActive = manager.isGyroActive
    seen.withLock { $0.restartWanted = true }
    let restartedInTime = restarted.wait(timeout: .now() + 5) == .success
    var accelAfterRestart = false
    for _ in 0..<300 where !accelAfterRestart {
        accelAfterRestart = manager.accelerometerData != nil
        usleep(10_000)
    }
    manager.stopAllUpdates()
    usleep(200_000)
    let after = processCounts()
    let s = seen.withLock { $0 }
    let gaps = zip(s.accel, s.accel.dropFirst()).map { $1 - $0 }
    emit([("stopped", "\(stopped)"), ("rate", "\(rate)"), ("accel", "\(s.accel.count)"),
          ("nonIncreasing", "\(gaps.filter { $0 <= 0 }.count)"), ("maxGap", "\(gaps.max() ?? -1)"),
          ("gyro", "\(s.gyro)"), ("gyroAfterStop", "\(s.gyroAfterStop)"), ("accelAfterStop", "\(s.accelAfterStop)"),
          ("stopSeconds", "\(s.stopSeconds)"), ("accelActive", "\(accelActive)"), ("gyroActive", "\(gyroActive)"),
          ("restarted", "\(restartedInTime)"), ("restartSeconds", "\(s.restartSeconds)"), ("accelAfterRestart", "\(accelAfterRestart)"),
          ("threads", "\"\(s.threads.sorted().joined(separator: ","))\""),
          ("captureThreadsBefore", "\(before.captureThreads)"), ("captureThreadsAfter", "\(after.captureThreads)")])
case "stop-while-starting":
    // COUNT times: device motion runs; one thread stops it while another starts the gyroscope's
    // own updates. The gyroscope must end up running (a stop once wiped consumers another
    // owner added while the capture was being wound down).
    let cycles = Int(number(1, 50))
    var lost = 0
    for _ in 0..<cycles {
        do { try manager.startDeviceMotionUpdates() } catch { fail("\(error)") }
        let both = DispatchGroup()
        DispatchQueue.global().async(group: both) { manager.stopDeviceMotionUpdates() }
        DispatchQueue.global().async(group: both) { try? manager.startGyroUpdates() }
        both.wait()
        if !manager.isGyroActive { lost += 1 }
        manager.stopAllUpdates()
    }
    emit([("cycles", "\(cycles)"), ("lost", "\(lost)")])
case "async":
    // for try await over both async forms until COUNT updates and COUNT batched samples arrived.
    let count = Int(number(1, 20))
    manager.accelerometerUpdateInterval = 0.02
    let done = DispatchSemaphore(value: 0)
    let result = Locked<(updates: [Double], samples: [Double])>(([], []))
    Task.detached {
        do {
            for try await d in manager.accelerometerUpdates() {
                let n = result.withLock { $0.updates.append(d.timestamp); return $0.updates.count }
                if n >= count { break }
            }
        } catch { warn("updates: \(error)") }
        done.signal()
    }
    Task.detached {
        do {
            for try await batch in manager.gyroBatches() {
                let n = result.withLock { $0.samples += batch.map(\.timestamp); return $0.samples.count }
                if n >= count { break }
            }
        } catch { warn("batches: \(error)") }
        done.signal()
    }
    let ok = done.wait(timeout: .now() + 10) == .success && done.wait(timeout: .now() + 10) == .success
    usleep(200_000)  // the streams' termination stops their consumers
    let r = result.withLock { $0 }
    emit([("finished", "\(ok)"), ("updates", "\(r.updates.count)"), ("samples", "\(r.samples.count)"),
          ("ordered", "\(zip(r.samples, r.samples.dropFirst()).allSatisfy { $0 < $1 })"),
          ("stillActive", "\(manager.isAccelerometerActive || manager.isGyroActive)")])
case "bench-throughput":
    // Every sample of accelerometer and gyroscope, decoded, converted (g, rad/s) and summed by a
    // batched handler, until COUNT scans arrived; the simulator streams in --fast mode. The
    // handlers run on the capture thread, or with `queue`, on a queue of their own.
    let count = Int(number(1, 1_000_000))
    let onQueue = args.count > 2 && args[2] == "queue"
    manager.accelerometerUpdateInterval = 2.56  // 4096 scans per refill at 1600 Hz, as iio_readdev -b 4096
    manager.gyroUpdateInterval = 2.56
    manager.requestSamplingFrequency(1600, for: .accelerometer)
    manager.requestSamplingFrequency(1600, for: .gyroscope)
    let sums = Locked<(n: Int, sum: Double)>((0, 0))
    let done = DispatchSemaphore(value: 0)
    // One queue for both handlers, as a logger handling both sensors would have: with each sensor
    // on its own default queue, every refill wakes two threads instead of one.
    let delivery: HandlerDelivery = onQueue ? .queue(DispatchQueue(label: "bench handlers")) : .captureThread
    let t0 = monotonicSeconds()
    manager.startAccelerometerBatches(on: delivery) { batch, _ in
        guard let batch else { return }
        var s = 0.0
        for d in batch { s += d.acceleration.x + d.acceleration.y + d.acceleration.z }
        let n = sums.withLock { $0.n += batch.count; $0.sum += s; return $0.n }
        if n >= count { done.signal() }
    }
    manager.startGyroBatches(on: delivery) { batch, _ in
        guard let batch else { return }
        var s = 0.0
        for d in batch { s += d.rotationRate.x + d.rotationRate.y + d.rotationRate.z }
        sums.withLock { $0.sum += s }
    }
    _ = done.wait(timeout: .now() + 120)
    let t1 = monotonicSeconds()
    manager.stopAllUpdates()
    let r = sums.withLock { $0 }
    emit([("scans", "\(r.n)"), ("seconds", "\(t1 - t0)"), ("checksum", "\(r.sum.isFinite)")])
case "bench-pull":
    // ns per accelerometerData read (each timed), while the sensor streams at RATE; and how many
    // mallocs the reads made (with the counting preload of scripts/bench, else -1).
    let reads = Int(number(1, 1_000_000))
    manager.requestSamplingFrequency(number(2, 1600), for: .accelerometer)
    manager.accelerometerUpdateInterval = 0
    do { try manager.startAccelerometerUpdates() } catch { fail("\(error)") }
    while manager.accelerometerData == nil { usleep(1000) }
    typealias Counter = @convention(c) () -> Int
    let counter = dlsym(nil, "bench_malloc_count").map { unsafeBitCast($0, to: Counter.self) }
    var ts = timespec()
    func ns() -> Int64 { clock_gettime(CLOCK_MONOTONIC, &ts); return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec) }
    var overhead = [Int64](repeating: 0, count: 10_000)
    for i in 0..<overhead.count { let a = ns(); let b = ns(); overhead[i] = b - a }
    overhead.sort()
    var samples = [Int64](repeating: 0, count: reads)
    let m0 = counter?() ?? -1
    var sink = 0.0
    for i in 0..<reads {
        let a = ns()
        let d = manager.accelerometerData
        let b = ns()
        sink += d?.acceleration.z ?? 0
        samples[i] = b - a
    }
    let m1 = counter?() ?? -1
    manager.stopAllUpdates()
    samples.sort()
    let base = overhead[overhead.count / 2]
    emit([("medianNs", "\(samples[reads / 2] - base)"), ("p99Ns", "\(samples[reads * 99 / 100] - base)"),
          ("timerNs", "\(base)"), ("mallocs", "\(counter == nil ? -1 : m1 - m0)"), ("sink", "\(sink.isFinite)")])
case "bench-latency":
    // A 1 kHz game loop reading accelerometerData: the age of the newest sample at each read.
    let seconds = number(1, 5)
    manager.requestSamplingFrequency(number(2, 1000), for: .accelerometer)
    manager.accelerometerUpdateInterval = number(3, 0)
    do { try manager.startAccelerometerUpdates() } catch { fail("\(error)") }
    while manager.accelerometerData == nil { usleep(1000) }
    var ages: [Double] = []
    let end = monotonicSeconds() + seconds
    while monotonicSeconds() < end {
        if let d = manager.accelerometerData { ages.append(monotonicSeconds() - d.timestamp) }
        usleep(1000)
    }
    let rate = manager.samplingFrequency(of: .accelerometer) ?? 0
    manager.stopAllUpdates()
    ages.sort()
    emit([("reads", "\(ages.count)"), ("rate", "\(rate)"), ("p50", "\(ages[ages.count / 2])"), ("p99", "\(ages[ages.count * 99 / 100])")])
case "bench-idle":
    // Pull mode at 1.6 kHz with an interval of 0.05 s for SECONDS: only the capture thread works.
    let seconds = number(1, 10)
    for kind in [SensorKind.accelerometer, .gyroscope] { manager.requestSamplingFrequency(1600, for: kind) }
    manager.accelerometerUpdateInterval = 0.05
    manager.gyroUpdateInterval = 0.05
    do {
        try manager.startAccelerometerUpdates()
        try manager.startGyroUpdates()
    } catch { fail("\(error)") }
    usleep(UInt32(seconds * 1e6))
    manager.stopAllUpdates()
    emit([("ok", "true")])
case "device-motion-sharing":
    // The accelerometer's own handler and device motion share one capture; stopping either leaves
    // the other running (as in Core Motion).
    let own = Atomic<Int>(0), fused = Atomic<Int>(0)
    manager.accelerometerUpdateInterval = 0.02
    manager.startAccelerometerUpdates { d, _ in if d != nil { own.add(1, ordering: .relaxed) } }
    manager.startDeviceMotionUpdates { m, _ in if m != nil { fused.add(1, ordering: .relaxed) } }
    usleep(500_000)
    let both = (own.load(ordering: .relaxed), fused.load(ordering: .relaxed))
    let activeBoth = (manager.isAccelerometerActive, manager.isDeviceMotionActive, manager.isGyroActive)
    manager.stopDeviceMotionUpdates()
    let afterMotionStop = own.load(ordering: .relaxed)
    usleep(500_000)
    let ownGrew = own.load(ordering: .relaxed) - afterMotionStop
    let stillAccel = manager.isAccelerometerActive
    manager.startDeviceMotionUpdates { m, _ in if m != nil { fused.add(1, ordering: .relaxed) } }
    manager.stopAccelerometerUpdates()
    let fusedBefore = fused.load(ordering: .relaxed)
    usleep(500_000)
    let fusedGrew = fused.load(ordering: .relaxed) - fusedBefore
    let stillMotion = manager.isDeviceMotionActive
    manager.stopAllUpdates()
    emit([("ownWithBoth", "\(both.0)"), ("fusedWithBoth", "\(both.1)"), ("accelActive", "\(activeBoth.0)"),
          ("motionActive", "\(activeBoth.1)"), ("gyroActive", "\(activeBoth.2)"),
          ("ownAfterMotionStop", "\(ownGrew)"), ("accelStillActive", "\(stillAccel)"),
          ("fusedAfterAccelStop", "\(fusedGrew)"), ("motionStillActive", "\(stillMotion)"),
          ("motionAfterStopAll", "\(manager.isDeviceMotionActive)")])
case "bench-motion-age":
    // Device motion pushed at INTERVAL for SECONDS: in the handler, how much older the delivered
    // estimate is than the newest sample the manager has (p50, p99), the time between calls
    // (no bursts: the shortest gap stays near the interval), and the calls per second.
    let seconds = number(1, 5), interval = number(2, 0.02)
    manager.deviceMotionUpdateInterval = interval
    struct Seen: Sendable { var ages: [Double] = [], calls: [Double] = [] }
    let seen = Locked(Seen())
    let handlerQueue = DispatchQueue(label: "bench-motion-age")
    manager.startDeviceMotionUpdates(to: handlerQueue) { m, _ in
        guard let m else { return }
        let t = monotonicSeconds()
        let newest = max(manager.accelerometerData?.timestamp ?? 0, manager.gyroData?.timestamp ?? 0)
        seen.withLock { $0.ages.append(newest - m.timestamp); $0.calls.append(t) }
    }
    usleep(500_000)  // the filter's start-up
    seen.withLock { $0 = Seen() }
    usleep(UInt32(seconds * 1e6))
    let rate = manager.samplingFrequency(of: .gyroscope) ?? 0
    let stats = manager.deviceMotionUpdateStatistics
    manager.stopAllUpdates()
    let s = seen.withLock { $0 }
    let ages = s.ages.sorted()
    let gaps = zip(s.calls, s.calls.dropFirst()).map { $1 - $0 }.sorted()
    func pick(_ a: [Double], _ q: Double) -> Double { a.isEmpty ? -1 : a[min(a.count - 1, Int(Double(a.count) * q))] }
    emit([("interval", "\(interval)"), ("rate", "\(rate)"), ("calls", "\(s.calls.count)"),
          ("callsPerSecond", "\(Double(s.calls.count) / seconds)"),
          ("ageP50", "\(pick(ages, 0.5))"), ("ageP99", "\(pick(ages, 0.99))"), ("ageMax", "\(ages.last ?? -1)"),
          ("gapMin", "\(gaps.first ?? -1)"), ("gapP50", "\(pick(gaps, 0.5))"), ("gapP01", "\(pick(gaps, 0.01))"),
          ("coalesced", "\(stats.coalesced)"), ("estimates", "\(stats.samples)")])
case "release":
    // A manager streams (a push handler and batches; with `capture-thread` the batches run on the
    // capture thread and hold the last reference, so the release happens there), and is released.
    // Then a new manager starts the same sensor: buffered at once, not "held by another process".
    let onCaptureThread = args.count > 1 && args[1] == "capture-thread"
    let got = DispatchSemaphore(value: 0)
    let firstMode: String
    var nodesWhileStreaming = 0
    let scopeEnded = Atomic<Bool>(false)
    do {
        let first = MotionManager(uri: environment["MOTION_URI"] ?? "local:", units: .si)
        first.accelerometerUpdateInterval = 0.01
        first.startAccelerometerUpdates { d, _ in if d != nil { got.signal() } }
        if onCaptureThread {
            let holder = Locked<MotionManager?>(first)
            first.startGyroBatches(on: .captureThread) { b, _ in
                // Once the scenario has dropped its reference, the next batch drops the last one:
                // the manager is released here, on its own capture thread.
                if b != nil, scopeEnded.load(ordering: .relaxed) { holder.withLock { $0 = nil } }
            }
        } else {
            first.startGyroBatches { _, _ in }
        }
        _ = got.wait(timeout: .now() + 5)
        firstMode = first.mode(of: .accelerometer)?.description ?? "stopped"
        nodesWhileStreaming = openDeviceNodes()
    }
    scopeEnded.store(true, ordering: .relaxed)
    // Released (on the capture thread, the join happens just after: wait for it).
    var afterRelease = processCounts()
    for _ in 0..<100 where afterRelease.captureThreads > 0 || openDeviceNodes() > 0 {
        usleep(10_000)
        afterRelease = processCounts()
    }
    let nodesAfterRelease = openDeviceNodes()
    let second = MotionManager(uri: environment["MOTION_URI"] ?? "local:", units: .si)
    second.accelerometerUpdateInterval = 0.01
    let got2 = DispatchSemaphore(value: 0)
    second.startAccelerometerUpdates { d, _ in if d != nil { got2.signal() } }
    let streamed = got2.wait(timeout: .now() + 5) == .success
    let mode = second.mode(of: .accelerometer)?.description ?? "stopped"
    let reason = second.fallbackReason(of: .accelerometer) ?? ""
    second.stopAllUpdates()
    emit([("firstMode", "\"\(firstMode)\""), ("mode", "\"\(mode)\""), ("streamed", "\(streamed)"),
          ("fallbackReason", "\"\(String(reason.map { $0 == "\"" ? "'" : $0 }))\""),
          ("captureThreadsAfterRelease", "\(afterRelease.captureThreads)"),
          ("nodesWhileStreaming", "\(nodesWhileStreaming)"), ("nodesAfterRelease", "\(nodesAfterRelease)")])
default:
    fail("unknown scenario \(scenario)")
}
