/* The warnings we hold our C to. Set here rather than as unsafeFlags in Package.swift, which
 * SwiftPM refuses in a package others depend on by version. */
#pragma clang diagnostic warning "-Wall"
#pragma clang diagnostic warning "-Wextra"
#pragma clang diagnostic error "-Wimplicit-function-declaration"
#include "CIIOShim.h"
#include "SigpipeGuard.h"
#include <iio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>

static struct iio_device *device_at(const iioshim_context *ctx, unsigned int dev)
{
	if (dev >= iio_context_get_devices_count(ctx))
		return NULL;
	return (struct iio_device *) iio_context_get_device(ctx, dev);
}

/* In C because libiio's write returns the byte count or -errno and wants the listed name. */
ssize_t iioshim_device_attr_write(const iioshim_context *ctx, unsigned int dev, const char *attr,
				  const char *value)
{
	const struct iio_device *d = device_at(ctx, dev);
	const char *name;

	if (!d)
		return -EINVAL;
	name = iio_device_find_attr(d, attr);
	if (!name)
		return -ENOENT;
	return IIOSHIM_NO_SIGPIPE(ssize_t, iio_device_attr_write(d, name, value));
}

/* In C because the files a capture must put back (scan_elements/in_accel_x_en, buffer/length,
 * trigger/current_trigger) are not listed attributes: libiio's device-attribute calls take any path
 * relative to the device folder (locally, and through iiod), which is how libiio itself reaches
 * them. An empty file (the kernel's current_trigger with none set) reads as "" here. */
ssize_t iioshim_device_path_read(const iioshim_context *ctx, unsigned int dev, const char *path,
				 char *dst, size_t len)
{
	const struct iio_device *d = device_at(ctx, dev);
	ssize_t ret;

	if (len)
		dst[0] = '\0';
	if (!d || len == 0)
		return -EINVAL;
	ret = IIOSHIM_NO_SIGPIPE(ssize_t, iio_device_attr_read(d, path, dst, len));
	if (ret == -EIO) {
		/* libiio's local backend: a file of 0 bytes. Tell it from a failing read by reading the
		 * file ourselves (locally only; over the network the error stands). */
		const char *name = iio_context_get_name(iio_device_get_context(d));
		char full[512];
		struct stat st;
		if (name && strcmp(name, "local") == 0) {
			snprintf(full, sizeof(full), "/sys/bus/iio/devices/%s/%s", iio_device_get_id(d), path);
			if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
				int fd = open(full, O_RDONLY | O_CLOEXEC);
				if (fd >= 0) {
					char c;
					ssize_t n = read(fd, &c, 1);
					close(fd);
					if (n == 0)
						return 0;
				}
			}
		}
		return ret;
	}
	if (ret < 0)
		return ret;
	if ((size_t) ret >= len)
		ret = (ssize_t) len - 1;
	dst[ret] = '\0';
	return (ssize_t) strlen(dst);
}

/* The write counterpart of iioshim_device_path_read. */
ssize_t iioshim_device_path_write(const iioshim_context *ctx, unsigned int dev, const char *path,
				  const char *value)
{
	const struct iio_device *d = device_at(ctx, dev);

	if (!d)
		return -EINVAL;
	return IIOSHIM_NO_SIGPIPE(ssize_t, iio_device_attr_write(d, path, value));
}

/* In C to keep channel pointers out of Swift. */
ssize_t iioshim_channel_attr_write(const iioshim_context *ctx, unsigned int dev, unsigned int chn,
				   const char *attr, const char *value)
{
	const struct iio_device *d = device_at(ctx, dev);
	const struct iio_channel *c;
	const char *name;

	if (!d || chn >= iio_device_get_channels_count(d))
		return -EINVAL;
	c = iio_device_get_channel(d, chn);
	name = iio_channel_find_attr(c, attr);
	if (!name)
		return -ENOENT;
	return IIOSHIM_NO_SIGPIPE(ssize_t, iio_channel_attr_write(c, name, value));
}

/* In C because it compares libiio-owned strings over the device list. */
int iioshim_device_index(const iioshim_context *ctx, const char *id)
{
	unsigned int i, n = iio_context_get_devices_count(ctx);

	for (i = 0; i < n; i++) {
		const char *did = iio_device_get_id(iio_context_get_device(ctx, i));
		if (did && strcmp(did, id) == 0)
			return (int) i;
	}
	return -ENOENT;
}

