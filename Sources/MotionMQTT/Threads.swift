internal import Glibc

/// Starts `body` on a detached thread (`name` is for error messages); the caller learns of its end through its own
/// signal (the publisher's and subscriber's `done` semaphores).
/// - Returns: false when the system refused another thread (errno is set).
func startThread(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
    final class Box: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(_ name: String, _ body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
    }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Box(name, body)).toOpaque()
    let rc = pthread_create(&thread, &attributes, { arg in
        let box = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
        // A broker that closes the connection must not kill the process with SIGPIPE.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        box.body()
        return nil
    }, box)
    if rc != 0 {
        Unmanaged<Box>.fromOpaque(box).release()
        errno = rc
        return false
    }
    return true
}
