/*
 * hwprobe.h — measurements of this machine that the planner's cost model and
 * the benchmarks compare against, and the small text file that caches them.
 *
 * Everything is measured on the engine's real code paths: memory bandwidth
 * with a streaming read over a buffer far larger than the last-level cache,
 * kernel throughput with pi_kernels_get()'s matvec / vec_dot / axpy over
 * weights far larger than the LLC (dense rows in order; sparse rows at random,
 * one per call), and flash with random O_DIRECT reads through the I/O engine
 * (store/io.h) by read size and queue depth. So this part of src/plan depends
 * on kernels and store, not only on base; the cache file's parser and the
 * interpolation helpers (hwfile.c) depend on base and the type table only, so
 * the fuzz target links without the kernels.
 *
 * Thread safety: the probes use the pool they are given (or create their
 * own) and touch no global state; the file functions are reentrant.
 */
#ifndef PI_PLAN_HWPROBE_H
#define PI_PLAN_HWPROBE_H

#include "base/pool.h"
#include "kernels/kernels.h"
#include "store/io.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PI_HW_MAX_THREADS 16
#define PI_HW_N_BLOCKS 6 /* 4K 8K 16K 32K 64K 128K */
#define PI_HW_N_QD 5     /* 1 8 32 64 128 */
#define PI_HW_FILE_VERSION 6 /* 1-5 are read too: 1 has no kernels_build, 1 and 2 no read_cpu_us, 1-3 no read_busy_k,
                                 1-4 no read_issue_us, 1-5 no io_huge_pages */

enum { PI_HW_MATVEC = 0, PI_HW_ROWDOT = 1, PI_HW_AXPY = 2, PI_HW_N_KERNELS = 3 };

