/*
 * test_io.c — the I/O engine: every backend this machine can run (io_uring,
 * pread, test) reads a file whose bytes are known (each 8-byte word is its
 * offset ^ a constant) and every byte that arrives is checked, as are the
 * bytes around the destinations. Covered: single and scattered (multi-iovec)
 * reads, more reads in one submit than the queue depth, reaping with and
 * without waiting, pi_io_read at any offset/length/buffer, READ_FIXED into a
 * registered arena, the file on tmpfs, the buffered fallback when O_DIRECT is
 * refused, reads past the end of a file (short-read errors, never a hang),
 * injected EIO/short/delayed reads, close with reads in flight or after an
 * error, and the fixed queue: a batch that does not fit beside the reads in
 * flight is refused whole with PI_ERR_FULL and accepted after reaping, with
 * no allocation on the submit/reap path; reads reaped by another thread while
 * the one that submitted them sleeps (as the server's slots take turns with
 * one engine), and reaped after the submitter computed without entering the
 * kernel. An alarm turns a hang into a failure.
 */
#include "store/io.h"
#include "base/timer.h"
#include "test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define KEY 0x5a17c0ffee123457ull
#define FILE_SIZE ((int64_t)4 << 20)
#define N_READS 200
#define MAX_PIECES 4
#define PIECE_MAX 8192
#define REQ_SPAN (MAX_PIECES * PIECE_MAX * 2) /* arena bytes per read: pieces scattered with gaps */
#define SENTINEL 0xEE

static const char *backend_str(pi_io_backend b) {
    switch ((int)b) {
    case PI_IO_URING: return "uring";
    case PI_IO_PREAD: return "pread";
    case PI_IO_TEST: return "test";
    default: return "auto";
    }
}

static uint8_t expect_byte(int64_t p) { return (uint8_t)(((uint64_t)(p & ~7) ^ KEY) >> (8 * (p & 7))); }

/* Index of the first byte of buf that differs from the file at off, or -1. */
static int64_t mismatch(const uint8_t *buf, int64_t off, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (buf[i] != expect_byte(off + (int64_t)i)) return (int64_t)i;
    return -1;
}

static bool write_pattern(const char *path, int64_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    uint8_t chunk[65536];
    for (int64_t at = 0; at < size; at += (int64_t)sizeof chunk) {
        size_t n = size - at < (int64_t)sizeof chunk ? (size_t)(size - at) : sizeof chunk;
        for (size_t i = 0; i < n; i++) chunk[i] = expect_byte(at + (int64_t)i);
        if (fwrite(chunk, 1, n, f) != n) {
            fclose(f);
            return false;
        }
    }
    return fclose(f) == 0;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_io: timed out: a read or close hangs\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(1);
}

static pi_status open_io(const char *path, pi_io_backend b, int qd, pi_io_fault f, pi_io **io) {
    pi_io_opts o = {.backend = b, .queue_depth = qd, .fault = f};
    return pi_io_open(path, &o, io);
}

typedef struct plan {
    pi_io_req req[N_READS];
    struct iovec iov[N_READS][MAX_PIECES];
    size_t arena_off[N_READS][MAX_PIECES];
    int seen[N_READS];
} plan;

/* Random reads of 1..MAX_PIECES pieces (one piece when fixed) at multiples of
   the alignment a (of 512 bytes when a is 1, so offsets are also odd). Pieces
   land in the arena at scattered places, last piece first. */
static void make_plan(plan *p, t_rng *r, uint8_t *arena, size_t a, int64_t file_size, bool single) {
    size_t g = a > 1 ? a : 1;
    for (int i = 0; i < N_READS; i++) {
        int np = single ? 1 : 1 + (int)(t_next(r) % MAX_PIECES);
        size_t total = 0, len[MAX_PIECES];
        for (int k = 0; k < np; k++) {
            size_t units = PIECE_MAX / (a > 1 ? a : 512);
            len[k] = (1 + t_next(r) % units) * (a > 1 ? a : 512);
            if (a == 1) len[k] -= t_next(r) % 511;
            total += len[k];
        }
        int64_t span = (file_size - (int64_t)total) / (int64_t)g;
        int64_t off = (int64_t)(t_next(r) % (uint64_t)(span + 1)) * (int64_t)g;
        size_t base = (size_t)i * REQ_SPAN, at = base + REQ_SPAN;
        for (int k = 0; k < np; k++) { /* last piece lowest in memory, a gap of a*k before each */
            at -= len[k] + (single ? 0 : (size_t)k * g);
            at &= ~(g - 1);
            p->arena_off[i][k] = at;
            p->iov[i][k].iov_base = arena + at;
            p->iov[i][k].iov_len = len[k];
        }
        PI_ASSERT(at >= base);
        p->req[i] = (pi_io_req){.off = off, .iov = p->iov[i], .iovcnt = np, .tag = 1000 + (uint64_t)i};
        p->seen[i] = 0;
    }
}

