#ifndef CIIOSHIM_H
#define CIIOSHIM_H
/*
 * The only code in this package that calls libiio (0.24).
 *
 * Conventions:
 * - every symbol starts with `iioshim_`;
 * - functions that can fail return 0 (or a byte count) on success and a NEGATIVE errno on
 *   failure, as libiio does;
 * - devices and channels are addressed by (context, device index, channel index) so that no
 *   pointer into libiio's object graph ever reaches Swift except the context handle itself;
 * - strings returned as `const char *` are owned by the context and live as long as it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>

#pragma clang assume_nonnull begin

/* An opaque libiio context (`struct iio_context`). */
typedef struct iio_context iioshim_context;

/* Returns libiio's version as major*100 + minor (e.g. 24 for 0.24). */
int iioshim_library_version(void);

/* Writes the text for a (positive) errno value into `dst`, always NUL-terminated. */
void iioshim_strerror(int err, char *_Nonnull dst, size_t len);

/* ---- Contexts ------------------------------------------------------------------------------ */

/* Creates a context from a URI ("local:", "ip:HOST[:PORT]", ...). On failure returns NULL and
 * stores a negative errno in *error. */
iioshim_context *_Nullable iioshim_context_create(const char *_Nonnull uri, int *_Nonnull error);

/* Destroys a context created by iioshim_context_create. */
void iioshim_context_destroy(iioshim_context *_Nonnull ctx);

/* Sets the I/O timeout in milliseconds (0 = wait forever). Returns 0 or a negative errno. */
int iioshim_context_set_timeout(iioshim_context *_Nonnull ctx, unsigned int timeout_ms);

/* The backend's name, e.g. "local" or "network". */
const char *_Nonnull iioshim_context_name(const iioshim_context *_Nonnull ctx);

/* Number of devices (including triggers) in the context. */
unsigned int iioshim_device_count(const iioshim_context *_Nonnull ctx);

/* ---- Devices ------------------------------------------------------------------------------- */

/* What discovery needs to know about one device. */
typedef struct iioshim_device_desc {
    /* "iio:device0" or "trigger0". Nullable only so that Swift can zero-initialise the struct;
     * never NULL after a successful iioshim_device_describe. */
    const char *_Nullable id;
    const char *_Nullable name;   /* driver name, e.g. "bmi160" */
    const char *_Nullable label;  /* the `label` file, absent on many drivers */
    bool is_trigger;
    /* True when the device has at least one scan element or buffer attribute, i.e. it can stream. */
    bool can_buffer;
    unsigned int channel_count;
} iioshim_device_desc;

/* Fills `out` for device `dev`. Returns 0, or -EINVAL if the index is out of range. */
int iioshim_device_describe(const iioshim_context *_Nonnull ctx, unsigned int dev,
                            iioshim_device_desc *_Nonnull out);

/* True if the device lists a device-level attribute with this exact name. */
bool iioshim_device_has_attr(const iioshim_context *_Nonnull ctx, unsigned int dev,
                             const char *_Nonnull attr);

/* Reads a device-level attribute as text into dst (NUL-terminated). Returns the string length
 * (excluding NUL) or a negative errno; -ENOENT if the device does not list that attribute. */
ssize_t iioshim_device_attr_read(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                 const char *_Nonnull attr, char *_Nonnull dst, size_t len);

/* Reads the attribute whose sysfs FILE name (relative to the device directory) is `filename`,
 * wherever libiio filed it: a device attribute of that name, or a channel attribute (possibly
 * of a pseudo-channel libiio invented, such as `mount` for `in_mount_matrix`). Returns the
 * string length or a negative errno; -ENOENT if no attribute maps to that file. */
ssize_t iioshim_device_read_file(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                 const char *_Nonnull filename, char *_Nonnull dst, size_t len);

/* Writes the name of the device's current trigger into dst (empty string when none is set).
 * Returns 0, or a negative errno: -ENOENT when the device has no trigger support. */
int iioshim_device_trigger_name(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                char *_Nonnull dst, size_t len);

/* ---- Channels ------------------------------------------------------------------------------ */

/* The kinds of channel this package uses. Everything else is IIOSHIM_KIND_NONE. */
typedef enum iioshim_kind {
    IIOSHIM_KIND_NONE = 0,
    IIOSHIM_KIND_ACCEL = 1,
    IIOSHIM_KIND_ANGLVEL = 2,
    IIOSHIM_KIND_MAGN = 3,
    IIOSHIM_KIND_TIMESTAMP = 4,
} iioshim_kind;

/* Axis from the channel modifier: 0 = none, 1 = x, 2 = y, 3 = z. */
typedef enum iioshim_axis {
    IIOSHIM_AXIS_NONE = 0,
    IIOSHIM_AXIS_X = 1,
    IIOSHIM_AXIS_Y = 2,
    IIOSHIM_AXIS_Z = 3,
} iioshim_axis;

/* A copy of libiio's `struct iio_data_format` for one scan element. */
typedef struct iioshim_format {
    unsigned int length;   /* storage bits */
    unsigned int bits;     /* real bits */
    unsigned int shift;
    unsigned int repeat;
    bool is_signed;
    bool is_fully_defined;
    bool is_be;
} iioshim_format;

