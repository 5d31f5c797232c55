/* The warnings we hold our C to. Set here rather than as unsafeFlags in Package.swift, which
 * SwiftPM refuses in a package others depend on by version. */
#pragma clang diagnostic warning "-Wall"
#pragma clang diagnostic warning "-Wextra"
#pragma clang diagnostic error "-Wimplicit-function-declaration"
/*
 * The simulator's IIO character devices over FUSE (see SimFuse.h for the behaviour). Speaks the raw
 * FUSE protocol of <linux/fuse.h> on /dev/fuse: no libfuse, one serving thread, one mutex.
 */
#include "SimFuse.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define ROOT_ID FUSE_ROOT_ID /* 1; node i has id i + 2 */
#define MAX_READ (128 * 1024)
#define REQUEST_BUFFER (MAX_READ + 64 * 1024)

struct parked_read {
	uint64_t unique;
	uint64_t fh;
	uint32_t size;
	struct parked_read *next;
};

struct poll_handle {
	uint64_t kh;
	struct poll_handle *next;
};

struct node {
	char name[64];
	uint32_t mode;
	uint32_t uid, gid;
	bool gone;
	int readers;
	int event_fd;
	/* The session. */
	uint64_t session;
	bool active;
	size_t scan_size, length, watermark;
	unsigned char *ring;
	size_t head, queued; /* in scans */
	long stale_unread;
	int enable_attr;
	struct timespec enable_mtime;
	struct parked_read *reads;
	struct poll_handle *polls;
	bool events_only; /* no buffer: the node opens, reads fail with EINVAL, poll says ready */
};

/* An attribute file (buffer/enable, scan element _en, sampling_frequency, ...): its contents
 * live here, and a write is the driver's store(), answered synchronously. */
struct attr {
	char name[32];
	uint32_t mode;
	uint32_t uid, gid;
	bool gone;
	bool queued; /* in the written queue */
	char value[SIMFUSE_ATTR_MAX];
	size_t len; /* of value, without the newline the file shows */
	struct timespec mtime;
	int read_error; /* > 0: reads fail with this errno (the driver's show() refuses) */
	bool trailing_nul; /* the file ends "\n\0", as show() functions that count the NUL */
};

struct handle {
	uint64_t fh;
	int node; /* >= 0: a device node; < 0: attribute -1 - node */
	struct handle *next;
};

struct simfuse {
	int fd;
	char mountpoint[512];
	pthread_t thread;
	pthread_mutex_t lock;
	int count;
	struct node *nodes;
	int attr_count;
	struct attr *attrs;
	simfuse_store_fn store;
	void *store_context;
	int written_fd;
	int *written; /* attribute indices written since the last simfuse_take_written, in order */
	int nwritten;
	struct handle *handles;
	uint64_t next_fh;
	volatile int stopping;
};

/* MARK: Replies */

static void reply(simfuse *fs, uint64_t unique, int error, const void *body, size_t size)
{
	struct fuse_out_header out = { .len = (uint32_t)(sizeof(out) + (error ? 0 : size)), .error = error, .unique = unique };
	struct iovec iov[2] = { { &out, sizeof(out) }, { (void *)body, error ? 0 : size } };
	/* ENOENT here means the request was interrupted and the kernel forgot it: nothing to do. */
	(void)!writev(fs->fd, iov, (body && size && !error) ? 2 : 1);
}

static void notify_poll(simfuse *fs, uint64_t kh)
{
	struct fuse_out_header out = { .len = sizeof(out) + sizeof(struct fuse_notify_poll_wakeup_out),
				       .error = FUSE_NOTIFY_POLL, .unique = 0 };
	struct fuse_notify_poll_wakeup_out body = { .kh = kh };
	struct iovec iov[2] = { { &out, sizeof(out) }, { &body, sizeof(body) } };
	(void)!writev(fs->fd, iov, 2);
}

static void signal_event(struct node *n)
{
	uint64_t one = 1;
	(void)!write(n->event_fd, &one, sizeof(one));
}

