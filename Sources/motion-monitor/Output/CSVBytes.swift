import Dispatch
import SystemSupport
@preconcurrency import Glibc // errno, stdout
import IIOMotion

/// A growable byte buffer that rows are formatted into, one per log, reused batch after batch:
/// no allocation per row. Manually managed: ``free()`` it once.
struct CSVBytes: TextOutputStream {
    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var capacity: Int
    /// Bytes in use.
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    func free() { base.deallocate() }

    /// Forgets the contents, keeping the memory.
    mutating func removeAll() { count = 0 }

    /// The contents as text (for the tests and `row`).
    var string: String { String(decoding: bytes, as: UTF8.self) }

    /// The contents.
    var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

    /// Makes room for `n` more bytes: the `Unchecked` appends after this call may write up to `n`.
    @inline(__always)
    mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(count + n) }
    }

    @inline(never)
    private mutating func grow(_ needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        grown.update(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }

    @inline(__always)
    mutating func appendUnchecked(_ byte: UInt8) {
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func appendUnchecked(_ b: UnsafeBufferPointer<UInt8>) {
        guard let from = b.baseAddress else { return }
        (base + count).update(from: from, count: b.count)
        count += b.count
    }

    mutating func appendASCII(_ s: StaticString) {
        reserve(s.utf8CodeUnitCount)
        s.withUTF8Buffer { appendUnchecked($0) }
    }

    /// `n` in decimal, without leading zeros (needs 20 bytes reserved).
    @inline(__always)
    mutating func appendDecimal(_ n: UInt64) {
        var digits = 1
        var limit: UInt64 = 10
        while digits < 20 && n >= limit {
            digits += 1
            if digits < 20 { limit &*= 10 }
        }
        var v = n
        var i = count + digits - 1
        repeat {
            base[i] = UInt8(truncatingIfNeeded: v % 10) &+ UInt8(ascii: "0")
            v /= 10
            i -= 1
        } while i >= count
        count += digits
    }

    /// `n` (< 10⁹) in exactly nine digits, zero-padded (needs 9 bytes reserved).
    @inline(__always)
    mutating func appendNineDigits(_ n: UInt64) {
        var v = n
        var i = count + 8
        while i >= count {
            base[i] = UInt8(truncatingIfNeeded: v % 10) &+ UInt8(ascii: "0")
            v /= 10
            i -= 1
        }
        count += 9
    }

    // TextOutputStream: how `Double.write(to:)` hands over its digits (as ASCII, without a String).
    mutating func write(_ string: String) {
        var s = string
        s.withUTF8 { u in
            reserve(u.count)
            appendUnchecked(u)
        }
    }

    mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) {
        reserve(buffer.count)
        appendUnchecked(buffer)
    }
}
