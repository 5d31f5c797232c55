#if canImport(Glibc)
import Glibc
#endif

/// A value protected by a `pthread_mutex_t`, with the shape of `Synchronization.Mutex`
/// (`withLock`).
///
/// Why not `Mutex`: on Linux, Swift 6.3's `Mutex` locks with raw futex system calls that
/// ThreadSanitizer cannot see, so every value it protects is reported as a data race
/// (`swift test --sanitize=thread` on a two-thread counter under `Mutex` reports one). The test
/// suite runs under ThreadSanitizer, so the package's locks must be ones it understands; an
/// uncontended `pthread_mutex_lock`/`unlock` pair costs about the same as `Mutex`'s.
///
/// ```swift
/// let counter = Locked(0)
/// counter.withLock { $0 += 1 }
/// ```
public final class Locked<Value>: @unchecked Sendable { // every access to `value` happens between pthread_mutex_lock and unlock of `mutex`
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    /// Creates a lock protecting `initialValue`.
    /// - Parameter initialValue: the value.
    public init(_ initialValue: Value) {
        value = initialValue
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    /// - Parameter body: reads or changes the value; must not block or call back into this lock.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws.
    @inlinable
    public func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        lock()
        defer { unlock() }
        return try body(&value)
    }

    @usableFromInline
    func lock() { pthread_mutex_lock(mutex) }

    @usableFromInline
    func unlock() { pthread_mutex_unlock(mutex) }
}
