/*
 * log.h — leveled logging to stderr. Never called on the per-token path.
 * The level comes from PI_LOG (error|warn|info|debug), default warn.
 */
#ifndef PI_BASE_LOG_H
#define PI_BASE_LOG_H

#include "status.h"

typedef enum { PI_LOG_ERROR = 0, PI_LOG_WARN = 1, PI_LOG_INFO = 2, PI_LOG_DEBUG = 3 } pi_log_level;

void pi_log_set_level(pi_log_level lvl);
pi_log_level pi_log_get_level(void);
void pi_log(pi_log_level lvl, const char *fmt, ...) PI_PRINTF(2, 3);

#define PI_LOGE(...) pi_log(PI_LOG_ERROR, __VA_ARGS__)
#define PI_LOGW(...) pi_log(PI_LOG_WARN, __VA_ARGS__)
#define PI_LOGI(...) pi_log(PI_LOG_INFO, __VA_ARGS__)
#define PI_LOGD(...) pi_log(PI_LOG_DEBUG, __VA_ARGS__)

#endif