static void fill_attr(simfuse *fs, uint64_t id, struct fuse_attr *a)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	memset(a, 0, sizeof(*a));
	a->ino = id;
	a->atime = a->mtime = a->ctime = (uint64_t)now.tv_sec;
	a->atimensec = a->mtimensec = a->ctimensec = (uint32_t)now.tv_nsec;
	a->blksize = 4096;
	if (id == ROOT_ID) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
		return;
	}
	if (id >= (uint64_t)fs->count + 2) {
		struct attr *t = &fs->attrs[id - 2 - (uint64_t)fs->count];
		a->mode = S_IFREG | (t->mode & 07777);
		a->nlink = 1;
		a->uid = t->uid;
		a->gid = t->gid;
		a->size = 4096; /* as sysfs says of every attribute */
		a->mtime = a->ctime = (uint64_t)t->mtime.tv_sec;
		a->mtimensec = a->ctimensec = (uint32_t)t->mtime.tv_nsec;
		return;
	}
	struct node *n = &fs->nodes[id - 2];
	a->mode = S_IFREG | (n->mode & 07777);
	a->nlink = 1;
	a->uid = n->uid;
	a->gid = n->gid;
}

static struct attr *attr_of(simfuse *fs, uint64_t id)
{
	if (id < (uint64_t)fs->count + 2 || id >= (uint64_t)fs->count + 2 + (uint64_t)fs->attr_count)
		return NULL;
	return &fs->attrs[id - 2 - (uint64_t)fs->count];
}

static void set_value(struct attr *t, const char *value, size_t len)
{
	if (len > sizeof(t->value) - 1)
		len = sizeof(t->value) - 1;
	memcpy(t->value, value, len);
	t->value[len] = '\0';
	t->len = len;
	clock_gettime(CLOCK_REALTIME, &t->mtime);
}

static struct node *node_of(simfuse *fs, uint64_t id)
{
	if (id < 2 || id >= (uint64_t)fs->count + 2)
		return NULL;
	return &fs->nodes[id - 2];
}

static struct handle *handle_of(simfuse *fs, uint64_t fh)
{
	for (struct handle *h = fs->handles; h; h = h->next)
		if (h->fh == fh)
			return h;
	return NULL;
}

/* MARK: The kfifo (lock held) */

/* A session is stale once its enable file was written after the session was decided. */
static void check_stale(simfuse *fs, struct node *n)
{
	if (!n->active)
		return;
	if (n->enable_attr >= 0 && n->enable_attr < fs->attr_count) {
		const struct timespec *m = &fs->attrs[n->enable_attr].mtime;
		if (m->tv_sec == n->enable_mtime.tv_sec && m->tv_nsec == n->enable_mtime.tv_nsec)
			return;
	}
	n->stale_unread += (long)n->queued;
	n->queued = 0;
	n->active = false;
}

static size_t take(struct node *n, unsigned char *out, size_t max_scans)
{
	size_t k = max_scans < n->queued ? max_scans : n->queued;
	for (size_t i = 0; i < k; i++) {
		memcpy(out + i * n->scan_size, n->ring + n->head * n->scan_size, n->scan_size);
		n->head = (n->head + 1) % n->length;
	}
	n->queued -= k;
	return k;
}

/* Scans a read of `size` bytes waits for before it returns (the kernel's iio_buffer_ready). */
static size_t wanted(struct node *n, uint32_t size)
{
	size_t asked = n->scan_size ? size / n->scan_size : 0;
	if (!n->active)
		return 1;
	return asked < n->watermark ? asked : n->watermark;
}

/* Answers the parked reads and pollers that can be answered now. */
static void wake(simfuse *fs, struct node *n)
{
	check_stale(fs, n);
	struct parked_read **p = &n->reads;
	while (*p) {
		struct parked_read *r = *p;
		if (n->gone) {
			reply(fs, r->unique, -ENODEV, NULL, 0);
		} else if (n->scan_size && n->queued > 0 && n->queued >= wanted(n, r->size)) {
			unsigned char *buf = malloc(r->size);
			if (!buf) {
				reply(fs, r->unique, -ENOMEM, NULL, 0);
			} else {
				size_t k = take(n, buf, r->size / n->scan_size);
				reply(fs, r->unique, 0, buf, k * n->scan_size);
				free(buf);
				signal_event(n);
			}
		} else {
			p = &r->next;
			continue;
		}
		*p = r->next;
		free(r);
	}
	bool ready = n->gone || (n->queued > 0 && n->queued >= (n->active ? n->watermark : 1));
	if (!ready)
		return;
	while (n->polls) {
		struct poll_handle *h = n->polls;
		n->polls = h->next;
		notify_poll(fs, h->kh);
		free(h);
	}
}

