import Foundation
import IIOScanFormat
import IIOSimKit
import Testing

/// iio-sim proven with libiio's own tools (package libiio-utils): what `iio_info`, `iio_attr` and
/// `iio_readdev` see through the real libiio 0.24 local backend, and through the real `iiod`.
@Suite(.timeLimit(.minutes(10)),
       .enabled(if: SimHarness.underCI || (SimHarness.installed("iio_info") && SimHarness.installed("iio_readdev")),
                "needs libiio-utils (apt-get install libiio-utils); scripts/test installs it"))
struct SimulatorIntegrationTests {
    static let fixtures = SimHarness.fixtureNames

    // MARK: iio_info sees every device and channel as declared

    @Test("iio_info lists each fixture's devices, channels and triggers as declared", arguments: fixtures)
    func iioInfoMatchesFixture(_ name: String) throws {
        let fixture = try SimHarness.fixture(name)
        let r = try SimHarness.sim(["--fixture", name], script: "iio_info -u local:")
        try #require(r.status == 0, "\(r)")
        let lines = r.out.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(lines.contains("IIO context has \(fixture.devices.count + fixture.triggers.count) devices:"), "\(r)")
        for (n, device) in fixture.devices.enumerated() {
            var header = "iio:device\(n): \(device.name)"
            if let label = device.label { header += " (label: \(label))" }
            if device.buffer != nil { header += " (buffer capable)" }
            #expect(lines.contains(header), "missing \"\(header)\" in\n\(r.out)")
            // This device's block of lines: from its header to the next device header.
            guard let start = lines.firstIndex(of: header) else { continue }
            let block = lines[(start + 1)...].prefix { !$0.hasPrefix("iio:device") && !$0.hasPrefix("trigger") }
            for ch in device.channels {
                if let index = ch.index, let format = ch.format {
                    let type = try ScanFormat(parsing: format)
                    let line = block.first { $0.hasPrefix("\(ch.id):  (input, index: \(index), format: ") }
                    let shown = try #require(line, "channel \(ch.id) of \(device.name) not listed as a scan element")
                    let shownFormat = shown.split(separator: " ").last.map { String($0.dropLast()) } ?? ""
                    #expect(try ScanFormat(parsing: shownFormat) == type, "\(shown)")
                } else if ch.hasRaw {
                    #expect(block.contains("\(ch.id):  (input)"), "channel \(ch.id) of \(device.name) missing")
                }
            }
            if let trigger = device.currentTrigger, !trigger.isEmpty {
                let t = try #require(fixture.triggers.firstIndex { $0.name == trigger })
                #expect(block.contains("Current trigger: trigger\(t)(\(trigger))"), "\(block)")
            } else {
                #expect(block.contains("No trigger on this device"))
            }
        }
        for (n, t) in fixture.triggers.enumerated() {
            #expect(lines.contains("trigger\(n): \(t.name)"), "trigger \(t.name) missing")
        }
    }

    // MARK: iio_attr reads every attribute as declared

    @Test("iio_attr reads device attributes and per-type channel attributes as declared", arguments: fixtures)
    func iioAttrMatchesFixture(_ name: String) throws {
        let fixture = try SimHarness.fixture(name)
        var script = ""
        var expected: [String] = []
        for (n, device) in fixture.devices.enumerated() {
            for (file, value) in device.attributes.sorted(by: { $0.key < $1.key }) where !file.contains("/") {
                if !file.hasPrefix("in_") {
                    script += "iio_attr -u local: -d iio:device\(n) \(file); "
                    expected.append(value)
                    // current_timestamp_clock reads "realtime\n\0" (the IIO core's show() counts the
                    // NUL): libiio keeps that newline and iio_attr prints an empty line after it, as
                    // on Linux 6.1.
                    if file == "current_timestamp_clock" { expected.append("") }
                } else if let own = device.channels.first(where: { file.hasPrefix("in_\($0.id)_") }) {
                    // A per-channel file (in_magn_x_scale) is that channel's attribute (scale).
                    script += "iio_attr -u local: -c iio:device\(n) \(own.id) \(file.dropFirst("in_\(own.id)_".count)); "
                    expected.append(value)
                } else if let axisChannel = device.channels.first(where: { $0.axis != nil && file.hasPrefix("in_\($0.typeName)_") }) {
                    // A shared-by-type file (in_accel_scale) is every axis channel's attribute (scale).
                    let attr = String(file.dropFirst("in_\(axisChannel.typeName)_".count))
                    guard !attr.contains("matrix") || attr == "mount_matrix" else { continue }
                    script += "iio_attr -u local: -c iio:device\(n) \(axisChannel.id) \(attr); "
                    expected.append(value)
                }
            }
        }
        let r = try SimHarness.sim(["--fixture", name], script: script)
        try #require(r.status == 0, "\(r)")
        let got = r.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(Array(got.prefix(expected.count)) == expected, "\(r)")
    }