/* Every byte of every read as in the file; every arena byte outside the pieces untouched. */
static int check_plan(const plan *p, const uint8_t *arena, size_t arena_len, const char *what) {
    uint8_t *mark = calloc(arena_len, 1);
    int bad = 0;
    for (int i = 0; i < N_READS; i++) {
        int64_t off = p->req[i].off;
        for (int k = 0; k < p->req[i].iovcnt; k++) {
            size_t len = p->iov[i][k].iov_len;
            int64_t m = mismatch(p->iov[i][k].iov_base, off, len);
            if (m >= 0 && bad++ < 3)
                fprintf(stderr, "%s: read %d piece %d: byte %lld of %zu (file offset %lld) wrong\n", what, i, k,
                        (long long)m, len, (long long)(off + m));
            memset(mark + p->arena_off[i][k], 1, len);
            off += (int64_t)len;
        }
    }
    size_t touched = 0;
    for (size_t i = 0; i < arena_len; i++) touched += !mark[i] && arena[i] != SENTINEL;
    CHECKF(touched == 0, "%s: %zu bytes outside the destinations were written", what, touched);
    free(mark);
    CHECKF(bad == 0, "%s: %d pieces with wrong bytes", what, bad);
    return bad;
}

/* Submit all reads in one call, reap with a mix of wait/no-wait and batch sizes. */
static void run_plan(pi_io *io, plan *p, uint8_t *arena, size_t arena_len, const char *what) {
    memset(arena, SENTINEL, arena_len);
    pi_io_reset_stats(io);
    uint64_t bytes = 0;
    for (int i = 0; i < N_READS; i++)
        for (int k = 0; k < p->req[i].iovcnt; k++) bytes += p->iov[i][k].iov_len;
    CHECKF(pi_io_submit(io, p->req, N_READS) == PI_OK, "%s: submit: %s", what, pi_last_error());
    CHECKF(pi_io_in_flight(io) == N_READS, "%s: in flight %lld", what, (long long)pi_io_in_flight(io));
    int got = 0, rounds = 0, dup = 0, unknown = 0;
    uint64_t tags[16];
    static const int maxes[] = {1, 3, 16, 7};
    while (got < N_READS && rounds < 100000) {
        bool wait = rounds % 3 != 0;
        int n = pi_io_reap(io, tags, maxes[rounds % 4], wait);
        rounds++;
        if (n < 0) {
            CHECKF(0, "%s: reap: %s", what, pi_last_error());
            break;
        }
        if (wait) CHECKF(n > 0, "%s: reap(wait) returned 0 with %lld in flight", what, (long long)pi_io_in_flight(io));
        for (int j = 0; j < n; j++) {
            uint64_t t = tags[j] - 1000;
            if (tags[j] < 1000 || t >= N_READS) unknown++;
            else if (p->seen[t]++) dup++;
        }
        got += n;
        CHECK(pi_io_in_flight(io) == N_READS - got);
    }
    CHECKF(got == N_READS && !dup && !unknown, "%s: %d of %d tags, %d twice, %d unknown", what, got, N_READS, dup,
           unknown);
    CHECK(pi_io_reap(io, tags, 16, true) == 0); /* nothing pending: returns at once */
    CHECK(pi_io_reap(io, tags, 16, false) == 0);
    pi_io_stats st;
    pi_io_get_stats(io, &st);
    CHECKF(st.reads == N_READS && st.bytes == bytes, "%s: stats %llu reads %llu bytes, want %d %llu", what,
           (unsigned long long)st.reads, (unsigned long long)st.bytes, N_READS, (unsigned long long)bytes);
    CHECK(st.submit_calls > 0);
    /* the reads were with the backend a while, each of those moments at least one deep */
    CHECKF(st.busy_ns > 0 && st.depth_ns >= (double)st.busy_ns && st.depth_ns <= (double)N_READS * (double)st.busy_ns,
           "%s: %llu ns busy, %.0f read-ns", what, (unsigned long long)st.busy_ns, st.depth_ns);
    check_plan(p, arena, arena_len, what);
}

