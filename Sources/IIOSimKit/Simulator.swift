#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import Foundation
import SystemSupport
import Synchronization

/// What a simulation run does beyond the fixture: the motion, imperfections, pacing and faults.
public struct SimulationOptions: Sendable {
    /// The scripted motion every device feels.
    public var motion: MotionScript = .faceUp
    /// Noise and bias added to the true motion.
    public var imperfections = Imperfections()
    /// Seed for the noise.
    public var seed: UInt64 = 1
    /// Stream as fast as the reader drains (virtual time) instead of at the sampling frequency.
    public var fast = false
    /// `raw` files are rewritten at the sampling frequency, but at most this often (Hz).
    public var rawRefreshMax: Double = 200
    /// Devices (id or name) whose sysfs directory and device node disappear this many seconds
    /// after the simulation starts.
    public var unplug: [(device: String, after: Double)] = []
    /// Devices absent until this many seconds after start, when they appear (plugged in).
    public var plug: [(device: String, after: Double)] = []
    /// Devices whose buffer enables but never delivers data (no data-ready interrupt).
    public var noIRQ: [String] = []
    /// Devices whose buffer stops delivering data this many seconds after it is enabled, for
    /// `duration` seconds (nil: for good), as a sensor hub that stalls.
    public var stall: [(device: String, after: Double, duration: Double?)] = []
    /// Files (device, relative path) made unreadable (mode 0000).
    public var unreadable: [(device: String, file: String)] = []
    /// Files (device, relative path) made read-only (mode 0444): a write fails (EACCES), as a
    /// driver's rejected store() fails it.
    public var readOnly: [(device: String, file: String)] = []
    /// Files (device, relative path) given other contents after the tree is built (garbage values).
    public var overrides: [(device: String, file: String, value: String)] = []
    /// When set, every stream session's delivered bytes and a JSON summary are written here.
    public var streamLog: String?
    /// Print what the simulator does to stderr.
    public var verbose = false
    /// Make `/dev/iio:deviceN` plain FIFOs even where FUSE works (see ``FuseNodes``).
    public var fifoNodes = false

    public init() {}
}

/// Counters of one device's buffer, over all stream sessions.
public struct StreamStats: Sendable, Codable, Equatable {
    /// Buffer sessions started (`buffer/enable` 0 → 1).
    public var sessions = 0
    /// Scans written into the device node.
    public var scansWritten: Int64 = 0
    /// Scans the kfifo had no room for (the reader fell behind).
    public var scansDropped: Int64 = 0
    /// Scans still unread in the device node when the reader closed it.
    public var scansUnreadAtClose: Int64 = 0
}

/// The simulated IIO hardware: builds the sysfs tree and device nodes under a root, then keeps it
/// alive like a driver would: `raw` files follow the motion, writes to attributes take effect,
/// and enabling the buffer streams scans into `/dev/iio:deviceN` (a FIFO).
///
/// ```swift
/// let sim = try Simulator(fixture: Fixture.resolve("bmi160"), root: "", options: SimulationOptions())
/// try sim.build()
/// try sim.start()
/// // … run libiio against /sys/bus/iio/devices …
/// let stats = sim.stop()
/// ```
public final class Simulator: Sendable {
    /// The fixture this simulates.
    public let fixture: Fixture
    /// Prefix of every path ("" inside the simulator's namespace; a temporary folder in unit tests).
    public let root: String
    /// The run's options.
    public let options: SimulationOptions
    /// `<root>/sys/bus/iio/devices`.
    public let devicesDirectory: String
    /// `<root>/dev`.
    public let devDirectory: String
    let scratch: String
    let devices: [DeviceSim]
    let triggerIDs: [String]
    let stopFD: Int32
    /// The nodes served through FUSE; nil where the nodes are FIFOs (outside the simulator's
    /// namespaces, with `--fifo-nodes`, or when FUSE cannot be mounted).
    let fuseNodes: FuseNodes?
    /// Why the nodes are FIFOs although FUSE was wanted (said with `--verbose`).
    let fuseFailure: String?
    /// Threads started by ``start()`` that have not returned yet.
    let activeThreads = Atomic<Int>(0)
    let running = Atomic<Bool>(false)
    let startTime = SimClock.now()

