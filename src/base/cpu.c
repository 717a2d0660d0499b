/*
 * cpu.c — runtime CPU feature detection.
 *
 * On x86 a feature is usable only when the CPU reports it *and* the OS saves
 * the corresponding register state (XCR0), otherwise AVX instructions fault.
 * AMX tile data additionally needs a per-process permission on Linux
 * (arch_prctl ARCH_REQ_XCOMP_PERM); that request is the kernel dispatcher's,
 * made only when it picks the AMX table, so detection has no side effects.
 */
#include "cpu.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void) {
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void detect(pi_cpu_features *f) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = (c >> 27) & 1;
    bool avx = (c >> 28) & 1;
    f->fma = (c >> 12) & 1;
    f->f16c = (c >> 29) & 1;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm_ok = avx && (xcr0 & 0x6) == 0x6;
    bool zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;
    if (!ymm_ok) f->fma = f->f16c = false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    /* XCR0 bits 17 and 18: tile configuration and tile data state */
    if ((xcr0 & 0x60000) == 0x60000) {
        f->amx_tile = (d >> 24) & 1;
        f->amx_int8 = f->amx_tile && ((d >> 25) & 1);
    }
    if (!ymm_ok) return;
    f->avx2 = (b >> 5) & 1;
    f->bmi2 = (b >> 8) & 1;
    if (zmm_ok) {
        f->avx512f = (b >> 16) & 1;
        f->avx512dq = (b >> 17) & 1;
        f->avx512bw = (b >> 30) & 1;
        f->avx512vl = (b >> 31) & 1;
        f->avx512vnni = (c >> 11) & 1;
        f->avx512vbmi = (c >> 1) & 1;
    }
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
static void detect(pi_cpu_features *f) {
    unsigned long hw = getauxval(AT_HWCAP);
    f->neon = (hw & HWCAP_ASIMD) != 0;
    f->neon_fp16 = (hw & HWCAP_ASIMDHP) != 0;
    f->neon_dotprod = (hw & HWCAP_ASIMDDP) != 0;
}
#else
static void detect(pi_cpu_features *f) { (void)f; }
#endif

static pi_cpu_features g_features;
static int g_detected;

const pi_cpu_features *pi_cpu_get(void) {
    if (!__atomic_load_n(&g_detected, __ATOMIC_ACQUIRE)) {
        pi_cpu_features f;
        memset(&f, 0, sizeof f);
        detect(&f);
        g_features = f; /* every racing thread writes the same value */
        __atomic_store_n(&g_detected, 1, __ATOMIC_RELEASE);
    }
    return &g_features;
}

const char *pi_cpu_describe(void) {
    static _Thread_local char buf[160];
    const pi_cpu_features *f = pi_cpu_get();
    struct { bool on; const char *name; } all[] = {
        {f->avx2, "avx2"}, {f->fma, "fma"}, {f->f16c, "f16c"}, {f->avx512f, "avx512f"},
        {f->avx512bw, "avx512bw"}, {f->avx512vl, "avx512vl"}, {f->avx512dq, "avx512dq"},
        {f->avx512vnni, "avx512vnni"}, {f->avx512vbmi, "avx512vbmi"}, {f->bmi2, "bmi2"}, {f->amx_tile, "amx_tile"}, {f->amx_int8, "amx_int8"},
        {f->neon, "neon"}, {f->neon_dotprod, "dotprod"}, {f->neon_fp16, "fp16"},
    };
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!all[i].on) continue;
        int w = snprintf(buf + n, sizeof buf - n, "%s%s", n ? "," : "", all[i].name);
        if (w < 0 || (size_t)w >= sizeof buf - n) break;
        n += (size_t)w;
    }
    if (!n) snprintf(buf, sizeof buf, "none");
    return buf;
}

int pi_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
