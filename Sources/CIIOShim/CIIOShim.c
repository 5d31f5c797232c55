/* The warnings we hold our C to. Set here rather than as unsafeFlags in Package.swift, which
 * SwiftPM refuses in a package others depend on by version. */
#pragma clang diagnostic warning "-Wall"
#pragma clang diagnostic warning "-Wextra"
#pragma clang diagnostic error "-Wimplicit-function-declaration"
#include "CIIOShim.h"
#include "SigpipeGuard.h"
#include <iio.h>
#include <errno.h>
#include <string.h>

/* In C because iio_library_get_version fills out-parameters including a char buffer. */
int iioshim_library_version(void)
{
	unsigned int major = 0, minor = 0;
	char tag[8];
	iio_library_get_version(&major, &minor, tag);
	return (int)(major * 100 + minor);
}

/* In C because libiio's iio_strerror fills a caller buffer and is the thread-safe way to name an
 * errno (strerror() is not guaranteed thread-safe). */
void iioshim_strerror(int err, char *dst, size_t len)
{
	if (len == 0)
		return;
	iio_strerror(err, dst, len);
	dst[len - 1] = '\0';
}

/* In C because the failure is reported through the thread-local errno, which must be read
 * immediately after the call, before Swift's runtime can touch it. */
iioshim_context *iioshim_context_create(const char *uri, int *error)
{
	struct iio_context *ctx;

	errno = 0;
	ctx = IIOSHIM_NO_SIGPIPE(struct iio_context *, iio_create_context_from_uri(uri));
	if (!ctx)
		*error = errno ? -errno : -EIO;
	else
		*error = 0;
	return ctx;
}

/* In C so that Swift never names libiio's destroy function on a raw pointer it doesn't own. */
void iioshim_context_destroy(iioshim_context *ctx)
{
	IIOSHIM_NO_SIGPIPE_VOID(iio_context_destroy(ctx));
}

/* In C to keep the libiio call (and its __check_ret) in one place. */
int iioshim_context_set_timeout(iioshim_context *ctx, unsigned int timeout_ms)
{
	return IIOSHIM_NO_SIGPIPE(int, iio_context_set_timeout(ctx, timeout_ms));
}

/* In C because it returns a libiio-owned string. */
const char *iioshim_context_name(const iioshim_context *ctx)
{
	const char *name = iio_context_get_name(ctx);
	return name ? name : "";
}

/* In C to keep device pointers out of Swift. */
unsigned int iioshim_device_count(const iioshim_context *ctx)
{
	return iio_context_get_devices_count(ctx);
}

static const struct iio_device *device_at(const iioshim_context *ctx, unsigned int dev)
{
	if (dev >= iio_context_get_devices_count(ctx))
		return NULL;
	return iio_context_get_device(ctx, dev);
}

static const struct iio_channel *channel_at(const iioshim_context *ctx, unsigned int dev,
					    unsigned int chn)
{
	const struct iio_device *d = device_at(ctx, dev);
	if (!d || chn >= iio_device_get_channels_count(d))
		return NULL;
	return iio_device_get_channel(d, chn);
}

/* Copies a NUL-terminated libiio result into dst and returns its length. libiio's local backend
 * returns the byte count INCLUDING the NUL (it overwrites the last byte, normally the newline),
 * the network backend may not terminate at all; normalise both. */
static ssize_t finish_read(ssize_t ret, char *dst, size_t len)
{
	if (ret < 0) {
		if (len)
			dst[0] = '\0';
		return ret;
	}
	if ((size_t) ret >= len)
		ret = (ssize_t) len - 1;
	dst[ret] = '\0';
	return (ssize_t) strlen(dst);
}

/* In C because it gathers several libiio getters (and walks channels for scan elements) into one
 * plain struct, so Swift never holds an iio_device pointer. */
