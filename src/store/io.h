/*
 * io.h — the I/O engine: many small reads from one file, in flight at once.
 *
 * The sparse FFN reads neuron bundles of a few KiB at random offsets; flash
 * only reaches its throughput with tens of reads outstanding, so reads are
 * queued, submitted in batches and reaped as they complete. Backends:
 *   io_uring  one ring, READV or READ_FIXED into registered buffers (the cache);
 *   pread     a pool of worker threads doing preadv, where io_uring is missing;
 *   test      synchronous pread at reap time with injected faults and delays.
 *
 * The file is opened with O_DIRECT: reads bypass the page cache, so memory use
 * is what the engine allocates and nothing more. Offsets, lengths and buffer
 * addresses must then be multiples of pi_io_align(). A filesystem that refuses
 * O_DIRECT gets buffered reads followed by posix_fadvise(DONTNEED).
 *
 * Memory: everything the engine needs is allocated at open; submitting and
 * reaping never allocate. A full queue is reported (PI_ERR_FULL), never grown.
 *
 * Threads: one thread drives a pi_io (submit, reap, read, register); different
 * pi_io objects are independent. Errors: a read that fails or comes back short
 * puts the engine in a failed state: pi_io_reap returns -1 with a message
 * naming the file, offset and length, every later call fails the same way, and
 * only pi_io_close remains useful.
 */
#ifndef PI_STORE_IO_H
#define PI_STORE_IO_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define PI_IO_MAX_IOV 64         /* iovec pieces per read */
#define PI_IO_MAX_QUEUE_DEPTH 4096
#define PI_IO_MAX_PENDING (1 << 20)

/* pi_io_backend is the public enum (include/pinfer.h): AUTO, URING, PREAD;
   and, for the library's own tests, synchronous reads with injected faults: */
#define PI_IO_TEST ((pi_io_backend)3)

typedef enum pi_io_fault_kind {
    PI_FAULT_NONE = 0,
    PI_FAULT_EIO,      /* the read fails with EIO, as if the device failed */
    PI_FAULT_SHORT,    /* the read returns half its bytes, as if the file ended */
    PI_FAULT_DELAY,    /* every read completes delay_us after it was started */
    PI_FAULT_NODIRECT, /* open behaves as if the filesystem refused O_DIRECT; the one
                          fault every backend honours (it tests the buffered fallback) */
} pi_io_fault_kind;

typedef struct pi_io_fault {        /* PI_IO_TEST only: what goes wrong and when */
    pi_io_fault_kind kind;
    int64_t nth;          /* the nth read submitted (0-based) fails; -1: every read whose range covers `off` */
    int64_t off;          /* used when nth < 0 */
    int delay_us;         /* PI_FAULT_DELAY: each read completes this late (for pipeline tests) */
} pi_io_fault;

typedef struct pi_io_opts {
    pi_io_backend backend;   /* AUTO: io_uring when the kernel allows it, else pread */
    int queue_depth;         /* reads in flight at most (default 32 when 0; at most PI_IO_MAX_QUEUE_DEPTH) */
    int n_workers;           /* pread backend threads (default: min(queue_depth, 16)) */
    int max_pending;         /* reads that may wait beyond those in flight (submitted and not yet reaped,
                                in all); 0: 1024; allocated at open. So pi_io_in_flight never exceeds
                                queue_depth + max_pending; at most PI_IO_MAX_PENDING */
    bool buffered;           /* false (default): O_DIRECT; true: page cache (for filesystems without
                                O_DIRECT). When opening with O_DIRECT fails with EINVAL the engine
                                falls back to buffered reads + posix_fadvise(DONTNEED), with a warning. */
    pi_io_fault fault;       /* PI_IO_TEST */
} pi_io_opts;

typedef struct pi_io_req {
    int64_t off;             /* file offset; multiple of pi_io_align() */
    const struct iovec *iov; /* destination pieces filled in order; each base and len aligned; the
                                caller keeps the array alive until the read completes */
    int iovcnt;              /* 1..PI_IO_MAX_IOV */
    uint64_t tag;            /* returned on completion */
} pi_io_req;

