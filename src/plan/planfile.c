/*
 * planfile.c — the plan file: "pinfer-plan 1", then "key value" lines
 * (# comments). Kept apart from the planner so the parser's fuzz target
 * links only this file and base/. A plan is saved through base/outfile.h:
 * the path holds the old plan or the whole new one, never half of one.
 */
#include "plan.h"

#include "base/outfile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pi_status pi_plan_save(const pi_plan *p, const char *path) {
    pi_outfile *of;
    pi_status st = pi_outfile_open(path, &of);
    if (st) return st;
    FILE *f = pi_outfile_stream(of);
    fprintf(f, "pinfer-plan 1\n");
    fprintf(f, "model %s\n", p->model);
    fprintf(f, "model_size %llu\n", (unsigned long long)p->model_size);
    fprintf(f, "mem_budget %llu\n", (unsigned long long)p->mem_budget);
    fprintf(f, "n_ctx %lld\n", (long long)p->n_ctx);
    fprintf(f, "threads %d\n", p->threads);
    fprintf(f, "queue_depth %d\n", p->queue_depth);
    fprintf(f, "cache_bytes %llu\n", (unsigned long long)p->cache_bytes);
    if (p->head_rows) fprintf(f, "head_rows %lld\n", (long long)p->head_rows);
    fprintf(f, "n_layer %lld\n", (long long)p->n_layer);
    fprintf(f, "hot");
    for (int64_t l = 0; l < p->n_layer; l++) fprintf(f, " %lld", (long long)p->hot[l]);
    fprintf(f, "\n");
    if (p->recall > 0.0) {
        fprintf(f, "recall %.6g\nthresholds", p->recall);
        for (int64_t l = 0; l < p->n_layer; l++) fprintf(f, " %.9g", (double)p->thr[l]);
        fprintf(f, "\n");
        if (p->split) {
            fprintf(f, "thresholds_hot");
            for (int64_t l = 0; l < p->n_layer; l++) fprintf(f, " %.9g", (double)p->thr_hot[l]);
            fprintf(f, "\n");
        }
    }
    fprintf(f, "predicted_tok_s %.17g\n", p->cost.tok_s);
    fprintf(f, "# breakdown (ms per token): fixed %.3f, predictor %.3f, gate/up %.3f, down %.3f, reads %.3f "
               "(%.3f hidden), reads' CPU %.3f, overhead %.3f\n",
            p->cost.ms_fixed, p->cost.ms_pred, p->cost.ms_gu, p->cost.ms_down, p->cost.ms_io, p->cost.ms_io_hidden,
            p->cost.ms_read_cpu, p->cost.ms_overhead);
    /* a failed fprintf leaves the stream's error flag set: commit reports it */
    return pi_outfile_commit(of);
}

static bool parse_u64(const char *s, uint64_t *v) {
    char *end;
    if (!isdigit((unsigned char)*s)) return false;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || (*end && !isspace((unsigned char)*end))) return false;
    *v = x;
    return true;
}

/* A line of n_layer finite thresholds into thr. */
static pi_status parse_thresholds(const char *k, const char *v, int64_t n_layer, int line_no, float *thr) {
    if (!n_layer) return pi_error(PI_ERR_FORMAT, "plan line %d: '%s' before 'n_layer'", line_no, k);
    const char *c = v;
    for (int64_t l = 0; l < n_layer; l++) {
        char *end;
        thr[l] = strtof(c, &end);
        if (end == c || isnan(thr[l]) || isinf(thr[l]))
            return pi_error(PI_ERR_FORMAT, "plan line %d: '%s' needs %lld finite numbers", line_no, k,
                            (long long)n_layer);
        c = end;
    }
    while (*c == ' ') c++;
    if (*c) return pi_error(PI_ERR_FORMAT, "plan line %d: more than %lld %s", line_no, (long long)n_layer, k);
    return PI_OK;
}

