/*
 * log.c — leveled stderr logging; the level is read once from PI_LOG.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_level = -1;
static pi_log_fn g_fn;
static void *g_ctx;

static int level_from_env(void) {
    const char *s = getenv("PI_LOG");
    if (!s) return PI_LOG_WARN;
    if (!strcmp(s, "error")) return PI_LOG_ERROR;
    if (!strcmp(s, "info")) return PI_LOG_INFO;
    if (!strcmp(s, "debug")) return PI_LOG_DEBUG;
    return PI_LOG_WARN;
}

void pi_log_set_level(pi_log_level lvl) { g_level = (int)lvl; }

void pi_log_set(pi_log_fn fn, void *ctx, pi_log_level level) {
    g_fn = fn;
    g_ctx = ctx;
    g_level = (int)level;
}

pi_log_level pi_log_get_level(void) {
    if (g_level < 0) g_level = level_from_env();
    return (pi_log_level)g_level;
}

void pi_log(pi_log_level lvl, const char *fmt, ...) {
    if ((int)lvl > (int)pi_log_get_level()) return;
    static const char *tag[] = {"error", "warn", "info", "debug"};
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (g_fn) g_fn(g_ctx, lvl, buf);
    else fprintf(stderr, "pinfer: %s: %s\n", tag[lvl], buf);
}
