#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import SystemSupport
import Foundation
import IIOSimKit

/// iio-sim's version.
let version = "0.1.0"

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("iio-sim: \(message)\n".utf8))
    exit(status)
}

let arguments = Array(CommandLine.arguments.dropFirst())

// `iio-sim record [DEVICE_FOLDER...] > board.json`: a real board, as a fixture.
if arguments.first == "record" {
    var rest = Array(arguments.dropFirst())
    if rest.contains("-h") || rest.contains("--help") {
        print(Recorder.help)
        exit(0)
    }
    var description: String?
    if let i = rest.firstIndex(of: "--description") {
        guard i + 1 < rest.count else { fail("record: --description needs a text", status: 64) }
        description = rest[i + 1]
        rest.removeSubrange(i...(i + 1))
    }
    do {
        let fixture: Fixture
        if rest.isEmpty {
            fixture = try Recorder.recordAll(description: description)
        } else {
            fixture = try Recorder.record(devices: rest, triggers: Recorder.triggerFolders(usableBy: rest), description: description)
        }
        print(try Recorder.json(fixture))
        exit(0)
    } catch {
        fail("record: \(error)", status: 66)
    }
}
let commandLine: SimCommandLine
do {
    commandLine = try SimCommandLine(arguments: arguments)
} catch {
    FileHandle.standardError.write(Data("iio-sim: \(error)\nTry 'iio-sim --help'.\n".utf8))
    exit(64)
}

switch commandLine.action {
case .help:
    print(SimCommandLine.help)
    exit(0)
case .version:
    print("iio-sim \(version)")
    exit(0)
case .listFixtures:
    let fixtures = Fixture.available()
    let width = max(16, (fixtures.map(\.name.count).max() ?? 0) + 2)
    for f in fixtures {
        print(f.name.padding(toLength: width, withPad: " ", startingAt: 0) + f.description)
        print(String(repeating: " ", count: width) + f.path)
    }
    exit(0)
case .run:
    break
}

// Everything that can be checked before entering the namespaces is checked here, so that mistakes
// are reported plainly (exit 64 for usage, 66 for a fixture that cannot be read).
let fixture: Fixture
do { fixture = try commandLine.loadFixture() } catch { fail("\(error)", status: 66) }
var runAs: (uid: Int32, gid: Int32, groups: [gid_t])?
if let user = commandLine.user {
    guard geteuid() == 0 else { fail("--user needs iio-sim to run as root", status: 64) }
    let pw = UInt32(user).flatMap { getpwuid($0) } ?? getpwnam(user)
    guard let pw else { fail("--user: no user \"\(user)\"", status: 67) }
    // Its supplementary groups (e.g. `iio`) as a login would give them; getgrouplist says how many
    // there are when the array is too small.
    var count: Int32 = 64
    var groups = [gid_t](repeating: 0, count: 64)
    if getgrouplist(pw.pointee.pw_name, pw.pointee.pw_gid, &groups, &count) < 0 {
        groups = [gid_t](repeating: 0, count: Int(max(count, 1)))
        if getgrouplist(pw.pointee.pw_name, pw.pointee.pw_gid, &groups, &count) < 0 { count = 0 }
    }
    runAs = (Int32(pw.pointee.pw_uid), Int32(pw.pointee.pw_gid), Array(groups.prefix(Int(count))))
    // What `runuser` (without a login shell) sets; the rest of the environment is kept.
    setenv("HOME", pw.pointee.pw_dir, 1)
    setenv("USER", pw.pointee.pw_name, 1)
    setenv("LOGNAME", pw.pointee.pw_name, 1)
}
if let script = commandLine.permissionScript {
    guard geteuid() == 0 else { fail("--apply-permissions needs iio-sim to run as root (the script gives files to a group)", status: 64) }
    guard access(script, X_OK) == 0 else { fail("--apply-permissions: cannot execute \(script): \(errnoText(errno))", status: 66) }
}
if let dir = commandLine.options.streamLog {
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
}

if !Sandbox.isInside {
    do { try Sandbox.reexecInNamespaces(arguments: arguments) } catch { fail("\(error)", status: 71) }
}
unsetenv(Sandbox.insideVariable)

func spawn(_ argv: [String], dropDAC: Bool, as user: (uid: Int32, gid: Int32, groups: [gid_t])?, output: String?) -> pid_t {
    let cargs = argv.map { strdup($0) } + [nil]
    defer { cargs.forEach { free($0) } }
    let groups = user?.groups ?? []
    return groups.withUnsafeBufferPointer { g in
        simsupport_spawn(cargs, dropDAC ? 1 : 0, user?.uid ?? -1, user?.gid ?? -1, g.baseAddress,
                         Int32(g.count), output)
    }
}