typedef struct pi_hw {
    int n_threads;                               /* measured for 1..n_threads */
    double mem_bw[PI_HW_MAX_THREADS + 1];        /* GB/s, index = threads */
    /* weight bytes per second (GB/s) by type (pi_type index; only F32, F16, BF16, Q8_0, Q4_0,
       Q4_K, Q5_K, Q6_K measured, others 0) and threads:
       matvec: a contiguous 4096-wide matrix far larger than the LLC (the dense path);
       rowdot: vec_dot_rows over random rows of such a matrix, 64 rows per call (the sparse path's
               cold neurons);
       axpy:   axpy_rows of random rows into one accumulator, 64 rows per call (the sparse down
               projection) */
    double matvec[PI_TYPE_COUNT][PI_HW_MAX_THREADS + 1];
    double rowdot[PI_TYPE_COUNT][PI_HW_MAX_THREADS + 1];
    double axpy[PI_TYPE_COUNT][PI_HW_MAX_THREADS + 1];
    /* flash, O_DIRECT random reads on the filesystem of the model (or --dir), io_uring where
       available else pread: */
    char io_backend[16];
    int block[PI_HW_N_BLOCKS];                       /* bytes */
    int qd[PI_HW_N_QD];
    double read_iops[PI_HW_N_BLOCKS][PI_HW_N_QD];    /* reads per second */
    double read_lat_us[PI_HW_N_BLOCKS][PI_HW_N_QD];  /* mean latency */
    double seq_read_gbs;                             /* sequential 1 MiB reads, QD 8 */
    double read_cpu_us;                              /* the machine's CPU time per random read (queue
                                                        depth >= 8): the kernel submits a read inline,
                                                        and its completion takes interrupts and softirqs
                                                        on any core (files before 2026-11-29 hold the
                                                        submitting thread's alone); 0: not measured */
    double read_issue_us;                            /* the submitting thread's time inside a read's
                                                        submission at the deepest queue depth, what issuing
                                                        it holds the thread that computes for; the rest of
                                                        the CPU runs while reads are in flight; 0: not
                                                        measured (files before version 5) */
    double read_busy_k;                              /* 8 KiB random reads at the deepest queue with every
                                                        core streaming memory over the same reads with the
                                                        cores idle, in [1/8, 1]: the share of the table
                                                        reads get while the cores compute (the planner
                                                        prices hidden reads at it, where no run figure
                                                        applied); 0: not measured (files before version 4) */
    uint64_t fs_dev;                                 /* st_dev of the measured filesystem */
    char cpu[64];                                    /* kernel set name + core count, for the cache key */
    char kernels_build[24];                          /* pi_kernels_build_id() of the build that measured the
                                                        kernel rates; "": not recorded (a version 1 file) */

    /* Added: which figures were not measured but filled in (interpolated between thread
       counts, blocks or queue depths that were; quick mode measures fewer points). A flag is
       only set where its figure is non-zero. */
    bool mem_bw_est[PI_HW_MAX_THREADS + 1];
    bool kernel_est[PI_HW_N_KERNELS][PI_TYPE_COUNT][PI_HW_MAX_THREADS + 1]; /* [PI_HW_MATVEC..] */
    bool read_est[PI_HW_N_BLOCKS][PI_HW_N_QD];
    bool quick;              /* measured with --quick */
    bool io_buffered;        /* the filesystem refused O_DIRECT: flash figures are the page cache's */
    bool io_huge_pages;      /* the reads went into memory with huge pages advised, as the engine's
                                neuron cache (files from version 6); false: into 4 KiB pages, where a
                                virtio disk split each 1 MiB read (256 pieces, more than its queue's
                                254) and the sequential rate came out 2-4x below the engine's */
    uint64_t io_file_bytes;  /* size of the file the random reads were spread over */
    double other_cpu;        /* cores other processes kept busy on average while the probe ran
                                (from /proc/stat; 0 when unknown): above ~0.25 the figures are
                                likely low and worth measuring again */

    /* Added: the random reads the engine itself achieved after the probe (pinfer bench under
       --mem-budget on this filesystem; all 0 when none): reads per second while a read was in
       flight, at that run's mean read size (bytes) and queue depth, and when (Unix seconds).
       A virtual disk can serve blocks read before many times faster than new ones (measured
       here: 0.35K/s for blocks never read, 49K/s for blocks the probe had read), and the
       engine reads the same cold bundles token after token, so its rate can differ from any
       probe's. pi_hw_apply_run prices reads at it; a new probe drops it. Runs after the first
       average into it (pi_hw_note_run). */
    double run_read_rate, run_read_bytes, run_time;
    int run_qd;
    /* Added: the same for the output head read from flash in pieces (sequential reads), in
       GB/s including its product, and when (all 0 when none): the head's reads measured
       0.94-1.19 GB/s in runs an hour after a probe had read 2.11 GB/s sequentially, and a
       read priced at the probe's rate is half the time it takes. pi_hw_apply_run prices the
       head's read at it; runs after the first average into it (pi_hw_note_seq). */
    double run_seq_gbs, run_seq_time;
    /* Added: how much faster than the probe's memory and kernel figures a run computed (a
       pinfer bench under --mem-budget with every FFN row resident: the plan's predicted time
       per token over the measured one), and when (both 0 when none). This machine kind's
       memory speed moves by a third within minutes: two probes an hour apart measured Q4_0
       matvec at 11.9 and 17.3 GB/s on two threads, and plans priced at the first predicted
       26% below what runs achieved. pi_hw_apply_compute prices compute at it; a probe that
       measures compute drops it; runs after the first average into it (pi_hw_note_compute). */
    double run_compute_k, run_compute_time;
    /* Not in the file: which of the probe's figures pi_hw_apply_run replaced by a run's. A
       run's rate already holds the share its reads got while the cores computed, so
       read_busy_k prices neither the random reads (run_reads) nor the output head's
       sequential ones (run_seq) where the run's figure replaced them. */
    bool run_reads, run_seq;
} pi_hw;