/* MARK: Requests */

static void do_lookup(simfuse *fs, struct fuse_in_header *in, const char *name)
{
	if (in->nodeid != ROOT_ID) {
		reply(fs, in->unique, -ENOTDIR, NULL, 0);
		return;
	}
	for (int i = 0; i < fs->count + fs->attr_count; i++) {
		bool is_node = i < fs->count;
		const char *n = is_node ? fs->nodes[i].name : fs->attrs[i - fs->count].name;
		bool gone = is_node ? fs->nodes[i].gone : fs->attrs[i - fs->count].gone;
		if (strcmp(n, name) != 0 || gone)
			continue;
		struct fuse_entry_out e;
		memset(&e, 0, sizeof(e));
		e.nodeid = (uint64_t)i + 2;
		e.generation = 1;
		fill_attr(fs, e.nodeid, &e.attr);
		reply(fs, in->unique, 0, &e, sizeof(e));
		return;
	}
	reply(fs, in->unique, -ENOENT, NULL, 0);
}

static void do_getattr(simfuse *fs, struct fuse_in_header *in)
{
	if (in->nodeid != ROOT_ID && !node_of(fs, in->nodeid) && !attr_of(fs, in->nodeid)) {
		reply(fs, in->unique, -ENOENT, NULL, 0);
		return;
	}
	struct fuse_attr_out out;
	memset(&out, 0, sizeof(out));
	fill_attr(fs, in->nodeid, &out.attr);
	reply(fs, in->unique, 0, &out, sizeof(out));
}

static void do_setattr(simfuse *fs, struct fuse_in_header *in, const struct fuse_setattr_in *s)
{
	struct attr *t = attr_of(fs, in->nodeid);
	if (t) {
		/* Modes and owners as udev sets them; a truncation (O_TRUNC) means nothing to sysfs. */
		if (s->valid & FATTR_MODE)
			t->mode = s->mode & 07777;
		if (s->valid & FATTR_UID)
			t->uid = s->uid;
		if (s->valid & FATTR_GID)
			t->gid = s->gid;
		struct fuse_attr_out out;
		memset(&out, 0, sizeof(out));
		fill_attr(fs, in->nodeid, &out.attr);
		reply(fs, in->unique, 0, &out, sizeof(out));
		return;
	}
	struct node *n = node_of(fs, in->nodeid);
	if (!n) {
		reply(fs, in->unique, in->nodeid == ROOT_ID ? -EPERM : -ENOENT, NULL, 0);
		return;
	}
	/* The kernel has already checked that the caller may (default_permissions). */
	if (s->valid & FATTR_MODE)
		n->mode = s->mode & 07777;
	if (s->valid & FATTR_UID)
		n->uid = s->uid;
	if (s->valid & FATTR_GID)
		n->gid = s->gid;
	struct fuse_attr_out out;
	memset(&out, 0, sizeof(out));
	fill_attr(fs, in->nodeid, &out.attr);
	reply(fs, in->unique, 0, &out, sizeof(out));
}

static struct handle *new_handle(simfuse *fs, int node)
{
	struct handle *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->fh = ++fs->next_fh;
	h->node = node;
	h->next = fs->handles;
	fs->handles = h;
	return h;
}