int iioshim_device_describe(const iioshim_context *ctx, unsigned int dev, iioshim_device_desc *out)
{
	const struct iio_device *d = device_at(ctx, dev);
	unsigned int i, n;

	if (!d)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->id = iio_device_get_id(d);
	out->name = iio_device_get_name(d);
	out->label = iio_device_get_label(d);
	out->is_trigger = iio_device_is_trigger(d);
	n = iio_device_get_channels_count(d);
	out->channel_count = n;
	out->can_buffer = iio_device_get_buffer_attrs_count(d) > 0;
	for (i = 0; i < n && !out->can_buffer; i++)
		if (iio_channel_is_scan_element(iio_device_get_channel(d, i)))
			out->can_buffer = true;
	return 0;
}

/* In C to keep device pointers out of Swift. */
bool iioshim_device_has_attr(const iioshim_context *ctx, unsigned int dev, const char *attr)
{
	const struct iio_device *d = device_at(ctx, dev);
	return d && iio_device_find_attr(d, attr) != NULL;
}

/* In C because it fills a caller buffer and must normalise libiio's length/NUL conventions. It
 * refuses unlisted names: the local backend would otherwise read any file in the device
 * directory, and the network backend would not, so results would depend on the backend. */
ssize_t iioshim_device_attr_read(const iioshim_context *ctx, unsigned int dev, const char *attr,
				 char *dst, size_t len)
{
	const struct iio_device *d = device_at(ctx, dev);
	const char *name;

	if (len)
		dst[0] = '\0';
	if (!d)
		return -EINVAL;
	name = iio_device_find_attr(d, attr);
	if (!name)
		return -ENOENT;
	return finish_read(IIOSHIM_NO_SIGPIPE(ssize_t, iio_device_attr_read(d, name, dst, len)), dst, len);
}

/* In C because finding an attribute by its sysfs file name means walking every channel's
 * attribute table with iio_channel_attr_get_filename, which only makes sense next to libiio. */
ssize_t iioshim_device_read_file(const iioshim_context *ctx, unsigned int dev,
				 const char *filename, char *dst, size_t len)
{
	const struct iio_device *d = device_at(ctx, dev);
	unsigned int i, j, nch;

	if (len)
		dst[0] = '\0';
	if (!d)
		return -EINVAL;
	if (iio_device_find_attr(d, filename))
		return finish_read(IIOSHIM_NO_SIGPIPE(ssize_t, iio_device_attr_read(d, filename, dst, len)), dst, len);

	nch = iio_device_get_channels_count(d);
	for (i = 0; i < nch; i++) {
		const struct iio_channel *c = iio_device_get_channel(d, i);
		unsigned int na = iio_channel_get_attrs_count(c);

		for (j = 0; j < na; j++) {
			const char *attr = iio_channel_get_attr(c, j);
			const char *fn = attr ? iio_channel_attr_get_filename(c, attr) : NULL;

			if (fn && strcmp(fn, filename) == 0)
				return finish_read(IIOSHIM_NO_SIGPIPE(ssize_t, iio_channel_attr_read(c, attr, dst, len)), dst, len);
		}
	}
	return -ENOENT;
}

/* In C because iio_device_get_trigger returns a device pointer through an out-parameter, and its
 * error cases need translating: -ENOENT (no trigger/ directory) is passed on; success with a NULL
 * trigger, or -EIO (the kernel's empty file), means none is set (empty name); -ENXIO means
 * current_trigger names a trigger that is not in the context, in which case the raw file is read
 * so the caller still learns the name. */
int iioshim_device_trigger_name(const iioshim_context *ctx, unsigned int dev, char *dst, size_t len)
{
	const struct iio_device *d = device_at(ctx, dev);
	const struct iio_device *trig = NULL;
	const char *name;
	int ret;

	if (len)
		dst[0] = '\0';
	if (!d || len == 0)
		return -EINVAL;
	ret = IIOSHIM_NO_SIGPIPE(int, iio_device_get_trigger(d, &trig));
	/* The kernel's current_trigger reads as an EMPTY file (0 bytes, not "\n") when no trigger is
	 * set, which libiio's local backend reports as -EIO: that is "none set", not an error. */
	if (ret == -EIO)
		return 0;
	if (ret == -ENXIO) {
		ssize_t n = finish_read(IIOSHIM_NO_SIGPIPE(ssize_t, iio_device_attr_read(d, "trigger/current_trigger", dst, len)),
					dst, len);
		return n < 0 ? (int) n : 0;
	}
	if (ret < 0)
		return ret;
	if (!trig)
		return 0;
	name = iio_device_get_name(trig);
	if (!name)
		name = iio_device_get_id(trig);
	strncpy(dst, name, len - 1);
	dst[len - 1] = '\0';
	return 0;
}

