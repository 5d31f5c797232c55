import Foundation
import Glibc
import Testing

// Permissions for real: motion-monitor run by iio-sim as an unprivileged uid (`--user`) against a tree
// laid out as the kernel does (root:root, 0644/0444, node 0600), without and with the udev rule's
// permissions, which `--apply-permissions` applies by running the shipped udev/iio-motion-permissions
// exactly as udev would. Also: the script alone on a hand-made tree, the rule through Debian's udevadm,
// and scripts/install-udev in a private copy of /etc (nothing on the host changes).
//
// These need root (CI runs as root): they create, once, a system user `iiomotion-test` and the group
// `iio` if missing, make the user a member, and copy motion-monitor where that user can run it.
// Helpers are `private` so they cannot collide with the other suites of this target.

private enum Perm {
    static let user = "iiomotion-test"
    static let group = "iio"
    /// The repository (for udev/ and scripts/).
    static let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized.path
    static let permissionScript = repo + "/udev/iio-motion-permissions"
    static let rulesFile = repo + "/udev/99-iio-motion.rules"
    static let installUdev = repo + "/scripts/install-udev"
    /// Where the rule's RUN expects the script, and install-udev puts it.
    static let installedScript = "/usr/local/lib/iio-motion/iio-motion-permissions"

    /// The copied motion-monitor the test user runs, or why the suite cannot run.
    static let setup: Result<String, SetupFailure> = {
        guard geteuid() == 0 else {
            return .failure(SetupFailure(description: "not root: these tests create the user \(user) and the group \(group) and run iio-sim as root (CI runs as root; try `sudo swift test --filter Permission`)"))
        }
        guard FileManager.default.isExecutableFile(atPath: SimHarness.product("motion-monitor")),
              FileManager.default.isExecutableFile(atPath: SimHarness.product("iio-sim")) else {
            return .failure(SetupFailure(description: "motion-monitor or iio-sim is not built next to the tests"))
        }
        do {
            if try sh("getent group \(group)").status != 0 {
                let r = try sh("groupadd --system \(group)")
                guard r.status == 0 else { return .failure(SetupFailure(description: "groupadd \(group): \(r)")) }
            }
            if try sh("id -u \(user)").status != 0 {
                let r = try sh("useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \(user)")
                guard r.status == 0 else { return .failure(SetupFailure(description: "useradd \(user): \(r)")) }
            }
            let r = try sh("usermod -aG \(group) \(user)")
            guard r.status == 0 else { return .failure(SetupFailure(description: "usermod: \(r)")) }
            // The build folder may be under a home the user cannot enter: copy the program (it links
            // only the Swift runtime in /opt/swift or /usr) to a folder anyone can traverse.
            let temporary = FileManager.default.temporaryDirectory.path
            for old in (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
            where old.hasPrefix("iio-motion-permission-tests-") {
                // Copies left by earlier runs whose process is gone.
                if let pid = Int32(old.dropFirst(28)), kill(pid, 0) != 0 && errno == ESRCH {
                    try? FileManager.default.removeItem(atPath: temporary + "/" + old)
                }
            }
            let dir = temporary + "/iio-motion-permission-tests-\(getpid())"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            let mm = dir + "/motion-monitor"
            try? FileManager.default.removeItem(atPath: mm)
            try FileManager.default.copyItem(atPath: SimHarness.product("motion-monitor"), toPath: mm)
            chmod(mm, 0o755)
            let check = try sh("runuser -u \(user) -- \(mm) --version")
            guard check.status == 0 else { return .failure(SetupFailure(description: "\(user) cannot run \(mm): \(check)")) }
            return .success(mm)
        } catch {
            return .failure(SetupFailure(description: "setting up the test user failed: \(error)"))
        }
    }()

    struct SetupFailure: Error, CustomStringConvertible { var description: String }

    static var ready: Bool { (try? setup.get()) != nil }
    static var notReadyReason: String {
        if case .failure(let f) = setup { return f.description }
        return ""
    }
    static var motionMonitor: String { (try? setup.get()) ?? "motion-monitor" }

    static func sh(_ script: String) throws -> SimHarness.Result {
        try SimHarness.run("/bin/sh", ["-c", script])
    }

    /// `iio-sim --fixture … <simArguments> -- /bin/sh -c 'cd / && <script>'` (the test user may not
    /// be able to enter the current folder).
    static func sim(fixtures: [String] = ["bmi160"], _ simArguments: [String], script: String) throws -> SimHarness.Result {
        try SimHarness.sim(fixtures.flatMap { ["--fixture", $0] } + simArguments, script: "cd / && " + script)
    }

    /// motion-monitor as the test user: `--json --interval 0 --count N -v`.
    static func monitor(_ simArguments: [String], count: Int = 5, options: String = "") throws -> SimHarness.Result {
        try sim(["--user", user] + simArguments,
                script: "exec timeout 60 \(motionMonitor) --json --interval 0 --count \(count) -v \(options)")
    }

    /// One JSON reading.
    struct Reading: Decodable {
        var sensor: String
        var x: Double
        var y: Double
        var z: Double
    }

    static func readings(_ r: SimHarness.Result) -> [Reading] {
        r.out.split(separator: "\n").compactMap { try? JSONDecoder().decode(Reading.self, from: Data($0.utf8)) }
    }

    /// The output of a script that prints `== NAME` before each step, by NAME (`== status N` lines
    /// stay in the step they end).
    static func sections(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        var name = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("== ") && !line.hasPrefix("== status") {
                name = String(line.dropFirst(3))
                continue
            }
            out[name, default: ""] += line + "\n"
        }
        return out
    }

