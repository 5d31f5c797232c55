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
 * Functions return 0 (or a count) on success and -errno on failure.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct simfuse simfuse;

/* Mounts the file system at `mountpoint` (a directory) with one file per name, owned by root with
 * mode 0600, and starts the thread that serves it. NULL on failure, with -errno in *error. */
simfuse *_Nullable simfuse_start(const char *_Nonnull mountpoint, const char *_Nonnull const *_Nonnull names,
				 int count, int *_Nonnull error);
/* Unmounts (lazily), stops the thread and frees everything. */
void simfuse_stop(simfuse *_Nonnull fs);

/* Starts a buffer session on node `node`: the kfifo is emptied and sized `length` scans of
 * `scan_size` bytes; `session` identifies it in the calls below. `enable_path` is the device's buffer/enable file, whose modification time
 * when the session was decided is `mtime_sec`/`mtime_nsec`: any later write to it ends the
 * session as far as the reader is concerned. */
int simfuse_session_begin(simfuse *_Nonnull fs, int node, uint64_t session, size_t scan_size, size_t length,
			  size_t watermark, const char *_Nonnull enable_path, int64_t mtime_sec, int64_t mtime_nsec);
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
#endif
