/*
 * status.c — thread-local last-error message and the assertion handler.
 */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char g_errmsg[PI_ERRMSG_MAX];

const char *pi_status_str(pi_status st) {
    switch (st) {
    case PI_OK: return "ok";
    case PI_ERR_IO: return "io";
    case PI_ERR_FORMAT: return "format";
    case PI_ERR_NOMEM: return "nomem";
    case PI_ERR_INVALID: return "invalid";
    case PI_ERR_UNSUPPORTED: return "unsupported";
    case PI_ERR_NOT_FOUND: return "not-found";
    case PI_ERR_FULL: return "full";
    }
    return "unknown";
}

const char *pi_last_error(void) { return g_errmsg; }

void pi_error_clear(void) { g_errmsg[0] = '\0'; }

void pi_error_save(pi_error_saved *s) { memcpy(s->msg, g_errmsg, sizeof g_errmsg); }

void pi_error_restore(const pi_error_saved *s) { memcpy(g_errmsg, s->msg, sizeof g_errmsg); }

pi_status pi_error(pi_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_errmsg, sizeof g_errmsg, fmt, ap);
    va_end(ap);
    return st;
}

pi_status pi_error_prefix(pi_status st, const char *fmt, ...) {
    char prev[PI_ERRMSG_MAX];
    memcpy(prev, g_errmsg, sizeof prev);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_errmsg, sizeof g_errmsg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n + 3 < sizeof g_errmsg) {
        int room = (int)(sizeof g_errmsg - (size_t)n - 3);
        snprintf(g_errmsg + n, sizeof g_errmsg - (size_t)n, ": %.*s", room, prev);
    }
    return st;
}

void pi_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "pinfer: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    fflush(stderr);
    abort();
}
