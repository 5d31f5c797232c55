import Foundation
import Glibc
import SystemSupport
import Testing
@testable import IIOMotion
@testable import IIOMotionCore
import IIOMotionLibIIO

/// udev's sensor database (issue 33): the matrix text systemd's hwdb carries, which matrix wins
/// (the caller's, udev's, the kernel's, the identity), and ACCEL_LOCATION in the automatic choice.
/// The real udev is exercised by the kernel suite's case udev-hwdb (Tests/Kernel/suite.py).
@Suite("udev's sensor database: mount matrices and locations", .timeLimit(.minutes(3)))
struct UdevMountMatrixTests {
    static let swapXY = "0, 1, 0; -1, 0, 0; 0, 0, 1"
    static let kernelFlip = try! MountMatrix(parsing: "-1, 0, 0; 0, -1, 0; 0, 0, 1")

    /// A kernel matrix reader that reads `kernelFlip` from `in_accel_mount_matrix`.
    static func kernel() throws(MotionError) -> (MountMatrix, String)? { (kernelFlip, "in_accel_mount_matrix") }

    @Test("hwdb's matrix forms parse: spaces or none, signs, decimals (systemd's parse_hwdb.py grammar)")
    func hwdbForms() throws {
        for text in ["0, 1, 0; -1, 0, 0; 0, 0, 1", "0,1,0;-1,0,0;0,0,1", " 0 ,1, 0 ;-1,0 , 0; 0,0,1 ",
                     "+0, +1, 0; -1.0, 0.0, 0; 0, 0, 1.000"] {
            let m = try MountMatrix(parsing: text)
            #expect(m.rows == [[0, 1, 0], [-1, 0, 0], [0, 0, 1]], "\(text)")
        }
    }

