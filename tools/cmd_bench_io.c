/*
 * cmd_bench_io.c — `pinfer bench-io`: random O_DIRECT read throughput of a
 * file through the I/O engine, per backend, read size and queue depth, and
 * the bundle-layout question: are neuron bundles better padded to 4 KiB
 * (bigger file, one aligned read each) or packed back to back (each read
 * covers the 4 KiB blocks the bundle spans)?
 *
 * Each point (pi_probe_io, the loop `pinfer hwprobe` measures with too)
 * keeps queue_depth reads in flight for --seconds: a completion is
 * answered at once by a new read at a fresh random offset, into a buffer
 * registered with the engine (READ_FIXED under io_uring), as the engine's
 * cache will. Reads bypass the page cache, so nothing needs dropping; the
 * file should still be >= 1 GiB so that the drive's own cache does not serve
 * the reads. The command reads FILE and writes nothing.
 */
#include "args.h"
#include "cmds.h"

#include "plan/hwprobe.h"
#include "store/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 16
#define ALIGN 4096 /* layout granularity of the bundle comparison */

typedef enum { WL_BLOCK, WL_PADDED, WL_PACKED } wl_kind;

typedef struct workload {
    wl_kind kind;
    size_t size;    /* WL_BLOCK: read size; else the bundle size */
    size_t stride;  /* WL_PADDED: bundle size rounded up to ALIGN */
    int64_t n;      /* offsets (WL_BLOCK, in units of align) or bundles to draw from */
    size_t max_len; /* longest read */
    size_t align;
    uint64_t rng;
} workload;

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* pi_probe_next_fn: a random read of the workload. */
static bool next_read(void *ctx, int64_t *off, size_t *len) {
    workload *w = ctx;
    int64_t i = (int64_t)(rng_next(&w->rng) % (uint64_t)w->n);
    switch (w->kind) {
    default:
        *off = i * (int64_t)w->align;
        *len = w->size;
        break;
    case WL_PADDED:
        *off = i * (int64_t)w->stride;
        *len = w->stride;
        break;
    case WL_PACKED: {
        int64_t a = i * (int64_t)w->size, b = a + (int64_t)w->size;
        *off = a / ALIGN * ALIGN;
        *len = round_up((size_t)b, ALIGN) - (size_t)*off;
        break;
    }
    }
    return true;
}

static size_t gcd(size_t a, size_t b) {
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Average bytes per read of the packed layout: the covering range repeats
   every ALIGN / gcd(bundle, ALIGN) bundles. */
static double packed_mean_read(size_t bundle) {
    size_t cycle = ALIGN / gcd(bundle, ALIGN), sum = 0;
    for (size_t i = 0; i < cycle; i++) {
        size_t a = i * bundle, b = a + bundle;
        sum += round_up(b, ALIGN) - a / ALIGN * ALIGN;
    }
    return (double)sum / (double)cycle;
}

/* Keep qd reads of workload w in flight for `seconds` (the shared loop in
   plan/hwprobe.c); 0 or 1 (message printed). */
static int measure(const char *path, pi_io_backend b, int qd, workload *w, double seconds, pi_probe_io_point *pt) {
    w->rng = 0x5eed0000ull + (uint64_t)qd * 131 + w->size;
    if (pi_probe_io(path, b, qd, w->max_len, seconds, next_read, w, pt) != PI_OK) {
        fprintf(stderr, "pinfer: bench-io: %s\n", pi_last_error());
        return 1;
    }
    return 0;
}

static void fmt_count(char *s, size_t n, double v) {
    if (v >= 1e6) snprintf(s, n, "%.2fM", v * 1e-6);
    else if (v >= 1e4) snprintf(s, n, "%.1fK", v * 1e-3);
    else snprintf(s, n, "%.0f", v);
}

static void fmt_size(char *s, size_t n, size_t v) {
    if (v % 1024 == 0) snprintf(s, n, "%zuK", v / 1024);
    else snprintf(s, n, "%zu", v);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: pinfer bench-io FILE [options]\n"
            "Random O_DIRECT reads of FILE (>= 1 GiB; nothing is written) through the I/O engine.\n"
            "  --block LIST    read sizes (default 4K,8K,16K,32K,64K,128K)\n"
            "  --qd LIST       queue depths: reads in flight (default 1,32)\n"
            "  --io LIST       backends: uring, pread (default: both, where available)\n"
            "  --seconds S     time per point (default 2)\n"
            "  --bundle BYTES  compare two layouts of neuron bundles of this size: padded to a multiple\n"
            "                  of 4096 vs packed back to back (then the block sweep runs only with --block)\n");
}