/* pi_io_read at any offset, length and buffer, across bounce chunks and to the end of the file. */
static void test_sync_reads(pi_io *io, t_rng *r, const char *what) {
    int64_t size = pi_io_file_size(io);
    size_t cap = (size_t)size + 64;
    uint8_t *buf = aligned_alloc(4096, (cap + 4095) & ~(size_t)4095);
    for (int i = 0; i < 40; i++) {
        size_t len = i < 3 ? (size_t)size - (size_t)i * 4096 - 1 : (size_t)(t_next(r) % 70000) + 1;
        int64_t off = i < 3 ? 1 + i : (int64_t)(t_next(r) % (uint64_t)(size - (int64_t)len + 1));
        size_t shift = i % 4 == 0 ? 0 : (size_t)(t_next(r) % 64);
        if (i == 3) { /* fully aligned: read straight into the buffer */
            off = 8192;
            len = 65536;
            shift = 0;
        }
        if (i == 4) { /* the last bytes of the file */
            len = 5000;
            off = size - 5000;
        }
        memset(buf, SENTINEL, cap);
        pi_status st = pi_io_read(io, off, buf + shift, len);
        CHECKF(st == PI_OK, "%s: pi_io_read(%lld, %zu): %s", what, (long long)off, len, pi_last_error());
        int64_t m = mismatch(buf + shift, off, len);
        CHECKF(m < 0, "%s: pi_io_read(%lld, %zu) byte %lld wrong", what, (long long)off, len, (long long)m);
        CHECKF((shift == 0 || buf[shift - 1] == SENTINEL) && buf[shift + len] == SENTINEL,
               "%s: pi_io_read(%lld, %zu) wrote outside the buffer", what, (long long)off, len);
    }
    CHECK(pi_io_read(io, 5, buf, 0) == PI_OK);
    /* One byte past the end: a short read that names the range; the engine stays usable. */
    pi_status st = pi_io_read(io, size - 100, buf + 3, 101);
    CHECKF(st == PI_ERR_IO && strstr(pi_last_error(), "short read") && strstr(pi_last_error(), "got 100 of 101"),
           "%s: read past the end: %d %s", what, st, pi_last_error());
    CHECK(pi_io_read(io, 0, buf, 100) == PI_OK && mismatch(buf, 0, 100) < 0);
    free(buf);
}

/* The random-read workloads over one backend and file. */
static void test_backend(const char *path, pi_io_backend b, pi_io_fault f, const char *where, plan *p, uint8_t *arena,
                         size_t arena_len) {
    char what[128];
    pi_io *io;
    pi_status st = open_io(path, b, 8, f, &io);
    if (b == PI_IO_URING && st == PI_ERR_UNSUPPORTED) {
        fprintf(stderr, "%s: io_uring skipped: %s\n", where, pi_last_error());
        return;
    }
    CHECKF(st == PI_OK, "%s/%s: open: %s", where, backend_str(b), pi_last_error());
    if (st != PI_OK) return;
    snprintf(what, sizeof what, "%s/%s (%s, align %zu%s)", where, backend_str(b), pi_io_backend_name(io),
             pi_io_align(io), pi_io_buffered(io) ? ", buffered" : "");
    fprintf(stderr, "%s\n", what);
    size_t a = pi_io_align(io);
    CHECK(pi_io_file_size(io) == FILE_SIZE);
    CHECK(f.kind == PI_FAULT_NODIRECT ? a == 1 && pi_io_buffered(io) : a >= 4096 && (a & (a - 1)) == 0);
    CHECK(strcmp(pi_io_backend_name(io), b == PI_IO_URING ? "io_uring" : b == PI_IO_PREAD ? "pread" : "test") == 0);

    t_rng r = {(uint64_t)b * 77 + a};
    make_plan(p, &r, arena, a, FILE_SIZE, false);
    run_plan(io, p, arena, arena_len, what);
    make_plan(p, &r, arena, a, FILE_SIZE, false);
    run_plan(io, p, arena, arena_len, what); /* again on the same engine: slots recycled */

    if (a > 1) { /* misaligned requests are refused whole */
        struct iovec v = {arena, a};
        pi_io_req bad[2] = {{.off = 0, .iov = &v, .iovcnt = 1}, {.off = 100, .iov = &v, .iovcnt = 1}};
        CHECK(pi_io_submit(io, bad, 2) == PI_ERR_INVALID && strstr(pi_last_error(), "offset 100"));
        struct iovec odd = {arena + 8, a};
        bad[1] = (pi_io_req){.off = 0, .iov = &odd, .iovcnt = 1};
        CHECK(pi_io_submit(io, bad, 2) == PI_ERR_INVALID);
        CHECK(pi_io_in_flight(io) == 0);
    }
    struct iovec v = {arena, 4096};
    pi_io_req none = {.off = 0, .iov = &v, .iovcnt = 0};
    CHECK(pi_io_submit(io, &none, 1) == PI_ERR_INVALID);
    none.iovcnt = PI_IO_MAX_IOV + 1;
    CHECK(pi_io_submit(io, &none, 1) == PI_ERR_INVALID);
    test_sync_reads(io, &r, what);
    pi_io_close(io);

    /* Single-piece reads into a registered arena: READ_FIXED with io_uring. */
    CHECK(open_io(path, b, 16, f, &io) == PI_OK);
    CHECK(pi_io_register(io, arena, arena_len) == PI_OK);
    CHECK(pi_io_register(io, arena, arena_len) == PI_ERR_INVALID); /* once */
    make_plan(p, &r, arena, a, FILE_SIZE, true);
    run_plan(io, p, arena, arena_len, what);
    pi_io_stats s;
    pi_io_get_stats(io, &s);
    if (!strcmp(pi_io_backend_name(io), "io_uring")) {
        struct rlimit rl;
        bool can_lock = geteuid() == 0 || (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur >= 2 * arena_len);
        if (can_lock) CHECKF(s.fixed_reads == N_READS, "%s: %llu READ_FIXED reads of %d", what,
                             (unsigned long long)s.fixed_reads, N_READS);
        else fprintf(stderr, "%s: locked-memory limit too low for registration; READ_FIXED not checked\n", what);
    } else {
        CHECK(s.fixed_reads == 0);
    }
    /* Close with reads in flight: waits for them, returns promptly. */
    make_plan(p, &r, arena, a, FILE_SIZE, false);
    CHECK(pi_io_submit(io, p->req, N_READS) == PI_OK);
    uint64_t tag;
    CHECK(pi_io_reap(io, &tag, 1, true) == 1);
    pi_io_close(io);
}