    static func notes(_ r: SimHarness.Result) -> [Substring] {
        r.stderr.split(separator: "\n").filter { $0.hasPrefix("note:") }
    }

    /// `up=+x`, still: the accelerometer reads x ≈ −1 g, the gyroscope 0.
    static func expectStillOnX(_ r: SimHarness.Result, count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        let rs = readings(r)
        let accel = rs.filter { $0.sensor == "accelerometer" }, gyro = rs.filter { $0.sensor == "gyroscope" }
        #expect(accel.count == count && gyro.count == count, "\(r)", sourceLocation: sourceLocation)
        for a in accel {
            #expect(abs(a.x + 1) < 0.01 && abs(a.y) < 0.01 && abs(a.z) < 0.01, "\(a)", sourceLocation: sourceLocation)
        }
        for g in gyro {
            #expect(abs(g.x) < 0.005 && abs(g.y) < 0.005 && abs(g.z) < 0.005, "\(g)", sourceLocation: sourceLocation)
        }
    }

    /// Whether the rule gives the group write access to this file (path relative to its device
    /// folder), when the kernel lets root write it.
    static func grantedByRule(_ rel: String) -> Bool {
        let parts = rel.split(separator: "/").map(String.init)
        switch parts.count {
        case 1: return parts[0].hasSuffix("sampling_frequency") || parts[0] == "current_timestamp_clock"
        case 2:
            let (dir, name) = (parts[0], parts[1])
            if dir == "buffer" || (dir.hasPrefix("buffer") && Int(dir.dropFirst(6)) != nil) {
                return ["enable", "length", "watermark"].contains(name) || name.hasSuffix("_en")
            }
            if dir == "scan_elements" { return name.hasSuffix("_en") }
            if dir == "trigger" { return name == "current_trigger" }
            return false
        default: return false
        }
    }

    /// Path → "owner:group mode" of every file under the simulated devices and of each node, as
    /// root sees them inside the simulator.
    static func listing(_ r: SimHarness.Result) -> [String: String] {
        var out: [String: String] = [:]
        for line in r.out.split(separator: "\n") {
            let f = line.split(separator: " ")
            if f.count == 3 { out[String(f[0])] = "\(f[1]) \(f[2])" }
        }
        return out
    }

    static let listScript = """
        cd /sys/bus/iio/devices && for d in *; do find "$d/" -mindepth 1 \\( -type f -o -type p \\) -printf '%p %u:%g %m\\n'; done
        for n in /dev/iio:device*; do stat -c '%n %U:%G %a' "$n"; done
        """
}