static void do_open(simfuse *fs, struct fuse_in_header *in)
{
	struct attr *t = attr_of(fs, in->nodeid);
	if (t) {
		if (t->gone) {
			reply(fs, in->unique, -ENOENT, NULL, 0);
			return;
		}
		struct handle *h = new_handle(fs, -1 - (int)(in->nodeid - 2 - (uint64_t)fs->count));
		if (!h) {
			reply(fs, in->unique, -ENOMEM, NULL, 0);
			return;
		}
		struct fuse_open_out out = { .fh = h->fh, .open_flags = FOPEN_DIRECT_IO };
		reply(fs, in->unique, 0, &out, sizeof(out));
		return;
	}
	struct node *n = node_of(fs, in->nodeid);
	if (!n || n->gone) {
		reply(fs, in->unique, in->nodeid == ROOT_ID ? -EISDIR : -ENODEV, NULL, 0);
		return;
	}
	if (n->readers > 0) {
		reply(fs, in->unique, -EBUSY, NULL, 0); /* iio_chrdev_open: one user at a time */
		return;
	}
	struct handle *h = new_handle(fs, (int)(in->nodeid - 2));
	if (!h) {
		reply(fs, in->unique, -ENOMEM, NULL, 0);
		return;
	}
	n->readers++;
	struct fuse_open_out out = { .fh = h->fh, .open_flags = FOPEN_DIRECT_IO | FOPEN_NONSEEKABLE };
	reply(fs, in->unique, 0, &out, sizeof(out));
	signal_event(n);
}

static void do_release(simfuse *fs, struct fuse_in_header *in, const struct fuse_release_in *r)
{
	struct handle **p = &fs->handles;
	while (*p && (*p)->fh != r->fh)
		p = &(*p)->next;
	if (*p) {
		struct handle *h = *p;
		*p = h->next;
		if (h->node >= 0) {
			struct node *n = &fs->nodes[h->node];
			n->readers--;
			signal_event(n);
		}
		free(h);
	}
	reply(fs, in->unique, 0, NULL, 0);
}

static void read_attr(simfuse *fs, struct fuse_in_header *in, struct attr *t, const struct fuse_read_in *r)
{
	char text[SIMFUSE_ATTR_MAX + 1];
	size_t len = t->len;
	memcpy(text, t->value, len);
	if (len) /* sysfs shows "value\n"; the kernel's empty current_trigger is an empty file */
		text[len++] = '\n';
	if (len && t->trailing_nul)
		text[len++] = '\0';
	if (t->gone) {
		reply(fs, in->unique, -ENODEV, NULL, 0);
		return;
	}
	if (t->read_error > 0) {
		reply(fs, in->unique, -t->read_error, NULL, 0);
		return;
	}
	if (r->offset >= len) {
		reply(fs, in->unique, 0, text, 0);
		return;
	}
	size_t k = len - r->offset < r->size ? len - r->offset : r->size;
	reply(fs, in->unique, 0, text + r->offset, k);
}

static void queue_written(simfuse *fs, int index)
{
	struct attr *t = &fs->attrs[index];
	if (!t->queued) {
		t->queued = true;
		fs->written[fs->nwritten++] = index;
	}
	uint64_t one = 1;
	(void)!write(fs->written_fd, &one, sizeof(one));
}

static void do_write(simfuse *fs, struct fuse_in_header *in, const struct fuse_write_in *w)
{
	struct handle *h = handle_of(fs, w->fh);
	if (!h) {
		reply(fs, in->unique, -EBADF, NULL, 0);
		return;
	}
	if (h->node >= 0) {
		reply(fs, in->unique, -EINVAL, NULL, 0); /* an input buffer */
		return;
	}
	int index = -1 - h->node;
	struct attr *t = &fs->attrs[index];
	if (t->gone) {
		reply(fs, in->unique, -ENODEV, NULL, 0);
		return;
	}
	/* What the driver's store() sees: the bytes written, up to a NUL (libiio writes one). */
	const char *data = (const char *)(w + 1);
	size_t len = w->size;
	if (len > SIMFUSE_ATTR_MAX - 1)
		len = SIMFUSE_ATTR_MAX - 1;
	char value[SIMFUSE_ATTR_MAX];
	memcpy(value, data, len);
	value[len] = '\0';
	char out[SIMFUSE_ATTR_MAX];
	out[0] = '\0';
	int r = fs->store ? fs->store(fs->store_context, index, value, strlen(value), out, sizeof(out)) : 0;
	if (r < 0) {
		reply(fs, in->unique, r, NULL, 0);
		return;
	}
	if (fs->store)
		set_value(t, out, strnlen(out, sizeof(out)));
	else
		set_value(t, value, strcspn(value, "\n"));
	queue_written(fs, index);
	struct fuse_write_out o = { .size = w->size };
	reply(fs, in->unique, 0, &o, sizeof(o));
}

