/// The notices discovery has for the user (``MotionManager/noticeHandler``): a mount matrix udev's
/// hardware database gives a sensor the manager reads, rejected (not a mount matrix), so that the
/// kernel's is used instead.
extension Discovery {
    /// One notice per rejected udev matrix among `sensors` (``SensorInfo/rejectedUdevMountMatrix``),
    /// naming the device and the property's value: the accelerometer and a gyroscope on the same
    /// device share one. A sensor whose matrix is the caller's (``MountMatrix/Source/override``) has
    /// none: udev's matrix would not have been used anyway.
    /// - Parameter sensors: the sensors a manager reads.
    /// - Returns: the notices, in the order of `sensors`.
    static func udevNotices(for sensors: [SensorInfo]) -> [MotionNotice] {
        var notices: [MotionNotice] = []
        for sensor in sensors where sensor.mountMatrixSource != .override {
            guard let rejected = sensor.rejectedUdevMountMatrix else { continue }
            let message = rejected + "."
            if let i = notices.firstIndex(where: { $0.message == message }) {
                notices[i].sensors.append(sensor.kind)
            } else {
                notices.append(MotionNotice(sensors: [sensor.kind], device: sensor.deviceDescription, message: message))
            }
        }
        return notices
    }
}

extension MotionManager {
    /// Hands discovery's notices about the sensors this manager reads (``Discovery/udevNotices(for:)``)
    /// to ``noticeHandler``, once each; nothing while no handler is set (setting one calls this).
    func announceDiscoveryNotices() {
        guard hub.state.withLock({ $0.noticeHandler != nil }) else { return }
        let chosen = state.withLock { $0.chosen }
        let sensors = SensorKind.allCases.compactMap { chosen[$0]?.info }
        for notice in Discovery.udevNotices(for: sensors) {
            hub.announce(notice, once: notice.message)
        }
    }
}
