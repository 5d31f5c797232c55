import Dispatch
import SystemSupport
@preconcurrency import Glibc // ioctl, write
import IIOMotion

/// The terminal the live view draws on: stdout, written by its ``OutputChannel`` (one `write(2)`
/// per frame, so a frame appears whole) and asked for its size.
enum Terminal {
    /// Hide the cursor.
    static let hideCursor = "\u{1B}[?25l"
    /// Show the cursor and reset colours: what every exit path leaves behind.
    static let restore = "\u{1B}[0m\u{1B}[?25h"
    /// Cursor to the top left.
    static let home = "\u{1B}[H"
    /// Clear the whole screen (on start and after a resize only, never per frame).
    static let clearScreen = "\u{1B}[2J"
    /// Clear to the end of the line / of the screen.
    static let clearLine = "\u{1B}[K", clearBelow = "\u{1B}[J"

    /// `(columns, rows)` of stdout's terminal, or 80×24 when it does not say.
    static func size() -> (width: Int, height: Int) {
        var ws = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 {
            return (Int(ws.ws_col), Int(ws.ws_row))
        }
        return (80, 24)
    }

    /// Makes a crash (a trap, SIGSEGV, SIGABRT, Ctrl-\\) leave the cursor visible (with `terminal`)
    /// and put the real stderr back on fd 2 with what the ``StderrFilter``'s pipe still holds, so
    /// the runtime's message and backtrace reach the user. The handler only calls
    /// async-signal-safe functions (`write(2)`, `read(2)`, `dup2(2)`, `sigaction(2)`, `raise(3)`),
    /// then hands the signal to whoever had it before (Swift's backtracer, or the default action):
    /// a fault re-executes the faulting instruction, a sent signal is raised again. The orderly
    /// exits (the end, Ctrl-C, SIGTERM, SIGHUP, an error) do not come here: those signals are
    /// waited for on the main thread, which restores the terminal itself.
    static func restoreOnCrash(terminal: Bool) {
        crashRestoresTerminal = terminal
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            if crashRestoresTerminal {
                let text: StaticString = "\u{1B}[0m\u{1B}[?25h\r\n"
                _ = Glibc.write(STDOUT_FILENO, text.utf8Start, text.utf8CodeUnitCount)
            }
            if savedInputModeSet { _ = tcsetattr(STDIN_FILENO, TCSANOW, savedInputMode) }
            let (original, pipe) = crashStderr
            if original >= 0 {
                _ = dup2(original, STDERR_FILENO)
                if pipe >= 0 {
                    var buffer: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
                    withUnsafeMutableBytes(of: &buffer) { b in
                        while true {
                            let n = read(pipe, b.baseAddress!, b.count)
                            if n <= 0 { break }
                            _ = Glibc.write(original, b.baseAddress!, n)
                        }
                    }
                }
            }
            _ = sigaction(signal, previousActions + Int(signal), nil)
            if signal == SIGABRT || signal == SIGQUIT { _ = raise(signal) }
        }
        sigemptyset(&action.sa_mask)
        for s in crashSignals {
            sigaction(s, &action, previousActions + Int(s))
        }
    }

    private static let crashSignals = [SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT, SIGQUIT]

    /// Makes stdin's terminal hand over each key as it is pressed, without echo (signals such as
    /// Ctrl-C and Ctrl-Z still work); the mode before is kept for ``restoreInput()``.
    /// Only in the terminal's foreground: changing the mode from the background would stop the
    /// process (SIGTTOU).
    /// - Returns: whether stdin is a terminal that now gives keys.
    static func takeKeys() -> Bool {
        guard isatty(STDIN_FILENO) == 1, tcgetpgrp(STDIN_FILENO) == getpgrp() else { return false }
        var mode = termios()
        guard tcgetattr(STDIN_FILENO, &mode) == 0 else { return false }
        if !savedInputModeSet {
            savedInputMode.pointee = mode
            savedInputModeSet = true
        }
        mode.c_lflag &= ~tcflag_t(ICANON | ECHO)
        withUnsafeMutableBytes(of: &mode.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        return tcsetattr(STDIN_FILENO, TCSANOW, &mode) == 0
    }

    /// Gives stdin's terminal back the mode it had before ``takeKeys()`` (line editing, echo).
    static func restoreInput() {
        if savedInputModeSet, tcgetpgrp(STDIN_FILENO) == getpgrp() { _ = tcsetattr(STDIN_FILENO, TCSANOW, savedInputMode) }
    }
}

/// stdin's terminal mode before the live view took its keys (restored on every exit, the crash
/// handler's included), and whether it was saved. Written on the session's queue before the keys
/// are taken, then only read.
nonisolated(unsafe) private let savedInputMode = UnsafeMutablePointer<termios>.allocate(capacity: 1)
nonisolated(unsafe) private var savedInputModeSet = false