static void do_read(simfuse *fs, struct fuse_in_header *in, const struct fuse_read_in *r)
{
	struct handle *h = handle_of(fs, r->fh);
	if (!h) {
		reply(fs, in->unique, -EBADF, NULL, 0);
		return;
	}
	if (h->node < 0) {
		read_attr(fs, in, &fs->attrs[-1 - h->node], r);
		return;
	}
	struct node *n = &fs->nodes[h->node];
	if (n->gone) {
		reply(fs, in->unique, -ENODEV, NULL, 0);
		return;
	}
	if (n->events_only) {
		reply(fs, in->unique, -EINVAL, NULL, 0); /* iio_event_fileops: no read */
		return;
	}
	check_stale(fs, n);
	if (n->scan_size && r->size < n->scan_size) {
		reply(fs, in->unique, -EINVAL, NULL, 0); /* smaller than one scan */
		return;
	}
	if (n->scan_size && n->queued > 0 && (n->queued >= wanted(n, r->size) || (r->flags & O_NONBLOCK))) {
		unsigned char *buf = malloc(r->size);
		if (!buf) {
			reply(fs, in->unique, -ENOMEM, NULL, 0);
			return;
		}
		size_t k = take(n, buf, r->size / n->scan_size);
		reply(fs, in->unique, 0, buf, k * n->scan_size);
		free(buf);
		signal_event(n);
		return;
	}
	if (r->flags & O_NONBLOCK) {
		reply(fs, in->unique, -EAGAIN, NULL, 0);
		return;
	}
	struct parked_read *p = calloc(1, sizeof(*p));
	if (!p) {
		reply(fs, in->unique, -ENOMEM, NULL, 0);
		return;
	}
	*p = (struct parked_read){ .unique = in->unique, .fh = r->fh, .size = r->size, .next = n->reads };
	n->reads = p;
}

static void do_poll(simfuse *fs, struct fuse_in_header *in, const struct fuse_poll_in *q)
{
	struct handle *h = handle_of(fs, q->fh);
	if (!h) {
		reply(fs, in->unique, -EBADF, NULL, 0);
		return;
	}
	if (h->node < 0) { /* sysfs attributes are always readable */
		struct fuse_poll_out out = { .revents = POLLIN | POLLRDNORM };
		reply(fs, in->unique, 0, &out, sizeof(out));
		return;
	}
	struct node *n = &fs->nodes[h->node];
	check_stale(fs, n);
	struct fuse_poll_out out = { 0 };
	/* After unregistering, the kernel's poll reports nothing (reads then fail with ENODEV). */
	if (!n->gone && n->queued > 0 && n->queued >= (n->active ? n->watermark : 1))
		out.revents = POLLIN | POLLRDNORM;
	if (!n->gone && n->events_only) /* no poll in iio_event_fileops: the VFS's default mask */
		out.revents = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM;
	if (!out.revents && !n->gone && (q->flags & FUSE_POLL_SCHEDULE_NOTIFY)) {
		bool known = false;
		for (struct poll_handle *p = n->polls; p; p = p->next)
			known |= p->kh == q->kh;
		struct poll_handle *p = known ? NULL : calloc(1, sizeof(*p));
		if (p) {
			p->kh = q->kh;
			p->next = n->polls;
			n->polls = p;
		}
	}
	reply(fs, in->unique, 0, &out, sizeof(out));
}

static void do_interrupt(simfuse *fs, const struct fuse_interrupt_in *i)
{
	for (int k = 0; k < fs->count; k++) {
		for (struct parked_read **p = &fs->nodes[k].reads; *p; p = &(*p)->next) {
			if ((*p)->unique != i->unique)
				continue;
			struct parked_read *r = *p;
			*p = r->next;
			reply(fs, r->unique, -EINTR, NULL, 0);
			free(r);
			return;
		}
	}
}