typedef struct pi_hwprobe_opts {
    const char *dir;   /* directory on the filesystem to measure (a temp file is created there
                          and removed), or */
    const char *file;  /* an existing file >= 256 MiB to read randomly (e.g. the model itself:
                          reads only, O_DIRECT); a smaller one: a temp file in its directory */
    int max_threads;   /* 0: all cores (capped at PI_HW_MAX_THREADS) */
    bool quick;        /* total under ~20 s on a 2-core machine */
    bool verbose;      /* progress lines on stderr */
    bool tiny;         /* tests only: a few MiB everywhere and short points (~2 s); the
                          figures are positive and finite but say nothing about the machine */
    const pi_hw *flash_from; /* non-NULL: measure memory and kernels only, and take the flash
                                figures (and the reads runs achieved) from this earlier probe;
                                dir and file are then not read */
} pi_hwprobe_opts;

/* Measure everything into *out (zeroed first). Takes ~1-2 min (quick: ~20 s).
   Errors: PI_ERR_INVALID (options), PI_ERR_IO (the file or directory: open,
   write, space), PI_ERR_NOMEM. The temp file is removed on every path. */
pi_status pi_hwprobe_run(const pi_hwprobe_opts *o, pi_hw *out);

/* ---- the cache file (hwfile.c) ----
   Text, one "key value..." record per line, '#' comments and blank lines
   allowed; first record "pinfer-hwprobe <version>", last "end" (so a
   truncated file is recognised). Doubles are written with %.17g and read back
   bit-exact. See hwfile.c for the keys. */

/* Write hw to path (through a temporary beside it, renamed over it when
   complete: base/outfile.h, so readers never see half a file), creating
   missing parent directories. PI_ERR_INVALID when hw fails the loader's checks (so every
   saved file loads), PI_ERR_IO when writing fails. */
pi_status pi_hw_save(const pi_hw *hw, const char *path);

/* Read a file written by pi_hw_save. Strict: an unknown or repeated key, a bad
   number, a value out of range, a missing record or a missing "end" is
   PI_ERR_FORMAT with a message naming the path and line. Never crashes on any
   input; *hw is zeroed on error. PI_ERR_IO / PI_ERR_NOT_FOUND when unreadable. */
pi_status pi_hw_load(const char *path, pi_hw *hw);

/* pi_hw_load on text[0..n) (need not be NUL-terminated; may contain anything). */
pi_status pi_hw_parse(const char *text, size_t n, pi_hw *hw);
/* The read counters of a block device's stat file (text[0..n), one line of
   at least 11 fields as Linux writes /sys/block/DEV/stat): false, with *out
   zeroed, for anything else. */
bool pi_hw_parse_disk_stat(const char *text, size_t n, pi_disk_counts *out);
/* The counters of the block device dev (a file's st_dev). PI_ERR_NOT_FOUND
   where it has no stat file. */
pi_status pi_hw_disk_counts(uint64_t dev, pi_disk_counts *out);

/* Format hw as pi_hw_save writes it into buf[0..n) (NUL-terminated when n > 0);
   returns the length of the whole text, like snprintf (so n = 0 measures), or
   -1 (PI_ERR_INVALID set) when hw fails the loader's checks. */
long pi_hw_format(const pi_hw *hw, char *buf, size_t n);

/* The checks pi_hw_load applies after parsing: PI_OK or PI_ERR_INVALID naming
   the first bad field. */
pi_status pi_hw_validate(const pi_hw *hw);

/* $XDG_CACHE_HOME/pinfer/hwprobe-<fs_dev>.txt, or ~/.cache/... when
   XDG_CACHE_HOME is unset or empty; into buf, returning buf, or NULL when
   neither that nor HOME is set or buf is too small. Creates nothing. */
const char *pi_hw_default_path(char *buf, size_t n, uint64_t fs_dev);

/* ---- what the cost model asks (hwfile.c) ---- */

/* The factor by which the engine's achieved reads beat the probe's at the
   same size and queue depth (run_read_rate over pi_hw_iops there), clamped
   to [1/8, 8]; 1 when hw has no run figure. */
double pi_hw_run_factor(const pi_hw *hw);

