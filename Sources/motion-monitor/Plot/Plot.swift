@preconcurrency import Glibc // open, write, stat, opendir, rename, posix_spawnp, waitpid
import SystemSupport

/// `motion-monitor plot LOG.csv… [-o FILE.svg|FILE.png|-] [--width PX] [--panel-height PX]`:
/// draws a `--csv` log (or the files of one `--csv-rotate` series, or a motion-collect log) as
/// one panel per sensor, read in one pass and decimated to the smallest and largest value per
/// pixel column.
enum Plot {
    /// What the command line asked for.
    struct Options: Equatable {
        var logs: [String] = []
        /// The picture; nil: the first log's name with `.svg`.
        var output: String?
        var width = 1200
        var panelHeight = 220
        var help = false

        /// The picture's file name when `-o` is not given: `ride.csv` → `ride.svg`.
        var outputPath: String {
            if let output { return output }
            let log = logs.first ?? "plot"
            let slash = log.lastIndex(of: "/").map { log.index(after: $0) } ?? log.startIndex
            if let dot = log[slash...].lastIndex(of: "."), dot != slash { return String(log[..<dot]) + ".svg" }
            return log + ".svg"
        }

    }

    static let usage = "usage: \(MonitorOptions.commandName) plot LOG.csv... [-o FILE.svg|FILE.png|-] [--width PX] [--panel-height PX]"

    static let helpText = """
        \(usage)

        Draws a log written by --csv (or by motion-collect) as one panel per sensor of each device:
        x, y and z against time in seconds from the log's first row, in the log's units, each line
        through the smallest and largest value of every pixel column (nothing between two columns
        is lost). The files of one --csv-rotate series plot as one: name the series (ride.csv for
        ride-20261201T134501.csv, ...) or list its files. A pause of more than 0.5 s and of more than
        20 sampling periods (a device that went away under --wait-for-device) is drawn as a gap.

          -o FILE            The picture: .svg (default: the log's name with .svg), .png
                             (drawn from the SVG by librsvg's rsvg-convert, Debian's
                             librsvg2-bin), or - for SVG on stdout. A file that is there is
                             replaced whole once the new picture is complete, and the
                             summary on stderr says so.
          --width PX         The picture's width (default 1200, 300 to 20000).
          --panel-height PX  Each panel's plotting height (default 220, 60 to 4000).
          -h, --help         Show this help.

        Exit status: 0 drawn, 64 usage error, 65 a log that is empty or malformed (the file and line
        are named), 66 a log that cannot be opened, 73 the picture cannot be written.
        """

    /// Parses the arguments after `plot`.
    static func parse(_ arguments: [String]) throws(PlotError) -> Options {
        var o = Options()
        var i = 0
        func value(_ flag: String) throws(PlotError) -> String {
            i += 1
            guard i < arguments.count else { throw PlotError(message: "\(MonitorOptions.commandName) plot: \(flag) needs a value.\n\(usage)", status: ExitStatus.usage) }
            return arguments[i]
        }
        func pixels(_ flag: String, _ range: ClosedRange<Int>) throws(PlotError) -> Int {
            let text = try value(flag)
            guard let n = Int(text), range.contains(n) else {
                throw PlotError(message: "\(MonitorOptions.commandName) plot: invalid value '\(text)' for \(flag) (expected \(range.lowerBound) to \(range.upperBound) pixels).", status: ExitStatus.usage)
            }
            return n
        }
        var onlyFiles = false
        while i < arguments.count {
            let a = arguments[i]
            if onlyFiles || !a.hasPrefix("-") {
                o.logs.append(a)
            } else {
                switch a {
                case "--": onlyFiles = true
                case "-o", "--output": o.output = try value(a)
                case "--width": o.width = try pixels(a, 300...20000)
                case "--panel-height": o.panelHeight = try pixels(a, 60...4000)
                case "-h", "--help": o.help = true
                default: throw PlotError(message: "\(MonitorOptions.commandName) plot: unknown option '\(a)'.\n\(usage)", status: ExitStatus.usage)
                }
            }
            i += 1
        }
        if !o.help && o.logs.isEmpty { throw PlotError(message: "\(MonitorOptions.commandName) plot: which log? \(usage)", status: ExitStatus.usage) }
        if let out = o.output, out != "-", !out.lowercased().hasSuffix(".svg"), !out.lowercased().hasSuffix(".png") {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: -o \(out): the picture's name must end in .svg or .png (or be - for SVG on stdout).", status: ExitStatus.usage)
        }
        return o
    }

