#ifndef CSIMSUPPORT_H
#define CSIMSUPPORT_H
/*
 * System calls the simulator needs that Swift cannot make directly: variadic calls (fcntl, ioctl),
 * the mount API, and a fork/exec whose child must drop capabilities before exec. None of this calls
 * libiio. Every function returns 0 (or a non-negative value) on success and -errno on failure.
 */
#include <stddef.h>
#include <sys/types.h>

/* mount(2) with the flags spelled out by the caller (MS_BIND etc. are macros Swift cannot always see). */
int simsupport_mount_tmpfs(const char *_Nonnull target, const char *_Nonnull options);
int simsupport_bind(const char *_Nonnull source, const char *_Nonnull target, int recursive);
int simsupport_umount_lazy(const char *_Nonnull target);

/* fcntl(F_SETPIPE_SZ): variadic, so not importable. Returns the new capacity in bytes. */
int simsupport_set_pipe_size(int fd, int bytes);
/* ioctl(FIONREAD): bytes queued in a pipe, seen from either end. */
int simsupport_pipe_queued(int fd);
/* Brings the loopback interface up in the current network namespace (SIOCSIFFLAGS). */
int simsupport_loopback_up(void);

/*
 * fork + exec of argv[0] (PATH search), with SIGINT/SIGTERM/SIGHUP/SIGPIPE reset to default and the
 * signal mask cleared in the child. When drop_dac is non-zero the child loses CAP_DAC_OVERRIDE and
 * CAP_DAC_READ_SEARCH from its bounding, inheritable and ambient sets before exec, so that a uid-0
 * COMMAND sees file modes enforced the way kernfs enforces them on sysfs even for root.
 * When uid >= 0 the child takes that uid, gid and supplementary groups (resolved by the caller:
 * nothing that may take a lock runs between fork and exec). When output_path is non-NULL, the
 * child's stdout and stderr go to that file (appended). Returns the child's pid or -errno.
 */
pid_t simsupport_spawn(char *_Nullable const *_Nonnull argv, int drop_dac, int uid, int gid,
		       const gid_t *_Nullable groups, int ngroups, const char *_Nullable output_path);

/* 0 when something accepts TCP connections on 127.0.0.1:port, else -errno. */
int simsupport_tcp_probe(int port);

/* Blocks SIGINT, SIGTERM, SIGHUP in the calling thread (and threads it creates later); ignores SIGPIPE. */
void simsupport_block_signals(void);
/* Waits for one of the blocked signals; returns its number. */
int simsupport_wait_signal(void);

/* ppoll(2) with a timeout in nanoseconds (negative: wait forever); ppoll needs _GNU_SOURCE. */
#include <poll.h>
int simsupport_poll_ns(struct pollfd *_Nonnull fds, int count, long long timeout_ns);

/* eventfd for waking threads that block in poll(). */
int simsupport_eventfd(void);

/* The device nodes served through FUSE. */
#include "SimFuse.h"
#endif