/* Reads past the end of a file that is not a multiple of the alignment, and of
   a file truncated after open: short-read errors, then a prompt close. */
static void test_eof(const char *dir_path, pi_io_backend b) {
    char path[600];
    snprintf(path, sizeof path, "%s.eof", dir_path);
    const int64_t size = 65536 + 1000;
    CHECK(write_pattern(path, size));
    uint8_t *buf = aligned_alloc(4096, 65536);
    pi_io *io;
    pi_io_fault nf = {0};
    pi_status st = open_io(path, b, 4, nf, &io);
    if (st == PI_ERR_UNSUPPORTED) goto out;
    CHECKF(st == PI_OK, "%s", pi_last_error());
    if (st != PI_OK) goto out;
    CHECK(pi_io_file_size(io) == size);
    /* The last, partial block reads fine when asked for what the file holds... */
    CHECK(pi_io_read(io, 65536, buf, 1000) == PI_OK && mismatch(buf, 65536, 1000) < 0);
    /* ...and a queued read that covers the end is a short read. */
    struct iovec v[2] = {{buf, 4096}, {buf + 8192, 4096}};
    pi_io_req rq[3] = {{.off = 0, .iov = v, .iovcnt = 1, .tag = 1},
                       {.off = 65536, .iov = v, .iovcnt = 2, .tag = 2},
                       {.off = 4096, .iov = v + 1, .iovcnt = 1, .tag = 3}};
    CHECK(pi_io_submit(io, rq, 3) == PI_OK);
    uint64_t tags[4];
    int n, total = 0;
    uint64_t t0 = pi_time_ns();
    while ((n = pi_io_reap(io, tags, 4, true)) > 0) total += n;
    CHECKF(n == -1 && strstr(pi_last_error(), "short read") && strstr(pi_last_error(), "got 1000 of 8192") &&
               strstr(pi_last_error(), "offset 65536") && strstr(pi_last_error(), path),
           "%s: past the end: %d: %s", backend_str(b), n, pi_last_error());
    CHECK(total <= 2);
    CHECK(pi_io_reap(io, tags, 4, false) == -1); /* failed stays failed */
    CHECK(pi_io_submit(io, rq, 1) == PI_ERR_IO);
    pi_io_close(io);
    CHECKF(pi_time_ns() - t0 < 3000000000ull, "close after an error took too long");

    /* Wholly past the end: got 0. */
    CHECK(open_io(path, b, 4, nf, &io) == PI_OK);
    rq[0].off = 131072;
    CHECK(pi_io_submit(io, rq, 1) == PI_OK);
    n = pi_io_reap(io, tags, 4, true);
    CHECKF(n == -1 && strstr(pi_last_error(), "got 0 of 4096"), "%d: %s", n, pi_last_error());
    pi_io_close(io);

    /* Truncated after open: the engine notices the new end, not a stale size. */
    CHECK(open_io(path, b, 4, nf, &io) == PI_OK);
    CHECK(truncate(path, 20000) == 0);
    rq[0].off = 16384;
    rq[0].iov = v;
    rq[0].iovcnt = 2;
    CHECK(pi_io_submit(io, rq, 1) == PI_OK);
    n = pi_io_reap(io, tags, 4, true);
    CHECKF(n == -1 && strstr(pi_last_error(), "short read (got 3616 of 8192 bytes at offset 16384"), "%s: %d: %s",
           backend_str(b), n, pi_last_error());
    pi_io_close(io);
out:
    free(buf);
    unlink(path);
}