int cmd_bench_io(int argc, char **argv) {
    const char *cmd = "bench-io";
    const char *path = NULL;
    char block_buf[256] = "4K,8K,16K,32K,64K,128K", qd_buf[128] = "1,32", io_buf[64] = "uring,pread";
    bool block_given = false, io_given = false;
    double seconds = 2.0;
    uint64_t bundle = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (a[0] != '-') {
            if (path) {
                fprintf(stderr, "pinfer: %s: one FILE only ('%s' and '%s')\n", cmd, path, a);
                return 2;
            }
            path = a;
            continue;
        }
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "--block")) {
            snprintf(block_buf, sizeof block_buf, "%s", v);
            block_given = true;
        } else if (!strcmp(a, "--qd")) {
            snprintf(qd_buf, sizeof qd_buf, "%s", v);
        } else if (!strcmp(a, "--io")) {
            snprintf(io_buf, sizeof io_buf, "%s", v);
            io_given = true;
        } else if (!strcmp(a, "--seconds")) {
            char *end;
            errno = 0;
            seconds = strtod(v, &end);
            if (errno || end == v || *end || !(seconds >= 0.05 && seconds <= 3600)) {
                fprintf(stderr, "pinfer: %s: --seconds expects a duration from 0.05 to 3600, got '%s'\n", cmd, v);
                return 2;
            }
        } else if (!strcmp(a, "--bundle")) {
            if (!arg_size(cmd, a, v, &bundle)) return 2;
            if (bundle < 1 || bundle > (64u << 20)) {
                fprintf(stderr, "pinfer: %s: --bundle expects 1 byte to 64M, got '%s'\n", cmd, v);
                return 2;
            }
        } else {
            return arg_unknown(cmd, a);
        }
    }
    if (!path) {
        fprintf(stderr, "pinfer: %s: which FILE? (a file of 1 GiB or more)\n", cmd);
        usage(stderr);
        return 2;
    }

    char *items[MAX_ITEMS];
    uint64_t blocks[MAX_ITEMS];
    long qds[MAX_ITEMS];
    pi_io_backend backends[2];
    int n_blocks, n_qd, n_io;
    if ((n_blocks = arg_list(cmd, "--block", block_buf, items, MAX_ITEMS)) < 0) return 2;
    for (int i = 0; i < n_blocks; i++) {
        if (!arg_size(cmd, "--block", items[i], &blocks[i])) return 2;
        if (blocks[i] < ALIGN || blocks[i] % ALIGN || blocks[i] > (64u << 20)) {
            fprintf(stderr, "pinfer: %s: --block %s: a multiple of 4K up to 64M\n", cmd, items[i]);
            return 2;
        }
    }
    if ((n_qd = arg_list(cmd, "--qd", qd_buf, items, MAX_ITEMS)) < 0) return 2;
    for (int i = 0; i < n_qd; i++)
        if (!arg_int(cmd, "--qd", items[i], 1, 1024, &qds[i])) return 2;
    if ((n_io = arg_list(cmd, "--io", io_buf, items, 2)) < 0) return 2;
    for (int i = 0; i < n_io; i++) {
        if (!strcmp(items[i], "uring") || !strcmp(items[i], "io_uring")) backends[i] = PI_IO_URING;
        else if (!strcmp(items[i], "pread")) backends[i] = PI_IO_PREAD;
        else {
            fprintf(stderr, "pinfer: %s: --io expects uring or pread, got '%s'\n", cmd, items[i]);
            return 2;
        }
    }

    /* The file: size, alignment, whether O_DIRECT holds; drop an unavailable default backend. */
    pi_io *probe;
    pi_io_opts po = {.backend = PI_IO_PREAD, .queue_depth = 1};
    if (pi_io_open(path, &po, &probe) != PI_OK) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    int64_t size = pi_io_file_size(probe);
    size_t align = pi_io_align(probe);
    bool buffered = pi_io_buffered(probe);
    pi_io_close(probe);
    for (int i = 0; i < n_io; i++) {
        if (backends[i] != PI_IO_URING) continue;
        pi_io_opts uo = {.backend = PI_IO_URING, .queue_depth = 1};
        if (pi_io_open(path, &uo, &probe) == PI_OK) {
            pi_io_close(probe);
            continue;
        }
        if (io_given) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return 1;
        }
        printf("(io_uring skipped: %s)\n", pi_last_error());
        memmove(&backends[i], &backends[i + 1], (size_t)(n_io - i - 1) * sizeof backends[0]);
        n_io--;
        i--;
    }
    if (align < ALIGN) align = ALIGN; /* a buffered fallback: keep the O_DIRECT geometry */
    int64_t usable = size / (int64_t)align * (int64_t)align;
    uint64_t max_block = 0;
    for (int i = 0; i < n_blocks; i++) max_block = blocks[i] > max_block ? blocks[i] : max_block;
    if (usable < (int64_t)(max_block > bundle + 2 * ALIGN ? max_block : bundle + 2 * ALIGN)) {
        fprintf(stderr, "pinfer: %s: %s is too small (%lld bytes) for these reads\n", cmd, path, (long long)size);
        return 1;
    }

    printf("bench-io: %s, %.2f GB, %s (alignment %zu), %.1f s per point\n", path, (double)size * 1e-9,
           buffered ? "BUFFERED: the filesystem refuses O_DIRECT" : "O_DIRECT", align, seconds);
    if (size < ((int64_t)1 << 30))
        printf("warning: the file is under 1 GiB: the drive's cache may serve reads, figures can be optimistic\n");
    if (buffered) printf("warning: reads go through the page cache; the figures are not the disk's\n");
    printf("pread backend: one thread per read in flight\n");

    int status = 0;
    if (!bundle || block_given) {
        printf("\n%-9s %7s %5s %10s %9s %10s\n", "backend", "block", "qd", "MB/s", "IOPS", "lat us");
        for (int bi = 0; bi < n_io && !status; bi++)
            for (int k = 0; k < n_blocks && !status; k++)
                for (int q = 0; q < n_qd && !status; q++) {
                    workload w = {.kind = WL_BLOCK, .size = blocks[k], .align = align, .max_len = blocks[k]};
                    w.n = (usable - (int64_t)blocks[k]) / (int64_t)align + 1;
                    pi_probe_io_point pt;
                    if ((status = measure(path, backends[bi], (int)qds[q], &w, seconds, &pt))) break;
                    char bs[32], iops[32];
                    fmt_size(bs, sizeof bs, blocks[k]);
                    fmt_count(iops, sizeof iops, (double)pt.reads / pt.seconds);
                    printf("%-9s %7s %5ld %10.0f %9s %10.1f\n", backends[bi] == PI_IO_URING ? "io_uring" : "pread",
                           bs, qds[q], (double)pt.bytes / pt.seconds * 1e-6, iops,
                           pt.reads ? pt.lat_sum_us / (double)pt.reads : 0.0);
                    fflush(stdout);
                }
    }
    if (bundle && !status) {
        size_t b = (size_t)bundle, stride = round_up(b, ALIGN);
        double mean_packed = packed_mean_read(b);
        printf("\nbundles of %zu bytes, random bundle each read:\n", b);
        printf("  padded: one %zu-byte read at a %zu-byte stride (file +%.1f%%)\n", stride, stride,
               100.0 * ((double)stride / (double)b - 1.0));
        printf("  packed: back to back; each read covers the 4 KiB blocks the bundle spans (%.0f bytes on average)\n",
               mean_packed);
        printf("\n%-9s %5s %-7s %11s %9s %10s\n", "backend", "qd", "layout", "bundles/s", "MB/s", "lat us");
        for (int bi = 0; bi < n_io && !status; bi++)
            for (int q = 0; q < n_qd && !status; q++) {
                double rate[2];
                for (int l = 0; l < 2 && !status; l++) {
                    workload w = {.kind = l ? WL_PACKED : WL_PADDED, .size = b, .stride = stride, .align = align};
                    if (l) {
                        w.n = usable / (int64_t)b;
                        w.max_len = round_up(b, ALIGN) + ALIGN;
                    } else {
                        w.n = usable / (int64_t)stride;
                        w.max_len = stride;
                    }
                    pi_probe_io_point pt;
                    if ((status = measure(path, backends[bi], (int)qds[q], &w, seconds, &pt))) break;
                    rate[l] = (double)pt.reads / pt.seconds;
                    char r[32];
                    fmt_count(r, sizeof r, rate[l]);
                    printf("%-9s %5ld %-7s %11s %9.0f %10.1f\n", backends[bi] == PI_IO_URING ? "io_uring" : "pread",
                           qds[q], l ? "packed" : "padded", r, (double)pt.bytes / pt.seconds * 1e-6,
                           pt.reads ? pt.lat_sum_us / (double)pt.reads : 0.0);
                    fflush(stdout);
                }
                if (status) break;
                bool padded = rate[0] >= rate[1];
                printf("%-9s %5s -> %s wins: %.2fx the bundles/s of %s\n", "", "", padded ? "padded" : "packed",
                       padded ? rate[0] / rate[1] : rate[1] / rate[0], padded ? "packed" : "padded");
            }
    }
    return status;
}