/* Record a run's achieved reads (read_bytes mean size, at queue_depth,
   reads_per_s while one was in flight, at Unix time `when`) in hw's run
   figure. Where hw holds one already, the figure kept is the geometric mean
   of the two factors over the probe (pi_hw_run_factor), stated at this
   run's size and depth: each older run weighs half as much as the one after
   it. One run's rate moves by 5-15% from the run before on the same file
   (57.7-67.8K reads/s over six runs at 715 MiB on a planted 7b-l8), and
   the plan that prices the next run's reads moved with it. */
void pi_hw_note_run(pi_hw *hw, double read_bytes, int queue_depth, double reads_per_s, double when);

/* The factor by which the engine's sequential reads of the output head beat
   the probe's (run_seq_gbs over seq_read_gbs), clamped to [1/8, 8]; 1 when
   hw has none. */
double pi_hw_seq_factor(const pi_hw *hw);

/* Record a run's sequential rate (the head's bytes over its time, GB/s) at
   Unix time `when`, averaged with the figure hw holds as pi_hw_note_run
   does (the geometric mean of the two factors over the probe). */
void pi_hw_note_seq(pi_hw *hw, double gbs, double when);

/* The factor by which a run's compute beat the probe's figures
   (run_compute_k), clamped to [1/8, 8]; 1 when hw has none. */
double pi_hw_compute_factor(const pi_hw *hw);

/* Record a run's compute factor k over the probe's memory and kernel
   figures (pi_engine_hw_note_run turns a run's factor over its plan into
   this) at Unix time `when`,
   averaged with the figure hw holds as pi_hw_note_run does (the geometric
   mean of the two). */
void pi_hw_note_compute(pi_hw *hw, double k, double when);

/* Scale the memory bandwidth and every kernel rate by
   pi_hw_compute_factor and clear the run's figure, so that it applies once.
   Returns the factor applied (1 where a scaled figure would leave the double
   range). */
double pi_hw_apply_compute(pi_hw *hw);

/* Scale every random-read figure by pi_hw_run_factor (latencies by its
   inverse) and the sequential rate by pi_hw_seq_factor, and clear both run
   figures, so that they apply once. Where a run figure applies, run_reads
   or run_seq is set: the run's rate already holds the share its reads got
   while the cores computed. Returns the random reads' factor
   applied (1 where a scaled figure would leave the double range); the
   sequential one goes to *seq_k (may be NULL). */
double pi_hw_apply_run(pi_hw *hw, double *seq_k);

/* Reads per second at this read size and queue depth: log(iops) interpolated
   bilinearly in log(block) and log(qd) between the grid's points, clamped to
   the measured range (outside it the edge value). 0 for a NULL hw. */
double pi_hw_iops(const pi_hw *hw, int block_bytes, int qd);

/* Weight GB/s of kernel `what` (PI_HW_MATVEC / _ROWDOT / _AXPY) on type t
   with `threads` threads. threads is clamped to 1..n_threads; a figure that is
   0 (not measured) falls back to the nearest thread count with one (the lower
   on a tie), and a type without any figure to the measured type nearest in
   bits per weight. 0 when nothing is measured. */
double pi_hw_kernel_gbs(const pi_hw *hw, int what, pi_type t, int threads);

/* The machine's CPU seconds per random read: hw->read_cpu_us, or
   for a file without it (or a NULL hw) PI_HW_READ_CPU_S, what the project
   machine measured. */
#define PI_HW_READ_CPU_S 2.7e-6
double pi_hw_read_cpu_s(const pi_hw *hw);

/* The submitting thread's seconds inside a read's submission:
   hw->read_issue_us, or for a file without it the machine's CPU per read
   (pi_hw_read_cpu_s), as files before version 5 were priced. */
double pi_hw_read_issue_s(const pi_hw *hw);

/* ---- the measuring cores, shared with bench-kernels and bench-io ---- */

