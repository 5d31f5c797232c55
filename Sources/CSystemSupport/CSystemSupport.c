/* The warnings we hold our C to. Set here rather than as unsafeFlags in Package.swift, which
 * SwiftPM refuses in a package others depend on by version. */
#pragma clang diagnostic warning "-Wall"
#pragma clang diagnostic warning "-Wextra"
#pragma clang diagnostic error "-Wimplicit-function-declaration"
#include "CSystemSupport.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

/* Read by CIIOShim's SigpipeGuard.h, which declares it. */
__thread int systemsupport_sigpipe_blocked_for_life;
static __thread int capture_thread;

int systemsupport_block_sigpipe_for_life(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	systemsupport_sigpipe_blocked_for_life = pthread_sigmask(SIG_BLOCK, &s, NULL) == 0;
	return systemsupport_sigpipe_blocked_for_life;
}

int systemsupport_sigpipe_is_blocked_for_life(void)
{
	return systemsupport_sigpipe_blocked_for_life;
}

void systemsupport_name_this_thread(const char *name)
{
	char buf[16];
	snprintf(buf, sizeof(buf), "%s", name);
	pthread_setname_np(pthread_self(), buf);
}

void systemsupport_mark_capture_thread(void)
{
	capture_thread = 1;
}

int systemsupport_is_capture_thread(void)
{
	return capture_thread;
}
