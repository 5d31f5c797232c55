import IIOScanFormat

/// Where each captured sensor's channels are on one device (resolved in the capture's context).
struct DeviceLayout: Sendable {
    var deviceName: String?
    /// Per plan: the x, y, z channel indices that are scan elements (nil when one is not).
    var scanChannels: [[Int]?]
    /// Per plan: the x, y, z `raw` channels and files.
    var rawChannels: [[(channel: Int, file: String)?]]
    /// Per plan: the channel to read or write per-type attributes on (the x axis).
    var firstChannels: [Int]
    /// The timestamp scan element, if any.
    var timestampChannel: Int?
    var formats: [Int: ScanFormat]
    var plans: [SensorPlan]

    init(raw: RawDevice, plans: [SensorPlan]) {
        deviceName = raw.name
        self.plans = plans
        var formats: [Int: ScanFormat] = [:]
        for c in raw.channels { if let f = c.format { formats[c.index] = f } }
        self.formats = formats
        scanChannels = plans.map { plan in
            let kind = plan.info.kind.rawKind
            let chans = Axis.allCases.map { a in raw.channels.first { $0.kind == kind && $0.axis == a && $0.scanIndex != nil }?.index }
            return chans.allSatisfy { $0 != nil } ? chans.compactMap { $0 } : nil
        }
        rawChannels = plans.map { plan in
            let kind = plan.info.kind.rawKind
            return Axis.allCases.map { a in
                raw.channels.first { $0.kind == kind && $0.axis == a && $0.hasRaw }.flatMap { c in c.rawFile.map { (c.index, $0) } }
            }
        }
        firstChannels = plans.map { plan in
            raw.channels.first { $0.kind == plan.info.kind.rawKind && $0.axis != nil }?.index ?? 0
        }
        timestampChannel = raw.channels.first { $0.kind == .timestamp && $0.scanIndex != nil }?.index
        scanElementIDs = raw.channels.filter { $0.scanIndex != nil }.map(\.id)
        let kinds = Set(plans.map(\.info.kind.rawKind))
        unreadableTypes = raw.channels.compactMap { c in
            guard kinds.contains(c.kind), c.axis != nil, let f = c.unreadableFormat else { return nil }
            return (c.id, f)
        }
        let used = scanChannels.flatMap { $0 ?? [] } + (timestampChannel.map { [$0] } ?? [])
        scanBytes = used.reduce(0) { total, c in
            let f = formats[c]
            return total + max(1, (f?.storageBits ?? 64) / 8) * max(1, f?.repeat ?? 1)
        }
    }

    /// libiio's ids of every scan element of the device (`accel_x`, `timestamp`): destroying a
    /// buffer writes 0 to all their `_en` files, not only to those of the captured sensors.
    var scanElementIDs: [String]
    /// The captured sensors' channels whose `scan_elements/*_type` libiio read as a layout no scan
    /// can be decoded with, and what it read.
    var unreadableTypes: [(id: String, format: ScanFormat)]
    /// Bytes of one scan of ``bufferChannels`` (an upper bound: each element padded to its size).
    var scanBytes: Int

    var canBuffer: Bool { !scanChannels.isEmpty && scanChannels.allSatisfy { $0 != nil } }

    /// Every channel the buffer needs, the timestamp last.
    var bufferChannels: [Int] { scanChannels.flatMap { $0 ?? [] } + (timestampChannel.map { [$0] } ?? []) }
}

extension SensorKind {
    var rawKind: RawChannel.Kind {
        switch self {
        case .accelerometer: .accel
        case .gyroscope: .anglvel
        case .magnetometer: .magn
        }
    }
}
