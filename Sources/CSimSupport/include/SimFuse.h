#ifndef SIMFUSE_H
#define SIMFUSE_H
/*
 * The simulator's /dev/iio:deviceN nodes, served through FUSE so that they behave like the kernel's
 * IIO character device rather than a FIFO:
 *   - one reader at a time (a second open() gets EBUSY, as iio_chrdev_open returns);
 *   - a kfifo of `length` scans per buffer session: scans that find it full are dropped, a read
 *     returns whole scans only, a non-blocking read of an empty buffer gets EAGAIN, a blocking read
 *     waits for min(watermark, requested) scans, poll() reports POLLIN from `watermark` scans on;
 *   - the kfifo belongs to one buffer session: scans of a session whose `buffer/enable` file has
 *     been written since it started are never served (the kernel empties the kfifo on enable; a
 *     FIFO keeps what the previous reader left, which a new reader then read in the old layout);
 *   - unplugged: read() fails with ENODEV, poll() never becomes ready (as after
 *     iio_device_unregister).
 * The simulator mounts one FUSE file system holding every node and bind-mounts each node onto
 * /dev/iio:deviceN. Sessions push scans with simfuse_push(); the FUSE thread answers the reader.
 *
 * The same file system serves the attribute files whose writes the kernel answers synchronously
 * (buffer/enable, buffer/length, scan element _en files, current_timestamp_clock,
 * trigger/current_trigger, sampling_frequency ...), bind-mounted onto their sysfs paths: a write
 * calls the simulator's store callback on the serving thread, which refuses it (EBUSY, EINVAL) or
 * says what the file holds from then on, before write(2) returns, as a driver's store() does.
 * Functions return 0 (or a count) on success and -errno on failure.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct simfuse simfuse;

/* The longest attribute value kept. */
#define SIMFUSE_ATTR_MAX 4096

/* A write of `value` (`len` bytes, up to the first NUL, newline included if written) to attribute
 * `attr`: return a negative errno to refuse it, or 0 with what the file holds from now on in `out`
 * (without the trailing newline the file shows). Runs on the serving thread with the file system's
 * (recursive) lock held: it may call simfuse_attr_get/set, and must not touch the mounted files. */
typedef int (*simfuse_store_fn)(void *_Nullable context, int attr, const char *_Nonnull value, size_t len,
				char *_Nonnull out, size_t out_cap);

/* Mounts the file system at `mountpoint` (a directory) with one device node per name, owned by root
 * with mode 0600, and `attr_count` attribute files named attr0, attr1, ... (mode 0444 until set,
 * empty), and starts the thread that serves it. NULL on failure, with -errno in *error. */
simfuse *_Nullable simfuse_start(const char *_Nonnull mountpoint, const char *_Nonnull const *_Nonnull names,
				 int count, int attr_count, simfuse_store_fn _Nullable store,
				 void *_Nullable store_context, int *_Nonnull error);
/* Unmounts (lazily), stops the thread and frees everything. */
void simfuse_stop(simfuse *_Nonnull fs);

/* Starts a buffer session on node `node`: the kfifo is emptied and sized `length` scans of
 * `scan_size` bytes; `session` identifies it in the calls below. `enable_attr` is the device's
 * buffer/enable attribute, whose modification time when the session was decided is
 * `mtime_sec`/`mtime_nsec`: any later write to it ends the session as far as the reader is
 * concerned. */
int simfuse_session_begin(simfuse *_Nonnull fs, int node, uint64_t session, size_t scan_size, size_t length,
			  size_t watermark, int enable_attr, int64_t mtime_sec, int64_t mtime_nsec);
/* Ends session `session` (nothing when another has begun since); returns the scans it left unread
 * (still queued, or discarded as stale), or -ESTALE. */
long simfuse_session_end(simfuse *_Nonnull fs, int node, uint64_t session);
/* Queues up to `count` scans of session `session`; returns how many fitted (the rest are dropped,
 * as by a full kfifo), or -ESTALE when the session is over (its buffer was disabled or re-enabled
 * since, or another session began). */
long simfuse_push(simfuse *_Nonnull fs, int node, uint64_t session, const void *_Nonnull scans, long count);
/* Scans queued now. */
long simfuse_queued(simfuse *_Nonnull fs, int node);
/* Number of open file handles of the node (0 or 1). */
int simfuse_readers(simfuse *_Nonnull fs, int node);
/* An eventfd that becomes readable whenever the reader takes scans, opens or closes the node. */
int simfuse_event_fd(simfuse *_Nonnull fs, int node);
/* The device is gone: reads fail with ENODEV, lookups with ENOENT. */
void simfuse_unplug(simfuse *_Nonnull fs, int node);

/* An attribute's value (without the newline the file shows) into dst; its length or -errno. */
int simfuse_attr_get(simfuse *_Nonnull fs, int attr, char *_Nonnull dst, size_t cap);
/* Sets an attribute's value as the driver would (no store callback); its modification time is now. */
int simfuse_attr_set(simfuse *_Nonnull fs, int attr, const char *_Nonnull value);
/* Sets an attribute's mode bits. */
int simfuse_attr_set_mode(simfuse *_Nonnull fs, int attr, uint32_t mode);
/* Reads of the attribute fail with `error` (a positive errno; 0: they succeed again), as a driver's
 * show() refuses (bmc150_accel's raw values while its buffer is enabled: EBUSY). */
int simfuse_attr_set_read_error(simfuse *_Nonnull fs, int attr, int error);
/* The file shows "value\n\0" (the IIO core's current_timestamp_clock counts the NUL). */
int simfuse_attr_set_trailing_nul(simfuse *_Nonnull fs, int attr, int on);
/* Node `node` has no buffer, only events: it opens (one user at a time), reads fail with EINVAL and
 * poll reports it ready, as the kernel's iio_event_fileops. */
int simfuse_node_set_events_only(simfuse *_Nonnull fs, int node);
/* The attribute's device is gone: lookups fail with ENOENT, reads and writes with ENODEV. */
void simfuse_attr_unplug(simfuse *_Nonnull fs, int attr);
/* An eventfd that becomes readable when an attribute was written (accepted by the store callback). */
int simfuse_written_fd(simfuse *_Nonnull fs);
/* Takes up to `max` indices of attributes written since the last call (each once, in the order of
 * their first write); returns how many. */
int simfuse_take_written(simfuse *_Nonnull fs, int *_Nonnull attrs, int max);
#endif