@Suite("Permissions: a normal user without and with the udev rules", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: Perm.ready, Comment(rawValue: Perm.notReadyReason)))
struct PermissionTests {
    static let allFixtures = ["bmi160", "lsm6dsx", "hid-sensor-hub", "mpu6050", "cros-ec"]

    @Test("iio-sim lays files out as the kernel does, really root-owned, and --user runs COMMAND with the user's groups")
    func kernelLayout() throws {
        let r = try Perm.sim(["--user", Perm.user], script: """
            id -un; id -Gn
            cd /sys/bus/iio/devices/iio:device0
            stat -c '%n %U:%G %a' buffer/enable scan_elements/in_accel_x_en in_accel_sampling_frequency \
                current_timestamp_clock trigger/current_trigger in_accel_x_raw name scan_elements/in_accel_x_type /dev/iio:device0
            echo 1 > buffer/enable && echo wrote || echo refused
            """)
        #expect(r.status == 0, "\(r)")
        let lines = r.out.split(separator: "\n").map(String.init)
        #expect(lines.first == Perm.user, "\(r)")
        #expect(lines.count > 1 && lines[1].split(separator: " ").contains("iio"), "supplementary group iio: \(r)")
        let stats = lines.dropFirst(2).map { $0.split(separator: " ") }.filter { $0.count == 3 }
        #expect(stats.count == 9, "\(r)")
        for f in stats {
            let line = f.joined(separator: " ")
            #expect(f[1] == "root:root", "\(line)")
            let expected = f[0].hasPrefix("/dev/") ? "600" : (f[0].hasSuffix("_raw") || f[0] == "name" || f[0].hasSuffix("_type") ? "444" : "644")
            #expect(f[2] == Substring(expected), "\(line)")
        }
        // The files are really root's (iio-sim ran as root, without a user namespace): the kernel says no.
        #expect(lines.last == "refused" && r.stderr.contains("Permission denied"), "a normal user cannot write a 0644 root file: \(r)")
    }

    @Test("No rules: polled readings with one notice naming scripts/install-udev, values right")
    func noRulesPolls() throws {
        let r = try Perm.monitor(["--motion", "still:up=+x"])
        #expect(r.status == 0, "\(r)")
        Perm.expectStillOnX(r, count: 5)
        let notes = Perm.notes(r)
        #expect(notes.count == 1, "one notice: \(r)")
        #expect(notes.first?.contains("no permission") == true && notes.first?.contains("scripts/install-udev") == true, "\(r)")
        #expect(r.stderr.contains("accelerometer: iio:device0 (bmi160), polled"), "\(r)")
        #expect(r.stderr.contains("gyroscope: iio:device0 (bmi160), polled"), "\(r)")
    }

    @Test("Rules applied by udev/iio-motion-permissions, user in iio: buffered capture, no notice, values right",
          arguments: ["bmi160", "lsm6dsx", "mpu6050"])
    func rulesBuffer(fixture: String) throws {
        let r = try Perm.sim(fixtures: [fixture], ["--user", Perm.user, "--motion", "still:up=+x", "--apply-permissions", Perm.permissionScript],
                             script: "exec timeout 60 \(Perm.motionMonitor) --json --interval 0 --count 5 -v")
        #expect(r.status == 0, "\(r)")
        Perm.expectStillOnX(r, count: 5)
        #expect(Perm.notes(r).isEmpty, "\(r)")
        let modes = r.stderr.split(separator: "\n").filter { $0.hasPrefix("accelerometer: iio:") || $0.hasPrefix("gyroscope: iio:") }
        #expect(modes.count == 2 && modes.allSatisfy { $0.contains(", buffered at ") }, "\(r)")
    }

    @Test("Rules applied, but a user outside the group (nobody): still polled, one notice")
    func rulesNeedTheGroup() throws {
        let r = try Perm.sim(["--user", "nobody", "--motion", "still:up=+x", "--apply-permissions", Perm.permissionScript],
                             script: "exec timeout 60 \(Perm.motionMonitor) --json --interval 0 --count 5 -v")
        #expect(r.status == 0, "\(r)")
        Perm.expectStillOnX(r, count: 5)
        #expect(Perm.notes(r).count == 1, "\(r)")
        #expect(r.stderr.contains("polled"), "\(r)")
    }

