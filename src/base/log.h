/*
 * log.h — leveled logging, to stderr or to the callback pi_log_set installs.
 * Never called on the per-token path. The level comes from PI_LOG
 * (error|warn|info|debug), default warn, unless pi_log_set gives one.
 */
#ifndef PI_BASE_LOG_H
#define PI_BASE_LOG_H

#include "status.h"

/* pi_log_level and pi_log_set are public (include/pinfer.h). */

void pi_log_set_level(pi_log_level lvl);
pi_log_level pi_log_get_level(void);
void pi_log(pi_log_level lvl, const char *fmt, ...) PI_PRINTF(2, 3);

#define PI_LOGE(...) pi_log(PI_LOG_ERROR, __VA_ARGS__)
#define PI_LOGW(...) pi_log(PI_LOG_WARN, __VA_ARGS__)
#define PI_LOGI(...) pi_log(PI_LOG_INFO, __VA_ARGS__)
#define PI_LOGD(...) pi_log(PI_LOG_DEBUG, __VA_ARGS__)

#endif
