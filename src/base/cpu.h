/*
 * cpu.h — CPU features detected once at start-up (cpuid + xgetbv on x86,
 * getauxval on aarch64). Kernel dispatch reads these; nothing else should.
 */
#ifndef PI_BASE_CPU_H
#define PI_BASE_CPU_H

#include <stdbool.h>

typedef struct pi_cpu_features {
    bool avx2, fma, f16c;                       /* x86: the AVX2 kernel needs all three */
    bool avx512f, avx512bw, avx512vl, avx512dq; /* x86: the AVX-512 kernel needs these... */
    bool avx512vnni;                            /* ...and VNNI for int8 dot products */
    bool avx512vbmi;                            /* x86: byte permutes (the Q4_0 down path; optional) */
    bool bmi2;                                  /* x86: pdep (with VBMI: the integer down paths) */
    bool amx_tile, amx_int8;                    /* x86: AMX tiles and their int8 multiply; the OS
                                                   saves tile state (XCR0), but a process must still
                                                   ask for permission before use (dispatch.c does) */
    bool neon, neon_dotprod, neon_fp16;         /* aarch64 */
} pi_cpu_features;

/* Features of the running CPU, with the OS's register-state support checked.
   Thread-safe after the first call returns; cheap. */
const pi_cpu_features *pi_cpu_get(void);

/* Comma-separated list of the detected features, for logs and `pinfer` output. */
const char *pi_cpu_describe(void);

/* Number of online CPUs (at least 1). */
int pi_cpu_count(void);

#endif