    @Test("An unreadable raw file: exit 77 naming the file and scripts/install-udev")
    func unreadableRaw() throws {
        let unreadable = ["--unreadable", "iio:device0/in_accel_x_raw"]
        // Streaming (auto: polled, as there are no rules) the accelerometer alone; and --once.
        let streamed = try Perm.monitor(unreadable, options: "--sensor accelerometer")
        let once = try Perm.sim(["--user", Perm.user] + unreadable, script: "exec timeout 60 \(Perm.motionMonitor) --once")
        for r in [streamed, once] {
            #expect(r.status == 77, "\(r)")
            #expect(r.stderr.contains("in_accel_x_raw") && r.stderr.contains("scripts/install-udev")
                    && r.stderr.contains("permission denied"), "\(r)")
        }
        // Streaming never reads raw files: with the rules the same device streams.
        let r = try Perm.sim(["--user", Perm.user, "--apply-permissions", Perm.permissionScript] + unreadable,
                             script: "exec timeout 60 \(Perm.motionMonitor) --json --interval 0 --count 5 -v")
        #expect(r.status == 0 && r.stderr.contains("buffered"), "\(r)")
    }

    @Test("An unreadable raw file while streaming both sensors of the device: the gyroscope goes on, exit 77")
    func unreadableRawBothSensors() throws {
        // The accelerometer fails, the gyroscope of the same device goes on to its count (the
        // failed capture's clean-up never stops the capture that replaced it).
        let r = try Perm.sim(["--user", Perm.user, "--unreadable", "iio:device0/in_accel_x_raw"],
                             script: "exec timeout 10 \(Perm.motionMonitor) --json --interval 0 --count 5 -v")
        #expect(r.status == 77, "\(r)")
        #expect(Perm.readings(r).filter { $0.sensor == "gyroscope" }.count == 5, "\(r)")
        #expect(r.stderr.contains("in_accel_x_raw") && r.stderr.contains("scripts/install-udev"), "\(r)")
    }

    @Test("The script changes exactly the listed attributes of every fixture, to root:iio 0664, and each node to 0660")
    func scriptChangesExactlyTheList() throws {
        let before = Perm.listing(try Perm.sim(fixtures: Self.allFixtures, [], script: Perm.listScript))
        let after = Perm.listing(try Perm.sim(fixtures: Self.allFixtures, ["--apply-permissions", Perm.permissionScript], script: Perm.listScript))
        #expect(before.count > 100 && Set(before.keys) == Set(after.keys), "\(before.count) vs \(after.count) files")
        var granted = 0
        for (path, was) in before.sorted(by: { $0.key < $1.key }) {
            let now = after[path] ?? "?"
            if path.hasPrefix("/dev/") {
                #expect(was == "root:root 600" && now == "root:iio 660", "\(path): \(was) → \(now)")
                continue
            }
            let rel = path.split(separator: "/", maxSplits: 1).dropFirst().first.map(String.init) ?? path
            let isDevice = path.hasPrefix("iio:device")
            if isDevice && Perm.grantedByRule(rel) && was == "root:root 644" {
                #expect(now == "root:iio 664", "\(path): \(was) → \(now)")
                granted += 1
            } else {
                #expect(now == was, "\(path) must not change: \(was) → \(now)")
            }
            #expect(!["2", "3", "6", "7"].contains(now.last.map(String.init) ?? ""), "world-writable: \(path) \(now)")
        }
        #expect(granted > 30, "\(granted) attributes granted")
        #expect(after.values.contains("root:iio 664") && after["iio:device0/buffer/data_available"] == "root:root 444")
    }

    @Test("The script on a hand-made tree: newer bufferN folders too; read-only, event and other attributes untouched; idempotent")
    func scriptOnHandMadeTree() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let files: [(String, mode_t, Bool)] = [
            ("sampling_frequency", 0o644, true), ("in_accel_sampling_frequency", 0o644, true),
            ("in_accel_sampling_frequency_available", 0o444, false), ("in_temp_sampling_frequency", 0o444, false),
            ("current_timestamp_clock", 0o644, true), ("in_accel_scale", 0o644, false), ("in_accel_x_calibbias", 0o644, false),
            ("reset", 0o200, false), ("in_accel_x_raw", 0o444, false),
            ("buffer/enable", 0o644, true), ("buffer/length", 0o644, true), ("buffer/watermark", 0o644, true),
            ("buffer/data_available", 0o444, false), ("buffer/hwfifo_timeout", 0o644, false),
            ("buffer0/enable", 0o644, true), ("buffer0/in_accel_x_en", 0o644, true), ("buffer0/in_accel_x_index", 0o444, false),
            ("buffer1/length", 0o644, true),
            ("scan_elements/in_accel_x_en", 0o644, true), ("scan_elements/in_accel_x_type", 0o444, false),
            ("trigger/current_trigger", 0o644, true), ("events/in_accel_thresh_rising_en", 0o644, false),
            ("power/control", 0o644, false), ("sub/dir/sampling_frequency", 0o644, false),
        ]
        for (f, mode, _) in files {
            let p = dir + "/dev/" + f
            try FileManager.default.createDirectory(atPath: (p as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: p, contents: Data("0\n".utf8))
            chmod(p, mode)
        }
        mkfifo(dir + "/iio:device0", 0o600)
        for run in 1...2 {
            let r = try Perm.sh("'\(Perm.permissionScript)' '\(dir)/dev' && '\(Perm.permissionScript)' '\(dir)/iio:device0'")
            #expect(r.status == 0, "run \(run): \(r)")
            for (f, mode, granted) in files {
                var st = stat()
                stat(dir + "/dev/" + f, &st)
                let group = getgrgid(st.st_gid).map { String(cString: $0.pointee.gr_name) } ?? "\(st.st_gid)"
                #expect(st.st_mode & 0o7777 == (granted ? mode | 0o020 : mode), "run \(run): \(f) mode \(String(st.st_mode & 0o7777, radix: 8))")
                #expect(group == (granted ? Perm.group : "root"), "run \(run): \(f) group \(group)")
            }
            var st = stat()
            stat(dir + "/iio:device0", &st)
            #expect(st.st_mode & 0o7777 == 0o660 && getgrgid(st.st_gid).map { String(cString: $0.pointee.gr_name) } == Perm.group)
        }
        #expect(try Perm.sh("'\(Perm.permissionScript)'").status == 64)
        #expect(try Perm.sh("'\(Perm.permissionScript)' '\(dir)/none'").status == 66)
    }

    // MARK: The rule, through Debian's udevadm

    /// `udevadm --debug test --action=ACTION /sys/class/net/lo` with only `rulesText` as the rules
    /// (in a private mount namespace: the host's rules and /run stay as they are).
    static func udevadmTest(_ rulesText: String, action: String) throws -> SimHarness.Result {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Data(rulesText.utf8).write(to: URL(fileURLWithPath: dir + "/99-iio-motion.rules"))
        return try Perm.sh("""
            unshare --mount --propagation private /bin/sh -c 'mount --bind \(dir) /etc/udev/rules.d && \
            mount -t tmpfs tmpfs /usr/lib/udev/rules.d && mount -t tmpfs tmpfs /run && \
            exec udevadm --debug test --action=\(action) /sys/class/net/lo' 2>&1
            """)
    }

    /// The programs `udevadm test` says the event would RUN, with udev's substitutions made, in the
    /// forms of the udev versions Debian ships: 252 (bookworm) logs `run: 'PROGRAM'`, 257 (trixie)
    /// lists `RUN{program} : PROGRAM` under "Queued commands:" (and logs the rule's unexpanded
    /// `RUN '…$sys$devpath'`, which is not what runs).
    static func queuedPrograms(_ output: String) -> [String] {
        output.split(separator: "\n").compactMap { line -> String? in
            let line = line.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("run: '"), line.hasSuffix("'") {
                return String(line.dropFirst(6).dropLast())
            }
            if let range = line.range(of: "RUN{program} : ") {
                return String(line[range.upperBound...])
            }
            return nil
        }
    }

    @Test("udevadm reads the rule without a complaint; with the match pointed at lo it sets GROUP iio, MODE 0660 and RUNs the script on add and change, nothing on remove",
          .enabled(if: SimHarness.installed("udevadm"), "udevadm is not installed (Debian package udev; scripts/install-deps installs it)"),
          .enabled(if: FileManager.default.fileExists(atPath: "/sys/class/net/lo"), "no /sys/class/net/lo to run udevadm test on"))
    func udevadmAcceptsTheRule() throws {
        let rules = try String(contentsOfFile: Perm.rulesFile, encoding: .utf8)
        let ruleLine = (rules.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.hasPrefix("SUBSYSTEM==") } ?? -1) + 1
        #expect(ruleLine > 0 && rules.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == 1, "one rule line")
        #expect(rules.contains("SUBSYSTEM==\"iio\", KERNEL==\"iio:device[0-9]*\""), "matches IIO devices")
        #expect(rules.contains("RUN+=\"\(Perm.installedScript) $sys$devpath\""), "runs the installed script")

        let plain = try Self.udevadmTest(rules, action: "add")
        #expect(plain.out.contains("Reading rules file: /etc/udev/rules.d/99-iio-motion.rules"), "\(plain)")
        let complaints = plain.out.split(separator: "\n").filter { $0.hasPrefix("/etc/udev/rules.d/99-iio-motion.rules") || $0.contains("Invalid") }
        #expect(complaints.isEmpty, "\(complaints)")

        // The same rule matching the loopback interface (no IIO device exists here): what it assigns and runs.
        let onLoopback = rules.replacingOccurrences(of: "SUBSYSTEM==\"iio\", KERNEL==\"iio:device[0-9]*\"", with: "SUBSYSTEM==\"net\", KERNEL==\"lo\"")
        let gid = getgrnam(Perm.group).map { $0.pointee.gr_gid } ?? 0
        for action in ["add", "change"] {
            let r = try Self.udevadmTest(onLoopback, action: action)
            #expect(r.out.contains("99-iio-motion.rules:\(ruleLine) GROUP \(gid)"), "\(action): \(r)")
            #expect(r.out.contains("99-iio-motion.rules:\(ruleLine) MODE 0660"), "\(action): \(r)")
            #expect(Self.queuedPrograms(r.out) == ["\(Perm.installedScript) /sys/devices/virtual/net/lo"], "\(action): \(r)")
        }
        let removed = try Self.udevadmTest(onLoopback, action: "remove")
        #expect(Self.queuedPrograms(removed.out).isEmpty && !removed.out.contains("GROUP"), "\(removed)")
    }

    // MARK: scripts/install-udev

    /// Runs `script` as root in a private mount namespace whose /etc is a copy of the host's and whose
    /// /usr/local/lib is empty, so install-udev's changes (files, group, membership) stay there.
    static func inPrivateSystem(simulated: Bool = false, _ script: String) throws -> SimHarness.Result {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        chmod(dir, 0o755)
        let setup = "cp -a /etc/. \(dir)/etc/ && mount --bind \(dir)/etc /etc && mount -t tmpfs tmpfs /usr/local/lib && cd / && "
        try FileManager.default.createDirectory(atPath: dir + "/etc", withIntermediateDirectories: true)
        let stub = dir + "/udevadm"
        try Data("#!/bin/sh\necho \"udevadm $*\" >> \(dir)/udevadm.log\n".utf8).write(to: URL(fileURLWithPath: stub))
        chmod(stub, 0o755)
        let body = "exec 2>&1; export STUB=\(stub) DIR=\(dir); " + setup + script
        if simulated {
            return try SimHarness.sim(["--fixture", "bmi160", "--keep-caps", "--motion", "still:up=+x"], script: body)
        }
        let quoted = "'" + body.replacingOccurrences(of: "'", with: "'\\''") + "'"
        return try Perm.sh("unshare --mount --propagation private /bin/sh -c \(quoted)")
    }

    @Test("install-udev: installs the rule and script, creates the group, adds SUDO_USER, reloads and triggers udev; again changes nothing; --uninstall undoes it")
    func installUdev() throws {
        let iu = Perm.installUdev
        let r = try Self.inPrivateSystem("""
            groupdel \(Perm.group)
            echo "== install"; UDEVADM=$STUB SUDO_USER=\(Perm.user) \(iu); echo "== status $?"
            stat -c '%n %U:%G %a' /etc/udev/rules.d/99-iio-motion.rules \(Perm.installedScript)
            cmp /etc/udev/rules.d/99-iio-motion.rules \(Perm.rulesFile) && cmp \(Perm.installedScript) \(Perm.permissionScript) && echo same
            id -nG \(Perm.user); cat $DIR/udevadm.log
            echo "== again"; UDEVADM=$STUB SUDO_USER=\(Perm.user) \(iu); echo "== status $?"
            echo "== uninstall"; UDEVADM=$STUB \(iu) --uninstall; echo "== status $?"
            ls /etc/udev/rules.d/99-iio-motion.rules /usr/local/lib/iio-motion 2>&1; getent group \(Perm.group) || echo "no group"
            echo "== uninstall again"; UDEVADM=$STUB \(iu) --uninstall; echo "== status $?"
            """)
        let sections = Perm.sections(r.out)
        let install = sections["install"] ?? "", again = sections["again"] ?? ""
        let uninstall = sections["uninstall"] ?? "", twice = sections["uninstall again"] ?? ""
        let statuses = r.out.split(separator: "\n").filter { $0.hasPrefix("== status") }
        #expect(r.status == 0 && statuses.count == 4 && statuses.allSatisfy { $0 == "== status 0" }, "\(r)")
        #expect(install.contains("created the group iio") && install.contains("added \(Perm.user) to the group iio")
                && install.contains("log out and in again"), "\(install)")
        #expect(install.contains("/etc/udev/rules.d/99-iio-motion.rules root:root 644")
                && install.contains("\(Perm.installedScript) root:root 755") && install.contains("\nsame\n"), "\(install)")
        #expect(install.contains("udevadm control --reload\nudevadm trigger --subsystem-match=iio --action=change\n"), "\(install)")
        #expect(again.contains("up to date") && !again.contains("installed ") && !again.contains("added ")
                && !again.contains("created") && !again.contains("log out"), "\(again)")
        #expect(uninstall.contains("removed /etc/udev/rules.d/99-iio-motion.rules") && uninstall.contains("deleted the group iio")
                && uninstall.contains("No such file") && uninstall.contains("no group"), "\(uninstall)")
        #expect(!twice.contains("removed") && twice.contains("uninstalled"), "\(twice)")
    }

    @Test("install-udev without a running udev applies the permissions itself (a user gets buffered capture); --uninstall gives the device back (polled again)")
    func installUdevWithoutUdev() throws {
        let mm = Perm.motionMonitor
        let run = "runuser -u \(Perm.user) -- \(mm) --json --interval 0 --count 3 -v --sensor accelerometer"
        let r = try Self.inPrivateSystem(simulated: true, """
            echo "== install"; UDEVADM=false \(Perm.installUdev) --user \(Perm.user); echo "== status $?"
            stat -c '%n %U:%G %a' /dev/iio:device0 /sys/bus/iio/devices/iio:device0/buffer/enable
            \(run); echo "== uninstall"; UDEVADM=false \(Perm.installUdev) --uninstall; echo "== status $?"
            stat -c '%n %U:%G %a' /dev/iio:device0 /sys/bus/iio/devices/iio:device0/buffer/enable
            \(run)
            """)
        let sections = Perm.sections(r.out)
        let install = sections["install"] ?? "", uninstall = sections["uninstall"] ?? ""
        #expect(r.status == 0 && r.out.components(separatedBy: "== status 0").count == 3, "\(r)")
        #expect(install.contains("udev is not running here: applied the permissions directly to 1 device(s)"), "\(install)")
        #expect(install.contains("/dev/iio:device0 root:iio 660") && install.contains("buffer/enable root:iio 664"), "\(install)")
        #expect(install.contains("accelerometer: iio:device0 (bmi160), buffered") && !install.contains("note:"), "\(install)")
        #expect(uninstall.contains("gave iio:device0 back to root"), "\(uninstall)")
        #expect(uninstall.contains("/dev/iio:device0 root:root 600") && uninstall.contains("buffer/enable root:root 644"), "\(uninstall)")
        #expect(uninstall.contains("polled") && uninstall.contains("note: "), "\(uninstall)")
    }
}
