internal import Glibc
internal import SystemSupport

/// One message on its way to the broker: a topic, its payload, and how many samples it carries
/// (what the statistics count).
public struct OutboundMessage: Sendable, Equatable {
    /// The topic to publish to.
    public var topic: String
    /// The payload bytes.
    public var payload: [UInt8]
    /// The samples in the payload.
    public var samples: Int

    /// - Parameters:
    ///   - topic: the topic to publish to.
    ///   - payload: the payload bytes.
    ///   - samples: the samples in the payload.
    public init(topic: String, payload: [UInt8], samples: Int) {
        self.topic = topic
        self.payload = payload
        self.samples = samples
    }
}

/// The messages not yet sent, oldest first: in memory up to a byte bound, then in a spool file up
/// to a size cap, then dropped (newest first, counted). Order is kept across the two: once a
/// message has gone to the spool, newer ones follow it there until the spool has been read back.
///
/// Not thread-safe: ``MQTTPublisher`` uses it under its lock.
struct Outbox {
    /// Bytes of payload and topic that memory may hold before messages go to the spool.
    let memoryLimit: Int
    /// The spool file's path (created when first needed, removed when drained and at the end).
    let spoolPath: String?
    /// The largest the spool file may grow, bytes.
    let spoolLimit: Int

    private var memory: [OutboundMessage] = []
    private var head = 0
    private(set) var memoryBytes = 0
    private var spoolFD: Int32 = -1
    private var spoolRead: Int64 = 0
    private var spoolWrite: Int64 = 0
    private(set) var spooledMessages = 0

    /// Samples that ever went to the spool.
    private(set) var spooledSamples = 0
    /// Samples refused because memory and spool were full.
    private(set) var droppedSamples = 0
    /// Samples waiting (memory and spool).
    private(set) var pendingSamples = 0
    /// The last spool error (the spool is then treated as full), for the summary.
    private(set) var spoolError: String?

    init(memoryLimit: Int, spoolPath: String?, spoolLimit: Int) {
        self.memoryLimit = memoryLimit
        self.spoolPath = spoolPath
        self.spoolLimit = spoolLimit
    }

    /// Whether nothing waits.
    var isEmpty: Bool { head == memory.count && spooledMessages == 0 }

    /// Adds `message` behind every message already waiting.
    /// - Returns: false when it was dropped (memory and spool full).
    @discardableResult
    mutating func append(_ message: OutboundMessage) -> Bool {
        let size = Self.size(message)
        if spooledMessages == 0 && memoryBytes + size <= memoryLimit {
            memory.append(message)
            memoryBytes += size
            pendingSamples += message.samples
            return true
        }
        if spoolAppend(message) {
            spooledSamples += message.samples
            pendingSamples += message.samples
            return true
        }
        droppedSamples += message.samples
        return false
    }

    /// Puts `messages` (oldest first) in front of everything waiting: messages sent but not
    /// acknowledged when the connection was lost. They may exceed the memory bound briefly.
    mutating func prepend(_ messages: [OutboundMessage]) {
        guard !messages.isEmpty else { return }
        compact()
        memory.insert(contentsOf: messages, at: 0)
        for m in messages { memoryBytes += Self.size(m); pendingSamples += m.samples }
    }

    /// Takes the oldest waiting message.
    mutating func popFirst() -> OutboundMessage? {
        if head < memory.count {
            let m = memory[head]
            head += 1
            memoryBytes -= Self.size(m)
            pendingSamples -= m.samples
            if head > 1024 && head * 2 > memory.count { compact() }
            return m
        }
        guard spooledMessages > 0, let m = spoolReadNext() else { return nil }
        pendingSamples -= m.samples
        return m
    }

    /// Closes and removes the spool file.
    mutating func close() {
        if spoolFD >= 0 {
            Glibc.close(spoolFD)
            spoolFD = -1
            if let spoolPath { unlink(spoolPath) }
        }
    }

    private mutating func compact() {
        if head > 0 { memory.removeFirst(head); head = 0 }
    }

    private static func size(_ m: OutboundMessage) -> Int { m.payload.count + m.topic.utf8.count + 64 }

    // MARK: The spool file: records of [topic length u32][payload length u32][samples u32][topic][payload]

    private mutating func spoolAppend(_ m: OutboundMessage) -> Bool {
        guard let spoolPath, spoolError == nil else { return false }
        let topic = Array(m.topic.utf8)
        let recordSize = 12 + topic.count + m.payload.count
        guard spoolWrite + Int64(recordSize) <= Int64(spoolLimit) else { return false }
        if spoolFD < 0 {
            spoolFD = open(spoolPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            if spoolFD < 0 { spoolError = "cannot create the spool file \(spoolPath): \(errnoText(errno))"; return false }
        }
        var record = [UInt8]()
        record.reserveCapacity(recordSize)
        for v in [UInt32(topic.count), UInt32(m.payload.count), UInt32(clamping: m.samples)] {
            withUnsafeBytes(of: v.littleEndian) { record.append(contentsOf: $0) }
        }
        record.append(contentsOf: topic)
        record.append(contentsOf: m.payload)
        let ok = record.withUnsafeBytes { buf -> Bool in
            var done = 0
            while done < buf.count {
                let n = pwrite(spoolFD, buf.baseAddress! + done, buf.count - done, off_t(spoolWrite) + off_t(done))
                if n < 0 { if errno == EINTR { continue }; return false }
                done += n
            }
            return true
        }
        guard ok else { spoolError = "writing the spool file \(spoolPath) failed: \(errnoText(errno))"; return false }
        spoolWrite += Int64(recordSize)
        spooledMessages += 1
        return true
    }

    private mutating func spoolReadNext() -> OutboundMessage? {
        func read(_ count: Int) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            let ok = bytes.withUnsafeMutableBytes { buf -> Bool in
                var done = 0
                while done < count {
                    let n = pread(spoolFD, buf.baseAddress! + done, count - done, off_t(spoolRead) + off_t(done))
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return false }
                    done += n
                }
                return true
            }
            guard ok else { return nil }
            spoolRead += Int64(count)
            return bytes
        }
        guard let header = read(12) else { spoolLost(); return nil }
        func word(_ i: Int) -> Int { Int(UInt32(header[i]) | UInt32(header[i + 1]) << 8 | UInt32(header[i + 2]) << 16 | UInt32(header[i + 3]) << 24) }
        guard let topic = read(word(0)), let payload = read(word(4)) else { spoolLost(); return nil }
        spooledMessages -= 1
        if spooledMessages == 0 {
            // Drained: start the file again from its beginning.
            spoolRead = 0; spoolWrite = 0
            _ = ftruncate(spoolFD, 0)
        }
        return OutboundMessage(topic: String(decoding: topic, as: UTF8.self), payload: payload, samples: word(8))
    }

    /// The spool could not be read back: what it held is counted as dropped.
    private mutating func spoolLost() {
        spoolError = "reading the spool file \(spoolPath ?? "") back failed: \(errnoText(errno))"
        spooledMessages = 0
        spoolRead = 0; spoolWrite = 0
        let lost = pendingSamples - (memory.count - head == 0 ? 0 : memory[head...].reduce(0) { $0 + $1.samples })
        droppedSamples += lost
        pendingSamples -= lost
    }
}