/* What discovery needs to know about one channel. */
typedef struct iioshim_channel_desc {
    /* "accel_x", "timestamp", "gyro", ...; never NULL after a successful describe (nullable
     * only so that Swift can zero-initialise the struct). */
    const char *_Nullable id;
    /* Classification; IIOSHIM_KIND_NONE for outputs, unknown types, and channels that have
     * neither a `raw` attribute nor a scan element (libiio's pseudo-channels). */
    iioshim_kind kind;
    iioshim_axis axis;
    bool has_raw;
    bool is_scan_element;
    long scan_index;                  /* negative if not a scan element */
    iioshim_format format;            /* meaningful only if is_scan_element */
    const char *_Nullable raw_filename; /* e.g. "in_accel_x_raw" */
} iioshim_channel_desc;

/* Fills `out` for channel `chn` of device `dev`. Returns 0 or -EINVAL. */
int iioshim_channel_describe(const iioshim_context *_Nonnull ctx, unsigned int dev,
                             unsigned int chn, iioshim_channel_desc *_Nonnull out);

/* Reads a channel attribute (libiio's short name, e.g. "raw", "scale") as text. Returns the string
 * length or a negative errno; -ENOENT if the channel does not list that attribute (this
 * deliberately does NOT fall back to a device file of the same name, as libiio's local backend
 * would). */
ssize_t iioshim_channel_attr_read(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                  unsigned int chn, const char *_Nonnull attr,
                                  char *_Nonnull dst, size_t len);

/* ---- Writes -------------------------------------------------------------------------------- */

/* Writes a listed device-level attribute (e.g. "sampling_frequency", "current_timestamp_clock").
 * Returns the bytes written or a negative errno (-ENOENT when the device does not list it). */
ssize_t iioshim_device_attr_write(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                  const char *_Nonnull attr, const char *_Nonnull value);

/* Writes a listed channel attribute by libiio's short name (e.g. "sampling_frequency"). */
ssize_t iioshim_channel_attr_write(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                   unsigned int chn, const char *_Nonnull attr,
                                   const char *_Nonnull value);

/* Reads the file at `path`, relative to the device's folder (e.g. "scan_elements/in_accel_x_en",
 * "buffer/length", "trigger/current_trigger"), whether or not libiio lists it as an attribute.
 * Returns the string length (an empty file: 0) or a negative errno. */
ssize_t iioshim_device_path_read(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                 const char *_Nonnull path, char *_Nonnull dst, size_t len);

/* Writes the file at `path`, relative to the device's folder. Returns the bytes written or a
 * negative errno (the kernel's: EBUSY for buffer/length while the buffer runs, EINVAL, ...). */
ssize_t iioshim_device_path_write(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                  const char *_Nonnull path, const char *_Nonnull value);

/* Index of the device whose id is `id` ("iio:device0"), or -ENOENT. */
int iioshim_device_index(const iioshim_context *_Nonnull ctx, const char *_Nonnull id);

/* Index of the trigger device whose name is `name`, or -ENOENT. */
int iioshim_trigger_index(const iioshim_context *_Nonnull ctx, const char *_Nonnull name);

/* Makes trigger `trig` (a device index) the current trigger of device `dev`. */
int iioshim_device_set_trigger(const iioshim_context *_Nonnull ctx, unsigned int dev,
                               unsigned int trig);

/* ---- Buffers ------------------------------------------------------------------------------- */

/* An opaque libiio buffer (`struct iio_buffer`). */
typedef struct iio_buffer iioshim_buffer;

/* Enables exactly the channels listed (indices into device `dev`), disables the others, and creates
 * a blocking buffer of `samples` scans, with a kernel buffer (buffer/length) of `kernel_buffers` ×
 * `samples` scans (0: libiio's default, 4). On failure returns NULL with a negative errno in *error;
 * -EBUSY, without touching the device, when another process has its node open (local contexts).
 * Only one buffer may exist per device; the caller's thread owns it from here on. */
iioshim_buffer *_Nullable iioshim_buffer_create(const iioshim_context *_Nonnull ctx, unsigned int dev,
                                                const unsigned int *_Nonnull channels, size_t count,
                                                size_t samples, unsigned int kernel_buffers,
                                                int *_Nonnull error);

/* Destroys a buffer (the kernel buffer is disabled and the channels with it). */
void iioshim_buffer_destroy(iioshim_buffer *_Nonnull buf);

/* Makes a blocked (or the next) refill return at once with an error; thread-safe, not signal-safe. */
void iioshim_buffer_cancel(iioshim_buffer *_Nonnull buf);

/* Refills the buffer (blocking until `samples` scans arrived, the context timeout passed, or a
 * cancel). Returns the bytes read, or a negative errno; *start points at the first scan and *step
 * is the size of one scan. */
ssize_t iioshim_buffer_refill(iioshim_buffer *_Nonnull buf, const uint8_t *_Nullable *_Nonnull start,
                              size_t *_Nonnull step);

/* Byte offset of channel `chn`'s element within a scan of `buf` (libiio's own layout), or a
 * negative errno when the channel is not enabled in the buffer. */
ssize_t iioshim_buffer_channel_offset(const iioshim_buffer *_Nonnull buf,
                                      const iioshim_context *_Nonnull ctx, unsigned int dev,
                                      unsigned int chn);

#pragma clang assume_nonnull end

#endif