/* Reads 0..n) of len bytes each, one piece apiece: read i from offset
   i * 12288 (not a multiple of len, so neighbours' pages interleave) into
   buf + i * len, tagged i. */
#define SPREAD_READ_STRIDE 12288
static void spread_reads(uint8_t *buf, size_t len, struct iovec *v, pi_io_req *rq, int n) {
    for (int i = 0; i < n; i++) {
        v[i] = (struct iovec){buf + (size_t)i * len, len};
        rq[i] = (pi_io_req){.off = (int64_t)i * SPREAD_READ_STRIDE, .iov = &v[i], .iovcnt = 1, .tag = (uint64_t)i};
    }
}

/* PI_IO_TEST faults: EIO and short reads by number and by offset, delays. */
static void test_faults(const char *path) {
    uint8_t *buf = aligned_alloc(4096, 16 * 8192);
    struct iovec v[16];
    pi_io_req rq[16];
    spread_reads(buf, 8192, v, rq, 16);
    uint64_t tags[16];
    char want[128];

    /* EIO on the 5th read (0-based): reads 0..4 complete, then the error. */
    pi_io *io;
    CHECK(open_io(path, PI_IO_TEST, 4, (pi_io_fault){.kind = PI_FAULT_EIO, .nth = 5}, &io) == PI_OK);
    CHECK(pi_io_submit(io, rq, 10) == PI_OK);
    int n, total = 0, ok_order = 1;
    while ((n = pi_io_reap(io, tags + total, 16 - total, true)) > 0) total += n;
    for (int i = 0; i < total; i++) ok_order &= tags[i] == (uint64_t)i;
    snprintf(want, sizeof want, "read of 8192 bytes at offset %d failed: %s", 5 * 12288, strerror(EIO));
    CHECKF(n == -1 && total == 5 && ok_order && strstr(pi_last_error(), want), "EIO nth: %d after %d: %s", n, total,
           pi_last_error());
    uint64_t t0 = pi_time_ns();
    pi_io_close(io);
    CHECK(pi_time_ns() - t0 < 1000000000ull);

    /* EIO on any read covering an offset; pi_io_read too. */
    CHECK(open_io(path, PI_IO_TEST, 4, (pi_io_fault){.kind = PI_FAULT_EIO, .nth = -1, .off = 3 * 12288 + 100}, &io) ==
          PI_OK);
    CHECK(pi_io_read(io, 3 * 12288 + 8192, buf, 50) == PI_OK); /* its aligned range does not cover it */
    CHECK(pi_io_read(io, 3 * 12288 + 90, buf, 50) == PI_ERR_IO && strstr(pi_last_error(), "Input/output error"));
    CHECK(pi_io_submit(io, rq, 8) == PI_OK);
    total = 0;
    for (int round = 0; round < 100 && (n = pi_io_reap(io, tags + total, 2, round % 2 == 0)) >= 0; round++) total += n;
    snprintf(want, sizeof want, "at offset %d failed", 3 * 12288);
    CHECKF(total == 3 && strstr(pi_last_error(), want), "EIO off: %d: %s", total, pi_last_error());
    pi_io_close(io);

    /* A short read. */
    CHECK(open_io(path, PI_IO_TEST, 4, (pi_io_fault){.kind = PI_FAULT_SHORT, .nth = 2}, &io) == PI_OK);
    CHECK(pi_io_submit(io, rq, 4) == PI_OK);
    total = 0;
    while ((n = pi_io_reap(io, tags + total, 16 - total, true)) > 0) total += n;
    snprintf(want, sizeof want, "short read (got 4096 of 8192 bytes at offset %d", 2 * 12288);
    CHECKF(n == -1 && total == 2 && strstr(pi_last_error(), want), "short: %d: %s", total, pi_last_error());
    pi_io_close(io);

    /* Delays: nothing is ready at once; a waiting reap blocks about delay_us. */
    CHECK(open_io(path, PI_IO_TEST, 4, (pi_io_fault){.kind = PI_FAULT_DELAY, .delay_us = 20000}, &io) == PI_OK);
    t0 = pi_time_ns();
    CHECK(pi_io_submit(io, rq, 6) == PI_OK);
    CHECK(pi_io_reap(io, tags, 16, false) == 0);
    total = 0;
    while (total < 6 && (n = pi_io_reap(io, tags + total, 16 - total, true)) > 0) total += n;
    uint64_t dt = pi_time_ns() - t0;
    pi_io_stats s;
    pi_io_get_stats(io, &s);
    CHECKF(total == 6 && dt >= 40000000ull && s.wait_ns >= 30000000ull && s.reads == 6,
           "delay: %d reads in %.1f ms, waited %.1f ms", total, dt * 1e-6, s.wait_ns * 1e-6);
    for (int i = 0; i < 6; i++) CHECK(mismatch(buf + (size_t)i * 8192, (int64_t)i * 12288, 8192) < 0);
    pi_io_close(io);
    free(buf);
}