static void do_init(simfuse *fs, struct fuse_in_header *in, const struct fuse_init_in *i)
{
	struct fuse_init_out out;
	memset(&out, 0, sizeof(out));
	out.major = FUSE_KERNEL_VERSION;
	out.minor = i->minor < FUSE_KERNEL_MINOR_VERSION ? i->minor : FUSE_KERNEL_MINOR_VERSION;
	out.max_readahead = i->max_readahead;
	out.max_write = 4096;
	out.max_background = 16;
	out.congestion_threshold = 12;
	out.time_gran = 1;
	size_t size = sizeof(out);
	if (out.minor < 5)
		size = FUSE_COMPAT_INIT_OUT_SIZE;
	else if (out.minor < 23)
		size = FUSE_COMPAT_22_INIT_OUT_SIZE;
	reply(fs, in->unique, 0, &out, size);
}

static void handle_request(simfuse *fs, unsigned char *buf, ssize_t len)
{
	struct fuse_in_header *in = (struct fuse_in_header *)buf;
	if (len < (ssize_t)sizeof(*in) || (ssize_t)in->len > len)
		return;
	void *arg = buf + sizeof(*in);
	pthread_mutex_lock(&fs->lock);
	switch (in->opcode) {
	case FUSE_INIT: do_init(fs, in, arg); break;
	case FUSE_LOOKUP: do_lookup(fs, in, arg); break;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET: break; /* no reply */
	case FUSE_GETATTR: do_getattr(fs, in); break;
	case FUSE_SETATTR: do_setattr(fs, in, arg); break;
	case FUSE_OPEN: do_open(fs, in); break;
	case FUSE_READ: do_read(fs, in, arg); break;
	case FUSE_WRITE: do_write(fs, in, arg); break;
	case FUSE_POLL: do_poll(fs, in, arg); break;
	case FUSE_FLUSH: reply(fs, in->unique, 0, NULL, 0); break;
	case FUSE_RELEASE: do_release(fs, in, arg); break;
	case FUSE_INTERRUPT: do_interrupt(fs, arg); break; /* no reply of its own */
	case FUSE_DESTROY: reply(fs, in->unique, 0, NULL, 0); break;
	default: reply(fs, in->unique, -ENOSYS, NULL, 0); break;
	}
	pthread_mutex_unlock(&fs->lock);
}

static void *serve(void *arg)
{
	simfuse *fs = arg;
	unsigned char *buf = malloc(REQUEST_BUFFER);
	if (!buf)
		return NULL;
	/* Cancellable only while waiting for a request, never with the lock held. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (!fs->stopping) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		ssize_t n = read(fs->fd, buf, REQUEST_BUFFER);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (n < 0 && (errno == EINTR || errno == ENOENT || errno == EAGAIN))
			continue;
		if (n <= 0)
			break; /* ENODEV: unmounted */
		handle_request(fs, buf, n);
	}
	free(buf);
	return NULL;
}

/* MARK: The simulator's side */

