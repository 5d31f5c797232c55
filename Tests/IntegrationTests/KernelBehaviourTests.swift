import Foundation
import IIOSimKit
import Testing

/// What Linux 6.1's IIO core and drivers do (../shared/reference/real-kernel.md), as iio-sim now
/// models it, and how capture copes: buffers that cannot deliver are polled with one note, and
/// every attribute capture writes is back to its value afterwards.
@Suite("The real kernel's behaviour: fallbacks, and devices left as found", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: SimHarness.monitorReady("kernel behaviour tests")))
struct KernelBehaviourTests {
    static let monitor = SimHarness.product("motion-monitor")

    /// A BMI160 as it probes without an interrupt: a triggered buffer, an empty current_trigger,
    /// no trigger at all; `withoutTrigger` says what enabling the buffer then does. The raw
    /// values are pinned, distinct per axis.
    static func noInterruptFixture(in dir: String, name: String, withoutTrigger: Fixture.Buffer.WithoutTrigger) throws -> (path: String, sim: [String]) {
        var fixture = try SimHarness.fixture("bmi160")
        fixture.devices[0].name = name
        fixture.devices[0].currentTrigger = ""
        fixture.devices[0].buffer?.withoutTrigger = withoutTrigger
        fixture.triggers = []
        let path = dir + "/\(name).json"
        try JSONEncoder().encode(fixture).write(to: URL(fileURLWithPath: path))
        let raw = ["accel_x": "100", "accel_y": "-200", "accel_z": "16000", "anglvel_x": "7", "anglvel_y": "-9", "anglvel_z": "11"]
        let sim = raw.sorted { $0.key < $1.key }.flatMap { ["--set", "iio:device0/in_\($0.key)_raw=\($0.value)"] }
        return (path, sim)
    }

    /// The files capture may change, with their contents, as `cat` prints them in the simulator.
    static let watched = ["buffer/enable", "buffer/length", "buffer/watermark", "buffer0/length", "current_timestamp_clock",
                          "trigger/current_trigger", "in_accel_sampling_frequency", "in_anglvel_sampling_frequency",
                          "scan_elements/in_accel_x_en", "scan_elements/in_anglvel_z_en", "scan_elements/in_timestamp_en"]
    static var snapshot: String {
        "for f in \(watched.joined(separator: " ")); do printf '%s=%s;' $f \"$(cat /sys/bus/iio/devices/iio:device0/$f)\"; done; echo"
    }

    func lines(_ r: SimHarness.Result, _ sensor: String) -> [JSONReading] {
        r.out.split(separator: "\n").compactMap { JSONReading(line: String($0)) }.filter { $0.sensor == sensor }
    }

