import Dispatch
import SystemSupport
@preconcurrency import Glibc // write, poll, pipe2, dup2
import Synchronization

/// A pthread mutex and condition variable on `CLOCK_MONOTONIC`: what the writer threads wait on.
final class Condition: @unchecked Sendable { // the pointers are only used through pthread calls, which synchronise
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        precondition(pthread_mutex_init(mutex, nil) == 0)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        precondition(pthread_cond_init(cond, &attributes) == 0)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func broadcast() { pthread_cond_broadcast(cond) }

    /// Waits for a broadcast (the mutex held).
    func wait() { pthread_cond_wait(cond, mutex) }

    /// Waits for a broadcast until `deadline` (``monotonicSeconds()``); false once it has passed.
    func wait(until deadline: Double) -> Bool {
        let now = monotonicSeconds()
        guard deadline > now else { return false }
        var ts = timespec(tv_sec: Int(deadline), tv_nsec: Int((deadline - deadline.rounded(.down)) * 1e9))
        return pthread_cond_timedwait(cond, mutex, &ts) != ETIMEDOUT || monotonicSeconds() < deadline
    }
}

/// Starts a detached ``OSThread`` (it inherits the caller's signal mask: the watch blocks its
/// signals before starting any); stops the program when the system refuses another thread.
/// - Parameters:
///   - name: what it is, for the message should it fail to start.
///   - body: what it runs.
func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    do { try OSThread.detached(name: name, body) } catch { preconditionFailure("\(error)") }
}

/// Writes `bytes` to `fd` from a thread of its own and waits at most `seconds` for it: for the
/// last words of a run that must end now (the terminal's restore after a second Ctrl-C).
func writeWithin(_ fd: Int32, _ text: String, seconds: Double) {
    let done = DispatchSemaphore(value: 0)
    let bytes = Array(text.utf8)
    startThread("mm-last-words") {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            offset += n
        }
        done.signal()
    }
    _ = done.wait(timeout: .now() + seconds)
}
