/*
 * progress.h — the progress line of the long commands (profile,
 * train-predictor, convert, gen-model) on stderr.
 *
 * On a terminal a bar is redrawn in place at most ten times a second:
 * percentage, done/total, rate and ETA. Otherwise (a log, a pipe) a line is
 * printed per tenth of the work, so logs stay short. The line for 100% is
 * printed once and ends the bar; later calls print nothing. The command
 * prints its own summary line after it.
 *
 * One progress per thread of work; no locking.
 */
#ifndef PI_TOOLS_PROGRESS_H
#define PI_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct progress {
    const char *what; /* the label: the command or its phase */
    const char *unit; /* what done counts ("tokens"); "bytes" are shown in MiB; NULL: a fraction only */
    bool tty;         /* stderr is a terminal: redraw in place */
    int64_t total;
    double t0, last_draw;
    int last_tenth;
    bool started;  /* progress_bytes: the writer's first report came */
    bool finished; /* the 100% line is out */
} progress;

/* Start: the clock runs from now (progress_bytes restarts it at the writer's
   first report, so loading an input is not counted in the rate). */
void progress_init(progress *p, const char *what, const char *unit, int64_t total);

/* done of p->total is complete. ctx is the progress (the signature of
   window_progress). */
void progress_show(void *ctx, int64_t done);

/* done of total (a total known only once the work started; the signature of
   pi_pred_progress_fn). */
void progress_update(void *ctx, int64_t done, int64_t total);

/* done of total bytes written (the signature of pi_gguf_progress_fn). */
void progress_bytes(void *ctx, uint64_t done, uint64_t total);

/* The work failed or stopped early: end a bar left half-drawn, so the error
   message that follows starts on a line of its own. */
void progress_abort(progress *p);

/* Seconds since the clock started. */
double progress_elapsed(const progress *p);

#endif