typedef struct pi_io_stats {
    uint64_t reads, bytes;    /* completed (pi_io_read counts each chunk it reads) */
    uint64_t wait_ns;         /* time spent blocked in pi_io_reap(wait=true) */
    uint64_t queued;          /* reads submitted while every slot was taken: they waited for a reap */
    uint64_t submit_calls;    /* io_uring_submit calls; pread/test: batches handed to the backend */
    uint64_t fixed_reads;     /* reads done with READ_FIXED into registered buffers */
    uint64_t retries;         /* io_uring: reads re-issued after EAGAIN/EINTR or a partial result */
    uint64_t busy_ns;         /* time with reads handed to the backend and not yet reaped */
    double depth_ns;          /* over that time, the reads so handed times the time (read-ns): over
                                 busy_ns, the mean queue depth the reads ran at */
} pi_io_stats;

typedef struct pi_io pi_io;

/* Open path for reading. o NULL: defaults. Errors: PI_ERR_IO (open, stat),
   PI_ERR_NOT_FOUND (no such file), PI_ERR_INVALID (options),
   PI_ERR_UNSUPPORTED (PI_IO_URING unavailable), PI_ERR_NOMEM. *out is NULL
   on error. */
pi_status pi_io_open(const char *path, const pi_io_opts *o, pi_io **out);
void pi_io_close(pi_io *io);                /* accepts NULL; waits for reads in flight */
const char *pi_io_backend_name(const pi_io *io);   /* "io_uring", "pread", "test" */
int64_t pi_io_file_size(const pi_io *io);   /* at open */
/* Alignment of offsets, lengths and buffers: 4096 with O_DIRECT (the device's
   logical block size or DIO alignment if larger), 1 buffered. */
size_t pi_io_align(const pi_io *io);
/* True when the file is read through the page cache (asked for, or fallback). */
bool pi_io_buffered(const pi_io *io);

/* io_uring: register [base, base+len) as fixed buffers (split into <= 1 GiB
   pieces); reads whose single iovec lies inside one piece use READ_FIXED. If
   the kernel refuses (RLIMIT_MEMLOCK), a warning is logged and plain READV is
   used. Other backends: no-op. Once per pi_io, before any read is submitted
   (else PI_ERR_INVALID). The memory must stay mapped until pi_io_close. */
pi_status pi_io_register(pi_io *io, void *base, size_t len);

/* Queue n reads, all or none. Never blocks on the device beyond submitting
   and never allocates; reads beyond queue_depth wait in a fixed FIFO of
   max_pending and are submitted as earlier ones complete (during
   pi_io_reap). Errors, with none of the n queued: PI_ERR_INVALID for an
   invalid request (alignment, iovcnt, empty) or a batch larger than
   queue_depth + max_pending, which could never fit; PI_ERR_FULL when the n
   do not fit beside the pi_io_in_flight reads already queued (the message
   names the numbers): reap and retry; PI_ERR_IO once the engine failed. */
pi_status pi_io_submit(pi_io *io, const pi_io_req *reqs, int n);

/* Completed reads' tags into tags[0..max) in completion order; returns the
   count (0 when wait is false and none is ready, or nothing is pending).
   wait: block until at least one completes (if any is pending). Returns -1
   with pi_error set (PI_ERR_IO) when a read failed or came back short; reads
   that completed before it in the same call are returned first and the -1
   comes with the next call. */
int pi_io_reap(pi_io *io, uint64_t *tags, int max, bool wait);
/* pi_io_reap with wait, blocking (io_uring) until at least min(min, in
   flight) reads have completed, so that a caller computing each batch wakes
   up once per batch rather than once per read. */
int pi_io_reap_min(pi_io *io, uint64_t *tags, int max, int min);
int64_t pi_io_in_flight(const pi_io *io);   /* submitted or queued, not yet reaped */

/* Read [off, off+len) into buf synchronously; any offset, length and buffer
   (aligned bounce reads of a few MiB when O_DIRECT needs them). Independent of
   the queue: reads in flight are neither waited for nor reaped. Reading past
   the end of the file is a short-read error. */
pi_status pi_io_read(pi_io *io, int64_t off, void *buf, size_t len);

void pi_io_get_stats(const pi_io *io, pi_io_stats *st);
void pi_io_reset_stats(pi_io *io);

#endif
