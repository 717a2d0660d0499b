/*
 * io.c — the I/O engine behind io.h, without its backends: opening the file
 * (O_DIRECT or the buffered fallback), request checks, a fixed FIFO of
 * requests waiting for a slot, a fixed set of in-flight slots (queue_depth),
 * statistics, the error state and pi_io_read. The backends (io_uring.c,
 * io_pread.c, io_test.c) complete the slots behind a pi_io_ops table chosen
 * at open (io_internal.h).
 *
 * Invariants:
 *   - Only the driving thread touches the FIFO, the free-slot stack, the
 *     statistics and the error state.
 *   - n_active slots are with the backend; a slot is freed when its completion
 *     is processed by the driver, so at most queue_depth reads are in flight
 *     and the backends' fixed rings never overflow.
 *   - n_active + fifo_n <= fifo_cap = queue_depth + max_pending: pi_io_submit
 *     refuses a batch that does not fit (PI_ERR_FULL) instead of growing, so
 *     nothing on the submit/reap path allocates.
 *   - A read is complete only when all its bytes arrived: partial results are
 *     re-issued for the rest unless the read reached the end of the file, which
 *     is a short-read error. After any error `failed` is set and stays set.
 */
#include "store/io_internal.h"

#include "base/log.h"
#include "base/timer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifndef BLKGETSIZE64
#define BLKGETSIZE64 _IOR(0x12, 114, size_t)
#endif

#define READ_DIRECT_CHUNK ((size_t)64 << 20) /* pi_io_read: aligned reads straight into the caller's buffer */
#define READ_BOUNCE ((size_t)4 << 20)        /* pi_io_read: bounce buffer for unaligned pieces */
#define DEFAULT_MAX_PENDING 1024

static atomic_flag g_warned_nodirect = ATOMIC_FLAG_INIT;

/* ---- helpers shared with the backends --------------------------------- */

static bool is_aligned(uint64_t x, size_t a) { return (x & (a - 1)) == 0; }