    /// Core Motion's reading of the pinned raw values: −M·(raw × scale) / g, M = bmi160's matrix.
    func expectExact(_ r: SimHarness.Result) {
        let g = 9.80665, s = 0.000598, sg = 0.001065
        let (ax, ay, az) = (100.0 * s, -200.0 * s, 16000.0 * s)
        // M = [0 1 0; -1 0 0; 0 0 1]: M·v = (v.y, −v.x, v.z).
        let accel = (-ay / g, ax / g, -az / g)
        let gyro = (-9.0 * sg, -7.0 * sg, 11.0 * sg)  // rad/s, Core Motion's sign: as the kernel's
        let a = lines(r, "accelerometer"), w = lines(r, "gyroscope")
        #expect(!a.isEmpty && !w.isEmpty, "\(r)")
        for l in a { #expect(abs(l.x - accel.0) < 1e-9 && abs(l.y - accel.1) < 1e-9 && abs(l.z - accel.2) < 1e-9, "\(l) vs \(accel)") }
        for l in w { #expect(abs(l.x - gyro.0) < 1e-9 && abs(l.y - gyro.1) < 1e-9 && abs(l.z - gyro.2) < 1e-9, "\(l) vs \(gyro)") }
    }

    @Test("No trigger, no interrupt, the kernel refuses the buffer (EINVAL): polled, one note saying why and what would stream; exact readings; left as found")
    func refusedBuffer() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (path, sim) = try Self.noInterruptFixture(in: dir, name: "bmi160", withoutTrigger: .refuse)
        let r = try SimHarness.sim(["--fixture", path] + sim, script: """
            \(Self.snapshot)
            '\(Self.monitor)' --json --interval 0.05 --count 4; echo "status $?" >&2
            \(Self.snapshot)
            """)
        #expect(r.stderr.contains("status 0"), "\(r)")
        let notes = r.stderr.split(separator: "\n").filter { $0.hasPrefix("note: ") }
        #expect(notes.count == 1, "one note: \(r.stderr)")
        let note = notes.first.map(String.init) ?? ""
        #expect(note.contains("Polling iio:device0 (bmi160) instead of streaming its buffer") && note.contains("no trigger and no data-ready interrupt")
                && note.contains("EINVAL") && note.contains("iio-trig-hrtimer"), "\(note)")
        expectExact(r)
        let snaps = r.out.split(separator: "\n").filter { $0.hasPrefix("buffer/enable=") }
        #expect(snaps.count == 2 && snaps.first == snaps.last, "left as found:\n\(snaps.joined(separator: "\n"))")
    }

