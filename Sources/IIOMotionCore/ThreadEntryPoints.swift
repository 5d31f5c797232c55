/// What the scenario programs (`Sources/motion-scenarios`, run by the integration tests) check of
/// the library's own threads, without making an internal type public.
///
/// Nothing here is used by the library itself.
package enum ThreadEntryPoints {
    /// How many capture threads of this process have started and not yet ended (their body has
    /// returned; a joined thread has also exited).
    package static var runningCaptureThreads: Int { JoinableThread.running.load(ordering: .acquiring) }
}
