import Dispatch
import SystemSupport
@preconcurrency import Glibc // errno, stdout
import IIOMotion

/// The `--csv` log: a file (or stdout) that every sample of every sensor is appended to, one
/// batch per `write(2)`, so what was received is in the kernel's hands within one update
/// interval and nothing is lost on Ctrl-C, SIGTERM or a crash of this process.
///
/// A file is written on the session's queue, the log's own path: nothing there waits for stdout
/// or stderr. The log on stdout (`--csv -`) is handed to stdout's ``OutputChannel`` instead,
/// whose bounded backlog counts what a reader too slow made it drop.
///
/// A write error (disk full, I/O error) stops the log: the file is cut back to its last whole row,
/// so it stays parseable, and ``failure`` says what happened.
///
/// Confinement: created on the main thread, then used only on the session's queue (every entry
/// point checks it), so it needs no lock.
final class CSVLog: @unchecked Sendable { // mutable state is touched only on `queue` after init (dispatchPrecondition)
    /// When a log file gives way to a new one (`--csv-rotate`).
    enum Rotation: Equatable, Sendable {
        /// Before a batch would take the file past this many bytes (a file holds at least one batch).
        case size(Int64)
        /// At the first batch after local midnight.
        case daily

        /// `daily`, or a size: bytes, or a number with K, M or G (powers of 1024), e.g. `10M`.
        init?(parsing text: String) {
            if text == "daily" { self = .daily; return }
            let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
            var digits = Substring(text)
            var unit: Int64 = 1
            if let last = text.last?.uppercased().first, let u = units[last] { unit = u; digits = digits.dropLast() }
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int64(digits),
                  n > 0, n <= Int64.max / unit else { return nil }
            self = .size(n * unit)
        }
    }

    /// What the log is called in messages: the path of the file being written, or `stdout`.
    private(set) var name: String
    private var fd: Int32
    /// stdout's channel when the log goes there.
    private let channel: OutputChannel?
    private let closeWhenDone: Bool
    /// The session's queue this log is confined to.
    private let queue: DispatchQueue
    /// Bytes of whole rows in the file (where to cut it back to after a failed write); nil for a
    /// file that cannot be cut (stdout, a pipe).
    private var committed: Int64?
    private var rows: [SensorKind: Int] = [:]
    private var gaps: [SensorKind: GapCounter] = [:]
    /// Why the log stopped, if a write failed.
    private(set) var failure: String?
    /// The `--csv` path: the file itself, or with rotation the name the files are named after.
    private let base: String
    private let rotation: Rotation?
    /// How many rotated files to keep (the oldest are removed), nil for all.
    private let keep: Int?
    /// The local day the current rotated file was started on (year × 1000 + day of the year).
    private var day: Int32 = 0
    /// When the current rotated file was started (the second of its name) and its counter.
    private var lastStart: (time: time_t, attempt: Int)?
        /// Every file this log wrote to, oldest first.
    private(set) var files: [String] = []
    /// Says something on stderr (a file removed by `--keep` that could not be).
    private let note: @Sendable (String) -> Void
    /// A `# …` line written after each header (whether readings are calibrated), or nil.
    private let comment: String?
    /// The header line and its comment, as bytes.
    private var headerBytes: [UInt8] { Array((CSVFormat.header + "\n" + (comment.map { "# " + $0 + "\n" } ?? "")).utf8) }

    /// Why a log could not be opened, with the exit status to end with.
    struct OpenError: Error, Equatable {
        var message: String
        var status: Int32
    }

