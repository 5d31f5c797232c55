import Dispatch
import SystemSupport
@preconcurrency import Glibc // errno, stdout
import IIOMotion

/// The pinned CSV form of `--csv`. Pure functions: the tests pin them down.
///
/// ```
/// timestamp,sensor,device,x,y,z
/// 3615.331022000,accelerometer,iio:device0,0.0,-0.0302,-0.9996
/// ```
enum CSVFormat {
    /// The first line of every log (without its newline).
    static let header = "timestamp,sensor,device,x,y,z"

    /// One row (with its newline): the timestamp in seconds with nine decimals (the kernel's
    /// nanoseconds, exactly), the sensor, the IIO device id, and x/y/z in the shortest text that
    /// parses back to the same `Double`.
    static func row(_ s: some SensorSample, device: String) -> String {
        var out = CSVBytes(capacity: 256)
        defer { out.free() }
        appendRow(s, labels: labels(sensor: type(of: s).sensorKind, device: device), to: &out)
        return out.string
    }

    /// `812.999438968`: seconds with exactly nine decimals, computed from whole nanoseconds so no
    /// binary-to-decimal rounding shows (a kernel timestamp comes back as its nanosecond count).
    static func timestamp(_ t: Double) -> String {
        var out = CSVBytes(capacity: 64)
        defer { out.free() }
        appendTimestamp(t, to: &out)
        return out.string
    }

    /// `,accelerometer,iio:device0,`: the bytes between a row's timestamp and its x.
    static func labels(sensor: SensorKind, device: String) -> [UInt8] {
        Array(",\(sensor.rawValue),\(device),".utf8)
    }

    /// The most bytes one row can take besides its labels: a timestamp or value is at most 24
    /// characters (`-2.2250738585072014e-308`), plus separators and the newline.
    static let rowSlack = 4 * 25 + 4

    /// Appends ``row(_:sensor:device:)`` as bytes, without making any `String`.
    /// - Parameter labels: ``labels(sensor:device:)``.
    @inline(__always)
    static func appendRow(_ s: some SensorSample, labels: [UInt8], to out: inout CSVBytes) {
        out.reserve(labels.count + rowSlack)
        appendTimestamp(s.timestamp, to: &out)
        labels.withUnsafeBufferPointer { out.appendUnchecked($0) }
        let v = s.axes
        appendValue(v.x, to: &out)
        out.appendUnchecked(UInt8(ascii: ","))
        appendValue(v.y, to: &out)
        out.appendUnchecked(UInt8(ascii: ","))
        appendValue(v.z, to: &out)
        out.appendUnchecked(UInt8(ascii: "\n"))
    }

    /// The shortest round-trip text (`Double.description`, written straight into the buffer), or
    /// `null` for a value that is not finite (as ``JSONValue/number(text:)``).
    @inline(__always)
    static func appendValue(_ d: Double, to out: inout CSVBytes) {
        if d.isFinite {
            d.write(to: &out)
        } else {
            out.appendASCII("null")
        }
    }

    /// Appends ``timestamp(_:)`` as bytes (needs 25 bytes reserved).
    @inline(__always)
    static func appendTimestamp(_ t: Double, to out: inout CSVBytes) {
        guard t.isFinite, abs(t) < 9e9 else {
            if t.isFinite { t.write(to: &out) } else { out.appendASCII("nan") }
            return
        }
        let ns = Int64((abs(t) * 1e9).rounded())
        if t < 0 && ns != 0 { out.appendUnchecked(UInt8(ascii: "-")) }
        out.appendDecimal(UInt64(ns / 1_000_000_000))
        out.appendUnchecked(UInt8(ascii: "."))
        out.appendNineDigits(UInt64(ns % 1_000_000_000))
    }
}
