#ifndef CSYSTEMSUPPORT_H
#define CSYSTEMSUPPORT_H
/*
 * Per-thread settings SystemSupport needs C for: a thread-local flag that C code reads on every
 * call (CIIOShim's SIGPIPE guard), and pthread_setname_np, which needs _GNU_SOURCE (Swift's Glibc
 * module does not define it). None of this calls libiio.
 *
 * The flag `systemsupport_sigpipe_blocked_for_life` (an `int`, thread-local) is defined here and
 * declared by its C readers themselves: Swift reads it through
 * systemsupport_sigpipe_is_blocked_for_life.
 */

/* Blocks SIGPIPE on the calling thread for the rest of its life and records it in the flag, so
 * that per-call SIGPIPE guards on this thread cost nothing. Returns 1 when the mask was changed. */
int systemsupport_block_sigpipe_for_life(void);
/* Whether systemsupport_block_sigpipe_for_life succeeded on the calling thread. */
int systemsupport_sigpipe_is_blocked_for_life(void);

/* Names the calling thread (what `top -H` and debuggers show); at most 15 bytes are kept. */
void systemsupport_name_this_thread(const char *_Nonnull name);

/* Marks the calling thread as a capture thread for the rest of its life. */
void systemsupport_mark_capture_thread(void);
/* Whether the calling thread is a capture thread. */
int systemsupport_is_capture_thread(void);
#endif
