import Glibc
import SystemSupport

/// The one error type of IIOMotion.
///
/// Its ``description`` is a full sentence saying what failed, where and why (advice that belongs
/// to a program, such as which script installs the udev rules, is that program's to add):
///
/// ```swift
/// do {
///     let sample = try manager.readAccelerometer()
/// } catch {
///     print(error)   // e.g. "Reading in_accel_x_raw of iio:device3 (accel_3d) failed: permission denied …"
/// }
/// ```
///
/// Match on ``code`` to react programmatically; the set of codes may grow.
public struct MotionError: Error, CustomStringConvertible, Sendable, Hashable {
    /// What kind of failure this is: a closed set today that may grow (switch with a `default`),
    /// as swift-subprocess's `SubprocessError.Code`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: String, Hashable, Sendable {
            case contextUnavailable, permissionDenied, deviceBusy, invalidAttribute, notAvailable, ioError, timedOut
        }
        let kind: Kind

        private init(_ kind: Kind) { self.kind = kind }

        /// A stable identifier such as `"permissionDenied"`.
        public var description: String { kind.rawValue }

        /// The IIO context (local sysfs or a remote iiod) could not be opened.
        public static let contextUnavailable = Code(.contextUnavailable)
        /// The operating system refused access (`EACCES`/`EPERM`).
        public static let permissionDenied = Code(.permissionDenied)
        /// The device is in use (`EBUSY`), e.g. by another process or a running buffer.
        public static let deviceBusy = Code(.deviceBusy)
        /// A sysfs attribute held text that is not what the IIO ABI promises.
        public static let invalidAttribute = Code(.invalidAttribute)
        /// The requested sensor does not exist on this machine (or not on the selected device).
        public static let notAvailable = Code(.notAvailable)
        /// A read or write failed for another reason; see ``MotionError/errno``.
        public static let ioError = Code(.ioError)
        /// An operation timed out (`ETIMEDOUT`).
        public static let timedOut = Code(.timedOut)
    }

    /// An errno value the kernel or libiio reported, e.g. 13 (`EACCES`).
    public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
        /// The positive errno value.
        public let rawValue: Int32

        /// The value `rawValue` (positive, as `<errno.h>` defines it).
        /// - Parameter rawValue: the errno value.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        package init(_ rawValue: Int32) { self.rawValue = rawValue }

        /// Its `<errno.h>` name, e.g. `"EACCES"`, for the values this library meets; nil otherwise.
        public var name: String? { errnoName(rawValue) }

        /// The C library's text for it, e.g. `"Permission denied"`.
        public var description: String { errnoText(rawValue) }
    }

    /// The errno behind the failure, typed, if there was one (the same value as ``underlyingErrno``).
    public var errno: Errno? { underlyingErrno.map(Errno.init(rawValue:)) }

    /// What kind of failure this is.
    public var code: Code
    /// The errno value behind the failure (positive, e.g. 13 for `EACCES`), if there was one.
    public var underlyingErrno: Int32?
    /// The libiio function that failed, e.g. `"iio_channel_attr_read"`, if one did.
    public var call: String?
    /// The device involved, e.g. `"iio:device0 (bmi160)"`, if known.
    public var device: String?
    /// The sysfs file involved, e.g. `"in_accel_scale"`, if known.
    public var attribute: String?
    /// The IIO context URI involved, e.g. `"local:"`, for context failures.
    public var uri: String?
    /// A specific explanation, used verbatim in ``description``.
    public var detail: String?

    /// Creates an error. The library creates these; the initializer is public so that code
    /// layered on IIOMotion (and tests) can produce the same type.
    /// - Parameters:
    ///   - code: the kind of failure.
    ///   - underlyingErrno: the positive errno value, if any.
    ///   - call: the libiio function that failed, if any.
    ///   - device: the device, e.g. `"iio:device0 (bmi160)"`.
    ///   - attribute: the sysfs file name.
    ///   - uri: the context URI.
    ///   - detail: a specific explanation.
    public init(
        code: Code, underlyingErrno: Int32? = nil, call: String? = nil, device: String? = nil,
        attribute: String? = nil, uri: String? = nil, detail: String? = nil
    ) {
        self.code = code
        self.underlyingErrno = underlyingErrno
        self.call = call
        self.device = device
        self.attribute = attribute
        self.uri = uri
        self.detail = detail
    }

    /// A full sentence: what failed, on which device and file, and why.
    public var description: String {
        switch code {
        case .contextUnavailable:
            let target = "Cannot open the IIO context \"\(uri ?? "local:")\""
            let isLocal = uri == nil || uri!.hasPrefix("local:")
            if underlyingErrno == ENOENT && isLocal {
                return "\(target): no IIO devices on this machine (/sys/bus/iio/devices does not exist). "
                    + "Load the sensor's kernel driver, or use a machine that has one through iiod with uri \"ip:HOST\"."
            }
            if isLocal {
                return "\(target): \(cause). Check that /sys/bus/iio/devices is readable."
            }
            return "\(target): \(cause). Check that iiod is running on that host and that the address and port are right."
        case .permissionDenied where attribute?.hasSuffix("_raw") == true:
            return "\(action) failed: \(cause). The kernel makes raw files readable by everyone, so a local policy "
                + "restricted this one."
        case .permissionDenied:
            return "\(action) failed: \(cause). The device's files belong to root unless a udev rule gives "
                + "them to a group of this user's."
        case .deviceBusy:
            return "\(action) failed: \(cause). Another process such as iio-sensor-proxy or iiod usually holds the device, "
                + "or its buffer is running (many drivers refuse polled reads while buffering)."
        case .timedOut where call == "iio_buffer_refill":
            return "\(detail ?? "\(device ?? "The device") delivered no data in time") (ETIMEDOUT from iio_buffer_refill). "
                + "Check that the driver's interrupt is wired (its count in /proc/interrupts grows) and its trigger fires."
        case .timedOut:
            return "\(action) failed: \(cause). The sensor did not answer in time; HID sensor hubs can take "
                + "several seconds after resume. Try again, or check the driver's interrupt wiring."
        case .invalidAttribute:
            let what = detail ?? "\(attribute ?? "an attribute") has unexpected contents"
            if let device { return "\(device): \(what)." }
            return "\(what.prefix(1).uppercased())\(what.dropFirst())."
        case .notAvailable:
            return detail ?? "The requested sensor is not available on this machine."
        default:
            var s = "\(action) failed: \(cause)."
            if underlyingErrno == ENOENT || underlyingErrno == ENODEV {
                s += " The device may have been removed or its driver unloaded."
            }
            if underlyingErrno == EINVAL && call == "iio_buffer_refill" {
                s += " The data did not fit the scan layout libiio computed from the device's scan_elements "
                    + "(its *_index and *_type files)."
            }
            if let e = underlyingErrno, [EPIPE, ECONNRESET, ENOTCONN, ECONNABORTED].contains(e) {
                s += " The connection to iiod was lost: check that iiod still runs on the board and that the network is up."
            }
            return s
        }
    }

    /// "Reading in_accel_x_raw of iio:device0 (bmi160)" and similar ("Writing" when the failed call
    /// wrote: `write`, `iio_device_attr_write`, `iio_device_set_trigger`).
    private var action: String {
        let verb = call.map { $0.contains("write") || $0.contains("_set_") } == true ? "Writing" : "Reading"
        return switch (attribute, device) {
        case let (a?, d?): "\(verb) \(a) of \(d)"
        case let (a?, nil): "\(verb) \(a)"
        case let (nil, d?): "Accessing \(d)"
        case (nil, nil): uri.map { "Accessing the IIO context \"\($0)\"" } ?? "An IIO operation"
        }
    }

    /// "permission denied (EACCES, errno 13, from iio_channel_attr_read)" and similar.
    private var cause: String {
        var parts: [String] = []
        if let e = errno {
            parts.append(e.name.map { "\($0), errno \(e.rawValue)" } ?? "errno \(e.rawValue)")
        }
        if let call { parts.append("from \(call)") }
        let text = detail ?? errno.map { $0.description.lowercasedFirst } ?? "unknown error"
        return parts.isEmpty ? text : "\(text) (\(parts.joined(separator: ", ")))"
    }


    /// The code that corresponds to an errno value from an I/O call.
    static func code(forErrno e: Int32) -> Code {
        switch e {
        case EACCES, EPERM: .permissionDenied
        case EBUSY: .deviceBusy
        case ETIMEDOUT: .timedOut
        default: .ioError
        }
    }

    /// An error for a failed libiio I/O call.
    static func io(_ e: Int32, call: String, device: String?, attribute: String?) -> MotionError {
        MotionError(code: code(forErrno: e), underlyingErrno: e, call: call, device: device, attribute: attribute)
    }

    /// An error for a failed `iio_create_context_from_uri`.
    package static func contextFailure(uri: String, errno e: Int32) -> MotionError {
        let code: Code = (e == EACCES || e == EPERM) ? .permissionDenied : .contextUnavailable
        return MotionError(code: code, underlyingErrno: e, call: "iio_create_context_from_uri", uri: uri)
    }

    /// `device: file contains "text", which is not a number`.
    static func notANumber(device: String, file: String, text: String) -> MotionError {
        MotionError(code: .invalidAttribute, device: device, attribute: file,
                    detail: "\(file) contains \"\(AttributeText.trimmed(text))\", which is not a number")
    }
}

extension String {
    var lowercasedFirst: String {
        guard let f = first else { return self }
        // Keep acronyms ("I/O") intact: only lower a capital followed by a lowercase letter.
        if let second = dropFirst().first, second.isLowercase { return f.lowercased() + dropFirst() }
        return self
    }
}
