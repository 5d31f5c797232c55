#if canImport(Glibc)
public import Glibc  // public: the lock is inlined into its callers
#endif

/// A value protected by a `pthread_mutex_t`, with the shape of `Synchronization.Mutex`
/// (`withLock`). The value and the mutex live in one allocation (a `ManagedBuffer`, as swift-nio's
/// `NIOLockedValueBox`), every pthread call's result is checked, and in debug builds the mutex is
/// an error-checking one, so that a `withLock` inside a `withLock` of the same lock on the same
/// thread stops the program with a message instead of deadlocking silently.
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
public struct Locked<Value>: @unchecked Sendable { // every access to the value happens between pthread_mutex_lock and unlock of the storage's mutex
    @usableFromInline let storage: LockStorage<Value>

    /// Creates a lock protecting `initialValue`.
    /// - Parameter initialValue: the value.
    public init(_ initialValue: Value) {
        storage = LockStorage.make(initialValue)
    }

    /// Runs `body` with exclusive access to the value.
    /// - Parameter body: reads or changes the value; must not block or call back into this lock
    ///   (debug builds stop with "withLock called recursively" when it does).
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws.
    @inlinable
    public func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        try storage.withLock(body)
    }
}

/// The one allocation behind a ``Locked``: the value in the header, the mutex as its only element.
public final class LockStorage<Value>: ManagedBuffer<Value, pthread_mutex_t> {
    /// A storage holding `value`, its mutex initialised.
    @usableFromInline
    static func make(_ value: Value) -> LockStorage {
        let buffer = create(minimumCapacity: 1) { _ in value }
        // `create` returns the dynamic type it was called on.
        let storage = unsafeDowncast(buffer, to: LockStorage.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            var attributes = pthread_mutexattr_t()
            check(pthread_mutexattr_init(&attributes), "pthread_mutexattr_init")
            #if DEBUG
            check(pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK)), "pthread_mutexattr_settype")
            #endif
            mutex.initialize(to: pthread_mutex_t())
            check(pthread_mutex_init(mutex, &attributes), "pthread_mutex_init")
            check(pthread_mutexattr_destroy(&attributes), "pthread_mutexattr_destroy")
        }
        return storage
    }

    deinit {
        withUnsafeMutablePointers { _, mutex in
            Self.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
            mutex.deinitialize(count: 1)
        }
    }

    @inlinable
    func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        // The pointers stay valid while `self` lives, which this call guarantees; the value is
        // reached only under the mutex (what `sending` asks the caller to promise).
        let (value, mutex) = withUnsafeMutablePointers { (SendablePointer(pointer: $0), $1) }
        let locked = pthread_mutex_lock(mutex)
        if locked != 0 { Self.lockFailed(locked) }
        defer {
            let unlocked = pthread_mutex_unlock(mutex)
            if unlocked != 0 { Self.unlockFailed(unlocked) }
        }
        return try body(&value.pointer.pointee)
    }

    /// Stops the program: `pthread_mutex_lock` failed (`EDEADLK` in a debug build: a recursive
    /// `withLock`).
    @usableFromInline
    static func lockFailed(_ code: Int32) -> Never {
        if code == EDEADLK { preconditionFailure("Locked.withLock called recursively on one thread (EDEADLK)") }
        preconditionFailure("pthread_mutex_lock failed: errno \(code)")
    }

    /// The value's address, passed as the mutex's protection allows.
    @usableFromInline
    struct SendablePointer: @unchecked Sendable { // dereferenced only while the mutex is held
        @usableFromInline let pointer: UnsafeMutablePointer<Value>
        @inlinable init(pointer: UnsafeMutablePointer<Value>) { self.pointer = pointer }
    }

    @usableFromInline
    static func unlockFailed(_ code: Int32) -> Never {
        preconditionFailure("pthread_mutex_unlock failed: errno \(code)")
    }

    private static func check(_ code: Int32, _ call: String) {
        precondition(code == 0, "\(call) failed: errno \(code)")
    }
}
