/*
 * pinfer — public C API.
 *
 * pinfer runs llama-family language models whose weights do not fit in memory,
 * computing only the FFN neurons a token activates and streaming the rest from
 * flash (the PowerInfer-2 design). This header is the stable surface: opaque
 * handles, small integer status codes, and the last-error message.
 *
 * Conventions: every fallible call returns a pi_status (0 ok, negative error) and
 * hands results back through out-parameters. On error, pi_last_error() returns a
 * message naming the file, offset or field at fault; it is thread-local and valid
 * until the next failing call on the same thread.
 */
#ifndef PINFER_H
#define PINFER_H

#ifdef __cplusplus
extern "C" {
#endif

#define PI_VERSION_MAJOR 0
#define PI_VERSION_MINOR 1
#define PI_VERSION_PATCH 0
#define PI_VERSION_STRING "0.1.0"

typedef enum pi_status {
    PI_OK              =  0,
    PI_ERR_IO          = -1, /* the OS refused a read, write, open or map */
    PI_ERR_FORMAT      = -2, /* a file is malformed: a field is out of range */
    PI_ERR_NOMEM       = -3, /* an allocation failed or a budget is exceeded */
    PI_ERR_INVALID     = -4, /* a caller passed a bad argument */
    PI_ERR_UNSUPPORTED = -5, /* valid input this build cannot handle */
    PI_ERR_NOT_FOUND   = -6, /* a key, tensor or file is missing */
    PI_ERR_FULL        = -7, /* a fixed-size queue is full: reap and retry */
} pi_status;

/* How decode computes the FFN (prompts always take the dense path). */
typedef enum pi_ffn_mode {
    PI_FFN_AUTO = 0,   /* sparse when the model has activation predictors, else dense */
    PI_FFN_DENSE = 1,  /* every neuron */
    PI_FFN_SPARSE = 2, /* a hot prefix plus the neurons the predictor selects */
    PI_FFN_ORACLE = 3, /* exactly the active neurons (every gate computed): for tests */
} pi_ffn_mode;

/* Short constant name of a status ("ok", "io", "format", ...). */
const char *pi_status_str(pi_status st);

/* The message of the last failing call on this thread ("" when none). */
const char *pi_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* PINFER_H */
