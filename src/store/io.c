/*
 * io.c — the I/O engine behind io.h: a FIFO of requests, a fixed set of
 * in-flight slots (queue_depth), and three backends that complete them.
 *
 * Invariants:
 *   - Only the driving thread touches the FIFO, the free-slot stack, the
 *     statistics and the error state. pread workers see a slot only between
 *     its push on the work ring and its push on the done ring (both under mu).
 *   - n_active slots are with the backend; a slot is freed when its completion
 *     is processed by the driver, so at most queue_depth reads are in flight
 *     and the rings and the io_uring SQ/CQ never overflow.
 *   - A read is complete only when all its bytes arrived: partial results are
 *     re-issued for the rest unless the read reached the end of the file, which
 *     is a short-read error. After any error `failed` is set and stays set.
 */
#include "store/io.h"

#include "base/log.h"
#include "base/timer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#ifdef PI_HAVE_LIBURING
#include <liburing.h>
#endif

#ifndef BLKGETSIZE64
#define BLKGETSIZE64 _IOR(0x12, 114, size_t)
#endif

#define REG_PIECE ((size_t)1 << 30)          /* io_uring caps one registered buffer at 1 GiB */
#define READ_DIRECT_CHUNK ((size_t)64 << 20) /* pi_io_read: aligned reads straight into the caller's buffer */
#define READ_BOUNCE ((size_t)4 << 20)        /* pi_io_read: bounce buffer for unaligned pieces */
#define CLOSE_DRAIN_NS (10ull * 1000000000ull)