    /// Opens the log and writes its header (unless appending to a file that has one).
    /// - Parameters:
    ///   - path: a file name, or `-` for stdout.
    ///   - force: replace a file that exists.
    ///   - append: add to a file that exists.
    ///   - queue: the queue every later call comes from.
    ///   - stdout: stdout's channel, which `-` writes through (without one, `-` writes fd 1 itself).
    ///   - rotation: start a new file, named by the time, at a size or a day (``Rotation``); the
    ///     first file too is named so.
    ///   - keep: with rotation, how many files to keep.
    ///   - note: where a problem that does not stop the log is said.
    /// - Throws: ``OpenError``: the file exists (73), cannot be created (73), or does not hold a
    ///   log (73, with `--append`); the header could not be written (74).
    init(path: String, force: Bool, append: Bool, queue: DispatchQueue, stdout: OutputChannel? = nil,
         rotation: Rotation? = nil, keep: Int? = nil, note: @escaping @Sendable (String) -> Void = { _ in },
         comment: String? = nil) throws(OpenError) {
        self.queue = queue
        self.comment = comment
        base = path
        self.rotation = path == "-" ? nil : rotation
        self.keep = keep
        self.note = note
        if path == "-" {
            name = "stdout"
            fd = STDOUT_FILENO
            channel = stdout
            closeWhenDone = false
            committed = nil
            try writeHeader()
            return
        }
        name = path
        channel = nil
        if self.rotation != nil {
            closeWhenDone = true
            fd = -1
            if let problem = startFile() {
                throw OpenError(message: "\(MonitorOptions.commandName): \(problem)", status: ExitStatus.cannotCreate)
            }
            return
        }
        files = [path]
        var flags = O_WRONLY | O_CREAT | O_CLOEXEC
        flags |= append ? O_APPEND : (force ? O_TRUNC : O_EXCL)
        if append { flags = (flags & ~O_WRONLY) | O_RDWR } // to check the header of what is there
        let opened = open(path, flags, 0o666)
        guard opened >= 0 else {
            let e = errno
            if e == EEXIST {
                throw OpenError(message: "\(MonitorOptions.commandName): \(path) exists; pass --force to replace it or --append to add to it, or choose another name.",
                                status: ExitStatus.cannotCreate)
            }
            throw OpenError(message: "\(MonitorOptions.commandName): cannot create \(path): \(errnoDescription(e)). "
                                + (e == EACCES || e == EROFS ? "Choose a folder you can write to." : "Check the folder exists."),
                            status: ExitStatus.cannotCreate)
        }
        fd = opened
        closeWhenDone = true
        var info = stat()
        let regular = fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
        let size = regular ? Int64(info.st_size) : 0
        committed = regular ? size : nil
        if append && size > 0 {
            // Appending to something that is not a log would give a file no reader can parse.
            var head = [UInt8](repeating: 0, count: CSVFormat.header.utf8.count + 1)
            let n = pread(fd, &head, head.count, 0)
            if n != head.count || head != Array((CSVFormat.header + "\n").utf8) {
                _ = Glibc.close(fd)
                throw OpenError(message: "\(MonitorOptions.commandName): \(path) does not begin with the header \(CSVFormat.header); not appending to it. Choose another file, or --force to replace it.",
                                status: ExitStatus.cannotCreate)
            }
            // The appended rows get their own comment line (calibrated or not), as a new file's do.
            if let comment { try writeHeader(Array(("# " + comment + "\n").utf8)) }
            return
        }
        try writeHeader()
    }

    private func writeHeader(_ bytes: [UInt8]? = nil) throws(OpenError) {
        let header = bytes ?? headerBytes
        if let channel {
            channel.control(header, force: true)
            return
        }
        if let problem = write(header) {
            if closeWhenDone { _ = Glibc.close(fd) }
            throw OpenError(message: "\(MonitorOptions.commandName): writing the header of \(name) failed: \(problem).",
                            status: ExitStatus.ioError)
        }
        if committed != nil { committed! += Int64(header.count) }
    }

