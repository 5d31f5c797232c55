import Foundation
import Glibc
import SystemSupport
import Testing

/// SystemSupport's per-thread settings, on threads of the test's own: the name, the capture-thread
/// mark and the SIGPIPE block belong to the thread that set them.
@Suite("The calling thread's name, mark and SIGPIPE block", .timeLimit(.minutes(1)))
struct ThisThreadTests {
    struct Seen: Sendable {
        var before = (capture: true, sigpipe: true)
        var after = (capture: false, sigpipe: false)
        var blocked = false
        var maskHasSIGPIPE = false
        var pending = false
        var name = ""
    }

    @Test("A new thread is unmarked; marking, naming and blocking SIGPIPE take on it alone, and a SIGPIPE raised there stays pending")
    func perThread() throws {
        let seen = Locked(Seen())
        let thread = try OSThread(name: "this-thread-test") {
            var s = Seen()
            s.before = (ThisThread.isCaptureThread, ThisThread.hasSIGPIPEBlocked)
            ThisThread.setName("iio:device12345-capture")
            ThisThread.markAsCaptureThread()
            s.blocked = blockSIGPIPEOnThisThread()
            s.after = (ThisThread.isCaptureThread, ThisThread.hasSIGPIPEBlocked)
            var mask = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &mask)
            s.maskHasSIGPIPE = sigismember(&mask, SIGPIPE) == 1
            // Blocked, the signal waits on this thread instead of ending the process.
            pthread_kill(pthread_self(), SIGPIPE)
            var pending = sigset_t()
            sigpending(&pending)
            s.pending = sigismember(&pending, SIGPIPE) == 1
            var zero = timespec()
            var only = sigset_t()
            sigemptyset(&only)
            sigaddset(&only, SIGPIPE)
            _ = sigtimedwait(&only, nil, &zero)
            s.name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "unreadable"
            seen.withLock { $0 = s }
        }
        thread.join()
        let s = seen.withLock { $0 }
        #expect(s.before == (false, false))
        #expect(s.blocked && s.after == (true, true) && s.maskHasSIGPIPE && s.pending)
        #expect(s.name == "iio:device12345\n", "the kernel keeps 15 bytes")
        #expect(!ThisThread.isCaptureThread, "the test's own thread stays unmarked")
    }
}