typedef struct io_slot {
    const struct iovec *iov; /* the caller's pieces */
    int iovcnt;
    int fixed;               /* registered buffer index for READ_FIXED, -1: READV */
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

typedef struct int_ring { /* FIFO of slot indices; capacity queue_depth */
    int *v;
    int cap, head, n;
} int_ring;

struct pi_io {
    char *path;
    int fd;
    pi_io_backend backend;
    bool buffered;  /* page cache: asked for, or O_DIRECT refused */
    bool dontneed;  /* O_DIRECT refused: drop what each read put in the page cache */
    bool is_reg;
    size_t align;
    int64_t size;
    int qd;
    pi_io_fault fault;
    pi_io_stats st;
    int64_t seq; /* reads submitted so far, pi_io_read chunks included */

    io_slot *slots;   /* (qd) */
    int *free_slots;  /* (qd) stack */
    int n_free;
    int64_t n_active; /* slots with the backend, not yet reaped */
    int reap_min;     /* pi_io_reap_min: completions to wait for (io_uring) */
    int *batch;       /* (qd) slots started by one start_pending call */
    int n_batch;

    io_pending *fifo; /* ring of requests waiting for a slot */
    int64_t fifo_cap, fifo_head, fifo_n;

    bool failed;
    char err[PI_ERRMSG_MAX];

    bool reg_done;    /* pi_io_register was called */
    char *reg_base;
    size_t reg_len;
    int n_reg;        /* registered pieces; 0: none */

    /* pread backend */
    pthread_t *workers;
    int n_workers;
    bool sync_ready;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int_ring work, done; /* under mu */
    bool stop;           /* under mu */

    /* test backend: started slots in start order */
    int_ring order;

#ifdef PI_HAVE_LIBURING
    struct io_uring ring;
    bool ring_ready;
#endif
};

#ifdef PI_HAVE_LIBURING
static atomic_flag g_logged_backend = ATOMIC_FLAG_INIT;
#endif
static atomic_flag g_logged_fallback = ATOMIC_FLAG_INIT;
static atomic_flag g_warned_nodirect = ATOMIC_FLAG_INIT;

/* ---- small helpers ---------------------------------------------------- */

static void ring_push(int_ring *r, int x) {
    PI_ASSERT(r->n < r->cap);
    r->v[(r->head + r->n) % r->cap] = x;
    r->n++;
}

static int ring_pop(int_ring *r) {
    PI_ASSERT(r->n > 0);
    int x = r->v[r->head];
    r->head = (r->head + 1) % r->cap;
    r->n--;
    return x;
}

static bool ring_init(int_ring *r, int cap) {
    r->v = malloc((size_t)cap * sizeof *r->v);
    r->cap = cap;
    return r->v != NULL;
}

static bool is_aligned(uint64_t x, size_t a) { return (x & (a - 1)) == 0; }

/* The pieces of iov[0..cnt) that remain after skipping `skip` bytes, into out;
   returns their count. */
static int iov_advance(const struct iovec *iov, int cnt, size_t skip, struct iovec *out) {
    int n = 0;
    for (int i = 0; i < cnt; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        out[n].iov_base = (char *)iov[i].iov_base + skip;
        out[n].iov_len = iov[i].iov_len - skip;
        skip = 0;
        n++;
    }
    return n;
}

/* Whether pos is at or past the end of the file (re-read: it may have shrunk). */
static bool at_eof(const pi_io *io, int64_t pos) {
    struct stat sb;
    if (io->is_reg && fstat(io->fd, &sb) == 0) return pos >= (int64_t)sb.st_size;
    return pos >= io->size;
}

/* Read len bytes at off into iov with preadv, continuing after partial results
   until done or the end of the file. Returns the bytes read (< len only at the
   end of the file) or -errno. Thread-safe. */
static int64_t read_fully(const pi_io *io, int64_t off, const struct iovec *iov, int iovcnt, size_t len) {
    struct iovec rest[PI_IO_MAX_IOV];
    const struct iovec *cur = iov;
    int cnt = iovcnt;
    size_t done = 0;
    int transient = 0;
    while (done < len) {
        ssize_t r = preadv(io->fd, cur, cnt, (off_t)(off + (int64_t)done));
        if (r < 0) {
            if ((errno == EINTR || errno == EAGAIN) && ++transient < 1000) continue;
            return -(int64_t)errno;
        }
        if (r == 0) break;
        done += (size_t)r;
        if (done < len) {
            if (at_eof(io, off + (int64_t)done)) break;
            cnt = iov_advance(iov, iovcnt, done, rest);
            cur = rest;
        }
    }
    if (io->dontneed && done > 0) posix_fadvise(io->fd, (off_t)off, (off_t)done, POSIX_FADV_DONTNEED);
    return (int64_t)done;
}

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Test backend: one read with the configured fault applied. */
static int64_t test_read(const pi_io *io, int64_t seq, int64_t off, const struct iovec *iov, int iovcnt, size_t len) {
    const pi_io_fault *f = &io->fault;
    bool hit = f->nth >= 0 ? seq == f->nth : (f->off >= off && f->off < off + (int64_t)len);
    if (f->kind == PI_FAULT_EIO && hit) return -EIO;
    int64_t got = read_fully(io, off, iov, iovcnt, len);
    if (f->kind == PI_FAULT_SHORT && hit && got > (int64_t)(len / 2)) got = (int64_t)(len / 2);
    return got;
}

/* The message of a failed read into io->err. got: bytes in all, or -errno. */
static void format_read_error(pi_io *io, int64_t off, size_t len, int64_t got) {
    if (got < 0)
        snprintf(io->err, sizeof io->err, "%s: read of %zu bytes at offset %lld failed: %s", io->path, len,
                 (long long)off, strerror((int)-got));
    else
        snprintf(io->err, sizeof io->err, "%s: short read (got %lld of %zu bytes at offset %lld; file truncated?)",
                 io->path, (long long)got, len, (long long)off);
}

static void fail_read(pi_io *io, int64_t off, size_t len, int64_t got) {
    io->failed = true;
    format_read_error(io, off, len, got);
}

static int reap_error(const pi_io *io) {
    pi_error(PI_ERR_IO, "%s", io->err);
    return -1;
}

/* A read finished with got bytes in all (or -errno): free its slot and hand
   out its tag, or fail the engine. */
static bool slot_finish(pi_io *io, int si, int64_t got, uint64_t *tag) {
    io_slot *s = &io->slots[si];
    io->free_slots[io->n_free++] = si;
    io->n_active--;
    if (got < 0 || (size_t)got < s->len) {
        fail_read(io, s->off, s->len, got);
        return false;
    }
    io->st.reads++;
    io->st.bytes += s->len;
    if (s->fixed >= 0) io->st.fixed_reads++;
    *tag = s->tag;
    return true;
}

/* ---- io_uring --------------------------------------------------------- */

#ifdef PI_HAVE_LIBURING
static void fail_msg(pi_io *io, const char *what, int err) {
    io->failed = true;
    snprintf(io->err, sizeof io->err, "%s: %s: %s", io->path, what, strerror(err));
}

static void uring_flush(pi_io *io) {
    int stalls = 0;
    while (io_uring_sq_ready(&io->ring) > 0) {
        int r = io_uring_submit(&io->ring);
        io->st.submit_calls++;
        if (r > 0) continue;
        if ((r == 0 || r == -EAGAIN || r == -EINTR || r == -EBUSY) && ++stalls < 10000) {
            sched_yield();
            continue;
        }
        fail_msg(io, "io_uring_submit failed", r < 0 ? -r : EAGAIN);
        return;
    }
}

/* Queue an SQE for what remains of slot si. */
static void uring_prep(pi_io *io, int si) {
    io_slot *s = &io->slots[si];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    if (!sqe) { /* cannot happen with <= qd in flight; be safe */
        uring_flush(io);
        sqe = io_uring_get_sqe(&io->ring);
        PI_ASSERT(sqe);
    }
    int64_t off = s->off + (int64_t)s->done;
    if (s->fixed >= 0) {
        io_uring_prep_read_fixed(sqe, io->fd, (char *)s->iov[0].iov_base + s->done, (unsigned)(s->len - s->done),
                                 (uint64_t)off, s->fixed);
    } else if (s->done == 0) {
        io_uring_prep_readv(sqe, io->fd, s->iov, (unsigned)s->iovcnt, (uint64_t)off);
    } else {
        int n = iov_advance(s->iov, s->iovcnt, s->done, s->rest);
        io_uring_prep_readv(sqe, io->fd, s->rest, (unsigned)n, (uint64_t)off);
    }
    io_uring_sqe_set_data64(sqe, (uint64_t)si);
}

static int uring_collect(pi_io *io, uint64_t *tags, int max, bool block) {
    int n = 0;
    bool reissued = false;
    while (n < max && !io->failed) {
        struct io_uring_cqe *cqe;
        int r;
        if (block && n == 0) {
            if (reissued) {
                uring_flush(io);
                reissued = false;
                if (io->failed) break;
            }
            uint64_t t0 = pi_time_ns();
            unsigned want = io->reap_min > 1 ? (unsigned)io->reap_min : 1;
            if (want > (unsigned)io->n_active) want = io->n_active > 0 ? (unsigned)io->n_active : 1;
            r = want > 1 ? io_uring_wait_cqe_nr(&io->ring, &cqe, want) : io_uring_wait_cqe(&io->ring, &cqe);
            io->st.wait_ns += pi_time_ns() - t0;
        } else {
            r = io_uring_peek_cqe(&io->ring, &cqe);
            if (r == -EAGAIN) break;
        }
        if (r == -EINTR) continue;
        if (r < 0) {
            fail_msg(io, "io_uring_wait_cqe failed", -r);
            break;
        }
        int si = (int)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&io->ring, cqe);
        PI_ASSERT(si >= 0 && si < io->qd);
        io_slot *s = &io->slots[si];
        if (res == -EAGAIN || res == -EINTR) {
            io->st.retries++;
            uring_prep(io, si);
            reissued = true;
            continue;
        }
        if (res < 0) {
            slot_finish(io, si, res, &tags[n]);
            break;
        }
        s->done += (size_t)res;
        if (s->done < s->len && res > 0 && !at_eof(io, s->off + (int64_t)s->done)) {
            io->st.retries++;
            uring_prep(io, si);
            reissued = true;
            continue;
        }
        if (io->dontneed && s->done > 0)
            posix_fadvise(io->fd, (off_t)s->off, (off_t)s->done, POSIX_FADV_DONTNEED);
        if (!slot_finish(io, si, (int64_t)s->done, &tags[n])) break;
        n++;
    }
    if (reissued) uring_flush(io); /* even after an error: close drains what is in flight */
    return n;
}

