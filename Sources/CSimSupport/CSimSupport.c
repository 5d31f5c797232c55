/* The warnings we hold our C to. Set here rather than as unsafeFlags in Package.swift, which
 * SwiftPM refuses in a package others depend on by version. */
#pragma clang diagnostic warning "-Wall"
#pragma clang diagnostic warning "-Wextra"
#pragma clang diagnostic error "-Wimplicit-function-declaration"
#include "CSimSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <time.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int simsupport_mount_tmpfs(const char *target, const char *options)
{
	return mount("iio-sim", target, "tmpfs", MS_NOSUID | MS_NODEV, options) == 0 ? 0 : -errno;
}

int simsupport_bind(const char *source, const char *target, int recursive)
{
	unsigned long flags = MS_BIND | (recursive ? MS_REC : 0);
	return mount(source, target, NULL, flags, NULL) == 0 ? 0 : -errno;
}

int simsupport_umount_lazy(const char *target)
{
	return umount2(target, MNT_DETACH) == 0 ? 0 : -errno;
}

int simsupport_set_pipe_size(int fd, int bytes)
{
	int r = fcntl(fd, F_SETPIPE_SZ, bytes);
	return r >= 0 ? r : -errno;
}

int simsupport_pipe_queued(int fd)
{
	int n = 0;
	return ioctl(fd, FIONREAD, &n) == 0 ? n : -errno;
}

int simsupport_loopback_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
	int r = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		r = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	int err = r == 0 ? 0 : -errno;
	close(s);
	return err;
}

static void drop_dac_caps(void)
{
	/* The bounding set decides what an exec'd uid-0 program gets back (its file caps are "all"). */
	prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0);
	prctl(PR_CAPBSET_DROP, CAP_DAC_READ_SEARCH, 0, 0, 0);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) == 0) {
		unsigned int mask = ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
		data[0].inheritable &= mask;
		syscall(SYS_capset, &hdr, data);
	}
}

pid_t simsupport_spawn(char *const *argv, int drop_dac, int uid, int gid, const gid_t *groups, int ngroups,
		       const char *output_path)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		return pid;
	/* Child: only async-signal-safe work until exec. */
	sigset_t none;
	sigemptyset(&none);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (output_path != NULL) {
		int fd = open(output_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
	}
	if (drop_dac)
		drop_dac_caps();
	if (uid >= 0) {
		if (setgroups((size_t)(ngroups > 0 ? ngroups : 0), ngroups > 0 ? groups : NULL) != 0 ||
		    setgid((gid_t)gid) != 0 || setuid((uid_t)uid) != 0)
			_exit(126);
	}
	execvp(argv[0], argv);
	_exit(errno == ENOENT ? 127 : 126);
}

int simsupport_tcp_probe(int port)
{
	struct sockaddr_in addr;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int r = connect(s, (struct sockaddr *)&addr, sizeof(addr)) == 0 ? 0 : -errno;
	close(s);
	return r;
}

void simsupport_block_signals(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int simsupport_wait_signal(void)
{
	sigset_t set;
	int sig = 0;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	return sigwait(&set, &sig) == 0 ? sig : -1;
}

int simsupport_eventfd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return fd >= 0 ? fd : -errno;
}

int simsupport_poll_ns(struct pollfd *fds, int count, long long timeout_ns)
{
	struct timespec ts;
	if (timeout_ns >= 0) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000LL);
		ts.tv_nsec = (long)(timeout_ns % 1000000000LL);
	}
	int r = ppoll(fds, (nfds_t)count, timeout_ns >= 0 ? &ts : NULL, NULL);
	return r >= 0 ? r : -errno;
}
