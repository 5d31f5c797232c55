import Foundation
import Testing
@testable import IIOSimKit
import IIOScanFormat

private func decode(_ json: String) throws -> Fixture {
    try JSONDecoder().decode(Fixture.self, from: Data(json.utf8))
}

/// A one-device fixture around the given channels (a buffered device unless `buffer` is false).
private func fixture(_ channels: [Fixture.Channel], buffer: Bool = true, currentTrigger: String? = nil,
                     triggers: [Fixture.Trigger] = []) -> Fixture {
    Fixture(description: "test", devices: [
        Fixture.Device(name: "dev", channels: channels, buffer: buffer ? Fixture.Buffer(triggered: false) : nil,
                       currentTrigger: currentTrigger),
    ], triggers: triggers)
}

@Suite("Fixtures", .timeLimit(.minutes(3)))
struct FixtureTests {
    @Test("The shipped fixtures are all there")
    func shippedSet() {
        let names = TestSupport.shippedFixtureNames
        for expected in ["bmi160", "cros-ec", "hid-sensor-hub", "lsm6dsx", "mpu6050"] {
            #expect(names.contains(expected), "fixtures/\(expected).json missing from \(TestSupport.fixturesDirectory)")
        }
    }

    @Test("Every shipped fixture loads and validates", arguments: TestSupport.shippedFixtureNames)
    func loads(name: String) throws {
        let f = try Fixture.load(path: TestSupport.fixturePath(name))
        try f.validate()
        #expect(!f.description.isEmpty)
        #expect(!f.devices.isEmpty)
        for d in f.devices {
            #expect(!d.name.isEmpty)
            var indices = Set<Int>()
            for ch in d.channels {
                guard let idx = ch.index else { continue }
                #expect(indices.insert(idx).inserted)
                let format = try #require(ch.format)
                #expect(try ScanFormat(parsing: format).description == format)
            }
            // Buffered devices carry a timestamp, the last scan index, as every driver reviewed does.
            if d.buffer != nil {
                let ts = try #require(d.channels.first { $0.id == "timestamp" })
                #expect(ts.format == "le:s64/64>>0")
                #expect(ts.index == indices.max())
                #expect(!ts.hasRaw)
            }
            if let t = d.currentTrigger, !t.isEmpty { #expect(f.triggers.contains { $0.name == t }) }
        }
        // Also resolvable by name (the source tree's fixtures/ is one of the lookup folders).
        #expect(try Fixture.resolve(name).devices.count == f.devices.count)
    }

    @Test("Shipped layouts with every scan element enabled", arguments: [
        ("bmi160", 24), ("mpu6050", 24), ("hid-sensor-hub", 24), ("lsm6dsx", 16), ("cros-ec", 16),
    ])
    func fullScanSizes(name: String, scanSize: Int) throws {
        let f = try Fixture.load(path: TestSupport.fixturePath(name))
        for d in f.devices where d.buffer != nil {
            let entries = try d.channels.compactMap { ch -> (channel: String, index: Int, type: ScanFormat)? in
                guard let idx = ch.index, let fmt = ch.format else { return nil }
                return (ch.id, idx, try ScanFormat(parsing: fmt))
            }
            #expect(ScanLayout(channels: entries).scanSize == scanSize, "\(name)/\(d.name)")
        }
    }

    @Test("A minimal JSON fixture gets the documented defaults")
    func defaults() throws {
        let f = try decode(#"{ "devices": [ { "name": "x", "buffer": {} } ] }"#)
        #expect(f.description == "")
        #expect(f.triggers.isEmpty)
        let d = try #require(f.devices.first)
        #expect(d.label == nil && d.attributes.isEmpty && d.channels.isEmpty && d.currentTrigger == nil && d.writable.isEmpty)
        let b = try #require(d.buffer)
        #expect(!b.triggered && b.length == 1 && b.watermark == 1 && b.rate == nil)
        try f.validate()
    }

    @Test("JSON keys map to the model")
    func keys() throws {
        let f = try decode("""
        { "description": "d",
          "devices": [ { "name": "n", "label": "accel-display", "attributes": { "a": "1", "buffer/b": "2" },
                         "channels": [ { "id": "accel_x", "index": 0, "format": "le:s16/32>>0", "upper_bits": "pattern" },
                                       { "id": "temp", "value": -2150, "raw": true } ],
                         "buffer": { "triggered": true, "length": 64, "watermark": 8, "rate": 25 },
                         "current_trigger": "t0", "writable": ["a"] } ],
          "triggers": [ { "name": "t0", "owner": "n", "attributes": { "sampling_frequency": "100" } } ] }
        """)
        try f.validate()
        let d = f.devices[0]
        #expect(d.label == "accel-display")
        #expect(d.attributes == ["a": "1", "buffer/b": "2"])
        #expect(d.channels[0].upperBits == .pattern)
        #expect(d.channels[0].format == "le:s16/32>>0")
        #expect(d.channels[1].value == -2150 && d.channels[1].raw == true && d.channels[1].index == nil)
        #expect(d.buffer?.triggered == true && d.buffer?.length == 64 && d.buffer?.watermark == 8 && d.buffer?.rate == 25)
        #expect(d.currentTrigger == "t0" && d.writable == ["a"])
        #expect(f.triggers[0].owner == "n" && f.triggers[0].attributes == ["sampling_frequency": "100"])
    }

    @Test("Channel ids: type, axis, raw file", arguments: [
        ("accel_x", "accel", 0 as Int?, true), ("accel_y", "accel", 1, true), ("anglvel_z", "anglvel", 2, true),
        ("magn_y", "magn", 1, true), ("temp", "temp", nil, true), ("temp0", "temp", nil, true),
        ("timestamp", "timestamp", nil, false), ("accel_linear_x", "accel", 0, true),
    ])
    func channelNames(id: String, typeName: String, axis: Int?, hasRaw: Bool) {
        let ch = Fixture.Channel(id: id)
        #expect(ch.typeName == typeName)
        #expect(ch.axis == axis)
        #expect(ch.hasRaw == hasRaw)
    }

    @Test("raw overrides the default")
    func rawOverride() {
        #expect(!Fixture.Channel(id: "accel_x", raw: false).hasRaw)
        #expect(Fixture.Channel(id: "timestamp", raw: true).hasRaw)
    }

    @Test("Validation: a scan index without a format")
    func indexWithoutFormat() throws {
        let f = fixture([Fixture.Channel(id: "accel_x", index: 0)])
        let e = try thrownError(Fixture.LoadError.self) { try f.validate() }
        #expect(e.description == "iio:device0 (dev): channel accel_x has a scan index but no format")
    }

    @Test("Validation: two channels on one scan index")
    func duplicateIndex() throws {
        let f = fixture([Fixture.Channel(id: "accel_x", index: 0, format: "le:s16/16>>0"),
                         Fixture.Channel(id: "accel_y", index: 0, format: "le:s16/16>>0")])
        let e = try thrownError(Fixture.LoadError.self) { try f.validate() }
        #expect(e.description == "iio:device0 (dev): channels accel_x and accel_y share scan index 0")
    }

    @Test("Validation: current_trigger names no trigger")
    func unknownTrigger() throws {
        let f = fixture([], currentTrigger: "ghost-dev0", triggers: [Fixture.Trigger(name: "real-dev0")])
        let e = try thrownError(Fixture.LoadError.self) { try f.validate() }
        #expect(e.description.contains("current_trigger \"ghost-dev0\""))
        // An empty current_trigger (none set) and a known one are fine.
        try fixture([], currentTrigger: "").validate()
        try fixture([], currentTrigger: "real-dev0", triggers: [Fixture.Trigger(name: "real-dev0")]).validate()
    }

    @Test("Validation: a bad scan format, and a scan element on a device without a buffer")
    func badFormatAndNoBuffer() throws {
        let bad = fixture([Fixture.Channel(id: "accel_x", index: 0, format: "le:s16/24>>0")])
        let e = try thrownError(Fixture.LoadError.self) { try bad.validate() }
        #expect(e.description.contains("accel_x") && e.description.contains("storage bits"))
        let unbuffered = fixture([Fixture.Channel(id: "accel_x", index: 0, format: "le:s16/16>>0")], buffer: false)
        #expect(throws: Fixture.LoadError.self) { try unbuffered.validate() }
        // Non-scan channels need neither.
        try fixture([Fixture.Channel(id: "temp", value: 3)], buffer: false).validate()
    }

    @Test("The device number in messages counts from 0 across the fixture")
    func deviceNumberInMessage() throws {
        let ok = Fixture.Device(name: "a", channels: [])
        let bad = Fixture.Device(name: "b", channels: [Fixture.Channel(id: "accel_x", index: 0)], buffer: Fixture.Buffer(triggered: false))
        let e = try thrownError(Fixture.LoadError.self) { try Fixture(description: "", devices: [ok, bad]).validate() }
        #expect(e.description.hasPrefix("iio:device1 (b):"))
    }

    @Test("load: unreadable file, invalid JSON and invalid content name the path")
    func loadErrors() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let missing = try thrownError(Fixture.LoadError.self) { try Fixture.load(path: dir + "/none.json") }
        #expect(missing.description == "cannot read fixture file \(dir)/none.json")

        let garbage = dir + "/garbage.json"
        try Data("{ not json".utf8).write(to: URL(fileURLWithPath: garbage))
        let g = try thrownError(Fixture.LoadError.self) { try Fixture.load(path: garbage) }
        #expect(g.description.hasPrefix("\(garbage): not a valid fixture"))

        let noDevices = dir + "/nodevices.json"
        try Data(#"{ "description": "x" }"#.utf8).write(to: URL(fileURLWithPath: noDevices))
        #expect(throws: Fixture.LoadError.self) { try Fixture.load(path: noDevices) }

        let invalid = dir + "/dup.json"
        try Data("""
        { "devices": [ { "name": "d", "buffer": {}, "channels": [
            { "id": "accel_x", "index": 1, "format": "le:s16/16>>0" }, { "id": "accel_y", "index": 1, "format": "le:s16/16>>0" } ] } ] }
        """.utf8).write(to: URL(fileURLWithPath: invalid))
        let v = try thrownError(Fixture.LoadError.self) { try Fixture.load(path: invalid) }
        #expect(v.description == "\(invalid): iio:device0 (d): channels accel_x and accel_y share scan index 1")
    }

    @Test("The fixtures recorded from Linux 6.1 load by their name in kernel-6.1/", arguments: [
        "bmi160", "lsm6dso", "bma255", "mxc4005", "kxcjk1013", "mpu6050", "fxos8700", "hid-sensor-hub",
        "lis3dh", "l3gd20", "lis3mdl", "hmc5883l", "bmg160", "mpu3050", "ak8975", "kxsd9", "mc3230", "fxas21002c",
        "lsm303dlhc_accel", "lsm303dlhc_magn", "l3g4200d", "ak09911", "bma400", "adxl372", "da280", "da311",
        "dmard09", "mma7455", "mma7660", "stk8ba50", "mag3110", "mmc35240", "bmc150_magn", "mxc6255", "kmx61",
    ])
    func kernelRecorded(name: String) throws {
        let f = try Fixture.resolve("kernel-6.1/" + name)
        #expect(f.description.hasPrefix("Linux 6.1"), "\(f.description)")
        #expect(!f.devices.isEmpty)
        // Recorded on a bus without an interrupt line: no trigger is set.
        for d in f.devices { #expect(d.currentTrigger == nil || d.currentTrigger == "" || name == "hid-sensor-hub", "\(d.name)") }
        #expect(Fixture.available().contains { $0.name == "kernel-6.1/" + name })
    }

    @Test("record: the triggers beside the recorded devices, except other devices' own")
    func recordTriggerFolders() throws {
        let root = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        for (dir, name) in [("iio:device0", "accel_3d"), ("iio:device1", "bmi160"), ("iio:device2", "st_magn"),
                            ("trigger0", "accel_3d-dev0"), ("trigger1", "hrtimer0"), ("trigger2", "st_magn-trigger")] {
            try FileManager.default.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
            try Data((name + "\n").utf8).write(to: URL(fileURLWithPath: root + "/" + dir + "/name"))
        }
        let names = { (devices: [String]) in Recorder.triggerFolders(usableBy: devices.map { root + "/" + $0 }).map { ($0 as NSString).lastPathComponent } }
        #expect(names(["iio:device1"]) == ["trigger1"])
        #expect(names(["iio:device0"]) == ["trigger0", "trigger1"])
        #expect(names(["iio:device2", "iio:device1"]) == ["trigger1", "trigger2"])
    }

    @Test("resolve: an unknown name lists what there is")
    func resolveUnknown() throws {
        let e = try thrownError(Fixture.LoadError.self) { try Fixture.resolve("no-such-imu") }
        #expect(e.description.contains("no fixture named \"no-such-imu\""))
        #expect(e.description.contains("bmi160"))
        #expect(Fixture.available().contains { $0.name == "bmi160" && $0.path.hasSuffix("/bmi160.json") })
    }
}
