#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import IIOScanFormat
import Foundation
import SystemSupport

extension DeviceSim {
    // MARK: raw files

    /// The raw value of each channel at monotonic time `now` (one motion state for all channels).
    func rawValues(motionTime t: Double, noisy: Bool, rate: Double = 100) -> [Int64] {
        let m = options.motion.state(at: t)
        let imp = options.imperfections
        let accelSigma = imp.accelSigma(rate: rate), gyroSigma = imp.gyroSigma(rate: rate)
        return state.withLock { s in
            var out: [Int64] = []
            out.reserveCapacity(channels.count)
            for (i, ch) in channels.enumerated() {
                var v: Vec3
                switch ch.source {
                case let .constant(c): out.append(c); continue
                case .timestamp: out.append(0); continue
                case .accel:
                    v = m.acceleration
                    if noisy && accelSigma > 0 {
                        v += Vec3(s.noise.gaussian(), s.noise.gaussian(), s.noise.gaussian()) * accelSigma
                    }
                case .anglvel:
                    v = m.angularVelocity + imp.gyroBias
                    if noisy && gyroSigma > 0 {
                        v += Vec3(s.noise.gaussian(), s.noise.gaussian(), s.noise.gaussian()) * gyroSigma
                    }
                case .magn:
                    v = imp.distortedField(m.magneticField)
                    if noisy && imp.magnNoise > 0 {
                        v += Vec3(s.noise.gaussian(), s.noise.gaussian(), s.noise.gaussian()) * imp.magnNoise
                    }
                }
                // The chip measures in its own frame; the mount matrix M takes chip to device
                // (v_device = M·v_chip), so the chip sees Mᵀ·v_device.
                var chip = (s.calibration.mount[ch.typeName] ?? .identity).transposed * v
                if case .accel = ch.source { chip = imp.distortedAcceleration(chip) }
                let si = chip[ch.axis ?? 0] + (i < s.calibration.calibbiasShift.count ? s.calibration.calibbiasShift[i] : 0)
                let scale = s.calibration.scale[i]
                let raw = scale != 0 ? (si / scale - s.calibration.offset[i]).rounded() : 0
                let clamped = raw.isFinite ? max(min(raw, 9.2e18), -9.2e18) : 0
                let type = ch.scanType ?? ScanFormat(isSigned: true, realBits: 32, storageBits: 32)
                out.append(type.saturate(Int64(clamped)))
            }
            return out
        }
    }

    func refreshRaw(at now: Int64, motionTime: Double, scratch: String, rate: Double = 100) {
        let values = rawValues(motionTime: motionTime, noisy: true, rate: rate)
        let skip = state.withLock { $0.pinned }
        for (ch, v) in zip(channels, values) where ch.spec.hasRaw {
            let file = "in_\(ch.spec.id)_raw"
            if skip.contains(file) { continue }
            if let nodes, let i = attributeIndex(file) {
                nodes.setAttribute(i, "\(v)")
                continue
            }
            try? Files.replaceAtomically("\(v)\n", at: directory + "/" + file, scratch: scratch,
                                         mode: isWritable(file) ? 0o644 : 0o444)
        }
    }

    /// Makes `raw` reads of the scan elements fail with EBUSY (`busy`) or succeed again, for a
    /// driver that refuses them while its buffer is enabled (``Fixture/Device/rawBusyWhileBuffering``).
    func rawReadsBusy(_ busy: Bool) {
        guard spec.rawBusyWhileBuffering == true, let nodes else { return }
        for ch in channels where ch.spec.hasRaw && ch.spec.index != nil {
            if let i = attributeIndex("in_\(ch.spec.id)_raw") { nodes.setAttributeReadError(i, busy ? EBUSY : 0) }
        }
    }

    /// Rewrites the `raw` files at the sampling frequency (at most `rawRefreshMax`, at least 10 Hz,
    /// so a device stopped at 0 Hz still answers polled reads the way the hardware would).
    func refreshRawLoop(stopFD: Int32, simulator: Simulator) {
        let types = motionTypes
        while !simulator.isStopping {
            if state.withLock({ $0.unplugged }) { return }
            let deviceRate = rate(types: types, simulator: simulator)
            let hz = min(max(deviceRate, 10), options.rawRefreshMax)
            if simulator.waitForStop(nanoseconds: Int64(1e9 / hz)) { return }
            let now = SimClock.now()
            refreshRaw(at: now, motionTime: simulator.motionTime(now), scratch: simulator.scratch, rate: max(deviceRate, 10))
        }
    }

    // MARK: Faults

    /// The device goes away as the kernel removes it: its stream stops, its sysfs folder leaves
    /// the tree in one step (renamed into `scratch`, then deleted there, so that a `raw` refresh
    /// still in flight cannot keep a folder with the device's name), then its node goes.
    func unplug(devDirectory: String, scratch: String, nodes: FuseNodes?) {
        state.withLock { $0.unplugged = true }
        stopStream(wait: true)
        if let nodes {
            for (file, i) in guardedIndex {
                _ = simsupport_umount_lazy(directory + "/" + file)
                nodes.unplugAttribute(i)
            }
        }
        let removed = scratch + "/unplugged-" + id
        Files.removeTree(rename(directory, removed) == 0 ? removed : directory)
        if let nodes {
            nodes.unplug(device: number)
            _ = simsupport_umount_lazy(devNode)
        }
        unlink(devNode)
    }
}
