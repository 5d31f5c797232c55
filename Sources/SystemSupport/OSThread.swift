internal import CSystemSupport
internal import Glibc

/// A thread of the package's own, started with `pthread_create`: the one way the package starts a
/// thread (Foundation's `Thread` cannot be joined, and Dispatch's workers are not the package's to
/// keep). Joinable (``init(name:_:)``, then ``join()``) or detached (``detached(name:_:)``).
///
/// The thread inherits the starting thread's signal mask and name; a body that wants SIGPIPE
/// blocked or a name of its own sets them first (``blockSIGPIPEOnThisThread()``,
/// ``ThisThread/setName(_:)``).
public final class OSThread: Sendable {
    private let thread: pthread_t

    /// Why a thread did not start: the system refused another one.
    public struct StartError: Error, Sendable, CustomStringConvertible {
        /// The name given to the thread.
        public let name: String
        /// `pthread_create`'s error (EAGAIN when the system has no room for another thread).
        public let code: Int32
        public var description: String { "cannot start the thread \(name): \(errnoText(code))" }
    }

    private final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts `body` on a new joinable thread; ``join()`` waits for it.
    /// - Parameters:
    ///   - name: what the thread is, for ``StartError``.
    ///   - body: what it runs.
    /// - Throws: ``StartError`` when the system refuses another thread.
    public init(name: String, _ body: @escaping @Sendable () -> Void) throws(StartError) {
        thread = try Self.create(name: name, detached: false, body)
    }

    /// Starts `body` on a new detached thread, which ends by itself once `body` returns; nothing
    /// can wait for it (the caller learns of its end through a signal of its own).
    /// - Parameters:
    ///   - name: what the thread is, for ``StartError``.
    ///   - body: what it runs.
    /// - Throws: ``StartError`` when the system refuses another thread.
    public static func detached(name: String, _ body: @escaping @Sendable () -> Void) throws(StartError) {
        _ = try create(name: name, detached: true, body)
    }

    /// Waits for the thread to end. Called on the thread itself (its body stopped what it was
    /// serving), detaches it instead: it ends by itself once the body returns.
    public func join() {
        if pthread_equal(pthread_self(), thread) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    private static func create(name: String, detached: Bool, _ body: @escaping @Sendable () -> Void) throws(StartError) -> pthread_t {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if detached { pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED)) }
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Body(body)).toOpaque()
        let rc = pthread_create(&thread, &attributes, { arg in
            Unmanaged<Body>.fromOpaque(arg!).takeRetainedValue().run()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            throw StartError(name: name, code: rc)
        }
        return thread
    }
}

/// Blocks SIGPIPE on the calling thread for the rest of its life, so that a write to a closed
/// pipe or socket fails with EPIPE there instead of ending the process. A SIGPIPE raised on the
/// thread stays pending and is discarded when the thread ends. CIIOShim's per-call SIGPIPE guard
/// around libiio calls is skipped on such a thread (three system calls per refill saved).
/// - Returns: whether the mask was changed.
@discardableResult
public func blockSIGPIPEOnThisThread() -> Bool {
    systemsupport_block_sigpipe_for_life() != 0
}

/// The calling thread's name and role.
public enum ThisThread {
    /// Names the calling thread (what `top -H` and debuggers show); at most 15 bytes are kept.
    public static func setName(_ name: String) {
        systemsupport_name_this_thread(name)
    }

    /// Marks the calling thread as a capture thread (a thread of IIOMotion's that reads one
    /// device and may run handlers) for the rest of its life.
    public static func markAsCaptureThread() {
        systemsupport_mark_capture_thread()
    }

    /// Whether SIGPIPE is blocked on the calling thread for the rest of its life
    /// (``blockSIGPIPEOnThisThread()`` succeeded on it).
    public static var hasSIGPIPEBlocked: Bool {
        systemsupport_sigpipe_is_blocked_for_life() != 0
    }

    /// Whether the calling thread is a capture thread (``markAsCaptureThread()``).
    public static var isCaptureThread: Bool {
        systemsupport_is_capture_thread() != 0
    }
}
