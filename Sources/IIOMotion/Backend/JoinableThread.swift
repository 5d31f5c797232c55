internal import Glibc
internal import CIIOShim
import SystemSupport
import Synchronization

/// A capture thread, which can be joined (Foundation's `Thread` cannot): named after its device,
/// with SIGPIPE blocked for its whole life (see `iioshim_capture_thread_begin`).
final class JoinableThread: Sendable {
    private let thread: pthread_t

    /// Capture threads started in this process whose body has not yet returned. The scenario
    /// tests count threads left after a stop with it: a thread's name cannot tell, since Linux
    /// threads inherit the name of the thread that starts them, and Swift 6.0's Dispatch starts
    /// its workers from whichever thread queues work, a capture thread among them.
    static let running = Atomic<Int>(0)

    private final class Body: Sendable {
        let name: String
        let run: @Sendable () -> Void
        init(_ name: String, _ run: @escaping @Sendable () -> Void) { self.name = name; self.run = run }
    }

    /// Starts `body` on a new thread named `name` (what `top -H` and debuggers show; at most 15
    /// bytes are kept).
    /// - Throws: ``MotionError`` when the system cannot start another thread (EAGAIN).
    init(name: String, _ body: @escaping @Sendable () -> Void) throws(MotionError) {
        var t = pthread_t()
        let box = Unmanaged.passRetained(Body(name, body)).toOpaque()
        Self.running.add(1, ordering: .relaxed)
        let r = pthread_create(&t, nil, { arg in
            let body = Unmanaged<Body>.fromOpaque(arg!).takeRetainedValue()
            iioshim_capture_thread_begin(body.name)
            body.run()
            JoinableThread.running.subtract(1, ordering: .releasing)
            return nil
        }, box)
        guard r == 0 else {
            Self.running.subtract(1, ordering: .relaxed)
            Unmanaged<Body>.fromOpaque(box).release()
            throw MotionError(code: .ioError, detail: "cannot start a capture thread for \(name): the system refused another thread (\(errnoText(r)))")
        }
        thread = t
    }

    /// Waits for the thread to end; called on the thread itself (a handler delivered on the
    /// capture thread stopped its own sensor), detaches it instead: it ends by itself once the
    /// handler returns, and nothing waits for it.
    func join() {
        if pthread_equal(pthread_self(), thread) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}