    /// Prepares a simulation; nothing is written until ``build()``.
    /// - Throws: ``Fixture/LoadError`` when the fixture is inconsistent, or when an option names
    ///   a device the fixture does not have.
    public init(fixture: Fixture, root: String, options: SimulationOptions) throws {
        try fixture.validate()
        self.fixture = fixture
        self.root = root
        self.options = options
        devicesDirectory = root + "/sys/bus/iio/devices"
        devDirectory = root + "/dev"
        scratch = root + "/sys/bus/iio/.iio-sim"
        let fd = simsupport_eventfd()
        guard fd >= 0 else { throw Fixture.LoadError(description: "eventfd: \(errnoText(-fd))") }
        stopFD = fd
        // FUSE only inside the simulator's own mount namespace (root ""), where nothing leaks: the
        // device nodes, and the attributes whose writes the kernel answers synchronously.
        var bases: [Int] = []
        var attributeCount = 0
        for d in fixture.devices {
            bases.append(attributeCount)
            attributeCount += SysfsLayout.guardedFiles(of: d).count
        }
        let router = StoreRouter()
        self.router = router
        var nodes: FuseNodes?
        var failure: String?
        if root.isEmpty && !options.fifoNodes {
            do {
                nodes = try FuseNodes(mountpoint: scratch + "/nodes",
                                      devices: fixture.devices.indices.filter { fixture.devices[$0].hasNode },
                                      attributes: attributeCount, store: { router.store($0, $1) })
            } catch {
                failure = "\(error)"
            }
        }
        fuseNodes = nodes
        fuseFailure = failure
        var devs: [DeviceSim] = []
        for (n, d) in fixture.devices.enumerated() {
            devs.append(try DeviceSim(number: n, spec: d, fixture: fixture, root: root, options: options,
                                      nodes: nodes, attributeBase: bases[n]))
        }
        devices = devs
        router.devices.withLock { $0 = devs }
        triggerIDs = fixture.triggers.indices.map { "trigger\($0)" }
        for sel in options.unplug.map(\.device) + options.plug.map(\.device) + options.noIRQ + options.stall.map(\.device) + options.unreadable.map(\.device) + options.readOnly.map(\.device)
            + options.overrides.map(\.device) where device(matching: sel) == nil {
            throw Fixture.LoadError(description: "no device \"\(sel)\" in the fixture (devices: "
                + devs.map { "\($0.id) (\($0.spec.name))" }.joined(separator: ", ") + ")")
        }
    }

    deinit {
        router.devices.withLock { $0 = [] }  // devices and the FUSE store refer to each other
        close(stopFD)
    }

    /// Hands a FUSE attribute write to its device's store() (see ``DeviceSim/store(_:_:)``).
    final class StoreRouter: Sendable {
        let devices = Locked<[DeviceSim]>([])

        func store(_ attr: Int, _ value: String) -> Result<String, FuseNodes.Errno> {
            guard let (device, file) = owner(of: attr) else { return .success(value) }
            return device.store(file, value)
        }

        /// The device and canonical file of attribute `attr`.
        func owner(of attr: Int) -> (DeviceSim, String)? {
            let devs = devices.withLock { $0 }
            for d in devs {
                if let file = d.guardedIndex.first(where: { $0.value == attr && d.aliases[$0.key] == nil })?.key { return (d, file) }
            }
            return nil
        }
    }
    let router: StoreRouter

    /// The device with this id (`iio:device0`), name or label.
    func device(matching selector: String) -> DeviceSim? {
        devices.first { $0.id == selector } ?? devices.first { $0.spec.name == selector }
            ?? devices.first { $0.spec.label == selector }
    }

    /// Ids and names of the simulated devices and triggers, in order.
    public var layout: [(id: String, name: String)] {
        devices.map { ($0.id, $0.spec.name) } + zip(triggerIDs, fixture.triggers).map { ($0, $1.name) }
    }