/* Bytes the C library has handed out and not taken back (glibc: every arena),
   or -1 where that cannot be known (other libcs, sanitizers own malloc). */
static int64_t heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33) && !defined(__SANITIZE_ADDRESS__)
    struct mallinfo2 mi = mallinfo2();
    return (int64_t)(mi.uordblks + mi.hblkhd);
#else
    return -1;
#endif
}

/* Reap until `want` reads completed (into tags); returns how many did. */
static int reap_n(pi_io *io, uint64_t *tags, int want) {
    int got = 0;
    while (got < want) {
        int n = pi_io_reap(io, tags + got, want - got, true);
        if (n <= 0) break;
        got += n;
    }
    return got;
}

/* The fixed queue of one backend: queue depth 4 + max_pending 8 = 12 places.
   A batch that does not fit beside the reads not yet reaped is refused whole
   (PI_ERR_FULL, nothing queued) and the same batch fits after reaping; one
   larger than 12 could never fit (PI_ERR_INVALID). Then the default 1024:
   1028 reads fit, the 1029th does not, and none of it allocates. */
static void test_full(const char *path, pi_io_backend b) {
    enum { QD = 4, PEND = 8, CAP = QD + PEND, N = CAP + 1, DEF = 4 + 1024 };
    const char *what = backend_str(b);
    uint8_t *buf = aligned_alloc(4096, (size_t)N * 4096);
    struct iovec v[N];
    pi_io_req rq[N];
    spread_reads(buf, 4096, v, rq, N);
    memset(buf, SENTINEL, (size_t)N * 4096);
    pi_io_req *many = calloc(DEF + 1, sizeof *many);
    struct iovec *many_v = calloc(DEF + 1, sizeof *many_v);
    uint8_t *many_buf = aligned_alloc(4096, (size_t)(DEF + 1) * 4096);
    uint64_t *tags = calloc(DEF + 1, sizeof *tags);
    pi_io *io = NULL;
    pi_io_opts o = {.backend = b, .queue_depth = QD, .max_pending = PEND};
    pi_status st = pi_io_open(path, &o, &io);
    if (b == PI_IO_URING && st == PI_ERR_UNSUPPORTED) goto out;
    CHECKF(st == PI_OK, "%s: open: %s", what, pi_last_error());
    if (st != PI_OK) goto out;

    st = pi_io_submit(io, rq, N);
    CHECKF(st == PI_ERR_INVALID && strstr(pi_last_error(), "never fit") && pi_io_in_flight(io) == 0,
           "%s: %d reads in a queue of %d: %d %s", what, N, CAP, st, pi_last_error());
    CHECK(pi_io_submit(io, rq, 10) == PI_OK && pi_io_in_flight(io) == 10);
    st = pi_io_submit(io, rq + 10, 3);
    CHECKF(st == PI_ERR_FULL && strstr(pi_last_error(), "no room for 3 more reads") &&
               strstr(pi_last_error(), "10 of 12 places") && strstr(pi_last_error(), path),
           "%s: 3 beside 10 of 12: %d %s", what, st, pi_last_error());
    CHECK(strcmp(pi_status_str(PI_ERR_FULL), "full") == 0);
    CHECK(pi_io_in_flight(io) == 10);
    int got = reap_n(io, tags, 3);
    CHECKF(got == 3 && pi_io_in_flight(io) == 7, "%s: reaped %d, %lld in flight", what, got,
           (long long)pi_io_in_flight(io));
    CHECKF(pi_io_submit(io, rq + 10, 3) == PI_OK, "%s: the same 3 after reaping: %s", what, pi_last_error());
    CHECK(pi_io_in_flight(io) == 10);
    /* Two reaped reads again fill the queue exactly; then one more is full. */
    pi_io_req again[3] = {rq[tags[0]], rq[tags[1]], rq[tags[2]]};
    CHECK(pi_io_submit(io, again, 2) == PI_OK && pi_io_in_flight(io) == CAP);
    st = pi_io_submit(io, again + 2, 1);
    CHECKF(st == PI_ERR_FULL && strstr(pi_last_error(), "12 of 12") && pi_io_in_flight(io) == CAP,
           "%s: one beside 12 of 12: %d %s", what, st, pi_last_error());
    /* waited for a slot: 6 of the first 10, then all 3 and both 2 (the 3 reaped started 3 of the 6) */
    pi_io_stats ios;
    pi_io_get_stats(io, &ios);
    CHECKF(ios.queued == 11, "%s: %llu reads queued behind a full ring, want 11", what,
           (unsigned long long)ios.queued);
    int seen[N] = {0};
    for (int i = 0; i < 3; i++) seen[tags[i]]++;
    got = reap_n(io, tags, CAP);
    CHECKF(got == CAP && pi_io_in_flight(io) == 0, "%s: reaped %d of %d", what, got, CAP);
    for (int i = 0; i < got; i++) seen[tags[i] < N ? tags[i] : 0] += tags[i] < N ? 1 : 100;
    for (int i = 0; i < N; i++) {
        int want = i == (int)again[0].tag || i == (int)again[1].tag ? 2 : 1;
        CHECKF(seen[i] == want, "%s: read %d completed %d times, want %d", what, i, seen[i], want);
        CHECKF(mismatch(buf + (size_t)i * 4096, (int64_t)i * 12288, 4096) < 0, "%s: read %d: wrong bytes", what, i);
    }
    pi_io_close(io);
    io = NULL;

    /* max_pending out of range. */
    o.max_pending = -1;
    CHECK(pi_io_open(path, &o, &io) == PI_ERR_INVALID && !io && strstr(pi_last_error(), "max_pending"));
    o.max_pending = PI_IO_MAX_PENDING + 1;
    CHECK(pi_io_open(path, &o, &io) == PI_ERR_INVALID && !io);

    /* The default: 1024 waiting beyond the queue depth. */
    o.max_pending = 0;
    CHECK(pi_io_open(path, &o, &io) == PI_OK);
    if (!io) goto out;
    for (int i = 0; i <= DEF; i++) {
        many_v[i] = (struct iovec){many_buf + (size_t)i * 4096, 4096};
        many[i] = (pi_io_req){.off = (int64_t)(i % 1000) * 4096, .iov = &many_v[i], .iovcnt = 1, .tag = (uint64_t)i};
    }
    int64_t heap0 = heap_in_use();
    st = pi_io_submit(io, many, DEF);
    pi_status st_full = pi_io_submit(io, many + DEF, 1);
    got = reap_n(io, tags, DEF);
    int64_t heap1 = heap_in_use();
    CHECKF(st == PI_OK && st_full == PI_ERR_FULL && got == DEF, "%s: default queue: %d %d, %d reaped: %s", what, st,
           st_full, got, pi_last_error());
    if (heap0 >= 0)
        CHECKF(heap1 == heap0, "%s: submit and reap left %lld bytes allocated", what, (long long)(heap1 - heap0));
    CHECK(pi_io_submit(io, many, DEF) == PI_OK); /* close with a full queue */
    pi_io_close(io);
out:
    free(tags);
    free(many_buf);
    free(many_v);
    free(many);
    free(buf);
}

