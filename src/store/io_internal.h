/*
 * io_internal.h — what the I/O engine (io.c) shares with its backends
 * (io_uring.c, io_pread.c, io_test.c); not part of the public API.
 *
 * io.c owns the common state: the file, the pending FIFO, the in-flight
 * slots, the statistics and the error state. A backend is a pi_io_ops table
 * chosen once at open; it keeps its own state behind io->be and completes
 * the slots io.c hands it. This is the only place io.c learns which backend
 * runs: there is no switch on the backend kind.
 *
 * Invariants (the backends rely on them):
 *   - One driving thread calls every op; only pread worker threads run
 *     beside it, and they touch a slot only between ops->submit handing it
 *     over and its completion being collected.
 *   - A slot handed to ops->submit comes back through ops->reap exactly once,
 *     via pi_io_slot_finish, or is drained by ops->close.
 *   - At most io->qd slots are with the backend, so fixed rings of qd entries
 *     never overflow.
 */
#ifndef PI_STORE_IO_INTERNAL_H
#define PI_STORE_IO_INTERNAL_H

#include "store/io.h"

#include <stdlib.h>

#define PI_IO_CLOSE_DRAIN_NS (10ull * 1000000000ull) /* close waits this long for reads in flight */

typedef struct io_slot {
    const struct iovec *iov; /* the caller's pieces */
    int iovcnt;
    int fixed;               /* io_uring: registered buffer index for READ_FIXED; -1: READV */
    int64_t off;
    size_t len;              /* sum of the pieces */
    size_t done;             /* io_uring: bytes arrived so far (partial results) */
    int64_t res;             /* pread workers: bytes got in all, or -errno */
    int64_t seq;             /* submission number (test faults) */
    uint64_t tag;
    uint64_t due_ns;         /* test backend: when it completes */
    struct iovec rest[PI_IO_MAX_IOV]; /* io_uring: the pieces left after a partial result */
} io_slot;

typedef struct io_pending {
    pi_io_req r;
    size_t len;
    int64_t seq;
} io_pending;

/* A backend. Every op runs on the driving thread. open and close are always
   set; the others are called only after open succeeded. */
typedef struct pi_io_ops {
    const char *name;  /* pi_io_backend_name */
    size_t state_size; /* io->be: zeroed by io.c before open, freed after close */
    /* Start the backend on an open file with slots allocated; o holds the
       options with defaults applied. PI_ERR_UNSUPPORTED when it cannot run
       here (then, for o->backend == PI_IO_AUTO, it has logged why and io.c
       falls back to pread). On any error ops->close still runs. */
    pi_status (*open)(pi_io *io, const pi_io_opts *o);
    /* Wait (a bounded time) for reads in flight and release what io->be
       holds. Runs after a failed or partial open too, unless io->be itself
       could not be allocated. */
    void (*close)(pi_io *io);
    /* pi_io_register after its checks; NULL: nothing to register. */
    pi_status (*register_buffers)(pi_io *io, void *base, size_t len);
    /* Hand slots si[0..n) (n >= 1, filled by io.c, fixed = -1) to the
       backend. Never allocates; may set the failed state. */
    void (*submit)(pi_io *io, const int *si, int n);
    /* Collect up to max completions through pi_io_slot_finish into tags;
       block: wait for at least one (there is one in flight). Stops at the
       first failed read. Returns the count. */
    int (*reap)(pi_io *io, uint64_t *tags, int max, bool block);
    /* pi_io_read's pieces: NULL: preadv (pi_io_read_fully). seq: the read's
       submission number. Returns bytes read or -errno. */
    int64_t (*read)(pi_io *io, int64_t seq, int64_t off, const struct iovec *iov, int iovcnt, size_t len);
} pi_io_ops;

extern const pi_io_ops pi_io_uring_ops, pi_io_pread_ops, pi_io_test_ops;

struct pi_io {
    char *path;
    int fd;
    const pi_io_ops *ops; /* set before ops->open, so that close tears down what it started */
    void *be;             /* (ops->state_size) the backend's state */
    bool buffered;  /* page cache: asked for, or O_DIRECT refused */
    bool dontneed;  /* O_DIRECT refused: drop what each read put in the page cache */
    bool is_reg;
    size_t align;
    int64_t size;
    int qd;
    pi_io_fault fault; /* kind NONE unless the test backend (or NODIRECT) */
    pi_io_stats st;
    int64_t seq; /* reads submitted so far, pi_io_read chunks included */

    io_slot *slots;   /* (qd) */
    int *free_slots;  /* (qd) stack */
    int n_free;
    int64_t n_active; /* slots with the backend, not yet reaped */
    uint64_t t_depth; /* when busy_ns and depth_ns were last counted (pi_io_stats) */
    int reap_min;     /* pi_io_reap_min: completions to wait for (io_uring) */
    int *batch;       /* (qd) slots started by one start_pending call */

    io_pending *fifo; /* (fifo_cap = qd + max_pending) ring of requests waiting for a slot */
    int64_t fifo_cap, fifo_head, fifo_n;

    bool failed;
    char err[PI_ERRMSG_MAX];
    bool reg_done; /* pi_io_register was called */
};

/* A FIFO of slot indices with a fixed capacity (qd); never grows. */
typedef struct int_ring {
    int *v;
    int cap, head, n;
} int_ring;

static inline bool pi_io_ring_init(int_ring *r, int cap) {
    r->v = malloc((size_t)cap * sizeof *r->v);
    r->cap = cap;
    r->head = r->n = 0;
    return r->v != NULL;
}

static inline void pi_io_ring_push(int_ring *r, int x) {
    PI_ASSERT(r->n < r->cap);
    r->v[(r->head + r->n) % r->cap] = x;
    r->n++;
}

static inline int pi_io_ring_pop(int_ring *r) {
    PI_ASSERT(r->n > 0);
    int x = r->v[r->head];
    r->head = (r->head + 1) % r->cap;
    r->n--;
    return x;
}

/* The pieces of iov[0..cnt) that remain after skipping `skip` bytes, into out;
   returns their count. */
int pi_io_iov_advance(const struct iovec *iov, int cnt, size_t skip, struct iovec *out);
/* Whether pos is at or past the end of the file (re-read: it may have shrunk). */
bool pi_io_at_eof(const pi_io *io, int64_t pos);
/* Read len bytes at off into iov with preadv, continuing after partial results
   until done or the end of the file. Returns the bytes read (< len only at the
   end of the file) or -errno. Thread-safe. */
int64_t pi_io_read_fully(const pi_io *io, int64_t off, const struct iovec *iov, int iovcnt, size_t len);
/* Drop [off, off+len) from the page cache when O_DIRECT was refused. */
void pi_io_dontneed(const pi_io *io, int64_t off, size_t len);
/* A read in slot si finished with got bytes in all (or -errno): free the
   slot and give its tag, or put the engine in the failed state (false). */
bool pi_io_slot_finish(pi_io *io, int si, int64_t got, uint64_t *tag);
/* Put the engine in the failed state: "<path>: <what>: <strerror(err)>". */
void pi_io_fail(pi_io *io, const char *what, int err);

#endif