    /// Each device's sysfs folder and, for a device with a buffer, its node (`/dev/iio:deviceN`),
    /// as the paths a udev rule would be given for it.
    public var devicePaths: [(directory: String, node: String?)] {
        devices.map { ($0.directory, $0.spec.hasNode ? $0.devNode : nil) }
    }

    /// Writes the sysfs tree and the device nodes.
    /// - Throws: when a file cannot be created.
    public func build() throws {
        try Files.makeDirectory(devicesDirectory)
        try Files.makeDirectory(scratch, mode: 0o700)
        try Files.makeDirectory(devDirectory)
        if let f = fuseFailure { log("device nodes are FIFOs (FUSE: \(f))") }
        for d in devices { try d.build(devDirectory: devDirectory, scratch: scratch, nodes: fuseNodes) }
        for (id, t) in zip(triggerIDs, fixture.triggers) {
            let dir = devicesDirectory + "/" + id
            try Files.makeDirectory(dir)
            try Files.write(t.name + "\n", to: dir + "/name", mode: 0o444)
            for (file, value) in t.attributes.sorted(by: { $0.key < $1.key }) {
                let writable = file.hasSuffix("frequency")
                try Files.write(value + "\n", to: dir + "/" + file, mode: writable ? 0o644 : 0o444)
            }
        }
        for o in options.overrides {
            guard let d = device(matching: o.device) else { continue }
            // The raw refresher skips pinned files; an overridden `raw` file must keep its
            // contents too (otherwise `--set DEV/in_accel_x_raw=garbage` lasts until the first refresh).
            try d.override(d.canonical(o.file), o.value)
        }
        for r in options.readOnly {
            guard let d = device(matching: r.device) else { continue }
            chmod(d.directory + "/" + r.file, 0o444)
        }
        for u in options.unreadable {
            guard let d = device(matching: u.device) else { continue }
            let path = d.directory + "/" + u.file
            if !FileManager.default.fileExists(atPath: path) { try Files.write("0\n", to: path, mode: 0) }
            chmod(path, 0)
            d.pin(u.file)
        }
        // A device plugged in later waits, whole, in the scratch folder, where nothing looks for
        // it, and its folder is moved into place when it appears. (Its node stays: programs find
        // a device through sysfs, and the node is a mount point that cannot be moved.)
        for p in options.plug {
            guard let d = device(matching: p.device) else { continue }
            guard rename(d.directory, hiddenDirectory(d)) == 0 else {
                throw Fixture.LoadError(description: "--plug \(p.device): cannot set \(d.id) aside: \(errnoText(errno))")
            }
        }
    }

    private func hiddenDirectory(_ d: DeviceSim) -> String { scratch + "/plug-" + d.id }

    /// Starts the threads that play the driver: the attribute watcher, `raw` refreshers, faults.
    /// - Throws: when inotify cannot be set up.
    public func start() throws {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let watcher = try Watcher(simulator: self)
        spawn("iio-sim watcher") { watcher.run() }
        for d in devices {
            spawn("iio-sim raw \(d.id)") { [self] in d.refreshRawLoop(stopFD: stopFD, simulator: self) }
        }
        for p in options.plug {
            guard let d = device(matching: p.device) else { continue }
            let after = p.after
            spawn("iio-sim plug \(d.id)") { [self] in
                if waitForStop(nanoseconds: Int64(after * 1e9)) { return }
                _ = rename(hiddenDirectory(d), d.directory)
                log("\(d.id) (\(d.spec.name)) plugged in at \(after) s")
            }
        }
        for u in options.unplug {
            guard let d = device(matching: u.device) else { continue }
            let after = u.after
            spawn("iio-sim unplug \(d.id)") { [self] in
                if waitForStop(nanoseconds: Int64(after * 1e9)) { return }
                d.unplug(devDirectory: devDirectory, scratch: scratch, nodes: fuseNodes)
                log("\(d.id) (\(d.spec.name)) unplugged at \(after) s")
            }
        }
    }