static void uring_close(pi_io *io) {
    io_uring_submit(&io->ring);
    uint64_t deadline = pi_time_ns() + CLOSE_DRAIN_NS;
    while (io->n_active > 0) {
        uint64_t now = pi_time_ns();
        if (now >= deadline) {
            PI_LOGW("%s: %lld reads still in flight at close", io->path, (long long)io->n_active);
            break;
        }
        struct __kernel_timespec ts = {(long long)((deadline - now) / 1000000000ull),
                                       (long long)((deadline - now) % 1000000000ull)};
        struct io_uring_cqe *cqe;
        int r = io_uring_wait_cqe_timeout(&io->ring, &cqe, &ts);
        if (r == -EINTR) continue;
        if (r < 0) break;
        io_uring_cqe_seen(&io->ring, cqe);
        io->n_active--;
    }
    io_uring_queue_exit(&io->ring);
}
#endif

/* ---- pread workers ---------------------------------------------------- */

static void *worker_main(void *arg) {
    pi_io *io = arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->stop && io->work.n == 0) pthread_cond_wait(&io->cv_work, &io->mu);
        if (io->stop) break;
        int si = ring_pop(&io->work);
        pthread_mutex_unlock(&io->mu);
        io_slot *s = &io->slots[si];
        int64_t got = read_fully(io, s->off, s->iov, s->iovcnt, s->len);
        pthread_mutex_lock(&io->mu);
        s->res = got;
        ring_push(&io->done, si);
        pthread_cond_signal(&io->cv_done);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

