/*
 * cmd_bench_kernels.c — `pinfer bench-kernels`: how fast each matvec variant
 * streams weights, next to the memory read bandwidth measured in the same run.
 *
 * Decode is memory-bound: a matvec's useful speed is weight bytes per second.
 * Each (type, variant, threads) point rotates over enough distinct matrices
 * that the working set exceeds the last-level cache many times over (default
 * 768 MiB), so the figure is what DRAM delivers to the kernel. Threads split
 * each matrix into contiguous row ranges, as the engine does. The measuring
 * code (pi_probe_mats, pi_probe_kernel) is `pinfer hwprobe`'s.
 */
#include "args.h"
#include "cmds.h"

#include "base/cpu.h"
#include "base/pool.h"
#include "kernels/kernels.h"
#include "plan/hwprobe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 16
#define MAX_REPS 100

static void usage(FILE *f) {
    fprintf(f,
            "usage: pinfer bench-kernels [options]\n"
            "  --types LIST      weight types (default f32,f16,bf16,q8_0,q4_0,q4_K,q5_K,q6_K)\n"
            "  --variants LIST   kernel sets (default: every one this CPU runs)\n"
            "  -t, --threads LIST  thread counts (default 1,<cores>)\n"
            "  --rows N --cols N matrix shape (default 14336 x 4096)\n"
            "  --ws-mib N        working set rotated over, MiB (default 768; keep it > 512)\n"
            "  --reps N          timed passes per point, median reported (default 5)\n"
            "  --bw-mib N        buffer for the read-bandwidth measurement (default 1024)\n");
}

