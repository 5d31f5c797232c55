/// `motion-collect`'s command line, parsed without a process (the tests call it).
///
/// ```
/// motion-collect mqtt://broker.local/lab --csv all.csv
/// ```
public struct CollectOptions: Sendable, Equatable {
    /// The broker and the prefix whose boards are collected.
    public var broker: BrokerAddress
    /// Where rows go: a path, or `-` for stdout.
    public var outputPath = "-"
    /// CSV rows (default) or JSON lines.
    public var json = false
    /// Replace an existing output file.
    public var force = false
    /// The persistent session's client identifier.
    public var clientID: String?
    /// The CA file for `mqtts://`.
    public var caFile: String?
    /// End after this many seconds (nil: at Ctrl-C or SIGTERM).
    public var duration: Double?
    /// Whether to show the live table of boards on stderr (default: when stderr is a terminal).
    public var table: Bool?

    /// What `--help` prints.
    public static let usage = """
        usage: motion-collect mqtt[s]://[user[:password]@]host[:port]/PREFIX [options]

        Subscribes to every board publishing under PREFIX (motion-monitor --mqtt) and writes their
        samples into one log, dropping QoS 1 redeliveries; shows a live table of boards on stderr:
        state, rate, last sample's age, samples, repeats, and what each board last reported in its
        status topic (samples spooled, resent, and dropped past the spool's cap).

        options:
          --csv FILE|-        CSV rows board,timestamp,sensor,device,x,y,z (default: stdout)
          --json              JSON lines (motion-monitor's, with "board" first) instead of CSV
          --force             replace FILE if it exists (otherwise refused, exit 73)
          --client-id ID      the persistent session's name (default: motion-collect-PREFIX); the
                              broker keeps what arrives for it while the collector is away
          --ca-file FILE      CA certificate for mqtts:// (default: the system's)
          --duration S        end after S seconds (default: at Ctrl-C or SIGTERM)
          --table / --no-table  the live table of boards (default: when stderr is a terminal)
          -h, --help          this text

        exit status: 0 done; 64 usage (a malformed URL, a wildcard in PREFIX); 73 FILE exists;
        74 writing FILE failed; 77 the broker refused the credentials; 78 a TLS certificate problem.
        """

    /// A command line that cannot be used, with the exit status it means.
    public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The message, naming the argument.
        public var description: String
    }

    /// Parses the arguments after the program name.
    /// - Parameter arguments: e.g. `["mqtt://h/lab", "--csv", "all.csv"]`.
    /// - Throws: ``UsageError``; `--help` throws one whose description is ``usage``.
    public init(arguments: [String]) throws(UsageError) {
        var url: String?
        var i = 0
        var outputPath = "-", json = false, force = false, table: Bool? = nil
        var clientID: String?, caFile: String?, duration: Double?
        func value(_ name: String) throws(UsageError) -> String {
            i += 1
            guard i < arguments.count else { throw UsageError(description: "motion-collect: \(name) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            let a = arguments[i]
            switch a {
            case "-h", "--help": throw UsageError(description: Self.usage)
            case "--csv": outputPath = try value(a)
            case "--json": json = true
            case "--force": force = true
            case "--client-id": clientID = try value(a)
            case "--ca-file": caFile = try value(a)
            case "--table": table = true
            case "--no-table": table = false
            case "--duration":
                let v = try value(a)
                guard let d = Double(v), d.isFinite, d > 0 else { throw UsageError(description: "motion-collect: --duration '\(v)' is not a positive number of seconds") }
                duration = d
            default:
                if a.hasPrefix("-") { throw UsageError(description: "motion-collect: unknown option \(a) (see --help)") }
                guard url == nil else { throw UsageError(description: "motion-collect: one broker URL only ('\(a)' is a second)") }
                url = a
            }
            i += 1
        }
        guard let url else { throw UsageError(description: "motion-collect: no broker URL given (mqtt://host/PREFIX; see --help)") }
        do { broker = try BrokerAddress(parsing: url) } catch { throw UsageError(description: "motion-collect: \(error)") }
        self.outputPath = outputPath; self.json = json; self.force = force; self.clientID = clientID
        self.caFile = caFile; self.duration = duration; self.table = table
    }
}