static int pread_collect(pi_io *io, uint64_t *tags, int max, bool block) {
    int n = 0;
    pthread_mutex_lock(&io->mu);
    if (block && io->done.n == 0) {
        uint64_t t0 = pi_time_ns();
        while (io->done.n == 0) pthread_cond_wait(&io->cv_done, &io->mu);
        io->st.wait_ns += pi_time_ns() - t0;
    }
    while (n < max && io->done.n > 0) {
        int si = ring_pop(&io->done);
        if (!slot_finish(io, si, io->slots[si].res, &tags[n])) break;
        n++;
    }
    pthread_mutex_unlock(&io->mu);
    return n;
}

static pi_status pread_start(pi_io *io, int n_workers) {
    if (!ring_init(&io->work, io->qd) || !ring_init(&io->done, io->qd) ||
        !(io->workers = calloc((size_t)n_workers, sizeof *io->workers)))
        return pi_error(PI_ERR_NOMEM, "%s: out of memory for the I/O queues", io->path);
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->cv_work, NULL);
    pthread_cond_init(&io->cv_done, NULL);
    io->sync_ready = true;
    for (int i = 0; i < n_workers; i++) {
        int rc = pthread_create(&io->workers[i], NULL, worker_main, io);
        if (rc) return pi_error(PI_ERR_NOMEM, "%s: cannot start I/O thread %d: %s", io->path, i, strerror(rc));
        io->n_workers++;
    }
    return PI_OK;
}

static void pread_stop(pi_io *io) {
    if (!io->sync_ready) return;
    pthread_mutex_lock(&io->mu);
    io->stop = true;
    pthread_cond_broadcast(&io->cv_work);
    pthread_mutex_unlock(&io->mu);
    for (int i = 0; i < io->n_workers; i++) pthread_join(io->workers[i], NULL);
    pthread_cond_destroy(&io->cv_work);
    pthread_cond_destroy(&io->cv_done);
    pthread_mutex_destroy(&io->mu);
}

/* ---- test backend ----------------------------------------------------- */

static int test_collect(pi_io *io, uint64_t *tags, int max, bool block) {
    int n = 0;
    while (n < max && io->order.n > 0) {
        io_slot *s = &io->slots[io->order.v[io->order.head]];
        uint64_t now = pi_time_ns();
        if (s->due_ns > now) {
            if (!block || n > 0) break;
            sleep_ns(s->due_ns - now);
            io->st.wait_ns += pi_time_ns() - now;
        }
        int si = ring_pop(&io->order);
        int64_t got = test_read(io, s->seq, s->off, s->iov, s->iovcnt, s->len);
        if (!slot_finish(io, si, got, &tags[n])) break;
        n++;
    }
    return n;
}

/* ---- the queue -------------------------------------------------------- */

static int registered_index(const pi_io *io, const struct iovec *iov, int iovcnt) {
    if (!io->n_reg || iovcnt != 1) return -1;
    const char *p = iov[0].iov_base;
    if (p < io->reg_base || iov[0].iov_len > io->reg_len || (size_t)(p - io->reg_base) > io->reg_len - iov[0].iov_len)
        return -1;
    size_t first = (size_t)(p - io->reg_base) / REG_PIECE;
    size_t last = ((size_t)(p - io->reg_base) + iov[0].iov_len - 1) / REG_PIECE;
    return first == last ? (int)first : -1;
}

