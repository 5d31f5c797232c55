import Dispatch
@preconcurrency import Glibc // stdout and stderr are C globals
import IIOMotion
import SystemSupport
import Synchronization

/// Where the continuous view's readings go on stdout.
enum Display: Equatable, Sendable {
    /// The live view: panels redrawn in place (stdout is a terminal that can).
    case live(color: Bool, unicode: Bool)
    /// One readable line per reading.
    case lines
    /// One JSON object per reading per line.
    case json
    /// Nothing on stdout (`--quiet`, or `--csv -` owns it).
    case none

    /// Decides from the options and the environment, without touching the terminal.
    /// - Parameters:
    ///   - options: the parsed command line.
    ///   - stdoutIsTerminal: `isatty(1)`.
    ///   - environment: `TERM`, `NO_COLOR`, `LANG`, `LC_ALL`, `LC_CTYPE` are read.
    /// - Returns: the live view only on a terminal that is not `TERM=dumb` and only when neither
    ///   `--json`, `--quiet` nor `--csv -` asks for something else; colour unless `--no-color` or
    ///   a non-empty `NO_COLOR` (no-color.org); Unicode bars and rules when the locale is UTF-8.
    static func choose(_ options: MonitorOptions, stdoutIsTerminal: Bool, environment: [String: String]) -> Display {
        if options.quiet || options.csvToStdout { return .none }
        if options.json { return .json }
        let term = environment["TERM"] ?? ""
        guard stdoutIsTerminal, !term.isEmpty, term != "dumb" else { return .lines }
        let color = !options.noColor && (environment["NO_COLOR"] ?? "").isEmpty
        // The first of LC_ALL, LC_CTYPE, LANG that is set decides, as setlocale(3) does.
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty } ?? ""
        let unicode = String(locale.lowercased().filter { $0 != "-" }).contains("utf8")
        return .live(color: color, unicode: unicode)
    }
}

extension SensorKind {
    /// The tag (log lines) and slot (display lines) of this sensor's output in stdout's channel.
    var tag: Int {
        switch self {
        case .accelerometer: 0
        case .gyroscope: 1
        case .magnetometer: 2
        }
    }
}
