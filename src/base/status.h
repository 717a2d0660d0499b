/*
 * status.h — error reporting shared by every module.
 *
 * A failing function records a message in a thread-local buffer and returns a
 * negative pi_status; callers up the stack may prefix context. Nothing here
 * allocates, so it is safe on out-of-memory paths.
 */
#ifndef PI_BASE_STATUS_H
#define PI_BASE_STATUS_H

#include "pinfer.h"

#include <stddef.h>

#if defined(__GNUC__)
#define PI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PI_PRINTF(f, a)
#endif

#define PI_ERRMSG_MAX 512

/* Record a formatted message as the thread's last error and return st. */
pi_status pi_error(pi_status st, const char *fmt, ...) PI_PRINTF(2, 3);

/* Prefix the current last-error message with "<prefix>: " and return st. */
pi_status pi_error_prefix(pi_status st, const char *fmt, ...) PI_PRINTF(2, 3);

/* Keep the current message across cleanup calls that may set their own. */
typedef struct pi_error_saved {
    char msg[PI_ERRMSG_MAX];
} pi_error_saved;
void pi_error_save(pi_error_saved *s);
void pi_error_restore(const pi_error_saved *s);

/* Clear the thread's last error. */
void pi_error_clear(void);

/* Always-on assertion for invariants (never for input validation). */
#define PI_ASSERT(x)                                                        \
    do {                                                                    \
        if (!(x)) pi_assert_fail(#x, __FILE__, __LINE__);                   \
    } while (0)

_Noreturn void pi_assert_fail(const char *expr, const char *file, int line);

#endif