simfuse *simfuse_start(const char *mountpoint, const char *const *names, int count, int attr_count,
			simfuse_store_fn store, void *store_context, int *error)
{
	simfuse *fs = calloc(1, sizeof(*fs));
	struct node *nodes = calloc((size_t)(count > 0 ? count : 1), sizeof(*nodes));
	struct attr *attrs = calloc((size_t)(attr_count > 0 ? attr_count : 1), sizeof(*attrs));
	int *written = calloc((size_t)(attr_count > 0 ? attr_count : 1), sizeof(*written));
	if (!fs || !nodes || !attrs || !written) {
		free(fs);
		free(nodes);
		free(attrs);
		free(written);
		*error = -ENOMEM;
		return NULL;
	}
	fs->nodes = nodes;
	fs->count = count;
	fs->attrs = attrs;
	fs->attr_count = attr_count;
	fs->written = written;
	fs->store = store;
	fs->store_context = store_context;
	fs->written_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	for (int i = 0; i < attr_count; i++) {
		snprintf(attrs[i].name, sizeof(attrs[i].name), "attr%d", i);
		attrs[i].mode = 0444;
		clock_gettime(CLOCK_REALTIME, &attrs[i].mtime);
	}
	/* Recursive: the store callback, run on the serving thread with the lock held, reads and
	 * sets other attributes through the public calls. */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&fs->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	for (int i = 0; i < count; i++) {
		snprintf(nodes[i].name, sizeof(nodes[i].name), "%s", names[i]);
		nodes[i].mode = 0600;
		nodes[i].event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	snprintf(fs->mountpoint, sizeof(fs->mountpoint), "%s", mountpoint);
	fs->fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fs->fd < 0) {
		*error = -errno;
		goto fail;
	}
	char options[256];
	snprintf(options, sizeof(options),
		 "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions,max_read=%d", fs->fd,
		 MAX_READ);
	if (mount("iio-sim", mountpoint, "fuse", MS_NOSUID | MS_NODEV, options) != 0) {
		*error = -errno;
		goto fail;
	}
	if (pthread_create(&fs->thread, NULL, serve, fs) != 0) {
		*error = -EAGAIN;
		umount2(mountpoint, MNT_DETACH);
		goto fail;
	}
	return fs;
fail:
	if (fs->fd >= 0)
		close(fs->fd);
	for (int i = 0; i < count; i++)
		close(nodes[i].event_fd);
	close(fs->written_fd);
	free(nodes);
	free(attrs);
	free(written);
	free(fs);
	return NULL;
}

void simfuse_stop(simfuse *fs)
{
	fs->stopping = 1;
	umount2(fs->mountpoint, MNT_DETACH);
	/* The thread waits in read(), where it is cancellable; the buffer it owns leaks once. */
	pthread_cancel(fs->thread);
	pthread_join(fs->thread, NULL);
	close(fs->fd);
	for (int i = 0; i < fs->count; i++) {
		close(fs->nodes[i].event_fd);
		free(fs->nodes[i].ring);
		while (fs->nodes[i].reads) {
			struct parked_read *r = fs->nodes[i].reads;
			fs->nodes[i].reads = r->next;
			free(r);
		}
		while (fs->nodes[i].polls) {
			struct poll_handle *p = fs->nodes[i].polls;
			fs->nodes[i].polls = p->next;
			free(p);
		}
	}
	while (fs->handles) {
		struct handle *h = fs->handles;
		fs->handles = h->next;
		free(h);
	}
	pthread_mutex_destroy(&fs->lock);
	close(fs->written_fd);
	free(fs->nodes);
	free(fs->attrs);
	free(fs->written);
	free(fs);
}