pi_status pi_plan_parse(const char *text, size_t n, pi_plan *p) {
    memset(p, 0, sizeof *p);
    bool seen_header = false, seen_hot = false, seen_thr = false;
    int line_no = 0;
    size_t pos = 0;
    char line[8192];
    while (pos < n) {
        size_t e = pos;
        while (e < n && text[e] != '\n') e++;
        line_no++;
        size_t len = e - pos;
        if (len >= sizeof line) return pi_error(PI_ERR_FORMAT, "plan line %d: too long", line_no);
        memcpy(line, text + pos, len);
        line[len] = '\0';
        pos = e + 1;
        if (memchr(line, '\0', len)) return pi_error(PI_ERR_FORMAT, "plan line %d: a NUL byte", line_no);
        if (!seen_header) {
            if (strcmp(line, "pinfer-plan 1"))
                return pi_error(PI_ERR_FORMAT, "plan line 1: expected 'pinfer-plan 1' (not a plan file, or a newer one)");
            seen_header = true;
            continue;
        }
        if (!len || line[0] == '#') continue;
        char *sp = strchr(line, ' ');
        if (!sp) return pi_error(PI_ERR_FORMAT, "plan line %d: expected 'key value'", line_no);
        *sp = '\0';
        const char *k = line, *v = sp + 1;
        uint64_t x = 0;
        if (!strcmp(k, "model")) {
            snprintf(p->model, sizeof p->model, "%s", v);
        } else if (!strcmp(k, "predicted_tok_s")) {
            char *end;
            p->cost.tok_s = strtod(v, &end);
            if (end == v || *end || !(p->cost.tok_s >= 0.0) || !isfinite(p->cost.tok_s))
                return pi_error(PI_ERR_FORMAT, "plan line %d: bad predicted_tok_s '%s'", line_no, v);
        } else if (!strcmp(k, "recall")) {
            char *end;
            p->recall = strtod(v, &end);
            if (end == v || *end || !(p->recall > 0.0 && p->recall <= 1.0))
                return pi_error(PI_ERR_FORMAT, "plan line %d: recall '%s' is not in (0, 1]", line_no, v);
        } else if (!strcmp(k, "thresholds") || !strcmp(k, "thresholds_hot")) {
            const bool hot = !strcmp(k, "thresholds_hot");
            pi_status st = parse_thresholds(k, v, p->n_layer, line_no, hot ? p->thr_hot : p->thr);
            if (st) return st;
            if (hot) p->split = true;
            else seen_thr = true;
        } else if (!strcmp(k, "hot")) {
            if (!p->n_layer) return pi_error(PI_ERR_FORMAT, "plan line %d: 'hot' before 'n_layer'", line_no);
            const char *c = v;
            for (int64_t l = 0; l < p->n_layer; l++) {
                char *end;
                while (*c == ' ') c++;
                if (!isdigit((unsigned char)*c))
                    return pi_error(PI_ERR_FORMAT, "plan line %d: 'hot' needs %lld counts", line_no, (long long)p->n_layer);
                errno = 0;
                long long h = strtoll(c, &end, 10);
                if (errno || h < 0 || h > (1ll << 30))
                    return pi_error(PI_ERR_FORMAT, "plan line %d: bad hot count", line_no);
                p->hot[l] = h;
                c = end;
            }
            while (*c == ' ') c++;
            if (*c) return pi_error(PI_ERR_FORMAT, "plan line %d: more than %lld hot counts", line_no, (long long)p->n_layer);
            seen_hot = true;
        } else if (parse_u64(v, &x)) {
            if (!strcmp(k, "model_size")) p->model_size = x;
            else if (!strcmp(k, "mem_budget")) p->mem_budget = x;
            else if (!strcmp(k, "cache_bytes")) p->cache_bytes = x;
            else if (!strcmp(k, "head_rows") && x <= (1u << 30)) p->head_rows = (int64_t)x;
            else if (!strcmp(k, "n_ctx") && x <= (1u << 24)) p->n_ctx = (int64_t)x; /* 0: the model's */
            else if (!strcmp(k, "threads") && x >= 1 && x <= 1024) p->threads = (int)x;
            else if (!strcmp(k, "queue_depth") && x >= 1 && x <= 4096) p->queue_depth = (int)x;
            else if (!strcmp(k, "n_layer") && x >= 1 && x <= PI_PLAN_MAX_LAYERS && !p->n_layer) p->n_layer = (int64_t)x;
            else return pi_error(PI_ERR_FORMAT, "plan line %d: unknown key or value out of range: '%s %s'", line_no, k, v);
        } else {
            return pi_error(PI_ERR_FORMAT, "plan line %d: unknown key or bad number: '%s %s'", line_no, k, v);
        }
    }
    if (!seen_header) return pi_error(PI_ERR_FORMAT, "plan: empty file");
    if (!p->n_layer || !seen_hot || !p->threads || !p->queue_depth)
        return pi_error(PI_ERR_FORMAT, "plan: incomplete (needs n_layer, hot, threads and queue_depth)");
    if ((p->recall > 0.0) != seen_thr)
        return pi_error(PI_ERR_FORMAT, "plan: 'recall' and 'thresholds' come together");
    if (p->split && !seen_thr) return pi_error(PI_ERR_FORMAT, "plan: 'thresholds_hot' without 'thresholds'");
    return PI_OK;
}

pi_status pi_plan_load(const char *path, pi_plan *p) {
    FILE *f = fopen(path, "rb");
    if (!f) return pi_error(PI_ERR_NOT_FOUND, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
    bool big = buf && !feof(f);
    fclose(f);
    if (!buf) return pi_error(PI_ERR_NOMEM, "out of memory");
    if (big) {
        free(buf);
        return pi_error(PI_ERR_FORMAT, "%s: larger than 1 MiB: not a plan file", path);
    }
    pi_status st = pi_plan_parse(buf, n, p);
    free(buf);
    if (st) return pi_error_prefix(st, "%s", path);
    return PI_OK;
}
