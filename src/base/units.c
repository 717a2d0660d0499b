/*
 * units.c — sizes for people.
 */
#include "base/units.h"

#include <stdio.h>

const char *pi_fmt_bytes(char *buf, size_t n, uint64_t bytes) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) v /= 1024.0, u++;
    if (u == 0) snprintf(buf, n, "%llu B", (unsigned long long)bytes);
    else if (v < 9.995) snprintf(buf, n, "%.2f %s", v, unit[u]);
    else if (v < 99.95) snprintf(buf, n, "%.1f %s", v, unit[u]);
    else snprintf(buf, n, "%.0f %s", v, unit[u]);
    return buf;
}
