/*
 * io_test.c — the test backend: synchronous preadv at reap time with the
 * fault of pi_io_opts.fault (EIO, short reads, delays) injected, so tests
 * can make every error path of the engine and its callers happen on demand.
 *
 * Invariants:
 *   - Reads complete in the order they were started (`order`, a ring of
 *     queue_depth slot indices), each no earlier than its due time.
 *   - A fault hits a read by its submission number (io->seq at submit, shared
 *     with pi_io_read's chunks) or by the file offset its range covers.
 */
#include "store/io_internal.h"

#include "base/timer.h"

#include <errno.h>
#include <time.h>

typedef struct test_state {
    int_ring order; /* started slots in start order */
} test_state;

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static uint64_t delay_ns(const pi_io *io) {
    return io->fault.kind == PI_FAULT_DELAY && io->fault.delay_us > 0 ? (uint64_t)io->fault.delay_us * 1000u : 0;
}

/* One read with the configured fault applied. */
static int64_t faulty_read(const pi_io *io, int64_t seq, int64_t off, const struct iovec *iov, int iovcnt,
                           size_t len) {
    const pi_io_fault *f = &io->fault;
    bool hit = f->nth >= 0 ? seq == f->nth : (f->off >= off && f->off < off + (int64_t)len);
    if (f->kind == PI_FAULT_EIO && hit) return -EIO;
    int64_t got = pi_io_read_fully(io, off, iov, iovcnt, len);
    if (f->kind == PI_FAULT_SHORT && hit && got > (int64_t)(len / 2)) got = (int64_t)(len / 2);
    return got;
}

/* pi_io_read's pieces: late by the delay, then faulty. */
static int64_t test_sync_read(pi_io *io, int64_t seq, int64_t off, const struct iovec *iov, int iovcnt, size_t len) {
    uint64_t d = delay_ns(io);
    if (d) sleep_ns(d);
    return faulty_read(io, seq, off, iov, iovcnt, len);
}

static void test_submit(pi_io *io, const int *si, int n) {
    test_state *t = io->be;
    uint64_t due = pi_time_ns() + delay_ns(io);
    for (int i = 0; i < n; i++) {
        io->slots[si[i]].due_ns = due;
        pi_io_ring_push(&t->order, si[i]);
    }
    io->st.submit_calls++;
}

static int test_reap(pi_io *io, uint64_t *tags, int max, bool block) {
    test_state *t = io->be;
    int n = 0;
    while (n < max && t->order.n > 0) {
        io_slot *s = &io->slots[t->order.v[t->order.head]];
        uint64_t now = pi_time_ns();
        if (s->due_ns > now) {
            if (!block || n > 0) break;
            sleep_ns(s->due_ns - now);
            io->st.wait_ns += pi_time_ns() - now;
        }
        int si = pi_io_ring_pop(&t->order);
        int64_t got = faulty_read(io, s->seq, s->off, s->iov, s->iovcnt, s->len);
        if (!pi_io_slot_finish(io, si, got, &tags[n])) break;
        n++;
    }
    return n;
}

static pi_status test_open(pi_io *io, const pi_io_opts *o) {
    (void)o;
    test_state *t = io->be;
    return pi_io_ring_init(&t->order, io->qd) ? PI_OK : pi_error(PI_ERR_NOMEM, "%s: out of memory", io->path);
}

static void test_close(pi_io *io) {
    test_state *t = io->be;
    free(t->order.v);
}

const pi_io_ops pi_io_test_ops = {
    .name = "test",
    .state_size = sizeof(test_state),
    .open = test_open,
    .close = test_close,
    .submit = test_submit,
    .reap = test_reap,
    .read = test_sync_read,
};