/// The actions the crash handler replaced, by signal number: filled before the handler is installed,
/// only read by it (no allocation or lock in the handler: the global is initialised by then).
nonisolated(unsafe) private let previousActions = UnsafeMutablePointer<sigaction>.allocate(capacity: 65) // written before any handler can run, then read-only
/// Whether the crash handler restores the cursor (the live view runs); set before it is installed.
nonisolated(unsafe) private var crashRestoresTerminal = false // written before the handler is installed, then read-only

/// The live view: one panel per requested sensor, redrawn in place at the update interval (at
/// most 30 times a second) by moving the cursor home and overwriting each line (clear to end of
/// line, then clear below): no full clear per frame, so no flicker.
///
/// Frames are offered to stdout's ``OutputChannel``, which writes the newest when the terminal
/// takes it: on a terminal that drains slowly (a serial console, Ctrl-S) frames are skipped, and
/// nothing else waits. ``framesDue`` counts the frames made, the channel the ones drawn.
///
/// Confinement: every method runs on the session's queue (the library's handlers, the idle timer,
/// and the main thread's `queue.sync` for resize, suspend and the end), so it needs no lock.
final class LiveView: @unchecked Sendable { // mutable state is touched only on `queue` (dispatchPrecondition)
    /// The slot of the frames in stdout's channel.
    static let frameSlot = 0

    private let queue: DispatchQueue
    private let out: OutputChannel
    private let style: ScreenStyle
    private let log: CSVLog?
    private var screen: ScreenModel
    private var size = Terminal.size()
    private var timer: (any DispatchSourceTimer)?
    private let framePeriod: Double
    /// When the last frame was made (``monotonicSeconds()``).
    private var lastDraw = -Double.infinity
    private let started = monotonicSeconds()
    private var active = false
    /// Per panel: gap counters, and the history the measured rates come from.
    private var gaps: [SensorKind: GapCounter] = [:]
    private var sampleHistory: [SensorKind: [(t: Double, n: Int)]] = [:]
    private var updateHistory: [SensorKind: [(t: Double, n: Int)]] = [:]
    /// Per panel, the timestamp of the sample last drawn.
    private var lastShown: [SensorKind: Double] = [:]
    /// Device motion estimates' (timestamp, count), for the measured rate.
    private var motionHistory: [(t: Double, n: Int)] = []
    /// Frames made (each offered to the terminal; a newer one may replace it before it is drawn).
    private(set) var framesDue = 0
    /// Per panel (as ``ScreenModel/panels``): the last seconds of every sample, for the history chart.
    private var rings: [HistoryRing]
    /// Keys from stdin's terminal (nil when stdin is not one).
    private var keySource: (any DispatchSourceRead)?

    /// - Parameters:
    ///   - queue: the session's queue.
    ///   - out: stdout's channel.
    ///   - style: colour and Unicode.
    ///   - options: `--interval`, `--rate`, `--uri`.
    ///   - sensors: the requested sensors, present (their info) or missing (nil).
    ///   - motion: the reference frame of the device motion panel; nil for no such panel.
    ///   - log: the `--csv` log, whose row count the view shows.
    init(queue: DispatchQueue, out: OutputChannel, style: ScreenStyle, options: MonitorOptions,
         sensors: [(kind: SensorKind, info: SensorInfo?)], motion: MonitorOptions.ReferenceFrameChoice? = nil, log: CSVLog?) {
        self.queue = queue
        self.out = out
        self.style = style
        self.log = log
        framePeriod = max(options.interval, 1.0 / 30)
        let panels = sensors.map { s in
            PanelModel(kind: s.kind, device: s.info?.deviceDescription, requestedRate: options.rate, interval: options.interval,
                       range: s.info.map { LiveScreen.range(of: $0, units: options.units) } ?? 1,
                       unit: Format.unit(s.kind, options.units))
        }
        screen = ScreenModel(uri: options.uri, elapsed: 0, log: log.map { ($0.name, 0, nil) }, panels: panels,
                             motion: motion.map { MotionPanelModel(frame: $0, interval: options.interval) })
        rings = panels.map { _ in HistoryRing() }
    }

    /// How often the view is redrawn when no samples arrive: at least once a second.
    static func idlePeriod(_ framePeriod: Double) -> Double { max(framePeriod, 1) }

