#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import IIOScanFormat
import Foundation
import SystemSupport

extension DeviceSim {
    // MARK: Streaming

    var streamStats: StreamStats { state.withLock { $0.stats } }

    /// The scan layout from the `_en` files as they are now.
    func enabledLayout() -> (ScanLayout, [Int]) {
        var entries: [(channel: String, index: Int, type: ScanFormat)] = []
        var channelIndex: [String: Int] = [:]
        for (i, ch) in channels.enumerated() {
            guard let idx = ch.spec.index, let t = ch.scanType else { continue }
            if read("scan_elements/in_\(ch.spec.id)_en") == "1" {
                entries.append((ch.spec.id, idx, t))
                channelIndex[ch.spec.id] = i
            }
        }
        let layout = ScanLayout(channels: entries)
        return (layout, layout.elements.map { channelIndex[$0.channel]! })
    }

    /// What a look at the buffer's files concluded (see ``evaluateBuffer(simulator:final:)``).
    enum BufferCheck: Equatable { case settled, unsettled }

    /// Files whose writes change what the buffer streams: the watcher re-evaluates the buffer after
    /// any of them is written.
    static func affectsBuffer(_ file: String) -> Bool {
        // (`file` is canonical: buffer0/ writes arrive as buffer/ and scan_elements/ ones.)
        file == "buffer/enable" || file == "buffer/length" || file == "buffer/watermark"
            || file == "trigger/current_trigger" || (file.hasPrefix("scan_elements/") && file.hasSuffix("_en"))
    }

    /// Brings the stream in line with the buffer's files, as the kernel's `enable` store() would.
    ///
    /// The kernel checks a buffer's configuration synchronously, inside the writer's `write(2)`;
    /// the simulator learns of writes through inotify, after the fact, while the writer may still be
    /// writing (libiio writes `enable` 0, the `_en` files, `length`, then `enable` 1 within
    /// microseconds, and closing a buffer writes `enable` 0 again). So the watcher calls this only
    /// when no further event is queued, the files are read twice and must agree, and a
    /// configuration the kernel would refuse (no scan element, no trigger) is refused only when
    /// `final`, i.e. after it has stayed that way with no write for a while. Acting on a half-written
    /// state once refused a good buffer (the writer's `enable` 1 was overwritten with 0) under load.
    /// - Returns: `.unsettled` when the watcher should look again later.
    func evaluateBuffer(simulator: Simulator, final: Bool) -> BufferCheck {
        if state.withLock({ $0.unplugged }) { return .settled }
        let stamp = enableStamp()
        guard read("buffer/enable") == "1" else {
            stopStream(wait: true)
            return .settled
        }
        let configuration = bufferConfiguration()
        let clockName = read("current_timestamp_clock") ?? "realtime"
        guard read("buffer/enable") == "1", bufferConfiguration() == configuration,
              let stamp, let again = enableStamp(), Self.same(stamp, again) else { return .unsettled }
        // Every write of `enable` is a new buffer session for the kernel (its kfifo is emptied),
        // even with the same configuration: keep a session only when nothing was written since.
        if let running = state.withLock({ $0.session }), !running.finished.load(ordering: .acquiring),
           running.configuration == configuration, Self.same(running.enableStamp, stamp) {
            return .settled
        }
        if let problem = bufferProblem(simulator: simulator) {
            guard final else { return .unsettled }
            stopStream(wait: true)
            simulator.warn("\(id) (\(spec.name)): \(problem)")
            try? write("buffer/enable", "0")
            rawReadsBusy(false)
            return .settled
        }
        startStream(simulator: simulator, enableStamp: stamp, clockName: clockName)
        return .settled
    }

    /// The modification time of `buffer/enable`. On kernels with multigrain timestamps (tmpfs since
    /// Linux 6.13) every write that follows a look at it gets a new one, however soon.
    func enableStamp() -> timespec? {
        var st = stat()
        guard stat(directory + "/buffer/enable", &st) == 0 else { return nil }
        return st.st_mtim
    }

    static func same(_ a: timespec, _ b: timespec) -> Bool { a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec }

    /// Why the kernel would refuse to enable the buffer as its files are now, if it would.
    func bufferProblem(simulator: Simulator) -> String? {
        if let b = spec.buffer, b.triggered, (b.withoutTrigger ?? .refuse) == .refuse, !hasValidTrigger {
            return "buffer not started: no trigger (the kernel returns EINVAL; set trigger/current_trigger)"
        }
        if enabledLayout().0.elements.isEmpty {
            return "buffer enabled with no scan element enabled (the kernel returns EINVAL)"
        }
        return nil
    }

    /// Whether a trigger that may drive this device is set.
    var hasValidTrigger: Bool {
        let trig = read("trigger/current_trigger") ?? ""
        return !trig.isEmpty && triggers.contains { $0.name == trig && ($0.owner == nil || $0.owner == spec.name) }
    }

    /// Whether an enabled buffer delivers nothing: no data-ready interrupt (`--no-irq`), or a
    /// triggered buffer running without its trigger whose driver then never reads the chip.
    var isSilent: Bool {
        if isNoIRQ { return true }
        guard let b = spec.buffer, b.triggered, !hasValidTrigger else { return false }
        return (b.withoutTrigger ?? .refuse) == .silent
    }

    /// What a stream session depends on: enabled channels, `buffer/length`, `buffer/watermark`.
    func bufferConfiguration() -> [String] {
        enabledLayout().0.elements.map(\.channel) + [read("buffer/length") ?? "", read("buffer/watermark") ?? ""]
    }

    /// Starts a session for the configuration in force (checked by the caller), replacing any.
    func startStream(simulator: Simulator, enableStamp: timespec, clockName: String) {
        stopStream(wait: true)
        let (layout, map) = enabledLayout()
        let sessionNumber = state.withLock { s -> Int in
            s.stats.sessions += 1
            return s.stats.sessions
        }
        let session = StreamSession(device: self, simulator: simulator, layout: layout, channelMap: map,
                                    number: sessionNumber, configuration: bufferConfiguration(), enableStamp: enableStamp,
                                    clockName: clockName)
        state.withLock { $0.session = session }
        session.start()
    }

    func stopStream(wait: Bool) {
        let s = state.withLock { st -> StreamSession? in
            let s = st.session
            st.session = nil
            return s
        }
        s?.stop(wait: wait)
    }

    func record(written: Int64 = 0, dropped: Int64 = 0, unread: Int64 = 0) {
        state.withLock {
            $0.stats.scansWritten += written
            $0.stats.scansDropped += dropped
            $0.stats.scansUnreadAtClose += unread
        }
    }
}
