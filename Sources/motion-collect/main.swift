@preconcurrency import Glibc
import MotionMQTT
import SystemSupport

// motion-collect: every board's samples from an MQTT broker into one CSV or JSON-lines log.

func say(_ s: String) {
    let line = s + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

let options: CollectOptions
do {
    options = try CollectOptions(arguments: Array(CommandLine.arguments.dropFirst()))
} catch {
    if error.description == CollectOptions.usage { print(CollectOptions.usage); exit(0) }
    say(error.description)
    exit(64)
}

// The output: a new file (never an existing one without --force), or stdout.
let outFD: Int32
if options.outputPath == "-" {
    outFD = 1
} else {
    let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.force ? O_TRUNC : O_EXCL)
    outFD = open(options.outputPath, flags, 0o644)
    if outFD < 0 {
        let e = errno
        say("motion-collect: cannot create \(options.outputPath): \(errnoText(e))\(e == EEXIST ? " (use --force to replace it)" : "")")
        exit(e == EEXIST ? 73 : 74)
    }
}
signal(SIGPIPE, SIG_IGN)

/// Writes everything or reports the error; the collector ends on a failed write.
func writeAll(_ text: String) -> Bool {
    var bytes = Array(text.utf8)
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(outFD, $0.baseAddress! + done, $0.count - done) }
        if n < 0 { if errno == EINTR { continue }; return false }
        done += n
    }
    return true
}

struct State: Sendable {
    var collector: Collector
    var writeError: String?
}
let state = Locked(State(collector: Collector(output: options.json ? .json : .csv)))
if !options.json, !writeAll(Collector.csvHeader + "\n") {
    say("motion-collect: writing \(options.outputPath) failed: \(errnoText(errno))"); exit(74)
}

// Ctrl-C, SIGTERM and SIGHUP are blocked here (the network thread inherits the mask) and waited
// for in the main loop with sigtimedwait: no signal handler runs.
var endSignals = sigset_t()
sigemptyset(&endSignals)
for sig in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&endSignals, sig) }
pthread_sigmask(SIG_BLOCK, &endSignals, nil)

let subscriber: MQTTSubscriber
do {
    subscriber = try MQTTSubscriber(broker: options.broker, clientID: options.clientID ?? "motion-collect-\(options.broker.prefix)",
                                    caFile: options.caFile) { message in
        state.withLock { s in
            guard s.writeError == nil else { return }
            let text = s.collector.take(message, now: monotonicSeconds())
            if !text.isEmpty, !writeAll(text) { s.writeError = errnoText(errno) }
        }
    }
} catch {
    say("motion-collect: \(error)")
    exit(78)
}

// Ends at Ctrl-C, SIGTERM, SIGHUP, --duration, or a failed write.
let showTable = options.table ?? (isatty(2) == 1)
let deadline = options.duration.map { monotonicSeconds() + $0 }
var status: Int32 = 0
while true {
    var second = timespec(tv_sec: 1, tv_nsec: 0)
    if sigtimedwait(&endSignals, nil, &second) > 0 { break }
    if state.withLock({ $0.writeError != nil }) { break }
    if let deadline, monotonicSeconds() >= deadline { break }
    let s = subscriber.state
    if let failure = s.failure {
        say("motion-collect: \(failure)")
        status = 77
        break
    }
    if showTable {
        let t = monotonicSeconds()
        let table = "\u{1B}[H\u{1B}[2J" + "motion-collect \(options.broker)  \(s.connected ? "connected" : (s.lastError ?? "connecting"))\n"
            + state.withLock { $0.collector.table(now: t) }
        say(table)
    }
}
subscriber.stop()
let final = state.withLock { $0 }
if let e = final.writeError { say("motion-collect: writing \(options.outputPath) failed: \(e)"); status = 74 }
if outFD != 1, close(outFD) != 0 { say("motion-collect: closing \(options.outputPath) failed: \(errnoText(errno))"); status = 74 }
let totals = final.collector.boards.values.reduce((0, 0)) { ($0.0 + $1.samples, $0.1 + $1.duplicates) }
say("motion-collect: \(totals.0) samples from \(final.collector.boards.count) boards, \(totals.1) repeats dropped")
exit(status)