    /// Takes the terminal: hides the cursor, clears the screen once, starts the idle timer.
    func start() {
        dispatchPrecondition(condition: .onQueue(queue))
        active = true
        out.control(Terminal.hideCursor + Terminal.home + Terminal.clearScreen, force: true)
        // Frames are drawn as samples arrive (``drawIfDue()``), in the wake-up that delivered
        // them; the timer only keeps the view going (the clock, a stalled sensor) when none do.
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now(), repeating: Self.idlePeriod(framePeriod), leeway: .milliseconds(50))
        timer.setEventHandler { [weak self] in self?.drawIfDue(idle: true) }
        timer.resume()
        self.timer = timer
        takeKeys()
    }

    /// Reads keys from stdin's terminal, if it is one: a read source on the session's queue, so a
    /// key costs one wake-up and no key costs none.
    private func takeKeys() {
        guard Terminal.takeKeys() else { return }
        screen.keys = true
        guard keySource == nil else { return }
        let source = DispatchSource.makeReadSource(fileDescriptor: STDIN_FILENO, queue: queue)
        source.setEventHandler { [weak self] in
            var bytes: (UInt64, UInt64) = (0, 0)
            let n = withUnsafeMutableBytes(of: &bytes) { read(STDIN_FILENO, $0.baseAddress!, $0.count) }
            guard n > 0 else {
                // The terminal went away (or stdin ended): no more keys.
                if n == 0 || (errno != EINTR && errno != EAGAIN) { self?.keySource?.cancel() }
                return
            }
            withUnsafeBytes(of: &bytes) { b in for k in b.prefix(n) { self?.key(k) } }
        }
        source.resume()
        keySource = source
    }

    /// A key: `h` switches between bars and history, space or `p` pauses and goes on, `q` ends
    /// the run as Ctrl-C does.
    func key(_ k: UInt8) {
        dispatchPrecondition(condition: .onQueue(queue))
        switch k {
        case UInt8(ascii: "h"), UInt8(ascii: "H"):
            screen.showHistory.toggle()
            draw(force: true)
        case UInt8(ascii: " "), UInt8(ascii: "p"), UInt8(ascii: "P"):
            screen.paused.toggle()
            draw(force: true)
        case UInt8(ascii: "q"), UInt8(ascii: "Q"):
            kill(getpid(), SIGINT)
        default:
            break
        }
    }

    /// Gives the terminal's keys back (line editing and echo).
    private func releaseKeys(cancel: Bool) {
        if cancel {
            keySource?.cancel()
            keySource = nil
        }
        if screen.keys { Terminal.restoreInput() }
    }

    /// What the library says about a started sensor.
    func configure(_ kind: SensorKind, mode: SensorMode?, frequency: Double?) {
        dispatchPrecondition(condition: .onQueue(queue))
        update(panel: kind) { $0.mode = mode; $0.frequency = frequency }
        let period = mode == .buffered ? frequency.map { 1 / $0 } : nil
        gaps[kind] = GapCounter(period: period)
    }

    /// New samples of a sensor (oldest first); `received` counts them all, also past `--count`.
    func update<S: SensorSample>(_ samples: ArraySlice<S>, received: Int) {
        dispatchPrecondition(condition: .onQueue(queue))
        let kind = S.sensorKind
        guard let last = samples.last else { return }
        var lost: Int?
        if var g = gaps[kind] {
            for s in samples { g.add(s.timestamp) }
            gaps[kind] = g
            lost = g.period == nil ? nil : g.missing
        }
        if let i = screen.panels.firstIndex(where: { $0.kind == kind }) {
            for s in samples {
                let v = s.axes
                rings[i].add(s.timestamp, AxisTriple(x: v.x, y: v.y, z: v.z))
            }
        }
        var total = 0
        update(panel: kind) { p in
            p.latest = last.axes
            p.latestTimestamp = last.timestamp
            p.samples += received
            p.lost = lost
            total = p.samples
        }
        var history = sampleHistory[kind, default: []]
        history.append((last.timestamp, total))
        history.removeAll { last.timestamp - $0.t > 2 }
        sampleHistory[kind] = history
        if let first = history.first, last.timestamp - first.t > 0.2 {
            let rate = Double(total - first.n) / (last.timestamp - first.t)
            update(panel: kind) { $0.measuredRate = rate }
        }
        drawIfDue()
    }

    /// Device motion has started, fusing these sensors.
    func configureMotion(sources: [SensorKind]) {
        dispatchPrecondition(condition: .onQueue(queue))
        screen.motion?.sources = sources
    }

    /// A device motion estimate.
    func update(motion m: DeviceMotion) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard screen.motion != nil else { return }
        screen.motion?.latest = m
        screen.motion?.estimates += 1
        let total = screen.motion?.estimates ?? 0
        motionHistory.append((m.timestamp, total))
        motionHistory.removeAll { m.timestamp - $0.t > 2 }
        if let first = motionHistory.first, m.timestamp - first.t > 0.2 {
            screen.motion?.measuredRate = Double(total - first.n) / (m.timestamp - first.t)
        }
        drawIfDue()
    }

    /// Device motion has stopped on an error.
    func fail(motion error: MotionError) {
        dispatchPrecondition(condition: .onQueue(queue))
        screen.motion?.error = Report.motionFailureMessage(error)
        draw()
    }

    /// The sensor has stopped on an error.
    func fail(_ kind: SensorKind, _ error: MotionError) {
        dispatchPrecondition(condition: .onQueue(queue))
        update(panel: kind) { $0.error = Report.failureMessage(kind, error) }
        draw()
    }

    /// A sensor whose device went away is back (`--wait-for-device`): its panel shows readings again.
    func resumed(_ kind: SensorKind) {
        dispatchPrecondition(condition: .onQueue(queue))
        update(panel: kind) { $0.error = nil }
        gaps[kind] = nil
        draw()
    }

    /// A notice of the library.
    func note(_ text: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        if !screen.notes.contains(text) { screen.notes.append(text) }
    }

    /// The log stopped on a write error.
    func logStopped(_ failure: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        screen.log?.failure = failure
        draw()
    }

    /// After SIGWINCH: the new size, one full clear (the terminal may have rewrapped the old frame),
    /// and a frame.
    func resize() {
        dispatchPrecondition(condition: .onQueue(queue))
        size = Terminal.size()
        guard active else { return }
        out.control(Terminal.home + Terminal.clearScreen, force: true)
        draw(force: true)
    }

    /// Before the process stops (Ctrl-Z): the last frame stays, the cursor comes back.
    func suspend() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard active else { return }
        draw(force: true)
        active = false
        releaseKeys(cancel: false)
        out.control("\r\n" + Terminal.restore, force: true)
    }

    /// After it continues: the terminal is taken again.
    func resume() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !active, timer != nil else { return }
        active = true
        if screen.keys { _ = Terminal.takeKeys() }
        size = Terminal.size()
        out.control(Terminal.hideCursor + Terminal.home + Terminal.clearScreen, force: true)
        draw()
    }

    /// The end: the final frame stays on the screen, the cursor goes below it, visible, colours
    /// reset.
    func finish() {
        dispatchPrecondition(condition: .onQueue(queue))
        timer?.cancel()
        timer = nil
        releaseKeys(cancel: true)
        guard active else { return }
        draw(force: true)
        active = false
        out.control("\r\n" + Terminal.restore, force: true)
    }

    /// stdout has closed or failed: nothing more is drawn (the log, if any, goes on).
    func stdoutEnded() {
        dispatchPrecondition(condition: .onQueue(queue))
        timer?.cancel()
        timer = nil
        releaseKeys(cancel: true)
        active = false
    }

    /// The frame as it is now (for tests and for the final screen).
    var frame: [String] {
        LiveScreen.lines(screen, width: size.width, height: size.height, style: style)
    }

    /// Draws a frame when one is due: a frame period (three quarters of one, so that refills one
    /// period apart each get their frame despite jitter) after the last, or, from the idle
    /// timer, a whole idle period after it.
    private func drawIfDue(idle: Bool = false) {
        if screen.paused { return }
        let since = monotonicSeconds() - lastDraw
        if idle ? since >= Self.idlePeriod(framePeriod) - 0.05 : since >= 0.75 * framePeriod { draw() }
    }

    /// Makes a frame and offers it; while paused, only when `force`d (a key, the end).
    private func draw(force: Bool = false) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard active, force || !screen.paused else { return }
        let now = monotonicSeconds()
        lastDraw = now
        screen.elapsed = now - started
        if let log { screen.log?.rows = log.totalRows }
        for i in screen.panels.indices {
            let kind = screen.panels[i].kind
            if let t = screen.panels[i].latestTimestamp, lastShown[kind] != t {
                lastShown[kind] = t
                screen.panels[i].shown += 1
            }
            var history = updateHistory[kind, default: []]
            history.append((now, screen.panels[i].shown))
            history.removeAll { now - $0.t > 2 }
            updateHistory[kind] = history
            if let first = history.first, now - first.t > 0.5 {
                screen.panels[i].measuredUpdates = Double(screen.panels[i].shown - first.n) / (now - first.t)
            }
        }
        // The history charts, at two columns per character (braille) of the width they get.
        let columns = max(1, size.width - 1 - LiveScreen.historyLabelWidth) * 2
        for i in screen.panels.indices {
            screen.panels[i].history = screen.showHistory ? rings[i].chart(seconds: LiveScreen.historySeconds, columns: columns) : nil
        }
        let lines = frame
        var text = Terminal.home
        for (i, line) in lines.enumerated() {
            text += line + Terminal.clearLine
            if i < lines.count - 1 { text += "\r\n" }
        }
        text += Terminal.clearBelow
        framesDue += 1
        out.offer(Array(text.utf8), slot: Self.frameSlot)
    }

    private func update(panel kind: SensorKind, _ change: (inout PanelModel) -> Void) {
        guard let i = screen.panels.firstIndex(where: { $0.kind == kind }) else { return }
        change(&screen.panels[i])
    }
}
