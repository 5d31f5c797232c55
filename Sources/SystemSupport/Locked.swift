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
        // `body` is called here, not handed on to the storage: Swift 6.0 cannot pass a `sending`
        // result through a second function ("returning task-isolated 'body' as a 'sending'
        // result"), so the lock is taken and released around this call (as stdlib's `Mutex` does).
        // The value's address stays valid while `storage` lives, which this call guarantees, and
        // it is reached only under the mutex (what `sending` asks the caller to promise).
        storage.lock()
        defer { storage.unlock() }
        return try body(&storage.value.pointee)
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

    /// The value's address; dereferenced only between ``lock()`` and ``unlock()``.
    @inlinable
    var value: UnsafeMutablePointer<Value> {
        withUnsafeMutablePointerToHeader { $0 }
    }

    /// Takes the mutex (stops the program if `pthread_mutex_lock` fails).
    @inlinable
    func lock() {
        let locked = withUnsafeMutablePointerToElements { pthread_mutex_lock($0) }
        if locked != 0 { Self.lockFailed(locked) }
    }

    /// Releases the mutex (stops the program if `pthread_mutex_unlock` fails).
    @inlinable
    func unlock() {
        let unlocked = withUnsafeMutablePointerToElements { pthread_mutex_unlock($0) }
        if unlocked != 0 { Self.unlockFailed(unlocked) }
    }

    /// Stops the program: `pthread_mutex_lock` failed (`EDEADLK` in a debug build: a recursive
    /// `withLock`).
    @usableFromInline
    static func lockFailed(_ code: Int32) -> Never {
        if code == EDEADLK { preconditionFailure("Locked.withLock called recursively on one thread (EDEADLK)") }
        preconditionFailure("pthread_mutex_lock failed: errno \(code)")
    }

    @usableFromInline
    static func unlockFailed(_ code: Int32) -> Never {
        preconditionFailure("pthread_mutex_unlock failed: errno \(code)")
    }

    private static func check(_ code: Int32, _ call: String) {
        precondition(code == 0, "\(call) failed: errno \(code)")
    }
}
