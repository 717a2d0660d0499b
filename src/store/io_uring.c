/*
 * io_uring.c — the io_uring backend: one ring of queue_depth entries, READV,
 * or READ_FIXED when a read's single piece lies in a registered buffer.
 *
 * Invariants:
 *   - At most queue_depth slots are with the ring (io.c hands out no more),
 *     so the SQ and CQ never overflow; an SQE's user data is its slot index.
 *   - A partial result, EAGAIN or EINTR re-issues the rest of the read from
 *     the slot (s->done, s->rest); a short result at the end of the file
 *     finishes the slot and the short read fails the engine in io.c.
 *   - close drains the ring (for at most PI_IO_CLOSE_DRAIN_NS) before it is
 *     torn down, so the kernel never writes into memory after pi_io_close.
 *
 * Built without liburing (PI_HAVE_LIBURING undefined), the ops table only
 * opens, and that fails with PI_ERR_UNSUPPORTED: AUTO then uses pread.
 */
#include "store/io_internal.h"

#include "base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

static atomic_flag g_logged_fallback = ATOMIC_FLAG_INIT;

#ifdef PI_HAVE_LIBURING

#include "base/timer.h"

#include <fcntl.h>
#include <liburing.h>
#include <sched.h>

#define REG_PIECE ((size_t)1 << 30) /* io_uring caps one registered buffer at 1 GiB */

/* Completions without an interrupt of the submitting thread (Linux 5.19):
   a read that lands while the thread computes is posted when it next enters
   the kernel (a reap, a submit; a peek enters when the ring's TASKRUN flag
   says completions wait), not by forcing it out of its computation; a
   sleeping thread is still woken. At 285 MiB of the 7b-l8 bundle file
   (~9000 reads a token), alternated with the plain ring over eight rounds:
   the CPU time in the kernel and interrupts per token 49-60 ms against
   39-91 (medians 56 and 66), decode speed the same (medians 7.97 and 8.00
   tok/s: the disk is the limit there). Older kernels refuse the flags: the plain ring. */
#if defined(IORING_SETUP_COOP_TASKRUN) && defined(IORING_SETUP_TASKRUN_FLAG)
#define RING_FLAGS (IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG)
#else
#define RING_FLAGS 0u
#endif

typedef struct uring_state {
    struct io_uring ring;
    bool ring_ready;
    char *reg_base; /* registered [reg_base, reg_base+reg_len) in n_reg pieces of REG_PIECE */
    size_t reg_len;
    int n_reg;      /* 0: none */
} uring_state;

static atomic_flag g_logged_backend = ATOMIC_FLAG_INIT;

static void uring_flush(pi_io *io) {
    uring_state *u = io->be;
    int stalls = 0;
    while (io_uring_sq_ready(&u->ring) > 0) {
        int r = io_uring_submit(&u->ring);
        io->st.submit_calls++;
        if (r > 0) continue;
        if ((r == 0 || r == -EAGAIN || r == -EINTR || r == -EBUSY) && ++stalls < 10000) {
            sched_yield();
            continue;
        }
        pi_io_fail(io, "io_uring_submit failed", r < 0 ? -r : EAGAIN);
        return;
    }
}

/* Queue an SQE for what remains of slot si. */
static void uring_prep(pi_io *io, int si) {
    uring_state *u = io->be;
    io_slot *s = &io->slots[si];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe) { /* cannot happen with <= qd in flight; be safe */
        uring_flush(io);
        sqe = io_uring_get_sqe(&u->ring);
        PI_ASSERT(sqe);
    }
    int64_t off = s->off + (int64_t)s->done;
    if (s->fixed >= 0) {
        io_uring_prep_read_fixed(sqe, io->fd, (char *)s->iov[0].iov_base + s->done, (unsigned)(s->len - s->done),
                                 (uint64_t)off, s->fixed);
    } else if (s->done == 0) {
        io_uring_prep_readv(sqe, io->fd, s->iov, (unsigned)s->iovcnt, (uint64_t)off);
    } else {
        int n = pi_io_iov_advance(s->iov, s->iovcnt, s->done, s->rest);
        io_uring_prep_readv(sqe, io->fd, s->rest, (unsigned)n, (uint64_t)off);
    }
    io_uring_sqe_set_data64(sqe, (uint64_t)si);
}

/* The registered piece that holds a read's single piece whole, or -1. */
static int registered_index(const uring_state *u, const struct iovec *iov, int iovcnt) {
    if (!u->n_reg || iovcnt != 1) return -1;
    const char *p = iov[0].iov_base;
    if (p < u->reg_base || iov[0].iov_len > u->reg_len || (size_t)(p - u->reg_base) > u->reg_len - iov[0].iov_len)
        return -1;
    size_t first = (size_t)(p - u->reg_base) / REG_PIECE;
    size_t last = ((size_t)(p - u->reg_base) + iov[0].iov_len - 1) / REG_PIECE;
    return first == last ? (int)first : -1;
}

static void uring_submit(pi_io *io, const int *si, int n) {
    uring_state *u = io->be;
    for (int i = 0; i < n; i++) {
        io_slot *s = &io->slots[si[i]];
        s->fixed = registered_index(u, s->iov, s->iovcnt);
        uring_prep(io, si[i]);
    }
    uring_flush(io);
}