/* Memory read bandwidth in GB/s (1e9 bytes/s): the median of `reps` passes of
   all of the pool's threads reading disjoint parts of a `bytes`-byte buffer
   (make it far larger than the last-level cache). *out receives the figure.
   Allocates and frees the buffer. */
pi_status pi_probe_read_bw(pi_pool *pool, size_t bytes, int reps, double *out);

/* Median of n doubles (reorders v). */
double pi_median(double *v, int n);

/* Weights to stream through a kernel: n_mat matrices of rows x cols of one
   type, back to back in huge-page memory, filled with valid random weights
   (a random tile repeated: the content does not change the speed), and the
   activation x in the type's vec_dot type. */
typedef struct pi_probe_mats {
    pi_type type;
    int64_t rows, cols;      /* one matrix */
    size_t row_bytes, mat_bytes;
    size_t n_mat;            /* at least 2, and n_mat * mat_bytes >= the bytes asked for */
    uint8_t *data;           /* (n_mat * rows, row_bytes) */
    size_t alloc_bytes;
    float *xf;               /* (cols) */
    void *xq;                /* xf in the type's quantized activation form (Q8_0 or Q8_K), or NULL */
    const void *x;           /* xf or xq, per pi_vec_dot_type(type) */
    int64_t *order;          /* (n_mat * rows) every row index once, in random order */
} pi_probe_mats;

/* Allocate and fill. cols a multiple of the type's block size (32, 256 for
   the K-quants), type with kernels. Errors:
   PI_ERR_INVALID, PI_ERR_NOMEM. *m is zeroed on error. */
pi_status pi_probe_mats_create(pi_type t, int64_t rows, int64_t cols, size_t min_bytes, pi_probe_mats *m);
void pi_probe_mats_free(pi_probe_mats *m); /* accepts a zeroed struct */

/* Weight GB/s of one kernel of table k over all of m: the median of `reps`
   timed passes after a warm-up pass, the pool's threads splitting the work
   as the engine does. PI_HW_MATVEC: matvec of each matrix in turn, threads
   taking contiguous row ranges. PI_HW_ROWDOT: vec_dot of every row, one call
   per row, in m->order. PI_HW_AXPY: axpy_rows of every row in m->order, 64
   rows per call, into a per-thread accumulator. PI_ERR_UNSUPPORTED when k lacks the kernel,
   PI_ERR_INVALID for bad reps or what, PI_ERR_NOMEM. */
pi_status pi_probe_kernel(pi_pool *pool, const pi_kernels *k, const pi_probe_mats *m, int what, int reps,
                          double *out);

/* One flash measurement point. */
typedef struct pi_probe_io_point {
    uint64_t reads, bytes; /* completed while the clock ran */
    double seconds;        /* from the first submit to the last counted completion */
    double lat_sum_us;     /* sum over counted reads of (completion seen - submitted) */
    double cpu_s;          /* the calling thread's CPU time (user + system) meanwhile */
    double submit_s;       /* the calling thread's time inside submissions (pi_io_submit) */
    double machine_cpu_s;  /* every core's (/proc/stat, steal aside; 0 where unknown): with the
                              completions' interrupts and softirqs, and whatever else ran */
} pi_probe_io_point;

/* The next read of a workload: its offset and length (aligned for the file),
   or false when the workload is done. */
typedef bool (*pi_probe_next_fn)(void *ctx, int64_t *off, size_t *len);

/* Keep qd reads in flight on path, through a fresh pi_io of backend b, for
   `seconds` or until next() says done: each completion is answered at once by
   a new read next() describes, into a buffer registered with the engine
   (READ_FIXED under io_uring), as the engine's cache does. max_len: the
   longest read next() asks for. Reads still in flight at the end are drained
   and not counted. Errors: those of pi_io_open/submit/reap, PI_ERR_NOMEM. */
pi_status pi_probe_io(const char *path, pi_io_backend b, int qd, size_t max_len, double seconds,
                      pi_probe_next_fn next, void *ctx, pi_probe_io_point *out);

#endif