/* Move queued requests into free slots and hand them to the backend. */
static void start_pending(pi_io *io) {
    io->n_batch = 0;
    uint64_t now = io->backend == PI_IO_TEST ? pi_time_ns() : 0;
    while (io->fifo_n > 0 && io->n_free > 0 && !io->failed) {
        io_pending *p = &io->fifo[io->fifo_head];
        io->fifo_head = (io->fifo_head + 1) % io->fifo_cap;
        io->fifo_n--;
        int si = io->free_slots[--io->n_free];
        io->n_active++;
        io_slot *s = &io->slots[si];
        s->iov = p->r.iov;
        s->iovcnt = p->r.iovcnt;
        s->off = p->r.off;
        s->len = p->len;
        s->done = 0;
        s->res = 0;
        s->seq = p->seq;
        s->tag = p->r.tag;
        s->fixed = io->backend == PI_IO_URING ? registered_index(io, s->iov, s->iovcnt) : -1;
        switch (io->backend) {
        case PI_IO_URING:
#ifdef PI_HAVE_LIBURING
            uring_prep(io, si);
#endif
            break;
        case PI_IO_TEST:
            s->due_ns = now + (io->fault.kind == PI_FAULT_DELAY && io->fault.delay_us > 0
                                   ? (uint64_t)io->fault.delay_us * 1000u
                                   : 0);
            ring_push(&io->order, si);
            break;
        default: io->batch[io->n_batch++] = si; break;
        }
    }
    if (io->backend == PI_IO_URING) {
#ifdef PI_HAVE_LIBURING
        uring_flush(io);
#endif
    } else if (io->backend == PI_IO_PREAD && io->n_batch > 0) {
        pthread_mutex_lock(&io->mu);
        for (int i = 0; i < io->n_batch; i++) ring_push(&io->work, io->batch[i]);
        if (io->n_batch == 1) pthread_cond_signal(&io->cv_work);
        else pthread_cond_broadcast(&io->cv_work);
        pthread_mutex_unlock(&io->mu);
        io->st.submit_calls++;
    } else if (io->backend == PI_IO_TEST) {
        io->st.submit_calls++;
    }
}

pi_status pi_io_submit(pi_io *io, const pi_io_req *reqs, int n) {
    if (!io || n < 0 || (n > 0 && !reqs)) return pi_error(PI_ERR_INVALID, "pi_io_submit: bad arguments");
    if (io->failed) return pi_error(PI_ERR_IO, "%s", io->err);
    size_t a = io->align;
    for (int i = 0; i < n; i++) {
        const pi_io_req *r = &reqs[i];
        if (r->iovcnt < 1 || r->iovcnt > PI_IO_MAX_IOV || !r->iov)
            return pi_error(PI_ERR_INVALID, "%s: read %d: %d pieces (1..%d)", io->path, i, r->iovcnt, PI_IO_MAX_IOV);
        if (r->off < 0 || !is_aligned((uint64_t)r->off, a))
            return pi_error(PI_ERR_INVALID, "%s: read at offset %lld: not a multiple of %zu", io->path,
                            (long long)r->off, a);
        size_t len = 0;
        for (int k = 0; k < r->iovcnt; k++) {
            if (!is_aligned((uintptr_t)r->iov[k].iov_base, a) || !is_aligned(r->iov[k].iov_len, a))
                return pi_error(PI_ERR_INVALID,
                                "%s: read at offset %lld: piece %d (%zu bytes at %p) is not aligned to %zu", io->path,
                                (long long)r->off, k, r->iov[k].iov_len, r->iov[k].iov_base, a);
            len += r->iov[k].iov_len;
        }
        if (len == 0) return pi_error(PI_ERR_INVALID, "%s: read at offset %lld: no bytes", io->path, (long long)r->off);
    }
    if (io->fifo_n + n > io->fifo_cap) {
        int64_t cap = io->fifo_cap;
        while (cap < io->fifo_n + n) cap *= 2;
        io_pending *f = malloc((size_t)cap * sizeof *f);
        if (!f) return pi_error(PI_ERR_NOMEM, "%s: out of memory for %lld queued reads", io->path, (long long)cap);
        for (int64_t i = 0; i < io->fifo_n; i++) f[i] = io->fifo[(io->fifo_head + i) % io->fifo_cap];
        free(io->fifo);
        io->fifo = f;
        io->fifo_cap = cap;
        io->fifo_head = 0;
    }
    for (int i = 0; i < n; i++) {
        io_pending *p = &io->fifo[(io->fifo_head + io->fifo_n) % io->fifo_cap];
        p->r = reqs[i];
        p->len = 0;
        for (int k = 0; k < reqs[i].iovcnt; k++) p->len += reqs[i].iov[k].iov_len;
        p->seq = io->seq++;
        io->fifo_n++;
    }
    start_pending(io);
    return io->failed ? pi_error(PI_ERR_IO, "%s", io->err) : PI_OK;
}

int pi_io_reap_min(pi_io *io, uint64_t *tags, int max, int min) {
    if (!io) return pi_error(PI_ERR_INVALID, "pi_io_reap: no engine"), -1;
    io->reap_min = min;
    int n = pi_io_reap(io, tags, max, true);
    io->reap_min = 1;
    return n;
}