// Inside the namespaces, as (namespace) root.
simsupport_block_signals()
let simulator: Simulator
do {
    try Sandbox.prepareMounts()
    simulator = try Simulator(fixture: fixture, root: "", options: commandLine.options)
    try simulator.build()
} catch {
    fail("cannot set up the simulated devices: \(error)", status: 71)
}
if let script = commandLine.permissionScript {
    // What udev does when a device appears: the rule's RUN on the device's sysfs folder; the script
    // also applies the rule's GROUP/MODE to a node it is given. Root with every capability, as udev.
    for (directory, node) in simulator.devicePaths {
        for path in [directory] + (node.map { [$0] } ?? []) {
            let pid = spawn([script, path], dropDAC: false, as: nil, output: nil)
            var status: Int32 = 0
            if pid > 0 { while waitpid(pid, &status, 0) < 0 && errno == EINTR {} }
            if pid < 0 || status != 0 {
                fail("--apply-permissions: \(script) \(path) failed (\(pid < 0 ? errnoText(-pid) : "status \(status >> 8)"))", status: 71)
            }
            if commandLine.options.verbose {
                FileHandle.standardError.write(Data("iio-sim: applied \(script) to \(path)\n".utf8))
            }
        }
    }
}
// Ground truth for COMMAND: the scripted motion and its time zero on CLOCK_MONOTONIC.
setenv("IIO_SIM_MOTION", commandLine.options.motion.description, 1)
setenv("IIO_SIM_MOTION_START_NS", String(simulator.motionStartNanoseconds), 1)
do {
    try simulator.start()
} catch {
    fail("cannot set up the simulated devices: \(error)", status: 71)
}
if commandLine.options.verbose {
    for (id, name) in simulator.layout {
        FileHandle.standardError.write(Data("iio-sim: \(id): \(name)\n".utf8))
    }
}

var iiodPID: pid_t = 0
if commandLine.iiod {
    guard let iiod = Sandbox.findExecutable("iiod") else {
        simulator.stop()
        fail("--iiod: cannot find iiod (Debian package iiod)", status: 69)
    }
    let logPath = commandLine.options.streamLog.map { $0 + "/iiod.log" } ?? "/dev/null"
    iiodPID = spawn([iiod, "-p", String(commandLine.iiodPort)], dropDAC: false, as: nil, output: logPath)
    var ready = false
    for _ in 0..<500 {
        if simsupport_tcp_probe(Int32(commandLine.iiodPort)) == 0 { ready = true; break }
        var status: Int32 = 0
        if iiodPID > 0 && waitpid(iiodPID, &status, WNOHANG) == iiodPID { iiodPID = 0; break }
        usleep(10_000)
    }
    if !ready {
        if iiodPID > 0 { kill(iiodPID, SIGTERM) }
        simulator.stop()
        fail("iiod did not start listening on 127.0.0.1:\(commandLine.iiodPort) (see \(logPath))", status: 69)
    }
}

let child = spawn(commandLine.command, dropDAC: !commandLine.keepCaps && runAs == nil, as: runAs, output: nil)
if child < 0 {
    simulator.stop()
    fail("cannot run \(commandLine.command[0]): \(errnoText(-child))", status: 126)
}

// Signals meant for COMMAND (a terminal's Ctrl-C reaches it directly; a kill of iio-sim does not).
let forwarder = Thread {
    while true {
        let sig = simsupport_wait_signal()
        if sig > 0 { kill(child, sig) }
    }
}
forwarder.start()

var status: Int32 = 0
while waitpid(child, &status, 0) < 0 && errno == EINTR {}
if iiodPID > 0 {
    kill(iiodPID, SIGTERM)
    var s: Int32 = 0
    for _ in 0..<200 where waitpid(iiodPID, &s, WNOHANG) == 0 { usleep(10_000) }
    kill(iiodPID, SIGKILL)
    waitpid(iiodPID, &s, 0)
}
let stats = simulator.stop()
if commandLine.options.verbose {
    for (id, s) in stats.sorted(by: { $0.key < $1.key }) where s.sessions > 0 {
        FileHandle.standardError.write(Data("iio-sim: \(id): \(s.sessions) sessions, \(s.scansWritten) scans written, \(s.scansDropped) dropped, \(s.scansUnreadAtClose) unread at close\n".utf8))
    }
}
// COMMAND's status: its exit code, or 128 + the signal that ended it (as a shell reports it).
let code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
exit(code)
