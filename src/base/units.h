/*
 * units.h — sizes for people: bytes with the largest binary unit that keeps
 * the figure at or above 1 (B, KiB, MiB, GiB, TiB), 3 significant digits.
 */
#ifndef PI_BASE_UNITS_H
#define PI_BASE_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Room for any result of pi_fmt_bytes. */
#define PI_FMT_BYTES_MAX 24

/* "1 B", "812 B", "1.50 KiB", "600 MiB", "23.4 GiB"; returns buf. */
const char *pi_fmt_bytes(char *buf, size_t n, uint64_t bytes);

/* A compound literal buffer, so a call fits inside a printf argument list. */
#define PI_BYTES(b) pi_fmt_bytes((char[PI_FMT_BYTES_MAX]){0}, PI_FMT_BYTES_MAX, (b))

#endif
