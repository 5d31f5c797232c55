#ifndef IIOSHIM_SIGPIPE_GUARD_H
#define IIOSHIM_SIGPIPE_GUARD_H
/*
 * libiio's network backend writes to iiod's socket with send(..., 0): when iiod has gone away, the
 * kernel raises SIGPIPE, whose default action ends the whole process (motion-monitor died with
 * status 141 when iiod was killed mid-stream). Every shim call that may write to the socket blocks
 * SIGPIPE on the calling thread for the duration, so the call fails with EPIPE instead, and
 * consumes the signal it raised on this thread before unblocking. errno is preserved.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

typedef struct {
	sigset_t old;
	int active;
} iioshim_sigpipe_guard;

/* Set on threads that block SIGPIPE for their whole life (the capture threads, through
 * SystemSupport's blockSIGPIPEOnThisThread): the guard then costs nothing. Defined in
 * CSystemSupport (CSystemSupport.c). */
extern __thread int systemsupport_sigpipe_blocked_for_life;

static inline void iioshim_sigpipe_block(iioshim_sigpipe_guard *g)
{
	sigset_t s;
	int saved = errno;
	if (systemsupport_sigpipe_blocked_for_life) {
		g->active = 0;
		return;
	}
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	g->active = pthread_sigmask(SIG_BLOCK, &s, &g->old) == 0 && !sigismember(&g->old, SIGPIPE);
	errno = saved;
}

static inline void iioshim_sigpipe_restore(iioshim_sigpipe_guard *g)
{
	sigset_t s;
	struct timespec zero = { 0, 0 };
	int saved = errno;
	if (!g->active)
		return;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	while (sigtimedwait(&s, NULL, &zero) == SIGPIPE)
		;
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
	errno = saved;
}

/* Evaluates `expr` (of type `type`) with SIGPIPE blocked on this thread. */
#define IIOSHIM_NO_SIGPIPE(type, expr) ({ \
	iioshim_sigpipe_guard guard_; \
	iioshim_sigpipe_block(&guard_); \
	type result_ = (expr); \
	iioshim_sigpipe_restore(&guard_); \
	result_; })

/* The same for a call without a result. */
#define IIOSHIM_NO_SIGPIPE_VOID(expr) do { \
	iioshim_sigpipe_guard guard_; \
	iioshim_sigpipe_block(&guard_); \
	expr; \
	iioshim_sigpipe_restore(&guard_); } while (0)
#endif