int pi_io_reap(pi_io *io, uint64_t *tags, int max, bool wait) {
    if (!io) return pi_error(PI_ERR_INVALID, "pi_io_reap: no engine"), -1;
    if (io->failed) return reap_error(io);
    if (max <= 0 || !tags) return 0;
    int n = 0;
    for (;;) {
        bool block = wait && n == 0 && io->n_active > 0;
        switch (io->backend) {
#ifdef PI_HAVE_LIBURING
        case PI_IO_URING: n += uring_collect(io, tags + n, max - n, block); break;
#endif
        case PI_IO_TEST: n += test_collect(io, tags + n, max - n, block); break;
        default: n += pread_collect(io, tags + n, max - n, block); break;
        }
        if (!io->failed) start_pending(io);
        if (io->failed) return n > 0 ? n : reap_error(io); /* the error comes with the next call */
        if (n > 0 || !wait || io->n_active == 0) break;
    }
    return n;
}

int64_t pi_io_in_flight(const pi_io *io) { return io ? io->n_active + io->fifo_n : 0; }

/* ---- synchronous reads ------------------------------------------------ */

static int64_t sync_read(pi_io *io, int64_t off, void *buf, size_t len) {
    struct iovec v = {buf, len};
    if (io->backend == PI_IO_TEST) {
        if (io->fault.kind == PI_FAULT_DELAY && io->fault.delay_us > 0) sleep_ns((uint64_t)io->fault.delay_us * 1000u);
        return test_read(io, io->seq++, off, &v, 1, len);
    }
    io->seq++;
    return read_fully(io, off, &v, 1, len);
}

pi_status pi_io_read(pi_io *io, int64_t off, void *buf, size_t len) {
    if (!io || off < 0 || (len && !buf)) return pi_error(PI_ERR_INVALID, "pi_io_read: bad arguments");
    if (io->failed) return pi_error(PI_ERR_IO, "%s", io->err);
    size_t a = io->align;
    uint8_t *dst = buf, *bounce = NULL;
    int64_t pos = off;
    size_t rem = len;
    pi_status st = PI_OK;
    while (rem > 0) {
        size_t n, want, skip = 0;
        int64_t at = pos, got;
        if (is_aligned((uint64_t)pos, a) && is_aligned((uintptr_t)dst, a) && rem >= a) {
            n = want = (rem < READ_DIRECT_CHUNK ? rem : READ_DIRECT_CHUNK) & ~(a - 1);
            got = sync_read(io, pos, dst, n);
        } else {
            if (!bounce && !(bounce = aligned_alloc(a, READ_BOUNCE))) {
                st = pi_error(PI_ERR_NOMEM, "%s: out of memory for a read buffer", io->path);
                break;
            }
            at = pos & ~(int64_t)(a - 1);
            skip = (size_t)(pos - at);
            n = rem < READ_BOUNCE - skip ? rem : READ_BOUNCE - skip;
            want = (skip + n + a - 1) & ~(a - 1);
            got = sync_read(io, at, bounce, want);
            if (got >= (int64_t)(skip + n)) memcpy(dst, bounce + skip, n);
        }
        if (got < 0) {
            format_read_error(io, at, want, got);
            st = pi_error(PI_ERR_IO, "%s", io->err);
            break;
        }
        if ((size_t)got < skip + n) {
            int64_t delivered = (pos - off) + (got > (int64_t)skip ? got - (int64_t)skip : 0);
            format_read_error(io, off, len, delivered);
            st = pi_error(PI_ERR_IO, "%s", io->err);
            break;
        }
        io->st.reads++;
        io->st.bytes += n;
        pos += (int64_t)n;
        dst += n;
        rem -= n;
    }
    free(bounce);
    return st;
}

void pi_io_get_stats(const pi_io *io, pi_io_stats *st) {
    if (io) *st = io->st;
    else memset(st, 0, sizeof *st);
}

void pi_io_reset_stats(pi_io *io) {
    if (io) memset(&io->st, 0, sizeof io->st);
}

/* ---- open, close, registration ---------------------------------------- */

/* O_DIRECT alignment: the filesystem's DIO alignment or the device's logical
   block size when larger than 4096. */
static size_t direct_align(int fd) {
    size_t a = 4096, want = 0;
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        want = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align : sx.stx_dio_mem_align;
    }
#endif
    struct stat sb;
    if (!want && fstat(fd, &sb) == 0) {
        dev_t dev = S_ISBLK(sb.st_mode) ? sb.st_rdev : sb.st_dev;
        for (int i = 0; i < 2 && !want; i++) { /* a whole disk, then a partition's parent */
            char path[96];
            snprintf(path, sizeof path, "/sys/dev/block/%u:%u/%squeue/logical_block_size", major(dev), minor(dev),
                     i ? "../" : "");
            FILE *f = fopen(path, "re");
            unsigned long v;
            if (f && fscanf(f, "%lu", &v) == 1) want = v;
            if (f) fclose(f);
        }
    }
    if (want > a && want <= ((size_t)1 << 20) && (want & (want - 1)) == 0) a = want;
    return a;
}