    func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        activeThreads.add(1, ordering: .relaxed)
        let t = Thread { [self] in
            body()
            activeThreads.subtract(1, ordering: .releasing)
        }
        t.name = name
        t.start()
    }

    /// Sleeps until the simulation stops or `nanoseconds` pass; true when stopping.
    func waitForStop(nanoseconds: Int64) -> Bool {
        var p = pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0)
        let deadline = SimClock.now() + nanoseconds
        while true {
            let left = deadline - SimClock.now()
            if left <= 0 { return isStopping }
            let r = poll(&p, 1, Int32(min(left / 1_000_000 + 1, 1000)))
            if r > 0 || isStopping { return true }
        }
    }

    var isStopping: Bool { !running.load(ordering: .acquiring) }

    /// `CLOCK_MONOTONIC` nanoseconds at the motion's time zero: a sample stamped `t` (monotonic
    /// seconds) saw the scripted motion's state at `t - motionStart / 1e9` (ground truth).
    public var motionStartNanoseconds: Int64 { startTime }

    /// Seconds since the simulator was created (the motion's clock).
    func motionTime(_ monotonicNs: Int64) -> Double { Double(monotonicNs - startTime) / 1e9 }

    func log(_ message: String) {
        if options.verbose { FileHandle.standardError.write(Data("iio-sim: \(message)\n".utf8)) }
    }

    func warn(_ message: String) {
        FileHandle.standardError.write(Data("iio-sim: \(message)\n".utf8))
    }

    /// Stops every thread and stream, writes the stream log summary, and returns the counters by
    /// device id.
    @discardableResult
    public func stop() -> [String: StreamStats] {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return stats }
        var one: UInt64 = 1
        _ = write(stopFD, &one, 8)
        for d in devices { d.stopStream(wait: true) }
        // Threads notice the eventfd within one poll; Foundation threads cannot be joined, so wait
        // for them to return.
        let deadline = SimClock.now() + 3_000_000_000
        while activeThreads.load(ordering: .acquiring) > 0 && SimClock.now() < deadline { usleep(1000) }
        let s = stats
        if let dir = options.streamLog {
            let enc = JSONEncoder()
            enc.outputFormatting = [.prettyPrinted, .sortedKeys]
            if let data = try? enc.encode(s) { _ = FileManager.default.createFile(atPath: dir + "/stats.json", contents: data) }
        }
        return s
    }

    /// Counters by device id.
    public var stats: [String: StreamStats] {
        Dictionary(uniqueKeysWithValues: devices.map { ($0.id, $0.streamStats) })
    }

    /// Handles a write to a file of device `d` (called by the watcher).
    func attributeWritten(device d: DeviceSim, file: String) {
        d.attributeWritten(file, simulator: self)
    }

    /// Handles a write to a trigger's file: snaps its frequency.
    func triggerAttributeWritten(trigger index: Int, file: String) {
        let dir = devicesDirectory + "/" + triggerIDs[index]
        guard file.hasSuffix("frequency"), let text = Files.read(dir + "/" + file) else { return }
        if Double(text) == nil {
            let original = fixture.triggers[index].attributes[file] ?? "0"
            try? Files.write(original + "\n", to: dir + "/" + file, mode: 0o644)
            warn("\(triggerIDs[index]): \(file) = \"\(text)\" is not a number (the kernel returns EINVAL); restored")
        }
    }

    /// The rate a trigger named `name` runs at, from its `sampling_frequency`, if it has one.
    func triggerRate(named name: String) -> Double? {
        guard let i = fixture.triggers.firstIndex(where: { $0.name == name }) else { return nil }
        let dir = devicesDirectory + "/" + triggerIDs[i]
        return Files.read(dir + "/sampling_frequency").flatMap(Double.init)
    }

    /// Whether `name` is a trigger that device `deviceName` may use.
    func triggerIsValid(_ name: String, for deviceName: String) -> Bool {
        guard let t = fixture.triggers.first(where: { $0.name == name }) else { return false }
        return t.owner == nil || t.owner == deviceName
    }
}

/// The inotify loop: every write to a watched file of the tree is handed to its device.
final class Watcher: Sendable {
    let simulator: Simulator
    let fd: Int32
    /// Watch descriptor → (device index or -1 - trigger index, directory relative to the device).
    let watches: [Int32: (owner: Int, subdir: String)]