static int uring_reap(pi_io *io, uint64_t *tags, int max, bool block) {
    uring_state *u = io->be;
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
            r = want > 1 ? io_uring_wait_cqe_nr(&u->ring, &cqe, want) : io_uring_wait_cqe(&u->ring, &cqe);
            io->st.wait_ns += pi_time_ns() - t0;
        } else {
            r = io_uring_peek_cqe(&u->ring, &cqe);
            if (r == -EAGAIN) break;
        }
        if (r == -EINTR) continue;
        if (r < 0) {
            pi_io_fail(io, "io_uring_wait_cqe failed", -r);
            break;
        }
        int si = (int)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
        PI_ASSERT(si >= 0 && si < io->qd);
        io_slot *s = &io->slots[si];
        if (res == -EAGAIN || res == -EINTR) {
            io->st.retries++;
            uring_prep(io, si);
            reissued = true;
            continue;
        }
        if (res < 0) {
            pi_io_slot_finish(io, si, res, &tags[n]);
            break;
        }
        s->done += (size_t)res;
        if (s->done < s->len && res > 0 && !pi_io_at_eof(io, s->off + (int64_t)s->done)) {
            io->st.retries++;
            uring_prep(io, si);
            reissued = true;
            continue;
        }
        pi_io_dontneed(io, s->off, s->done);
        if (!pi_io_slot_finish(io, si, (int64_t)s->done, &tags[n])) break;
        n++;
    }
    if (reissued) uring_flush(io); /* even after an error: close drains what is in flight */
    return n;
}

static pi_status uring_register(pi_io *io, void *base, size_t len) {
    uring_state *u = io->be;
    size_t n = (len + REG_PIECE - 1) / REG_PIECE;
    if (n > 16384) return pi_error(PI_ERR_INVALID, "%s: %zu GiB of buffers is too many to register", io->path, n);
    struct iovec *v = malloc(n * sizeof *v);
    if (!v) return pi_error(PI_ERR_NOMEM, "%s: out of memory", io->path);
    for (size_t i = 0; i < n; i++) {
        v[i].iov_base = (char *)base + i * REG_PIECE;
        v[i].iov_len = i + 1 < n ? REG_PIECE : len - i * REG_PIECE;
    }
    int r = io_uring_register_buffers(&u->ring, v, (unsigned)n);
    free(v);
    if (r < 0) {
        PI_LOGW("%s: io_uring cannot register %zu MiB of buffers (%s%s); reads use READV", io->path, len >> 20,
                strerror(-r), r == -ENOMEM ? ": raise the locked-memory limit, ulimit -l" : "");
        return PI_OK;
    }
    u->reg_base = base;
    u->reg_len = len;
    u->n_reg = (int)n;
    return PI_OK;
}

static pi_status uring_open(pi_io *io, const pi_io_opts *o) {
    uring_state *u = io->be;
    int r = io_uring_queue_init((unsigned)io->qd, &u->ring, RING_FLAGS);
    if (r == -EINVAL && RING_FLAGS) r = io_uring_queue_init((unsigned)io->qd, &u->ring, 0);
    if (r != 0) {
        if (o->backend == PI_IO_AUTO && !atomic_flag_test_and_set(&g_logged_fallback))
            PI_LOGI("I/O: io_uring is unavailable (%s); using %d pread threads", strerror(-r), o->n_workers);
        return pi_error(PI_ERR_UNSUPPORTED, "%s: io_uring is unavailable (io_uring_queue_init: %s)", io->path,
                        strerror(-r));
    }
    u->ring_ready = true;
    if (!atomic_flag_test_and_set(&g_logged_backend)) PI_LOGD("I/O: io_uring, queue depth %d", io->qd);
    return PI_OK;
}

static void uring_close(pi_io *io) {
    uring_state *u = io->be;
    if (u->ring_ready) {
        io_uring_submit(&u->ring);
        uint64_t deadline = pi_time_ns() + PI_IO_CLOSE_DRAIN_NS;
        while (io->n_active > 0) {
            uint64_t now = pi_time_ns();
            if (now >= deadline) {
                PI_LOGW("%s: %lld reads still in flight at close", io->path, (long long)io->n_active);
                break;
            }
            struct __kernel_timespec ts = {(long long)((deadline - now) / 1000000000ull),
                                           (long long)((deadline - now) % 1000000000ull)};
            struct io_uring_cqe *cqe;
            int r = io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
            if (r == -EINTR) continue;
            if (r < 0) break;
            io_uring_cqe_seen(&u->ring, cqe);
            io->n_active--;
        }
        io_uring_queue_exit(&u->ring);
    }
}

const pi_io_ops pi_io_uring_ops = {
    .name = "io_uring",
    .state_size = sizeof(uring_state),
    .open = uring_open,
    .close = uring_close,
    .register_buffers = uring_register,
    .submit = uring_submit,
    .reap = uring_reap,
};

#else /* !PI_HAVE_LIBURING */

static pi_status uring_open(pi_io *io, const pi_io_opts *o) {
    if (o->backend == PI_IO_AUTO && !atomic_flag_test_and_set(&g_logged_fallback))
        PI_LOGD("I/O: built without io_uring; using %d pread threads", o->n_workers);
    return pi_error(PI_ERR_UNSUPPORTED, "%s: pinfer was built without io_uring (liburing); use the pread backend",
                    io->path);
}

static void uring_close(pi_io *io) { (void)io; }

/* Only open and close: open always fails, so no other op is ever called. */
const pi_io_ops pi_io_uring_ops = {.name = "io_uring", .open = uring_open, .close = uring_close};

#endif