static iioshim_kind kind_of(enum iio_chan_type type)
{
	switch (type) {
	case IIO_ACCEL:
		return IIOSHIM_KIND_ACCEL;
	case IIO_ANGL_VEL:
		return IIOSHIM_KIND_ANGLVEL;
	case IIO_MAGN:
		return IIOSHIM_KIND_MAGN;
	case IIO_TIMESTAMP:
		return IIOSHIM_KIND_TIMESTAMP;
	default:
		return IIOSHIM_KIND_NONE;
	}
}

static iioshim_axis axis_of(enum iio_modifier mod)
{
	switch (mod) {
	case IIO_MOD_X:
		return IIOSHIM_AXIS_X;
	case IIO_MOD_Y:
		return IIOSHIM_AXIS_Y;
	case IIO_MOD_Z:
		return IIOSHIM_AXIS_Z;
	default:
		return IIOSHIM_AXIS_NONE;
	}
}

/* In C because classification uses libiio's enums (iio_channel_get_type/_modifier) and the
 * iio_data_format struct, which are best translated next to the header that defines them.
 * A channel is classified only if it is an input of a known type AND has a `raw` attribute or is
 * a scan element; that rejects the pseudo-channels libiio invents from names such as
 * `in_gyro_matrix` (channel "gyro") or `in_mount_matrix` (channel "mount"). */
int iioshim_channel_describe(const iioshim_context *ctx, unsigned int dev, unsigned int chn,
			     iioshim_channel_desc *out)
{
	const struct iio_channel *c = channel_at(ctx, dev, chn);
	const struct iio_data_format *fmt;
	iioshim_kind kind;

	if (!c)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->id = iio_channel_get_id(c);
	out->has_raw = iio_channel_find_attr(c, "raw") != NULL;
	out->raw_filename = out->has_raw ? iio_channel_attr_get_filename(c, "raw") : NULL;
	out->is_scan_element = iio_channel_is_scan_element(c);
	out->scan_index = out->is_scan_element ? iio_channel_get_index(c) : -1;
	if (out->is_scan_element) {
		fmt = iio_channel_get_data_format(c);
		out->format.length = fmt->length;
		out->format.bits = fmt->bits;
		out->format.shift = fmt->shift;
		out->format.repeat = fmt->repeat ? fmt->repeat : 1;
		out->format.is_signed = fmt->is_signed;
		out->format.is_fully_defined = fmt->is_fully_defined;
		out->format.is_be = fmt->is_be;
	}

	kind = kind_of(iio_channel_get_type(c));
	if (iio_channel_is_output(c) || !(out->has_raw || out->is_scan_element))
		kind = IIOSHIM_KIND_NONE;
	out->kind = kind;
	out->axis = kind == IIOSHIM_KIND_NONE ? IIOSHIM_AXIS_NONE
					      : axis_of(iio_channel_get_modifier(c));
	return 0;
}

/* In C because it fills a caller buffer, normalises libiio's length/NUL conventions, and refuses
 * attributes the channel does not list (libiio's local backend would silently read a device-level
 * file of the same name instead, e.g. cros-ec's `scale`, hiding where the value came from). */
ssize_t iioshim_channel_attr_read(const iioshim_context *ctx, unsigned int dev, unsigned int chn,
				  const char *attr, char *dst, size_t len)
{
	const struct iio_channel *c = channel_at(ctx, dev, chn);
	const char *name;

	if (len)
		dst[0] = '\0';
	if (!c)
		return -EINVAL;
	name = iio_channel_find_attr(c, attr);
	if (!name)
		return -ENOENT;
	return finish_read(IIOSHIM_NO_SIGPIPE(ssize_t, iio_channel_attr_read(c, name, dst, len)), dst, len);
}