    init(simulator: Simulator) throws {
        self.simulator = simulator
        fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { throw Fixture.LoadError(description: "inotify_init1: \(errnoText(errno))") }
        var w: [Int32: (Int, String)] = [:]
        let ifd = fd
        func add(_ path: String, _ owner: Int, _ sub: String) {
            let wd = inotify_add_watch(ifd, path, UInt32(IN_CLOSE_WRITE))
            if wd >= 0 { w[wd] = (owner, sub) }
        }
        for (i, d) in simulator.devices.enumerated() {
            for sub in ["", "buffer", "buffer0", "scan_elements", "trigger"] {
                let path = d.directory + (sub.isEmpty ? "" : "/" + sub)
                if FileManager.default.fileExists(atPath: path) { add(path, i, sub) }
            }
        }
        for (i, id) in simulator.triggerIDs.enumerated() {
            add(simulator.devicesDirectory + "/" + id, -1 - i, "")
        }
        watches = w
    }

    deinit { close(fd) }

    /// How long a buffer configuration the kernel would refuse must stay unchanged, with no write
    /// queued, before the simulator refuses it (see `DeviceSim.evaluateBuffer`).
    static let refusalQuietTime: Int64 = 50_000_000

    func run() {
        var buf = [UInt8](repeating: 0, count: 64 * 1024)
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: simulator.stopFD, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: simulator.fuseNodes?.writtenFD ?? -1, events: Int16(POLLIN), revents: 0)]
        // Devices whose buffer files were written and not yet acted on → when they were last written.
        var pending: [Int: Int64] = [:]
        while !simulator.isStopping {
            let r = poll(&fds, 3, pending.isEmpty ? 500 : 10)
            if r > 0 && fds[1].revents != 0 { return }
            if r > 0 && fds[2].revents != 0, let nodes = simulator.fuseNodes {
                // Attributes served through FUSE: already checked by their store(); react as for
                // any other write.
                for attr in nodes.takeWritten() {
                    guard let (device, file) = simulator.router.owner(of: attr) else { continue }
                    simulator.attributeWritten(device: device, file: file)
                    if DeviceSim.affectsBuffer(file) { pending[device.number] = SimClock.now() }
                }
            }
            if r > 0 && fds[0].revents != 0 {
                let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    for device in handle(buf, count: n) { pending[device] = SimClock.now() }
                }
                // Act only once the writer has paused: more events queued means it is still writing.
                var more = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&more, 1, 0) > 0 { continue }
            }
            let now = SimClock.now()
            for (device, written) in pending {
                let final = now - written >= Watcher.refusalQuietTime
                if simulator.devices[device].evaluateBuffer(simulator: simulator, final: final) == .settled {
                    pending[device] = nil
                }
            }
        }
    }

    /// Hands each event in `buf[0..<count]` to its device or trigger.
    /// - Returns: the devices whose buffer configuration files were written.
    private func handle(_ buf: [UInt8], count n: Int) -> Set<Int> {
        var buffers: Set<Int> = []
        var off = 0
        while off + MemoryLayout<inotify_event>.size <= n {
            let (wd, len) = buf.withUnsafeBytes { raw -> (Int32, Int) in
                let ev = raw.loadUnaligned(fromByteOffset: off, as: inotify_event.self)
                return (ev.wd, Int(ev.len))
            }
            let nameStart = off + MemoryLayout<inotify_event>.size
            let nameBytes = buf[nameStart..<(nameStart + len)].prefix { $0 != 0 }
            let name = String(decoding: nameBytes, as: UTF8.self)
            off = nameStart + len
            guard let (owner, sub) = watches[wd], !name.isEmpty else { continue }
            var file = sub.isEmpty ? name : sub + "/" + name
            if owner >= 0 {
                file = simulator.devices[owner].canonical(file)
                simulator.attributeWritten(device: simulator.devices[owner], file: file)
                if DeviceSim.affectsBuffer(file) { buffers.insert(owner) }
            } else {
                simulator.triggerAttributeWritten(trigger: -1 - owner, file: file)
            }
        }
        return buffers
    }
}
