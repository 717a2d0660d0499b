/*
 * dispatch.c — which kernel table runs: the best one this CPU supports, or the
 * one PI_KERNELS names. The choice is made once (pthread_once), so every caller
 * sees the same table and a bad PI_KERNELS is warned about once.
 *
 * A table is usable only when the CPU (and OS) provide every feature its file
 * is compiled for: an AVX-512 or NEON dot-product instruction on a CPU without
 * it would fault with SIGILL, not fall back. AMX needs one more step on Linux:
 * the process must ask for the tile-data state (arch_prctl
 * ARCH_REQ_XCOMP_PERM) before any thread touches a tile, or the first tile
 * instruction faults. The request is made once, the first time the "amx"
 * table is asked for; it covers every thread of the process.
 */
#include "kernels.h"

#include "base/cpu.h"
#include "base/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#define PI_ARCH_REQ_XCOMP_PERM 0x1023 /* <asm/prctl.h>, Linux 5.16 */
#define PI_XFEATURE_XTILEDATA 18

static bool g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

static void amx_request(void) {
    g_amx_ok = syscall(SYS_arch_prctl, PI_ARCH_REQ_XCOMP_PERM, PI_XFEATURE_XTILEDATA) == 0;
}

/* Whether this process may use AMX tile data (asks the kernel once). */
static bool amx_permitted(void) {
    pthread_once(&g_amx_once, amx_request);
    return g_amx_ok;
}
#endif

static const char *const k_names[] = {
#if defined(__x86_64__)
    "amx",
    "avx512",
    "avx2",
#endif
#if defined(__aarch64__)
    "neon",
#endif
    "ref",
    NULL,
};

const char *const *pi_kernels_names(void) { return k_names; }

const pi_kernels *pi_kernels_by_name(const char *name) {
    if (!name) return NULL;
    if (!strcmp(name, "ref")) return &pi_kernels_ref;
#if defined(__x86_64__) || defined(__aarch64__)
    const pi_cpu_features *f = pi_cpu_get();
#endif
#if defined(__x86_64__)
    if (!strcmp(name, "avx2")) return f->avx2 && f->fma && f->f16c ? &pi_kernels_avx2 : NULL;
    const bool avx512 = f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni && f->fma && f->f16c;
    if (!strcmp(name, "avx512")) return avx512 ? &pi_kernels_avx512 : NULL;
    if (!strcmp(name, "amx")) {
#if defined(__linux__)
        return avx512 && f->amx_tile && f->amx_int8 && amx_permitted() ? &pi_kernels_amx : NULL;
#else
        return NULL; /* how other systems grant tile state is not handled */
#endif
    }
#endif
#if defined(__aarch64__)
    if (!strcmp(name, "neon")) return f->neon && f->neon_dotprod && f->neon_fp16 ? &pi_kernels_neon : NULL;
#endif
    return NULL;
}

static const pi_kernels *g_chosen;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    const char *want = getenv("PI_KERNELS");
    if (want && *want) {
        g_chosen = pi_kernels_by_name(want);
        if (!g_chosen) {
            PI_LOGW("PI_KERNELS=%s: no such kernel set in this build, or this CPU cannot run it; using ref", want);
            g_chosen = &pi_kernels_ref;
        }
        return;
    }
    /* k_names lists the tables best first and ends with ref, which always runs */
    for (const char *const *nm = k_names; *nm && !g_chosen; nm++) g_chosen = pi_kernels_by_name(*nm);
}

#ifndef PI_KERNELS_ID
#define PI_KERNELS_ID "unknown"
#endif

const char *pi_kernels_build_id(void) { return PI_KERNELS_ID; }

const pi_kernels *pi_kernels_get(void) {
    pthread_once(&g_once, choose);
    return g_chosen;
}

int pi_vec_dot_type(pi_type wtype) {
    switch (wtype) {
    case PI_TYPE_F32:
    case PI_TYPE_F16:
    case PI_TYPE_BF16: return PI_TYPE_F32;
    case PI_TYPE_Q8_0:
    case PI_TYPE_Q4_0:
    case PI_TYPE_Q4_1:
    case PI_TYPE_Q5_0:
    case PI_TYPE_Q5_1: return PI_TYPE_Q8_0;
    case PI_TYPE_Q4_K:
    case PI_TYPE_Q5_K:
    case PI_TYPE_Q6_K: return PI_TYPE_Q8_K;
    default: return -1;
    }
}

size_t pi_vec_dot_bytes(pi_type wtype, int64_t n) {
    const int a = pi_vec_dot_type(wtype);
    return a < 0 ? 0 : pi_row_size((pi_type)a, n);
}

void pi_quantize_act(const pi_kernels *k, pi_type wtype, const float *x, void *y, int64_t n) {
    switch (pi_vec_dot_type(wtype)) {
    case PI_TYPE_Q8_0: k->quantize_q8_0(x, y, n); break;
    case PI_TYPE_Q8_K: k->quantize_q8_K(x, y, n); break;
    case PI_TYPE_F32: memcpy(y, x, (size_t)n * sizeof *x); break;
    default: break;
    }
}