int simfuse_session_begin(simfuse *fs, int node, uint64_t session, size_t scan_size, size_t length,
			  size_t watermark, int enable_attr, int64_t mtime_sec, int64_t mtime_nsec)
{
	if (node < 0 || node >= fs->count || scan_size == 0 || length == 0)
		return -EINVAL;
	unsigned char *ring = malloc(scan_size * length);
	if (!ring)
		return -ENOMEM;
	pthread_mutex_lock(&fs->lock);
	struct node *n = &fs->nodes[node];
	free(n->ring);
	n->ring = ring;
	n->scan_size = scan_size;
	n->length = length;
	n->watermark = watermark < 1 ? 1 : (watermark > length ? length : watermark);
	n->head = n->queued = 0;
	n->stale_unread = 0;
	n->session = session;
	n->enable_attr = enable_attr;
	n->enable_mtime.tv_sec = (time_t)mtime_sec;
	n->enable_mtime.tv_nsec = (long)mtime_nsec;
	n->active = true;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

long simfuse_session_end(simfuse *fs, int node, uint64_t session)
{
	if (node < 0 || node >= fs->count)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	struct node *n = &fs->nodes[node];
	if (n->session != session) {
		pthread_mutex_unlock(&fs->lock);
		return -ESTALE;
	}
	long unread = n->stale_unread + (long)n->queued;
	n->queued = 0;
	n->stale_unread = 0;
	n->active = false;
	pthread_mutex_unlock(&fs->lock);
	return unread;
}

long simfuse_push(simfuse *fs, int node, uint64_t session, const void *scans, long count)
{
	if (node < 0 || node >= fs->count || count < 0)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	struct node *n = &fs->nodes[node];
	check_stale(fs, n);
	if (!n->active || n->gone || n->session != session) {
		pthread_mutex_unlock(&fs->lock);
		return -ESTALE;
	}
	long fitted = 0;
	const unsigned char *src = scans;
	while (fitted < count && n->queued < n->length) {
		size_t tail = (n->head + n->queued) % n->length;
		memcpy(n->ring + tail * n->scan_size, src + (size_t)fitted * n->scan_size, n->scan_size);
		n->queued++;
		fitted++;
	}
	if (fitted > 0)
		wake(fs, n);
	pthread_mutex_unlock(&fs->lock);
	return fitted;
}

long simfuse_queued(simfuse *fs, int node)
{
	if (node < 0 || node >= fs->count)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	long q = (long)fs->nodes[node].queued;
	pthread_mutex_unlock(&fs->lock);
	return q;
}

int simfuse_readers(simfuse *fs, int node)
{
	if (node < 0 || node >= fs->count)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	int r = fs->nodes[node].readers;
	pthread_mutex_unlock(&fs->lock);
	return r;
}

int simfuse_event_fd(simfuse *fs, int node)
{
	return node >= 0 && node < fs->count ? fs->nodes[node].event_fd : -EINVAL;
}

void simfuse_unplug(simfuse *fs, int node)
{
	if (node < 0 || node >= fs->count)
		return;
	pthread_mutex_lock(&fs->lock);
	struct node *n = &fs->nodes[node];
	n->gone = true;
	n->active = false;
	n->queued = 0;
	wake(fs, n);
	pthread_mutex_unlock(&fs->lock);
}

/* MARK: Attributes */

int simfuse_attr_get(simfuse *fs, int attr, char *dst, size_t cap)
{
	if (attr < 0 || attr >= fs->attr_count || cap == 0)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	struct attr *t = &fs->attrs[attr];
	size_t k = t->len < cap - 1 ? t->len : cap - 1;
	memcpy(dst, t->value, k);
	dst[k] = '\0';
	int gone = t->gone;
	pthread_mutex_unlock(&fs->lock);
	return gone ? -ENOENT : (int)k;
}

int simfuse_attr_set(simfuse *fs, int attr, const char *value)
{
	if (attr < 0 || attr >= fs->attr_count)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	set_value(&fs->attrs[attr], value, strlen(value));
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

int simfuse_attr_set_mode(simfuse *fs, int attr, uint32_t mode)
{
	if (attr < 0 || attr >= fs->attr_count)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	fs->attrs[attr].mode = mode & 07777;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

int simfuse_attr_set_read_error(simfuse *fs, int attr, int error)
{
	if (attr < 0 || attr >= fs->attr_count)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	fs->attrs[attr].read_error = error;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

int simfuse_attr_set_trailing_nul(simfuse *fs, int attr, int on)
{
	if (attr < 0 || attr >= fs->attr_count)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	fs->attrs[attr].trailing_nul = on != 0;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

int simfuse_node_set_events_only(simfuse *fs, int node)
{
	if (node < 0 || node >= fs->count)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	fs->nodes[node].events_only = true;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

void simfuse_attr_unplug(simfuse *fs, int attr)
{
	if (attr < 0 || attr >= fs->attr_count)
		return;
	pthread_mutex_lock(&fs->lock);
	fs->attrs[attr].gone = true;
	pthread_mutex_unlock(&fs->lock);
}

int simfuse_written_fd(simfuse *fs)
{
	return fs->written_fd;
}

int simfuse_take_written(simfuse *fs, int *attrs, int max)
{
	uint64_t sink;
	(void)!read(fs->written_fd, &sink, sizeof(sink));
	pthread_mutex_lock(&fs->lock);
	int k = fs->nwritten < max ? fs->nwritten : max;
	for (int i = 0; i < k; i++) {
		attrs[i] = fs->written[i];
		fs->attrs[attrs[i]].queued = false;
	}
	memmove(fs->written, fs->written + k, (size_t)(fs->nwritten - k) * sizeof(int));
	fs->nwritten -= k;
	if (fs->nwritten > 0) {
		uint64_t one = 1;
		(void)!write(fs->written_fd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&fs->lock);
	return k;
}