    /// Appends a batch of one sensor's samples.
    /// - Parameters:
    ///   - samples: oldest first, of one sensor.
    ///   - device: its IIO id, the `device` column.
    ///   - period: the sensor's sampling period, for counting gaps (nil: unknown or polled).
    /// - Returns: false when the log has failed (now or before); ``failure`` says why.
    @discardableResult
    func append<S: SensorSample>(_ samples: ArraySlice<S>, device: String, period: @autoclosure () -> Double?) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        let kind = S.sensorKind
        guard failure == nil else { return false }
        // The first batches can arrive before the library has published the frequency in force.
        if gaps[kind]?.period == nil {
            var g = gaps[kind] ?? GapCounter(period: nil)
            g.setPeriod(period())
            gaps[kind] = g
        }
        let labels = labelBytes(kind, device: device)
        var out = buffer
        out.removeAll()
        var gap = gaps[kind]!
        for s in samples {
            CSVFormat.appendRow(s, labels: labels, to: &out)
            gap.add(s.timestamp)
        }
        gaps[kind] = gap
        buffer = out
        let bytes = out.bytes
        if let channel {
            // The channel counts what it drops (a full backlog) or cannot write (a closed stdout).
            if case .failed(let e) = channel.outcome {
                failure = "writing stdout failed: \(errnoDescription(e))"
                return false
            }
            if channel.append(Array(bytes), tag: kind.tag, items: samples.count) { rows[kind, default: 0] += samples.count }
            return true
        }
        if rotationDue(adding: bytes.count), let problem = startFile() {
            failure = problem
            return false
        }
        if let problem = write(bytes) {
            // Keep whole rows only: cut the file back to after the last newline that made it out.
            failure = "writing \(name) failed: \(problem)"
            let made = bytes[..<writtenPrefix]
            let wholeRows = made.count(where: { $0 == UInt8(ascii: "\n") })
            rows[kind, default: 0] += wholeRows
            if let committed {
                let keep = committed + Int64(made.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0)
                _ = ftruncate(fd, off_t(keep))
                self.committed = keep
            }
            return false
        }
        rows[kind, default: 0] += samples.count
        if committed != nil { committed! += Int64(bytes.count) }
        return true
    }

    /// The bytes each batch is formatted into, reused (freed in `deinit`).
    private var buffer = CSVBytes(capacity: 1 << 16)
    /// ``CSVFormat/labels(sensor:device:)`` per sensor, made once.
    private var labelCache: [SensorKind: (device: String, bytes: [UInt8])] = [:]

    private func labelBytes(_ kind: SensorKind, device: String) -> [UInt8] {
        if let cached = labelCache[kind], cached.device == device { return cached.bytes }
        let bytes = CSVFormat.labels(sensor: kind, device: device)
        labelCache[kind] = (device, bytes)
        return bytes
    }

    deinit { buffer.free() }

    /// How many bytes of the last ``write(_:)`` reached the file.
    private var writtenPrefix = 0

    /// Writes all of `bytes`, retrying short writes and EINTR; returns nil or what went wrong.
    private func write(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBufferPointer { write($0) }
    }

    /// Writes all of `bytes`, retrying short writes and EINTR; returns nil or what went wrong.
    private func write(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        writtenPrefix = 0
        while writtenPrefix < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + writtenPrefix, bytes.count - writtenPrefix)
            if n < 0 {
                if errno == EINTR { continue }
                return errnoDescription(errno)
            }
            if n == 0 { return errnoDescription(EIO) }
            writtenPrefix += n
        }
        return nil
    }

    /// Whether the log goes to stdout's channel (its rows are counted there).
    var isStdout: Bool { channel != nil }

    /// Rows written, per sensor (through stdout's channel: rows queued).
    func rowsWritten(_ kind: SensorKind) -> Int {
        dispatchPrecondition(condition: .onQueue(queue))
        return rows[kind] ?? 0
    }

    /// All rows written.
    var totalRows: Int {
        dispatchPrecondition(condition: .onQueue(queue))
        return rows.values.reduce(0, +)
    }

    /// Samples missing between the rows of a sensor (gaps in its timestamps), or nil when the
    /// sampling period is unknown.
    func kernelDropped(_ kind: SensorKind) -> Int? {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let g = gaps[kind] else { return 0 }
        return g.period == nil ? nil : g.missing
    }

    /// The sensor's device went away and came back (`--wait-for-device`): the rows go on after a
    /// gap that is not counted as samples the kernel dropped, at the period the device has now.
    func resumed(_ kind: SensorKind) {
        dispatchPrecondition(condition: .onQueue(queue))
        if var g = gaps[kind] {
            g.restart()
            gaps[kind] = g
        }
    }

    // MARK: Rotation and reopening

    /// Whether the next batch (of `bytes`) goes to a new file.
    private func rotationDue(adding bytes: Int) -> Bool {
        switch rotation {
        case nil: false
        case .size(let limit)?: (committed ?? 0) > Int64(headerBytes.count) && (committed ?? 0) + Int64(bytes) > limit
        case .daily?: Self.today() != day
        }
    }

    /// Year × 1000 + day of the year, local time.
    private static func today() -> Int32 {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        return (parts.tm_year + 1900) * 1000 + parts.tm_yday
    }

    /// The folder (with its slash, or empty), the stem and the extension (with its dot, or
    /// empty) of a `--csv` path.
    private static func parts(of base: String) -> (folder: String, stem: String, ext: String) {
        let slash = base.lastIndex(of: "/")
        let file = slash.map { base[base.index(after: $0)...] } ?? base[...]
        let dot = file.lastIndex(of: ".").flatMap { $0 == file.startIndex ? nil : $0 }
        return (slash.map { String(base[...$0]) } ?? "", String(dot.map { file[..<$0] } ?? file), String(dot.map { file[$0...] } ?? ""))
    }

    /// `ride-20261201T134501.csv` for `ride.csv` (local time; `_002`, `_003` … before the
    /// extension when that name is taken, so that the names sort as the files were started).
    static func rotatedName(base: String, time: time_t, attempt: Int) -> String {
        let (folder, stem, ext) = parts(of: base)
        var t = time
        var fields = tm()
        localtime_r(&t, &fields)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let stamp = "\(fields.tm_year + 1900)\(two(fields.tm_mon + 1))\(two(fields.tm_mday))T\(two(fields.tm_hour))\(two(fields.tm_min))\(two(fields.tm_sec))"
        let counter = attempt > 1 ? "_" + String(repeating: "0", count: max(0, 3 - String(attempt).count)) + String(attempt) : ""
        return folder + stem + "-" + stamp + counter + ext
    }

    /// The stamp and attempt of a file name (in the base's folder) that
    /// ``rotatedName(base:time:attempt:)`` made for this base, or nil.
    static func rotatedKey(_ file: String, base: String) -> (stamp: String, attempt: Int)? {
        let (_, stem, ext) = parts(of: base)
        let prefix = stem + "-"
        guard file.hasPrefix(prefix), file.hasSuffix(ext), file.count >= prefix.count + 15 + ext.count else { return nil }
        let middle = file.dropFirst(prefix.count).dropLast(ext.count)
        let stamp = middle.prefix(15)
        guard stamp.enumerated().allSatisfy({ i, c in i == 8 ? c == "T" : c.isASCII && c.isNumber }) else { return nil }
        let rest = middle.dropFirst(15)
        if rest.isEmpty { return (String(stamp), 1) }
        guard rest.first == "_", rest.count == 4, let n = Int(rest.dropFirst()), n > 1 else { return nil }
        return (String(stamp), n)
    }

    /// Starts the next rotated file (named by the time now, with its header), then closes the
    /// one before (made durable first) and removes the oldest beyond `--keep`.
    /// - Returns: nil, or what went wrong (the log then stops; the file before stays whole).
    private func startFile() -> String? {
        // Names sort as the files were started: within the second of the last file (or when the
        // clock went back) the counter goes on from that file's, even when --keep removed it.
        var now = time(nil)
        var first = 1
        if let last = lastStart, now <= last.time { now = last.time; first = last.attempt + 1 }
        var path = ""
        var opened: Int32 = -1
        var attempt = first
        while attempt <= 999 {
            path = Self.rotatedName(base: base, time: now, attempt: attempt)
            opened = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            if opened >= 0 || errno != EEXIST { break }
            attempt += 1
        }
        if attempt > 999 { return "cannot create another file of \(base) in the second \(Self.rotatedName(base: base, time: now, attempt: 1)) was started: 999 already." }
        guard opened >= 0 else {
            let e = errno
            return "cannot create \(path): \(errnoDescription(e))."
        }
        let header = headerBytes
        let previous = fd
        fd = opened
        if let problem = write(header) {
            _ = Glibc.close(opened)
            _ = unlink(path)
            fd = previous
            return "writing the header of \(path) failed: \(problem)."
        }
        if previous >= 0 {
            _ = fsync(previous)
            _ = Glibc.close(previous)
        }
        name = path
        lastStart = (now, attempt)
        committed = Int64(header.count)
        day = Self.today()
        files.append(path)
        prune()
        return nil
    }

    /// Removes the oldest rotated files of this base beyond `--keep` (never the current one).
    private func prune() {
        guard let keep else { return }
        let folder = Self.parts(of: base).folder
        guard let dir = opendir(folder.isEmpty ? "." : folder) else { return }
        var found: [(key: (stamp: String, attempt: Int), name: String)] = []
        while let entry = readdir(dir) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let key = Self.rotatedKey(entryName, base: base) { found.append((key, entryName)) }
        }
        closedir(dir)
        found.sort { $0.key.stamp != $1.key.stamp ? $0.key.stamp < $1.key.stamp : $0.key.attempt < $1.key.attempt }
        for old in found.dropLast(keep) {
            let path = folder + old.name
            if path == name { continue }
            if unlink(path) != 0 {
                note("\(MonitorOptions.commandName): --keep \(keep): cannot remove \(path): \(errnoDescription(errno)).")
            }
        }
    }

    /// Reopens the log (SIGHUP, after logrotate moved the file away): the `--csv` path again,
    /// created with a header if it is not there, appended to if it is; with rotation, the next
    /// file. Rows of the batches before are in the file before, whole.
    /// - Returns: nil, or what went wrong (the log then stops).
    @discardableResult
    func reopen() -> String? {
        dispatchPrecondition(condition: .onQueue(queue))
        guard channel == nil, failure == nil else { return failure }
        if rotation != nil {
            if let problem = startFile() { failure = problem }
            return failure
        }
        let opened = open(base, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o666)
        guard opened >= 0 else {
            failure = "reopening \(base) failed: \(errnoDescription(errno))"
            return failure
        }
        _ = fsync(fd)
        _ = Glibc.close(fd)
        fd = opened
        var info = stat()
        let regular = fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
        committed = regular ? Int64(info.st_size) : nil
        if !regular || info.st_size == 0 {
            let header = headerBytes
            if let problem = write(header) {
                failure = "writing the header of \(base) failed: \(problem)"
                return failure
            }
            if committed != nil { committed! += Int64(header.count) }
        }
        files.append(base)
        return nil
    }

    /// Makes the file durable and closes it (not stdout).
    func close() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard closeWhenDone, fd >= 0 else { return }
        _ = fsync(fd)
        _ = Glibc.close(fd)
    }
}