    /// The files to read for one argument: the file itself when it exists, else the files of the
    /// `--csv-rotate` series named after it, oldest first.
    static func files(for log: String) throws(PlotError) -> [String] {
        var info = stat()
        if stat(log, &info) == 0 { return [log] }
        let e = errno
        let slash = log.lastIndex(of: "/")
        let folder = slash.map { String(log[...$0]) } ?? ""
        var found: [(key: (stamp: String, attempt: Int), name: String)] = []
        if e == ENOENT, let dir = opendir(folder.isEmpty ? "." : folder) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if let key = CSVLog.rotatedKey(name, base: log) { found.append((key, folder + name)) }
            }
            closedir(dir)
        }
        guard !found.isEmpty else {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: cannot open \(log): \(errnoDescription(e))"
                                + (e == ENOENT ? " (nor is there a --csv-rotate series of that name)." : "."),
                            status: ExitStatus.noInput)
        }
        found.sort { $0.key.stamp != $1.key.stamp ? $0.key.stamp < $1.key.stamp : $0.key.attempt < $1.key.attempt }
        return found.map(\.name)
    }

    /// Reads the logs and lays out their picture.
    static func figure(_ o: Options) throws(PlotError) -> (figure: PlotFigure, files: [String], rows: Int) {
        var reader = PlotReader()
        var all: [String] = []
        for log in o.logs { all += try files(for: log) }
        for file in all { try reader.read(path: file) }
        guard reader.rows > 0 else {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: \(all.joined(separator: ", ")) \(all.count == 1 ? "has" : "have") a header but no rows: nothing to plot.", status: ExitStatus.dataError)
        }
        return (PlotFigure(series: reader.series, width: o.width, panelHeight: o.panelHeight), all, reader.rows)
    }

    /// Runs `plot` with the arguments after it; returns the exit status.
    static func main(arguments: [String]) -> Int32 {
        do throws(PlotError) {
            let o = try parse(arguments)
            if o.help {
                Console.out(helpText)
                return ExitStatus.success
            }
            let (figure, files, rows) = try figure(o)
            let bytes = Array(PlotSVG.document(figure).utf8)
            let path = o.outputPath
            if path == "-" {
                try write(bytes, to: STDOUT_FILENO, name: path)
            } else {
                var info = stat()
                let replaced = stat(path, &info) == 0
                try replace(path, with: bytes, png: path.lowercased().hasSuffix(".png"))
                let sensors = figure.panels.count == 1 ? "1 panel" : "\(figure.panels.count) panels"
                Console.error("\(MonitorOptions.commandName) plot: \(path)\(replaced ? " (replaced)" : ""): \(sensors), \(rows) rows from \(files.count == 1 ? files[0] : "\(files.count) files"), \(PlotFigure.fixed(figure.span, decimals: 3)) s.")
            }
            return ExitStatus.success
        } catch {
            Console.error(error.message)
            return error.status
        }
    }

    /// Writes the picture to `path` through a file beside it that is renamed over `path` once
    /// complete, so a failed run leaves the earlier picture as it was. A PNG is drawn from the SVG
    /// by librsvg's `rsvg-convert`.
    static func replace(_ path: String, with svg: [UInt8], png: Bool) throws(PlotError) {
        let partial = path + ".part-\(getpid())"
        defer { _ = unlink(partial) }
        if png {
            let source = partial + ".svg"
            defer { _ = unlink(source) }
            try create(source, svg)
            try render(source, toPNG: partial, for: path)
        } else {
            try create(partial, svg)
        }
        guard rename(partial, path) == 0 else {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: cannot create \(path): \(errnoDescription(errno)).", status: ExitStatus.cannotCreate)
        }
    }

    /// Creates `path` (it must not exist) holding `bytes`.
    static func create(_ path: String, _ bytes: [UInt8]) throws(PlotError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: cannot create \(path): \(errnoDescription(errno)).", status: ExitStatus.cannotCreate)
        }
        defer { _ = close(fd) }
        try write(bytes, to: fd, name: path)
    }

    /// Runs `rsvg-convert` to draw the SVG file `source` as the PNG file `output`; `path` is the
    /// picture the user asked for, named in errors.
    static func render(_ source: String, toPNG output: String, for path: String) throws(PlotError) {
        let arguments = ["rsvg-convert", "--format", "png", "--output", output, source]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, "rsvg-convert", nil, nil, &argv, environ)
        guard spawned == 0 else {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: -o \(path): a PNG is drawn by rsvg-convert, which "
                                + (spawned == ENOENT ? "is not installed (Debian: apt install librsvg2-bin); -o with .svg needs nothing." : "could not be started: \(errnoDescription(spawned))."),
                            status: ExitStatus.cannotCreate)
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: -o \(path): rsvg-convert failed (wait status \(status)).", status: ExitStatus.cannotCreate)
        }
    }

    /// Writes all of `bytes` to `fd`; `name` is the file named in errors.
    static func write(_ bytes: [UInt8], to fd: Int32, name path: String) throws(PlotError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw PlotError(message: "\(MonitorOptions.commandName) plot: writing \(path) failed: \(errnoDescription(n < 0 ? errno : EIO)).", status: ExitStatus.cannotCreate)
            }
            done += n
        }
    }
}