int pi_io_iov_advance(const struct iovec *iov, int cnt, size_t skip, struct iovec *out) {
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

bool pi_io_at_eof(const pi_io *io, int64_t pos) {
    struct stat sb;
    if (io->is_reg && fstat(io->fd, &sb) == 0) return pos >= (int64_t)sb.st_size;
    return pos >= io->size;
}

void pi_io_dontneed(const pi_io *io, int64_t off, size_t len) {
    if (io->dontneed && len > 0) posix_fadvise(io->fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}

int64_t pi_io_read_fully(const pi_io *io, int64_t off, const struct iovec *iov, int iovcnt, size_t len) {
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
            if (pi_io_at_eof(io, off + (int64_t)done)) break;
            cnt = pi_io_iov_advance(iov, iovcnt, done, rest);
            cur = rest;
        }
    }
    pi_io_dontneed(io, off, done);
    return (int64_t)done;
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

void pi_io_fail(pi_io *io, const char *what, int err) {
    io->failed = true;
    snprintf(io->err, sizeof io->err, "%s: %s: %s", io->path, what, strerror(err));
}

static int reap_error(const pi_io *io) {
    pi_error(PI_ERR_IO, "%s", io->err);
    return -1;
}

/* The time since the last count, at `depth` reads with the backend: once
   per submit and per reap call (a reap's completions are seen together, so
   the wait before them counts at the depth it began with), not per read. */
static void depth_tick(pi_io *io, int64_t depth) {
    const uint64_t now = pi_time_ns();
    if (depth > 0 && now > io->t_depth) {
        io->st.busy_ns += now - io->t_depth;
        io->st.depth_ns += (double)depth * (double)(now - io->t_depth);
    }
    io->t_depth = now;
}

bool pi_io_slot_finish(pi_io *io, int si, int64_t got, uint64_t *tag) {
    io_slot *s = &io->slots[si];
    io->free_slots[io->n_free++] = si;
    io->n_active--;
    if (got < 0 || (size_t)got < s->len) {
        io->failed = true;
        format_read_error(io, s->off, s->len, got);
        return false;
    }
    io->st.reads++;
    io->st.bytes += s->len;
    if (s->fixed >= 0) io->st.fixed_reads++;
    *tag = s->tag;
    return true;
}

/* ---- the queue -------------------------------------------------------- */

/* Move queued requests into free slots and hand them to the backend in one
   batch. Only while the engine has not failed. */
static void start_pending(pi_io *io) {
    int n = 0;
    while (io->fifo_n > 0 && io->n_free > 0) {
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
        s->fixed = -1;
        io->batch[n++] = si;
    }
    if (n > 0) io->ops->submit(io, io->batch, n);
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
    int64_t used = io->n_active + io->fifo_n;
    if (n > io->fifo_cap)
        return pi_error(PI_ERR_INVALID, "%s: a batch of %d reads can never fit: queue depth %d + max_pending %lld",
                        io->path, n, io->qd, (long long)(io->fifo_cap - io->qd));
    if (n > io->fifo_cap - used)
        return pi_error(PI_ERR_FULL,
                        "%s: no room for %d more reads: %lld of %lld places taken (queue depth %d + max_pending "
                        "%lld); reap and retry",
                        io->path, n, (long long)used, (long long)io->fifo_cap, io->qd,
                        (long long)(io->fifo_cap - io->qd));
    const int64_t waiting = io->fifo_n;
    for (int i = 0; i < n; i++) {
        io_pending *p = &io->fifo[(io->fifo_head + io->fifo_n) % io->fifo_cap];
        p->r = reqs[i];
        p->len = 0;
        for (int k = 0; k < reqs[i].iovcnt; k++) p->len += reqs[i].iov[k].iov_len;
        p->seq = io->seq++;
        io->fifo_n++;
    }
    depth_tick(io, io->n_active);
    start_pending(io);
    if (io->fifo_n > waiting) io->st.queued += (uint64_t)(io->fifo_n - waiting); /* the older ones start first */
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
        const int64_t depth = io->n_active;
        n += io->ops->reap(io, tags + n, max - n, block);
        depth_tick(io, depth);
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
    int64_t seq = io->seq++;
    return io->ops->read ? io->ops->read(io, seq, off, &v, 1, len) : pi_io_read_fully(io, off, &v, 1, len);
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
    if (io) {
        memset(&io->st, 0, sizeof io->st);
        io->t_depth = pi_time_ns(); /* what was in flight before counts from now */
    }
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

static pi_status backend_open(pi_io *io, const pi_io_ops *ops, const pi_io_opts *o) {
    io->ops = ops;
    if (ops->state_size && !(io->be = calloc(1, ops->state_size)))
        return pi_error(PI_ERR_NOMEM, "%s: out of memory for the %s backend", io->path, ops->name);
    return ops->open(io, o);
}

static void backend_close(pi_io *io) {
    if (io->ops && (io->be || !io->ops->state_size)) io->ops->close(io);
    free(io->be);
    io->be = NULL;
    io->ops = NULL;
}

/* The backend asked for; AUTO: io_uring, else (it said why) pread. */
static pi_status backend_start(pi_io *io, const pi_io_opts *o) {
    static const pi_io_ops *const by_kind[] = {
        [PI_IO_AUTO] = &pi_io_uring_ops,
        [PI_IO_URING] = &pi_io_uring_ops,
        [PI_IO_PREAD] = &pi_io_pread_ops,
        [PI_IO_TEST] = &pi_io_test_ops,
    };
    pi_error_saved e;
    pi_error_save(&e);
    pi_status st = backend_open(io, by_kind[o->backend], o);
    if (st == PI_ERR_UNSUPPORTED && o->backend == PI_IO_AUTO) {
        pi_error_restore(&e);
        backend_close(io);
        st = backend_open(io, &pi_io_pread_ops, o);
    }
    return st;
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
    if (d.max_pending == 0) d.max_pending = DEFAULT_MAX_PENDING;
    if (d.max_pending < 1 || d.max_pending > PI_IO_MAX_PENDING)
        return pi_error(PI_ERR_INVALID, "%s: max_pending %d is not in 1..%d", path, d.max_pending,
                        PI_IO_MAX_PENDING);

    pi_io *io = calloc(1, sizeof *io);
    if (!io || !(io->path = strdup(path))) {
        free(io);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    io->fd = -1;
    io->qd = d.queue_depth;
    io->fault = d.fault;
    if (d.backend != PI_IO_TEST && d.fault.kind != PI_FAULT_NODIRECT) io->fault.kind = PI_FAULT_NONE;
    pi_status st = open_file(io, d.buffered, d.fault.kind == PI_FAULT_NODIRECT);
    if (st == PI_OK) {
        io->fifo_cap = (int64_t)io->qd + d.max_pending;
        io->slots = calloc((size_t)io->qd, sizeof *io->slots);
        io->free_slots = malloc((size_t)io->qd * sizeof *io->free_slots);
        io->batch = malloc((size_t)io->qd * sizeof *io->batch);
        io->fifo = malloc((size_t)io->fifo_cap * sizeof *io->fifo);
        if (!io->slots || !io->free_slots || !io->batch || !io->fifo)
            st = pi_error(PI_ERR_NOMEM, "%s: out of memory for %d I/O slots and %d pending reads", path, io->qd,
                          d.max_pending);
    }
    if (st == PI_OK) {
        for (int i = 0; i < io->qd; i++) io->free_slots[i] = io->qd - 1 - i;
        io->n_free = io->qd;
        st = backend_start(io, &d);
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
    backend_close(io);
    if (io->fd >= 0) close(io->fd);
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
    return io->ops->register_buffers ? io->ops->register_buffers(io, base, len) : PI_OK;
}

const char *pi_io_backend_name(const pi_io *io) { return io ? io->ops->name : "none"; }

int64_t pi_io_file_size(const pi_io *io) { return io ? io->size : 0; }
size_t pi_io_align(const pi_io *io) { return io ? io->align : 1; }
bool pi_io_buffered(const pi_io *io) { return io && io->buffered; }