/* Reads submitted by one thread and reaped by another. The io_uring ring
   posts a completion in the submitting thread's context; the submitter
   here sleeps in pthread_join meanwhile, and must be woken to post them.
   Then the same thread submits, computes for a while without a system
   call, and reaps: every read is there, none twice. */
enum { HAND_N = 48 };
typedef struct {
    pi_io *io;
    uint64_t tags[HAND_N];
    int got;
} hand_ctx;

static void *hand_reaper(void *arg) {
    hand_ctx *h = arg;
    while (h->got < HAND_N) {
        int n = pi_io_reap(h->io, h->tags + h->got, HAND_N - h->got, true);
        if (n <= 0) break;
        h->got += n;
    }
    return NULL;
}

static void hand_check(const hand_ctx *h, const uint8_t *buf, const char *what, const char *how) {
    int seen[HAND_N] = {0}, bad = 0;
    for (int i = 0; i < h->got; i++) {
        if (h->tags[i] < HAND_N) seen[h->tags[i]]++;
        else bad++;
    }
    for (int i = 0; i < HAND_N; i++) bad += seen[i] != 1;
    CHECKF(h->got == HAND_N && bad == 0, "%s, %s: %d of %d reads reaped, %d wrong", what, how, h->got, HAND_N, bad);
    for (int i = 0; i < HAND_N; i++)
        CHECKF(mismatch(buf + (size_t)i * 4096, (int64_t)i * SPREAD_READ_STRIDE, 4096) < 0,
               "%s, %s: read %d: wrong bytes", what, how, i);
}