int cmd_bench_kernels(int argc, char **argv) {
    const char *cmd = "bench-kernels";
    char *types[MAX_ITEMS], *variants[MAX_ITEMS], *threads_s[MAX_ITEMS];
    char types_buf[256] = "f32,f16,bf16,q8_0,q4_0,q4_K,q5_K,q6_K", variants_buf[256] = "", threads_buf[64] = "";
    int n_types, n_variants = 0, n_threads_list;
    long rows = 14336, cols = 4096, ws_mib = 768, reps = 5, bw_mib = 1024;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "--types")) snprintf(types_buf, sizeof types_buf, "%s", v);
        else if (!strcmp(a, "--variants")) snprintf(variants_buf, sizeof variants_buf, "%s", v);
        else if (!strcmp(a, "-t")) snprintf(threads_buf, sizeof threads_buf, "%s", v);
        else if (!strcmp(a, "--rows")) { if (!arg_int(cmd, a, v, 1, 1 << 20, &rows)) return 2; }
        else if (!strcmp(a, "--cols")) { if (!arg_int(cmd, a, v, 32, PI_MAX_ROW, &cols)) return 2; }
        else if (!strcmp(a, "--ws-mib")) { if (!arg_int(cmd, a, v, 1, 1 << 16, &ws_mib)) return 2; }
        else if (!strcmp(a, "--reps")) { if (!arg_int(cmd, a, v, 1, MAX_REPS, &reps)) return 2; }
        else if (!strcmp(a, "--bw-mib")) { if (!arg_int(cmd, a, v, 64, 1 << 16, &bw_mib)) return 2; }
        else {
            return arg_unknown(cmd, a);
        }
    }
    if (cols % 32) {
        fprintf(stderr, "pinfer: %s: --cols must be a multiple of 32 (the quant block size)\n", cmd);
        return 2;
    }
    if ((n_types = arg_list(cmd, "--types", types_buf, types, MAX_ITEMS)) < 0) return 2;
    pi_type type_ids[MAX_ITEMS];
    for (int i = 0; i < n_types; i++) {
        int t = pi_type_from_name(types[i]);
        if (t < 0 || !pi_type_get((uint32_t)t)->compute) {
            fprintf(stderr, "pinfer: %s: no kernels for type '%s' (f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K)\n", cmd,
                    types[i]);
            return 2;
        }
        if (cols % pi_type_get((uint32_t)t)->blck) {
            fprintf(stderr, "pinfer: %s: --cols %ld is not a multiple of %s's block of %lld\n", cmd, cols,
                    pi_type_get((uint32_t)t)->name, (long long)pi_type_get((uint32_t)t)->blck);
            return 2;
        }
        type_ids[i] = (pi_type)t;
    }
    const pi_kernels *kset[MAX_ITEMS];
    if (variants_buf[0]) {
        if ((n_variants = arg_list(cmd, "--variants", variants_buf, variants, MAX_ITEMS)) < 0) return 2;
        for (int i = 0; i < n_variants; i++) {
            if (!(kset[i] = pi_kernels_by_name(variants[i]))) {
                fprintf(stderr, "pinfer: %s: kernel set '%s' is not in this build or this CPU cannot run it\n", cmd,
                        variants[i]);
                return 2;
            }
        }
    } else {
        for (const char *const *nm = pi_kernels_names(); *nm && n_variants < MAX_ITEMS; nm++)
            if ((kset[n_variants] = pi_kernels_by_name(*nm))) n_variants++;
    }
    int ncpu = pi_cpu_count();
    long thread_counts[MAX_ITEMS];
    if (threads_buf[0]) {
        if ((n_threads_list = arg_list(cmd, "-t", threads_buf, threads_s, MAX_ITEMS)) < 0) return 2;
        for (int i = 0; i < n_threads_list; i++)
            if (!arg_int(cmd, "-t", threads_s[i], 1, 256, &thread_counts[i])) return 2;
    } else {
        n_threads_list = 0;
        thread_counts[n_threads_list++] = 1;
        if (ncpu > 1) thread_counts[n_threads_list++] = ncpu;
    }

    printf("bench-kernels: matvec %ld x %ld, working set >= %ld MiB per point, median of %ld passes\n", rows, cols,
           ws_mib, reps);
    double bw[MAX_ITEMS];
    for (int ti = 0; ti < n_threads_list; ti++) {
        pi_pool *pool;
        if (pi_pool_create((int)thread_counts[ti], &pool) != PI_OK ||
            pi_probe_read_bw(pool, (size_t)bw_mib << 20, (int)reps, &bw[ti]) != PI_OK) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            pi_pool_free(pool);
            return 1;
        }
        pi_pool_free(pool);
        printf("memory read bandwidth, %ld thread%s: %.1f GB/s\n", thread_counts[ti], thread_counts[ti] > 1 ? "s" : "",
               bw[ti]);
    }
    printf("\n%-6s %-8s %7s %10s %9s %11s\n", "type", "kernels", "threads", "GB/s", "% of bw", "ms/matrix");

    int status = 0;
    for (int ti = 0; ti < n_types && !status; ti++) {
        pi_type t = type_ids[ti];
        pi_probe_mats m;
        if (pi_probe_mats_create(t, rows, cols, (size_t)ws_mib << 20, &m) != PI_OK) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return 1;
        }
        for (int vi = 0; vi < n_variants && !status; vi++) {
            const pi_kernels *k = kset[vi];
            if (!k->matvec[t]) continue;
            for (int hi = 0; hi < n_threads_list; hi++) {
                pi_pool *pool;
                double med;
                if (pi_pool_create((int)thread_counts[hi], &pool) != PI_OK ||
                    pi_probe_kernel(pool, k, &m, PI_HW_MATVEC, (int)reps, &med) != PI_OK) {
                    fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
                    pi_pool_free(pool);
                    status = 1;
                    break;
                }
                printf("%-6s %-8s %7ld %10.2f %8.0f%% %11.2f\n", pi_type_name(t), k->name, thread_counts[hi], med,
                       100.0 * med / bw[hi], (double)m.mat_bytes / (med * 1e9) * 1e3);
                fflush(stdout);
                pi_pool_free(pool);
            }
        }
        pi_probe_mats_free(&m);
    }
    return status;
}
