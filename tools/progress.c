/*
 * progress.c — the progress line on stderr (see progress.h).
 */
#include "progress.h"

#include "base/timer.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define REDRAW_S 0.1 /* a terminal bar is redrawn at most this often */
#define BAR 30

void progress_init(progress *p, const char *what, const char *unit, int64_t total) {
    *p = (progress){.what = what, .unit = unit, .tty = isatty(2) == 1, .total = total, .t0 = pi_time_s(),
                    .last_tenth = -1};
}

double progress_elapsed(const progress *p) { return pi_time_s() - p->t0; }

/* A duration for people: "42 s", "3 min 05 s", "2 h 10 min". */
static void fmt_time(char *buf, size_t n, double s) {
    long t = s > 0 ? (long)(s + 0.5) : 0;
    if (t < 100) snprintf(buf, n, "%ld s", t);
    else if (t < 3600) snprintf(buf, n, "%ld min %02ld s", t / 60, t % 60);
    else snprintf(buf, n, "%ld h %02ld min", t / 3600, t / 60 % 60);
}

/* "12/340 tokens" or "1.5/64.0 MiB"; "" without a unit. */
static void fmt_count(const progress *p, char *buf, size_t n, int64_t done) {
    if (!p->unit) buf[0] = '\0';
    else if (!strcmp(p->unit, "bytes"))
        snprintf(buf, n, "%.1f/%.1f MiB", (double)done / (1 << 20), (double)p->total / (1 << 20));
    else snprintf(buf, n, "%lld/%lld %s", (long long)done, (long long)p->total, p->unit);
}

/* "35 tokens/s" or "120.3 MiB/s"; "" without a unit. */
static void fmt_rate(const progress *p, char *buf, size_t n, double rate) {
    if (!p->unit) buf[0] = '\0';
    else if (!strcmp(p->unit, "bytes")) snprintf(buf, n, "%.1f MiB/s", rate / (1 << 20));
    else snprintf(buf, n, "%.0f %s/s", rate, p->unit);
}

void progress_show(void *ctx, int64_t done) {
    progress *p = ctx;
    if (p->finished) return;
    const double now = pi_time_s(), el = now - p->t0;
    if (done > p->total) done = p->total;
    const bool last = done >= p->total;
    /* a bar is redrawn at most every REDRAW_S, a log line once per tenth */
    const double frac = p->total > 0 ? (double)done / (double)p->total : 1.0;
    const int tenth = (int)(frac * 10.0);
    if (!last && (p->tty ? now - p->last_draw < REDRAW_S : tenth == p->last_tenth)) return;
    p->last_draw = now;
    p->last_tenth = tenth;
    p->finished = last;
    const double rate = el > 0 ? (double)done / el : 0.0;
    const int pct = (int)(frac * 100.0); /* rounded down: 100% is only printed when done */
    char count[64], speed[64], eta[32], spent[32];
    fmt_count(p, count, sizeof count, done);
    fmt_rate(p, speed, sizeof speed, rate);
    if (rate > 0 || last) fmt_time(eta, sizeof eta, rate > 0 ? (double)(p->total - done) / rate : 0.0);
    else snprintf(eta, sizeof eta, "?");
    fmt_time(spent, sizeof spent, el);
    if (p->tty) {
        char bar[BAR + 1];
        const int fill = (int)(frac * BAR);
        for (int i = 0; i < BAR; i++) bar[i] = i < fill ? '#' : '.';
        bar[BAR] = '\0';
        if (p->unit)
            fprintf(stderr, "\r%-8s [%s] %3d%%  %s  %s  ETA %s   ", p->what, bar, pct, count, speed, eta);
        else
            fprintf(stderr, "\r%-8s [%s] %3d%%  %s  ETA %s   ", p->what, bar, pct, spent, eta);
        if (last) fputc('\n', stderr);
        return;
    }
    if (p->unit)
        fprintf(stderr, "%s: %s (%d%%), %s, ETA %s\n", p->what, count, pct, speed, eta);
    else
        fprintf(stderr, "%s: %d%%, %s, ETA %s\n", p->what, pct, spent, eta);
}

void progress_update(void *ctx, int64_t done, int64_t total) {
    progress *p = ctx;
    p->total = total;
    progress_show(p, done);
}

void progress_bytes(void *ctx, uint64_t done, uint64_t total) {
    progress *p = ctx;
    if (!p->started) {
        p->started = true;
        p->t0 = pi_time_s();
    }
    progress_update(p, (int64_t)done, (int64_t)total);
}

void progress_abort(progress *p) {
    /* a log line always ends with its newline; a bar ends when it is full */
    if (p->tty && !p->finished && p->last_draw > 0) fputc('\n', stderr);
    p->finished = true;
}
