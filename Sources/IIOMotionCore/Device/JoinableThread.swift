import SystemSupport
import Synchronization

/// A capture thread (an ``OSThread``): named after its device, with SIGPIPE blocked for its whole
/// life (``blockSIGPIPEOnThisThread()``: libiio calls on it then need no per-call SIGPIPE guard),
/// marked as a capture thread (``ThisThread/isCaptureThread``), and counted while it runs.
final class JoinableThread: Sendable {
    private let thread: OSThread

    /// Capture threads started in this process whose body has not yet returned. The scenario
    /// tests count threads left after a stop with it: a thread's name cannot tell, since Linux
    /// threads inherit the name of the thread that starts them, and Swift 6.0's Dispatch starts
    /// its workers from whichever thread queues work, a capture thread among them.
    static let running = Atomic<Int>(0)

    /// Starts `body` on a new thread named `name` (what `top -H` and debuggers show; at most 15
    /// bytes are kept).
    /// - Throws: ``MotionError`` when the system cannot start another thread (EAGAIN).
    init(name: String, _ body: @escaping @Sendable () -> Void) throws(MotionError) {
        Self.running.add(1, ordering: .relaxed)
        do {
            thread = try OSThread(name: name) {
                ThisThread.setName(name)
                ThisThread.markAsCaptureThread()
                blockSIGPIPEOnThisThread()
                body()
                JoinableThread.running.subtract(1, ordering: .releasing)
            }
        } catch {
            Self.running.subtract(1, ordering: .relaxed)
            throw MotionError(code: .ioError, detail: "cannot start a capture thread for \(name): the system refused another thread (\(errnoText(error.code)))")
        }
    }

    /// Waits for the thread to end; called on the thread itself (a handler delivered on the
    /// capture thread stopped its own sensor), detaches it instead: it ends by itself once the
    /// handler returns, and nothing waits for it.
    func join() { thread.join() }
}