    @Test("Every ACCEL_MOUNT_MATRIX of this machine's 60-sensor.hwdb parses")
    func shippedDatabase() throws {
        let path = "/lib/udev/hwdb.d/60-sensor.hwdb"
        guard let file = fopen(path, "r") else {
            print("skipping: \(path) is not on this machine (Debian's udev package ships it)")
            return
        }
        defer { fclose(file) }
        var count = 0
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(AttributeText.trimmed(String(cString: line)))
            guard text.hasPrefix("ACCEL_MOUNT_MATRIX=") else { continue }
            let value = String(text.dropFirst("ACCEL_MOUNT_MATRIX=".count))
            #expect(throws: Never.self, "\(value)") { _ = try MountMatrix(parsing: value) }
            count += 1
        }
        #expect(count > 100, "\(path) holds \(count) ACCEL_MOUNT_MATRIX entries")
    }

    @Test("udev's matrix wins over the kernel's, for the accelerometer and a gyroscope on its device")
    func udevBeforeKernel() {
        for kind in [SensorKind.accelerometer, .gyroscope] {
            let c = Discovery.mountMatrix(kind: kind, deviceText: "iio:device0 (bmi160)",
                                          udev: ["ACCEL_MOUNT_MATRIX": Self.swapXY], kernel: Self.kernel)
            #expect(c.matrix.rows == [[0, 1, 0], [-1, 0, 0], [0, 0, 1]])
            #expect(c.source == .udev(property: "ACCEL_MOUNT_MATRIX"))
            #expect(c.rejected == nil && c.problem == nil)
        }
    }

    @Test("A magnetometer keeps the kernel's matrix: systemd defines no property for it")
    func magnetometerIgnoresUdev() {
        let c = Discovery.mountMatrix(kind: .magnetometer, deviceText: "iio:device0 (fxos8700)",
                                      udev: ["ACCEL_MOUNT_MATRIX": Self.swapXY], kernel: Self.kernel)
        #expect(c.matrix == Self.kernelFlip && c.source == .sysfs(file: "in_accel_mount_matrix"))
    }

    @Test("Without udev's matrix: the kernel's, else the identity")
    func kernelThenIdentity() {
        let k = Discovery.mountMatrix(kind: .accelerometer, deviceText: "d", udev: [:], kernel: Self.kernel)
        #expect(k.matrix == Self.kernelFlip && k.source == .sysfs(file: "in_accel_mount_matrix") && k.rejected == nil)
        let none = Discovery.mountMatrix(kind: .accelerometer, deviceText: "d", udev: ["ACCEL_LOCATION": "base"]) { () throws(MotionError) in nil }
        #expect(none.matrix == .identity && none.source == .identity)
    }

    @Test("A malformed udev matrix: a sentence naming the device and the property, and the kernel's matrix",
          arguments: ["1, 0, 0; 0, 1", "garbage", "0, 0, 0; 0, 1, 0; 0, 0, 1", "1, 0, 0; 0, 1, 0; 0, 0, nan", ""])
    func malformed(text: String) throws {
        let c = Discovery.mountMatrix(kind: .accelerometer, deviceText: "iio:device3 (bma255)",
                                      udev: ["ACCEL_MOUNT_MATRIX": text], kernel: Self.kernel)
        #expect(c.matrix == Self.kernelFlip && c.source == .sysfs(file: "in_accel_mount_matrix"))
        let rejected = try #require(c.rejected)
        #expect(rejected.hasPrefix("udev's ACCEL_MOUNT_MATRIX of iio:device3 (bma255) is not used: "), "\(rejected)")
        #expect(rejected.hasSuffix("; the kernel's mount matrix is used instead"), "\(rejected)")
        // The property's value, as udev gives it, whichever check refused it.
        #expect(rejected.contains("is not used: \"\(text.trimmingCharacters(in: .whitespaces))\" is not a mount matrix ("), "\(rejected)")
        #expect(c.problem == nil)
    }

    @Test("A rejected udev matrix is a notice to the manager's noticeHandler, once, naming the device and the value")
    func rejectedIsNotice() throws {
        let value = "0, 0, 0; 0, 1, 0; 0, 0, 1"
        let c = Discovery.mountMatrix(kind: .accelerometer, deviceText: "iio:device0 (scripted)",
                                      udev: ["ACCEL_MOUNT_MATRIX": value], kernel: Self.kernel)
        let rejected = try #require(c.rejected)
        var plans = [scriptedPlan(.accelerometer), scriptedPlan(.gyroscope), scriptedPlan(.magnetometer, device: "iio:device1")]
        plans[0].info.rejectedUdevMountMatrix = rejected
        plans[1].info.rejectedUdevMountMatrix = rejected
        let manager = MotionManager(plans: plans, units: .coreMotion, makeCapture: ScriptedDevice().factory)
        let seen = Locked<[MotionNotice]>([])
        manager.noticeHandler = { n in seen.withLock { $0.append(n) } }
        #expect(eventually { seen.withLock { !$0.isEmpty } })
        usleep(100_000)
        let notices = seen.withLock { $0 }
        #expect(notices.count == 1, "\(notices)")
        let n = try #require(notices.first)
        #expect(n.sensors == [.accelerometer, .gyroscope] && n.device == "iio:device0 (scripted)" && n.cause == nil)
        #expect(n.message == rejected + ".")
        #expect(n.message.contains("ACCEL_MOUNT_MATRIX of iio:device0 (scripted)") && n.message.contains("\"\(value)\""), "\(n.message)")
        // Once per manager: a handler set again hears nothing new.
        manager.noticeHandler = { n in seen.withLock { $0.append(n) } }
        usleep(100_000)
        #expect(seen.withLock { $0.count } == 1)
    }

    @Test("No notice for a sensor without a rejected matrix, or whose matrix is the caller's")
    func noticeScope() throws {
        var accel = sensor("iio:device2", name: "bma255")
        accel.rejectedUdevMountMatrix = "udev's ACCEL_MOUNT_MATRIX of iio:device2 (bma255) is not used: x; the kernel's mount matrix is used instead"
        let magnetometer = sensor("iio:device4", name: "ak8975", kind: .magnetometer)
        #expect(Discovery.udevNotices(for: [magnetometer]).isEmpty)
        let overridden = accel.overridingMountMatrix(with: try MountMatrix(parsing: "1, 0, 0; 0, -1, 0; 0, 0, -1"))
        #expect(Discovery.udevNotices(for: [overridden, magnetometer]).isEmpty)
        let notices = Discovery.udevNotices(for: [accel, magnetometer])
        #expect(notices == [MotionNotice(sensors: [.accelerometer], device: "iio:device2 (bma255)", message: accel.rejectedUdevMountMatrix! + ".")])
    }

    @Test("The kernel's unreadable matrix is no problem when udev gives one; without udev's it is")
    func kernelFailure() {
        let failing = { () throws(MotionError) -> (MountMatrix, String)? in
            throw MotionError(code: .invalidAttribute, device: "d", attribute: "mount_matrix", detail: "mount_matrix: garbage")
        }
        let withUdev = Discovery.mountMatrix(kind: .accelerometer, deviceText: "d", udev: ["ACCEL_MOUNT_MATRIX": Self.swapXY], kernel: failing)
        #expect(withUdev.problem == nil && withUdev.source == .udev(property: "ACCEL_MOUNT_MATRIX"))
        let without = Discovery.mountMatrix(kind: .accelerometer, deviceText: "d", udev: [:], kernel: failing)
        #expect(without.problem?.code == .invalidAttribute && without.matrix == .identity)
    }

    @Test("The caller's override wins over udev's matrix")
    func callerWins() throws {
        var info = sensor("iio:device0")
        let c = Discovery.mountMatrix(kind: .accelerometer, deviceText: "d", udev: ["ACCEL_MOUNT_MATRIX": Self.swapXY], kernel: Self.kernel)
        info.mountMatrix = c.matrix
        info.mountMatrixSource = c.source
        let mine = try MountMatrix(parsing: "1, 0, 0; 0, -1, 0; 0, 0, -1")
        let overridden = info.overridingMountMatrix(with: mine)
        #expect(overridden.mountMatrix == mine && overridden.mountMatrixSource == .override)
        #expect(info.overridingMountMatrix(with: nil) == info)
        #expect(MountMatrix.Source.udev(property: "ACCEL_MOUNT_MATRIX").description == "udev hwdb ACCEL_MOUNT_MATRIX")
    }

    @Test("ACCEL_LOCATION comes before the label and the location file in the automatic choice")
    func location() {
        var display = sensor("iio:device3")
        display.udevLocation = "display"
        var labelledDisplayButBase = sensor("iio:device1", label: "accel-display")
        labelledDisplayButBase.udevLocation = "base"
        let plain = sensor("iio:device2")
        #expect(DeviceSelector.automatic.choose(from: [labelledDisplayButBase, plain, display])?.deviceID == "iio:device3")
        #expect(DeviceSelector.automatic.choose(from: [labelledDisplayButBase, plain])?.deviceID == "iio:device2")
        #expect(DeviceSelector.placementRank(label: nil, location: nil, udevLocation: "base") == 3)
        #expect(DeviceSelector.placementRank(label: "accel-base", location: nil, udevLocation: "display") == 0)
        #expect(DeviceSelector.placementRank(label: "accel-base", location: nil, udevLocation: "somewhere") == 3)
    }

    @Test("udev is asked only for a local context; without a udev database it is not, and says why")
    func availability() {
        let remote = UdevDatabase.system(backend: "network")
        #expect(remote.unavailable == "a remote (ip:) context has no udev")
        #expect(remote.properties(of: "iio:device0").isEmpty)
        let local = UdevDatabase.system(backend: "local")
        if access("/run/udev/data", F_OK) == 0 {
            #expect(local.unavailable == nil, "\(local.unavailable ?? "")")
            #expect(local.properties(of: "iio:device9999").isEmpty)
        } else {
            #expect(local.unavailable?.contains("/run/udev/data") == true, "\(local.unavailable ?? "nil")")
        }
        let table = UdevDatabase { id in id == "iio:device1" ? ["ACCEL_LOCATION": "base"] : [:] }
        #expect(table.unavailable == nil && table.properties(of: "iio:device1") == ["ACCEL_LOCATION": "base"])
    }
}