    @Test("No trigger, the buffer enables and stays silent (bmc150_accel): detected in well under a second, polled, one note; left as found")
    func silentBuffer() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (path, sim) = try Self.noInterruptFixture(in: dir, name: "bma255", withoutTrigger: .silent)
        let start = Date()
        let r = try SimHarness.sim(["--fixture", path] + sim, script: """
            \(Self.snapshot)
            '\(Self.monitor)' --json --interval 0.05 --count 3; echo "status $?" >&2
            \(Self.snapshot)
            """)
        let seconds = Date().timeIntervalSince(start)
        #expect(r.stderr.contains("status 0"), "\(r)")
        let notes = r.stderr.split(separator: "\n").filter { $0.hasPrefix("note: ") }
        #expect(notes.count == 1, "one note: \(r.stderr)")
        let note = notes.first.map(String.init) ?? ""
        #expect(note.contains("no trigger and no data-ready interrupt") && note.contains("delivered nothing in 0.25 s")
                && note.contains("iio-trig-hrtimer"), "\(note)")
        #expect(seconds < 5, "the whole run took \(seconds) s")
        expectExact(r)
        let snaps = r.out.split(separator: "\n").filter { $0.hasPrefix("buffer/enable=") }
        #expect(snaps.count == 2 && snaps.first == snaps.last, "left as found:\n\(snaps.joined(separator: "\n"))")
    }

    @Test("Streaming with the device's trigger: length, watermark, clock and frequencies changed while it runs, all back after a normal end, SIGTERM and an error")
    func leftAsFound() throws {
        let r = try SimHarness.sim(["--fixture", "bmi160"], script: """
            \(Self.snapshot)
            '\(Self.monitor)' --json --interval 0.01 --rate 200 > /dev/null 2>&1 &
            m=$!; sleep 1.5
            \(Self.snapshot)
            kill -TERM $m; wait $m
            \(Self.snapshot)
            '\(Self.monitor)' --json --interval 0 --rate 400 --count 50 > /dev/null 2>&1
            \(Self.snapshot)
            """)
        let snaps = r.out.split(separator: "\n").filter { $0.hasPrefix("buffer/enable=") }.map(String.init)
        try #require(snaps.count == 4, "\(r)")
        #expect(snaps[1].contains("buffer/enable=1;") && snaps[1].contains("current_timestamp_clock=monotonic;")
                && snaps[1].contains("in_accel_sampling_frequency=200.000000;"), "while streaming: \(snaps[1])")
        #expect(!snaps[1].contains("buffer/length=1;"), "a kernel buffer of seconds while streaming: \(snaps[1])")
        #expect(snaps[0].contains("current_timestamp_clock=realtime;"), "the kernel's default: \(snaps[0])")
        #expect(snaps[2] == snaps[0], "after SIGTERM:\n\(snaps[0])\n\(snaps[2])")
        #expect(snaps[3] == snaps[0], "after a normal end:\n\(snaps[0])\n\(snaps[3])")

        // An error: no data-ready interrupt on a device whose trigger is set (exit 74).
        let e = try SimHarness.sim(["--fixture", "bmi160", "--no-irq", "bmi160"], script: """
            \(Self.snapshot)
            '\(Self.monitor)' --json --interval 0.05 > /dev/null 2>&1; echo "status $?" >&2
            \(Self.snapshot)
            """)
        #expect(e.stderr.contains("status 74"), "\(e)")
        let esnaps = e.out.split(separator: "\n").filter { $0.hasPrefix("buffer/enable=") }
        #expect(esnaps.count == 2 && esnaps.first == esnaps.last, "after an error:\n\(esnaps.joined(separator: "\n"))")
    }

    // MARK: The recorder

    @Test("iio-sim record: a recorded device loads as a fixture and reads the same (round trip)", arguments: ["bmi160", "hid-sensor-hub", "lsm6dsx"])
    func recordRoundTrip(_ name: String) throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sim = SimHarness.product("iio-sim")
        let pinned = ["--set", "iio:device0/in_accel_x_raw=123"]
        let recorded = try SimHarness.sim(["--fixture", name] + pinned, script: "'\(sim)' record > \(dir)/board.json && '\(Self.monitor)' --once --json")
        try #require(recorded.status == 0, "\(recorded)")
        let fixture = try Fixture.load(path: dir + "/board.json")
        let original = try SimHarness.fixture(name)
        #expect(fixture.devices.map(\.name) == original.devices.map(\.name))
        #expect(fixture.triggers.map(\.name) == original.triggers.map(\.name))
        for (r, o) in zip(fixture.devices, original.devices) {
            #expect(r.frequencyRule == o.frequencyRule, "\(r.name)")
            #expect(r.currentTrigger == o.currentTrigger, "\(r.name)")
            #expect(r.buffer?.triggered == o.buffer?.triggered, "\(r.name)")
            #expect(Set(r.channels.compactMap(\.index)) == Set(o.channels.compactMap(\.index)), "\(r.name)")
            for (k, v) in o.attributes { #expect(r.attributes[k] == v, "\(r.name) \(k)") }
        }
        let replayed = try SimHarness.sim(["--fixture", dir + "/board.json"], script: "'\(Self.monitor)' --once --json")
        try #require(replayed.status == 0, "\(replayed)")
        let strip = { (r: SimHarness.Result) in
            r.out.split(separator: "\n").compactMap { JSONReading(line: String($0)) }.map { "\($0.sensor) \($0.device) \($0.x) \($0.y) \($0.z)" }
        }
        #expect(!strip(recorded).isEmpty && strip(recorded) == strip(replayed), "\(recorded)\n\(replayed)")
    }

    // MARK: The simulator's kernel

    /// Writes `value` to each file with bash (whose error names the errno) and prints the result.
    static func writes(_ pairs: [(String, String)]) -> String {
        pairs.map { file, value in
            "bash -c \"echo '\(value)' > /sys/bus/iio/devices/iio:device0/\(file)\" 2>/dev/null && echo '\(file)=\(value): ok' || echo '\(file)=\(value): refused'; "
                + "bash -c \"echo '\(value)' > /sys/bus/iio/devices/iio:device0/\(file)\" 2>&1 | grep -o 'Device or resource busy\\|Invalid argument'"
        }.joined(separator: "\n")
    }

    @Test("iio-sim: EBUSY for length, _en, timestamp clock while buffering and for a second open; buffer0/ and scan_elements/ are the same files; an empty current_trigger is an empty file")
    func busyWhileBuffering() throws {
        let r = try SimHarness.sim(["--fixture", "bmi160"], script: """
            cd /sys/bus/iio/devices/iio:device0
            test -d buffer0 && test -d scan_elements && test -d buffer && echo dirs
            echo 1 > scan_elements/in_accel_x_en; cat buffer0/in_accel_x_en
            echo 1 > buffer/enable
            \(Self.writes([("buffer/length", "8"), ("buffer0/length", "8"), ("buffer/watermark", "2"), ("scan_elements/in_accel_y_en", "1"),
                           ("buffer0/in_accel_y_en", "1"), ("current_timestamp_clock", "monotonic")]))
            exec 3< /dev/iio:device0; bash -c 'exec 4< /dev/iio:device0' 2>&1 | grep -o 'Device or resource busy'; exec 3<&-
            echo 0 > buffer/enable
            \(Self.writes([("buffer/length", "8"), ("current_timestamp_clock", "bogus"), ("trigger/current_trigger", "nosuch")]))
            cat buffer0/length; wc -c < trigger/current_trigger
            """)
        #expect(r.status == 0, "\(r)")
        let expected = """
            dirs
            1
            buffer/length=8: refused
            Device or resource busy
            buffer0/length=8: refused
            Device or resource busy
            buffer/watermark=2: refused
            Device or resource busy
            scan_elements/in_accel_y_en=1: refused
            Device or resource busy
            buffer0/in_accel_y_en=1: refused
            Device or resource busy
            current_timestamp_clock=monotonic: refused
            Device or resource busy
            Device or resource busy
            buffer/length=8: ok
            current_timestamp_clock=bogus: refused
            Invalid argument
            trigger/current_trigger=nosuch: ok
            8
            0

            """
        #expect(r.out == expected, "\(r)")
    }

    @Test("iio-sim, fixtures recorded from Linux 6.1: an events-only node (st_lsm6dsx accelerometer without an IRQ: opens once, reads EINVAL), none for its gyroscope")
    func eventsOnlyNode() throws {
        let r = try SimHarness.sim(["--fixture", "kernel-6.1/lsm6dso"], script: """
            cat /sys/bus/iio/devices/iio:device0/name; test -e /dev/iio:device0 && echo node0; test -e /dev/iio:device1 || echo no node1
            test -d /sys/bus/iio/devices/iio:device0/buffer || echo no buffer
            python3 -c "
            import os, errno
            fd = os.open('/dev/iio:device0', os.O_RDONLY | os.O_NONBLOCK)
            for what in ('open', 'read'):
                try:
                    os.close(os.open('/dev/iio:device0', os.O_RDONLY)) if what == 'open' else os.read(fd, 64)
                    print(what, 'ok')
                except OSError as e:
                    print(what, errno.errorcode[e.errno])
            "
            """)
        #expect(r.status == 0, "\(r)")
        #expect(r.out == "lsm6dso_accel\nnode0\nno node1\nno buffer\nopen EBUSY\nread EINVAL\n", "\(r)")
    }

    @Test("iio-sim, fixtures recorded from Linux 6.1: bmc150_accel refuses raw reads of its axes with EBUSY while its buffer is enabled (it never delivers), its temperature still reads")
    func rawBusyWhileBuffering() throws {
        let r = try SimHarness.sim(["--fixture", "kernel-6.1/bma255"], script: """
            cd /sys/bus/iio/devices/iio:device0
            cat in_accel_x_raw; echo 1 > scan_elements/in_accel_x_en; echo 1 > buffer/enable && cat buffer/enable
            cat in_accel_x_raw 2>&1 | grep -o 'Device or resource busy'; cat in_accel_y_raw 2>&1 | grep -o 'Device or resource busy'
            cat in_temp_raw
            echo 0 > buffer/enable; cat in_accel_x_raw
            """)
        #expect(r.status == 0, "\(r)")
        #expect(r.out == "150\n1\nDevice or resource busy\nDevice or resource busy\n0\n150\n", "\(r)")
    }

    @Test("iio-sim, fixtures recorded from Linux 6.1: kmx61's two devices of one name; the magnetometer takes a listed rate and still reads 12.5 (kmx61.c:467-468), the accelerometer reads what it took")
    func kmx61Frequencies() throws {
        let r = try SimHarness.sim(["--fixture", "kernel-6.1/kmx61"], script: """
            cd /sys/bus/iio/devices
            cat iio:device0/name iio:device1/name
            for v in 25 101 0.78 400; do
              for f in iio:device0/in_accel_sampling_frequency iio:device1/in_magn_sampling_frequency; do
                bash -c "echo $v > $f" 2>/dev/null; echo "$f $v=$? $(cat $f)"
              done
            done
            """)
        #expect(r.status == 0, "\(r)")
        #expect(r.out == """
            kmx611021
            kmx611021
            iio:device0/in_accel_sampling_frequency 25=0 25.000000
            iio:device1/in_magn_sampling_frequency 25=0 12.500000
            iio:device0/in_accel_sampling_frequency 101=1 25.000000
            iio:device1/in_magn_sampling_frequency 101=1 12.500000
            iio:device0/in_accel_sampling_frequency 0.78=1 25.000000
            iio:device1/in_magn_sampling_frequency 0.78=1 12.500000
            iio:device0/in_accel_sampling_frequency 400=0 400.000000
            iio:device1/in_magn_sampling_frequency 400=0 12.500000

            """, "\(r)")
    }

    @Test("iio-sim: current_timestamp_clock reads \"realtime\\n\" and a NUL, as the IIO core's show() returns it; buffer/direction beside buffer0/direction")
    func timestampClockText() throws {
        let r = try SimHarness.sim(["--fixture", "kernel-6.1/bmi160"], script: """
            od -An -c /sys/bus/iio/devices/iio:device0/current_timestamp_clock | tr -s ' '
            cat /sys/bus/iio/devices/iio:device0/buffer/direction /sys/bus/iio/devices/iio:device0/buffer0/direction
            """)
        #expect(r.status == 0, "\(r)")
        #expect(r.out == " r e a l t i m e \\n \\0\nin\nin\n", "\(r)")
    }

    @Test("iio-sim: sampling_frequency as each driver takes it (bmi160: its table only; HID: anything ≥ 0, read back as the hub rounds it)")
    func frequencies() throws {
        let values = ["12.50", "0.78125", "101", "0.78", "0", "-5", " 50", "abc"]
        let r = try SimHarness.sim(["--fixture", "bmi160"], script: values.map {
            "bash -c \"echo '\($0)' > /sys/bus/iio/devices/iio:device0/in_accel_sampling_frequency\" 2>/dev/null; echo \"\($0)=$? $(cat /sys/bus/iio/devices/iio:device0/in_accel_sampling_frequency)\""
        }.joined(separator: "\n"))
        #expect(r.out == """
            12.50=0 12.500000
            0.78125=0 0.781250
            101=1 0.781250
            0.78=1 0.781250
            0=1 0.781250
            -5=1 0.781250
             50=1 0.781250
            abc=1 0.781250

            """, "\(r)")
        let hid = ["33", "0", "100", "-1", "1000000"]
        let h = try SimHarness.sim(["--fixture", "hid-sensor-hub"], script: hid.map {
            "bash -c \"echo '\($0)' > /sys/bus/iio/devices/iio:device0/in_accel_sampling_frequency\" 2>/dev/null; echo \"\($0)=$? $(cat /sys/bus/iio/devices/iio:device0/in_accel_sampling_frequency)\""
        }.joined(separator: "\n"))
        #expect(h.out == "33=0 33.300000\n0=0 0.000000\n100=0 100.000000\n-1=1 100.000000\n1000000=1 100.000000\n", "\(h)")
    }
}
