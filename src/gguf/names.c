/*
 * names.c — reading a layer index back out of a tensor name (the names
 * themselves are in names.h).
 */
#include "gguf/names.h"

#include <string.h>

int64_t pi_tensor_layer(pi_gguf_str name, const char *fmt) {
    const char *d = strstr(fmt, "%d");
    PI_ASSERT(d); /* a per-layer format */
    const size_t head = (size_t)(d - fmt), tail = strlen(d + 2);
    if (name.len < head + 1 + tail || memcmp(name.data, fmt, head) ||
        memcmp(name.data + name.len - tail, d + 2, tail))
        return -1;
    int64_t layer = 0;
    for (uint64_t i = head; i < name.len - tail; i++) {
        const char c = name.data[i];
        if (c < '0' || c > '9') return -1;
        layer = layer > (INT64_MAX - 9) / 10 ? INT64_MAX : layer * 10 + (c - '0');
    }
    return layer;
}