static pi_status open_file(pi_io *io, bool want_buffered, bool refuse_direct) {
    const char *path = io->path;
    if (!want_buffered) {
        io->fd = refuse_direct ? -1 : open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        int e = refuse_direct ? EINVAL : errno;
        struct stat sb;
        if (io->fd < 0 && e == EINVAL && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISBLK(sb.st_mode))
            return pi_error(PI_ERR_INVALID, "%s: not a regular file or block device", path);
        if (io->fd < 0 && e == EINVAL) {
            if (!atomic_flag_test_and_set(&g_warned_nodirect))
                PI_LOGW("%s: the filesystem refuses O_DIRECT; reading through the page cache and dropping "
                        "what each read leaves there", path);
            else
                PI_LOGD("%s: no O_DIRECT; buffered reads", path);
            io->dontneed = true;
            want_buffered = true;
        }
    }
    if (want_buffered) io->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (io->fd < 0) return pi_error(errno == ENOENT ? PI_ERR_NOT_FOUND : PI_ERR_IO, "%s: %s", path, strerror(errno));
    io->buffered = want_buffered;
    struct stat sb;
    if (fstat(io->fd, &sb) != 0) return pi_error(PI_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        io->is_reg = true;
        io->size = (int64_t)sb.st_size;
    } else if (S_ISBLK(sb.st_mode)) {
        uint64_t bytes = 0;
        if (ioctl(io->fd, BLKGETSIZE64, &bytes) != 0) return pi_error(PI_ERR_IO, "%s: %s", path, strerror(errno));
        io->size = (int64_t)bytes;
    } else {
        return pi_error(PI_ERR_INVALID, "%s: not a regular file or block device", path);
    }
    io->align = want_buffered ? 1 : direct_align(io->fd);
    return PI_OK;
}

static pi_status backend_start(pi_io *io, pi_io_backend want, int n_workers) {
    if (want == PI_IO_TEST) {
        io->backend = PI_IO_TEST;
        return ring_init(&io->order, io->qd) ? PI_OK : pi_error(PI_ERR_NOMEM, "%s: out of memory", io->path);
    }
    if (want == PI_IO_URING || want == PI_IO_AUTO) {
#ifdef PI_HAVE_LIBURING
        int r = io_uring_queue_init((unsigned)io->qd, &io->ring, 0);
        if (r == 0) {
            io->ring_ready = true;
            io->backend = PI_IO_URING;
            if (!atomic_flag_test_and_set(&g_logged_backend)) PI_LOGD("I/O: io_uring, queue depth %d", io->qd);
            return PI_OK;
        }
        if (want == PI_IO_URING)
            return pi_error(PI_ERR_UNSUPPORTED, "%s: io_uring is unavailable (io_uring_queue_init: %s)", io->path,
                            strerror(-r));
        if (!atomic_flag_test_and_set(&g_logged_fallback))
            PI_LOGI("I/O: io_uring is unavailable (%s); using %d pread threads", strerror(-r), n_workers);
#else
        if (want == PI_IO_URING)
            return pi_error(PI_ERR_UNSUPPORTED, "%s: pinfer was built without io_uring (liburing); use the pread "
                                                "backend", io->path);
        if (!atomic_flag_test_and_set(&g_logged_fallback))
            PI_LOGD("I/O: built without io_uring; using %d pread threads", n_workers);
#endif
    }
    io->backend = PI_IO_PREAD;
    return pread_start(io, n_workers);
}