static void test_handoff(const char *path, pi_io_backend b) {
    const char *what = backend_str(b);
    uint8_t *buf = aligned_alloc(4096, (size_t)HAND_N * 4096);
    struct iovec v[HAND_N];
    pi_io_req rq[HAND_N];
    spread_reads(buf, 4096, v, rq, HAND_N);
    pi_io *io = NULL;
    pi_status st = open_io(path, b, 16, (pi_io_fault){0}, &io);
    if (b == PI_IO_URING && st == PI_ERR_UNSUPPORTED) goto out;
    CHECKF(st == PI_OK, "%s: open: %s", what, pi_last_error());
    if (st != PI_OK) goto out;

    hand_ctx h = {.io = io};
    memset(buf, SENTINEL, (size_t)HAND_N * 4096);
    CHECK(pi_io_submit(io, rq, HAND_N) == PI_OK);
    pthread_t th;
    if (pthread_create(&th, NULL, hand_reaper, &h) == 0) {
        pthread_join(th, NULL);
        hand_check(&h, buf, what, "reaped by another thread");
    }

    memset(&h, 0, sizeof h);
    h.io = io;
    memset(buf, SENTINEL, (size_t)HAND_N * 4096);
    CHECK(pi_io_submit(io, rq, HAND_N) == PI_OK);
    volatile uint64_t x = 1;
    const uint64_t until = pi_time_ns() + 20 * 1000 * 1000; /* the clock is read in user mode (vDSO) */
    while (pi_time_ns() < until) x = x * 6364136223846793005ull + 1442695040888963407ull;
    hand_reaper(&h);
    hand_check(&h, buf, what, "reaped after computing");
    pi_io_close(io);
out:
    free(buf);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(60);
    char path[512];
    t_tmp_path(path, sizeof path, "io.bin");
    if (!write_pattern(path, FILE_SIZE)) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    pi_io *io = NULL;
    pi_io_close(NULL);
    CHECK(pi_io_open("/nonexistent/pinfer-io", NULL, &io) == PI_ERR_NOT_FOUND && !io &&
          strstr(pi_last_error(), "/nonexistent/pinfer-io"));
    CHECK(pi_io_open("/", NULL, &io) == PI_ERR_INVALID && strstr(pi_last_error(), "not a regular file"));
    pi_io_opts bad = {.queue_depth = -1};
    CHECK(pi_io_open(path, &bad, &io) == PI_ERR_INVALID);
    CHECK(pi_io_open(path, NULL, &io) == PI_OK);
    fprintf(stderr, "default backend: %s\n", pi_io_backend_name(io));
    pi_io_close(io);

    plan *p = malloc(sizeof *p);
    size_t arena_len = (size_t)N_READS * REQ_SPAN;
    uint8_t *arena = aligned_alloc(4096, arena_len);
    static const pi_io_backend backends[] = {PI_IO_URING, PI_IO_PREAD, PI_IO_TEST};
    pi_io_fault nofault = {0}, nodirect = {.kind = PI_FAULT_NODIRECT};

    for (int i = 0; i < 3; i++) test_backend(path, backends[i], nofault, "disk", p, arena, arena_len);
    for (int i = 0; i < 3; i++) test_backend(path, backends[i], nodirect, "no-O_DIRECT", p, arena, arena_len);

    struct stat sb;
    if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0) {
        char shm[256];
        snprintf(shm, sizeof shm, "/dev/shm/pinfer-test-%ld-io.bin", (long)getpid());
        if (write_pattern(shm, FILE_SIZE)) {
            for (int i = 0; i < 3; i++) test_backend(shm, backends[i], nofault, "tmpfs", p, arena, arena_len);
            unlink(shm);
        }
    } else {
        fprintf(stderr, "no writable /dev/shm: tmpfs case skipped\n");
    }

    for (int i = 0; i < 3; i++) test_eof(path, backends[i]);
    for (int i = 0; i < 3; i++) test_full(path, backends[i]);
    for (int i = 0; i < 3; i++) test_handoff(path, backends[i]);
    test_faults(path);

    free(arena);
    free(p);
    unlink(path);
    return t_done("test_io");
}