/* In C because it compares libiio-owned strings and asks iio_device_is_trigger. */
int iioshim_trigger_index(const iioshim_context *ctx, const char *name)
{
	unsigned int i, n = iio_context_get_devices_count(ctx);

	for (i = 0; i < n; i++) {
		const struct iio_device *d = iio_context_get_device(ctx, i);
		const char *dn = iio_device_get_name(d);
		if (iio_device_is_trigger(d) && dn && strcmp(dn, name) == 0)
			return (int) i;
	}
	return -ENOENT;
}

/* In C to keep device pointers out of Swift; libiio writes the trigger's name into
 * trigger/current_trigger. */
int iioshim_device_set_trigger(const iioshim_context *ctx, unsigned int dev, unsigned int trig)
{
	const struct iio_device *d = device_at(ctx, dev), *t = device_at(ctx, trig);

	if (!d || !t)
		return -EINVAL;
	return IIOSHIM_NO_SIGPIPE(int, iio_device_set_trigger(d, t));
}

/* Whether another process holds the device's node (the kernel lets one process open it: EBUSY).
 * libiio's buffer set-up writes buffer/enable = 0 before it opens the node, which would stop the
 * other process's stream and only then fail; looking first leaves that stream alone. Local
 * contexts only (over the network, iiod opens the node on its own machine). */
static int node_held_elsewhere(const iioshim_context *ctx, const struct iio_device *d)
{
	char path[256];
	const char *name = iio_context_get_name(ctx);
	if (!name || strcmp(name, "local") != 0)
		return 0;
	snprintf(path, sizeof(path), "/dev/%s", iio_device_get_id(d));
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == EBUSY;
}

/* In C because enabling channels and creating the buffer must happen together, on libiio's
 * channel objects, and the failure is reported through the thread-local errno. */
iioshim_buffer *iioshim_buffer_create(const iioshim_context *ctx, unsigned int dev,
				      const unsigned int *channels, size_t count, size_t samples,
				      unsigned int kernel_buffers, int *error)
{
	struct iio_device *d = device_at(ctx, dev);
	struct iio_buffer *buf;
	unsigned int i, n;

	*error = 0;
	if (!d || samples == 0) {
		*error = -EINVAL;
		return NULL;
	}
	n = iio_device_get_channels_count(d);
	for (i = 0; i < n; i++)
		iio_channel_disable(iio_device_get_channel(d, i));
	for (i = 0; i < count; i++) {
		if (channels[i] >= n) {
			*error = -EINVAL;
			return NULL;
		}
		iio_channel_enable(iio_device_get_channel(d, channels[i]));
	}
	if (node_held_elsewhere(ctx, d)) {
		*error = -EBUSY;
		return NULL;
	}
	/* Without mmap (mainline kernels) libiio makes buffer/length this many times `samples`. */
	if (kernel_buffers) {
		int r = iio_device_set_kernel_buffers_count(d, kernel_buffers);
		if (r < 0) {
			*error = r;
			return NULL;
		}
	}
	errno = 0;
	buf = IIOSHIM_NO_SIGPIPE(struct iio_buffer *, iio_device_create_buffer(d, samples, false));
	if (!buf)
		*error = errno ? -errno : -EIO;
	return buf;
}

/* In C so that Swift never names libiio's destroy function on a raw pointer. */
void iioshim_buffer_destroy(iioshim_buffer *buf)
{
	IIOSHIM_NO_SIGPIPE_VOID(iio_buffer_destroy(buf));
}

/* In C: the one libiio call documented as thread-safe, made from the stopping thread. */
void iioshim_buffer_cancel(iioshim_buffer *buf)
{
	IIOSHIM_NO_SIGPIPE_VOID(iio_buffer_cancel(buf));
}

/* In C because it pairs the refill with the buffer's start and step in one call. */
ssize_t iioshim_buffer_refill(iioshim_buffer *buf, const uint8_t **start, size_t *step)
{
	ssize_t n = IIOSHIM_NO_SIGPIPE(ssize_t, iio_buffer_refill(buf));

	*start = iio_buffer_start(buf);
	*step = (size_t) iio_buffer_step(buf);
	return n;
}

/* In C because libiio computes element positions from its own view of the layout. */
ssize_t iioshim_buffer_channel_offset(const iioshim_buffer *buf, const iioshim_context *ctx,
				      unsigned int dev, unsigned int chn)
{
	const struct iio_device *d = device_at(ctx, dev);
	const struct iio_channel *c;

	if (!d || chn >= iio_device_get_channels_count(d))
		return -EINVAL;
	c = iio_device_get_channel(d, chn);
	if (!iio_channel_is_enabled(c))
		return -ENOENT;
	return (ssize_t) ((const char *) iio_buffer_first(buf, c) - (const char *) iio_buffer_start(buf));
}