pi_status pi_io_open(const char *path, const pi_io_opts *o, pi_io **out) {
    if (!out) return pi_error(PI_ERR_INVALID, "pi_io_open: no output");
    *out = NULL;
    pi_io_opts d = {0};
    if (o) d = *o;
    if (!path) return pi_error(PI_ERR_INVALID, "pi_io_open: no path");
    if (d.backend < PI_IO_AUTO || d.backend > PI_IO_TEST)
        return pi_error(PI_ERR_INVALID, "%s: unknown I/O backend %d", path, (int)d.backend);
    if (d.queue_depth == 0) d.queue_depth = 32;
    if (d.queue_depth < 1 || d.queue_depth > PI_IO_MAX_QUEUE_DEPTH)
        return pi_error(PI_ERR_INVALID, "%s: queue depth %d is not in 1..%d", path, d.queue_depth,
                        PI_IO_MAX_QUEUE_DEPTH);
    if (d.n_workers == 0) d.n_workers = d.queue_depth < 16 ? d.queue_depth : 16;
    if (d.n_workers < 1 || d.n_workers > 1024)
        return pi_error(PI_ERR_INVALID, "%s: %d I/O threads (1..1024)", path, d.n_workers);

    pi_io *io = calloc(1, sizeof *io);
    if (!io || !(io->path = strdup(path))) {
        free(io);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    io->fd = -1;
    io->qd = d.queue_depth;
    io->fault = d.fault;
    if (d.backend != PI_IO_TEST && d.fault.kind != PI_FAULT_NODIRECT) io->fault.kind = PI_FAULT_NONE;
    io->backend = PI_IO_PREAD; /* until the backend starts: what pi_io_close tears down */
    pi_status st = open_file(io, d.buffered, d.fault.kind == PI_FAULT_NODIRECT);
    if (st == PI_OK) {
        io->fifo_cap = 2 * (int64_t)io->qd;
        io->slots = calloc((size_t)io->qd, sizeof *io->slots);
        io->free_slots = malloc((size_t)io->qd * sizeof *io->free_slots);
        io->batch = malloc((size_t)io->qd * sizeof *io->batch);
        io->fifo = malloc((size_t)io->fifo_cap * sizeof *io->fifo);
        if (!io->slots || !io->free_slots || !io->batch || !io->fifo)
            st = pi_error(PI_ERR_NOMEM, "%s: out of memory for %d I/O slots", path, io->qd);
    }
    if (st == PI_OK) {
        for (int i = 0; i < io->qd; i++) io->free_slots[i] = io->qd - 1 - i;
        io->n_free = io->qd;
        st = backend_start(io, d.backend, d.n_workers);
    }
    if (st != PI_OK) {
        pi_error_saved e;
        pi_error_save(&e);
        pi_io_close(io);
        pi_error_restore(&e);
        return st;
    }
    *out = io;
    return PI_OK;
}

void pi_io_close(pi_io *io) {
    if (!io) return;
    switch (io->backend) {
#ifdef PI_HAVE_LIBURING
    case PI_IO_URING:
        if (io->ring_ready) uring_close(io);
        break;
#endif
    case PI_IO_PREAD: pread_stop(io); break;
    default: break;
    }
    if (io->fd >= 0) close(io->fd);
    free(io->workers);
    free(io->work.v);
    free(io->done.v);
    free(io->order.v);
    free(io->slots);
    free(io->free_slots);
    free(io->batch);
    free(io->fifo);
    free(io->path);
    free(io);
}

pi_status pi_io_register(pi_io *io, void *base, size_t len) {
    if (!io || !base || !len) return pi_error(PI_ERR_INVALID, "pi_io_register: bad arguments");
    if (io->reg_done || pi_io_in_flight(io) > 0)
        return pi_error(PI_ERR_INVALID, "%s: buffers are registered once, before reads are queued", io->path);
    io->reg_done = true;
#ifdef PI_HAVE_LIBURING
    if (io->backend != PI_IO_URING) return PI_OK;
    size_t n = (len + REG_PIECE - 1) / REG_PIECE;
    if (n > 16384) return pi_error(PI_ERR_INVALID, "%s: %zu GiB of buffers is too many to register", io->path, n);
    struct iovec *v = malloc(n * sizeof *v);
    if (!v) return pi_error(PI_ERR_NOMEM, "%s: out of memory", io->path);
    for (size_t i = 0; i < n; i++) {
        v[i].iov_base = (char *)base + i * REG_PIECE;
        v[i].iov_len = i + 1 < n ? REG_PIECE : len - i * REG_PIECE;
    }
    int r = io_uring_register_buffers(&io->ring, v, (unsigned)n);
    free(v);
    if (r < 0) {
        PI_LOGW("%s: io_uring cannot register %zu MiB of buffers (%s%s); reads use READV", io->path, len >> 20,
                strerror(-r), r == -ENOMEM ? ": raise the locked-memory limit, ulimit -l" : "");
        return PI_OK;
    }
    io->reg_base = base;
    io->reg_len = len;
    io->n_reg = (int)n;
#endif
    return PI_OK;
}

const char *pi_io_backend_name(const pi_io *io) {
    if (!io) return "none";
    switch (io->backend) {
    case PI_IO_URING: return "io_uring";
    case PI_IO_TEST: return "test";
    default: return "pread";
    }
}

int64_t pi_io_file_size(const pi_io *io) { return io ? io->size : 0; }
size_t pi_io_align(const pi_io *io) { return io ? io->align : 1; }
bool pi_io_buffered(const pi_io *io) { return io && io->buffered; }