    // MARK: iio_readdev gets exactly the scans the simulator streamed

    /// Reads `samples` scans of every channel of each buffered device of `name` with iio_readdev
    /// (through `uri`), and checks the bytes are exactly what the simulator says it delivered.
    func readdevMatchesStream(_ name: String, fast: Bool, uri: String, samples: Int) throws {
        let fixture = try SimHarness.fixture(name)
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let buffer = fast ? 256 : 5
        var script = ""
        for (n, device) in fixture.devices.enumerated() where device.buffer != nil {
            // cros-ec idles at 0 Hz until a rate is set, as the EC does.
            if device.attributes["sampling_frequency"].flatMap(Double.init) == 0 {
                script += "iio_attr -u \(uri) -d iio:device\(n) sampling_frequency 100 >/dev/null; "
            }
            script += "iio_readdev -u \(uri) -b \(buffer) -s \(samples) iio:device\(n) > \(dir)/out\(n).bin || exit 1; "
        }
        var args = ["--fixture", name, "--stream-log", dir]
        if fast { args.append("--fast") }
        if uri.hasPrefix("ip:") { args.append("--iiod") }
        let r = try SimHarness.sim(args, script: script)
        try #require(r.status == 0, "\(r)")
        for (n, device) in fixture.devices.enumerated() where device.buffer != nil {
            let id = "iio:device\(n)"
            let got = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/out\(n).bin"))
            let sessions = try SimHarness.sessions(in: dir, device: id)
            let delivered = sessions.reduce(Data()) { $0 + $1.delivered }
            let rec = try #require(sessions.last?.record, "no stream session for \(id)")
            #expect(got.count == samples * rec.scanSize, "\(id): \(got.count) bytes, \(samples) scans of \(rec.scanSize) expected")
            // Locally the reader is the only consumer: it read every delivered byte, in whole
            // buffers (it prints only the samples asked for). Through iiod the server may read
            // ahead of its client, so there the client's bytes are only a prefix.
            if uri == "local:" {
                let refills = (samples + buffer - 1) / buffer
                #expect(delivered.count == refills * buffer * rec.scanSize,
                        "\(id): the simulator delivered \(delivered.count) bytes, iio_readdev consumed \(refills) buffers of \(buffer) scans")
            }
            let prefix = delivered.prefix(got.count) == got
            #expect(prefix, "\(id): iio_readdev bytes are not what the simulator streamed; first difference at \(firstDifference(got, delivered))")
            #expect(rec.elements.map(\.channel) == device.channels.filter { $0.index != nil }
                .sorted { $0.index! < $1.index! }.map(\.id))
            try checkDecodedScans(got, record: rec, device: device, fast: fast)
        }
    }

    func firstDifference(_ a: Data, _ b: Data) -> Int {
        zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
    }

    /// Decodes the scans a reader got and checks they are physically right: timestamps one period
    /// apart, the accelerometer at 1 g (face up, after scale and mount matrix), gyroscope at rest.
    func checkDecodedScans(_ bytes: Data, record: SessionRecord, device: Fixture.Device, fast: Bool) throws {
        let scans = bytes.count / record.scanSize
        let raw = Array(bytes)
        let types = try record.elements.map { try ScanFormat(parsing: $0.type) }
        var lastTimestamp: Int64?
        let period = Int64(1e9 / record.rate)
        for s in 0..<scans {
            var accel = [Double](repeating: 0, count: 3)
            for (e, type) in zip(record.elements, types) {
                let v = type.decode(raw, at: s * record.scanSize + e.offset)
                if e.channel == "timestamp" {
                    if let last = lastTimestamp {
                        // Paced: the scheduled times, one period apart (±1 ns of rounding).
                        #expect(abs(v - last - period) <= 1, "scan \(s): timestamp step \(v - last) ns, period \(period)")
                    }
                    lastTimestamp = v
                } else if e.channel.hasPrefix("accel_") {
                    let axis = ["x", "y", "z"].firstIndex(of: String(e.channel.suffix(1)))!
                    accel[axis] = Double(v) * scale(device, "accel", String(e.channel.suffix(1)))
                } else if e.channel.hasPrefix("anglvel_") {
                    #expect(v == 0, "gyroscope at rest reads \(v)")
                }
            }
            if record.elements.contains(where: { $0.channel.hasPrefix("accel_") }) {
                let m = mountMatrix(device, "accel")
                let z = (m.r2 * Vec3(accel[0], accel[1], accel[2])).sum()
                #expect(abs(z - 9.80665) < 0.01, "scan \(s): face-up z = \(z) m/s²")
            }
        }
    }

    func scale(_ d: Fixture.Device, _ type: String, _ axis: String) -> Double {
        for f in ["in_\(type)_\(axis)_scale", "in_\(type)_scale", "scale"] {
            if let v = d.attributes[f].flatMap(Double.init) { return v }
        }
        return 1
    }

    func mountMatrix(_ d: Fixture.Device, _ type: String) -> Mat3 {
        for f in ["in_\(type)_mount_matrix", "mount_matrix", "in_mount_matrix"] {
            if let t = d.attributes[f], let m = Mat3(mountMatrix: t) { return m }
        }
        return .identity
    }

    @Test("iio_readdev at the fixture's rate returns exactly the streamed scans", arguments: fixtures)
    func readdevPaced(_ name: String) throws {
        try readdevMatchesStream(name, fast: false, uri: "local:", samples: 10)
    }

    @Test("iio_readdev in fast mode returns exactly the streamed scans", arguments: fixtures)
    func readdevFast(_ name: String) throws {
        try readdevMatchesStream(name, fast: true, uri: "local:", samples: 20_000)
    }

    @Test("iio_readdev through the real iiod returns the streamed scans",
          .enabled(if: SimHarness.installed("iiod"), "needs iiod (apt-get install iiod)"),
          arguments: ["bmi160", "hid-sensor-hub"])
    func readdevThroughIIOD(_ name: String) throws {
        try readdevMatchesStream(name, fast: false, uri: "ip:127.0.0.1", samples: 10)
        try readdevMatchesStream(name, fast: true, uri: "ip:127.0.0.1", samples: 4096)
    }

    // MARK: Driver behaviour

    @Test("a written sampling frequency is taken as the driver takes it (bmi160: its table only) and sets the stream's period")
    func samplingFrequencyWrite() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try SimHarness.sim(["--fixture", "bmi160", "--stream-log", dir], script: """
            f=/sys/bus/iio/devices/iio:device0/in_accel_sampling_frequency
            iio_attr -u local: -c bmi160 accel_x sampling_frequency 150 >/dev/null 2>&1
            iio_attr -u local: -c bmi160 accel_x sampling_frequency 200 >/dev/null
            cat $f
            iio_attr -u local: -c bmi160 anglvel_x sampling_frequency 800 >/dev/null
            iio_readdev -u local: -b 40 -s 40 bmi160 accel_x accel_y accel_z timestamp > \(dir)/out.bin
            """)
        try #require(r.status == 0, "\(r)")
        #expect(r.out == "200.000000\n", "150 Hz is not in bmi160's table (EINVAL); 200 is")
        let rec = try #require(try SimHarness.sessions(in: dir, device: "iio:device0").last?.record)
        // One data-ready interrupt serves both sensors: the faster rate wins.
        #expect(rec.rate == 800)
        let got = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/out.bin"))
        let ts = try ScanFormat(parsing: "le:s64/64>>0")
        let t0 = ts.decode(Array(got), at: 8), t1 = ts.decode(Array(got), at: 24)
        #expect(t1 - t0 == 1_250_000)
    }

    @Test("a full kfifo keeps the oldest scans and drops the newest, counting them")
    func kfifoOverflow() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A reader that enables the buffer by hand (as root would with echo) and then sleeps.
        let r = try SimHarness.sim(["--fixture", "lsm6dsx", "--stream-log", dir], script: """
            cd /sys/bus/iio/devices/iio:device0
            for c in x y z; do echo 1 > scan_elements/in_accel_${c}_en; done
            echo 1 > scan_elements/in_timestamp_en
            echo 104 > sampling_frequency
            echo 8 > buffer/length; echo 1 > buffer/watermark
            exec 3<> /dev/iio:device0
            echo 1 > buffer/enable
            sleep 1
            dd bs=4096 count=1 <&3 2>/dev/null > \(dir)/out.bin
            echo 0 > buffer/enable
            """)
        try #require(r.status == 0, "\(r)")
        let stats = try JSONDecoder().decode([String: StreamStats].self,
                                             from: Data(contentsOf: URL(fileURLWithPath: dir + "/stats.json")))
        let s = try #require(stats["iio:device0"])
        let got = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/out.bin"))
        #expect(got.count == 8 * 16, "the reader gets exactly buffer/length scans")
        #expect(s.scansDropped > 50, "about 96 scans at 104 Hz found the kfifo full: \(s)")
        // The kept scans are the first ones, one period apart.
        let ts = try ScanFormat(parsing: "le:s64/64>>0")
        let stamps = (0..<8).map { ts.decode(Array(got), at: $0 * 16 + 8) }
        #expect(zip(stamps, stamps.dropFirst()).allSatisfy { abs($1 - $0 - Int64(1e9 / 104)) <= 1 })
        // And the bytes are the first ones the simulator delivered.
        let delivered = try SimHarness.sessions(in: dir, device: "iio:device0").first?.delivered
        let same = delivered == got
        #expect(same)
    }

    @Test("a triggered device without a trigger refuses to enable its buffer (EINVAL, as the kernel), and the simulator says why")
    func noTrigger() throws {
        let r = try SimHarness.sim(["--fixture", "bmi160", "--set", "iio:device0/trigger/current_trigger="],
                                   script: "iio_readdev -u local: -T 300 -b 4 -s 4 bmi160")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.contains("no trigger") && r.stderr.contains("Invalid argument"), "\(r)")
    }

    @Test("a device with no data-ready interrupt enables but never delivers: the refill times out")
    func noIRQ() throws {
        // (iio_readdev reports the failed refill and still exits 0.)
        let r = try SimHarness.sim(["--fixture", "mpu6050", "--no-irq", "mpu6050"],
                                   script: "iio_readdev -u local: -T 300 -b 4 -s 4 mpu6050")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.contains("Unable to refill buffer: Connection timed out"), "\(r)")
    }

    @Test("an unplugged device's directory and node disappear; the others stay")
    func unplug() throws {
        let r = try SimHarness.sim(["--fixture", "lsm6dsx", "--unplug", "lsm6dso_gyro@0.2"], script: """
            ls /sys/bus/iio/devices; sleep 1; echo after; ls /sys/bus/iio/devices
            test -e /dev/iio:device1 && echo node-still-there; iio_info -u local: | grep 'IIO context has.*devices'
            """)
        try #require(r.status == 0, "\(r)")
        #expect(r.out == "iio:device0\niio:device1\nafter\niio:device0\nIIO context has 1 devices:\n", "\(r)")
    }

    @Test("unreadable and garbage attributes are what a reader finds")
    func faultyAttributes() throws {
        let r = try SimHarness.sim(["--fixture", "bmi160", "--unreadable", "bmi160/in_accel_x_raw",
                                    "--set", "bmi160/in_accel_scale=abc"], script: """
            cat /sys/bus/iio/devices/iio:device0/in_accel_x_raw 2>/dev/null && echo readable
            iio_attr -u local: -c bmi160 accel_y scale
            """)
        #expect(r.out == "abc\n", "\(r)")
    }

    @Test("COMMAND's exit status is iio-sim's, and the host's /sys and /dev are untouched")
    func exitStatusAndHost() throws {
        let r = try SimHarness.sim(["--fixture", "bmi160"], script: "test -e /dev/iio:device0 && exit 7")
        #expect(r.status == 7, "\(r)")
        let hostHadIIO = FileManager.default.fileExists(atPath: "/sys/bus/iio/devices/iio:device0")
        if !hostHadIIO {
            #expect(!FileManager.default.fileExists(atPath: "/dev/iio:device0"))
        }
    }

    @Test("usage errors exit 64 with one line and a hint")
    func usageErrors() throws {
        let r = try SimHarness.run(SimHarness.product("iio-sim"), ["--fixture", "bmi160", "--bogus"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("unknown option --bogus") && r.stderr.contains("--help"), "\(r)")
        let missing = try SimHarness.run(SimHarness.product("iio-sim"), ["--fixture", "no-such-fixture", "--", "true"])
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("bmi160"), "the error lists the fixtures there are: \(missing)")
    }
}
