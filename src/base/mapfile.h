/*
 * mapfile.h — a whole file in memory: mapped from the page cache, or loaded
 * into anonymous memory backed by transparent huge pages.
 *
 * Loading costs a read of the file at start-up but makes weight streaming
 * faster: a 1 GB model spans ~250K 4 KiB pages of page cache, and the TLB
 * misses of walking them cost about 15% of decode speed on x86; 2 MiB pages
 * remove that. The page-cache copy made while reading is dropped afterwards,
 * so the file is resident once.
 */
#ifndef PI_BASE_MAPFILE_H
#define PI_BASE_MAPFILE_H

#include "status.h"

#include <stddef.h>

typedef struct pi_mapping {
    const void *data;
    size_t size;     /* bytes of the file */
    size_t mapped;   /* bytes of the mapping (size rounded up when loaded) */
} pi_mapping;

typedef enum pi_map_mode {
    PI_MAP_FILE = 0, /* mmap the file read-only (shares the page cache) */
    PI_MAP_LOAD = 1, /* read it into private huge-page-backed memory */
} pi_map_mode;

/* Map a whole file read-only. An empty file is PI_ERR_FORMAT ("empty file"),
   anything the OS refuses PI_ERR_IO; messages name the path. */
pi_status pi_map_file(const char *path, pi_mapping *out);

/* pi_map_file, or a load into anonymous memory with PI_MAP_LOAD. */
pi_status pi_map_file_mode(const char *path, pi_map_mode mode, pi_mapping *out);
void pi_unmap_file(pi_mapping *m); /* accepts a zeroed mapping */

#define PI_HUGE_PAGE ((size_t)2 << 20) /* the boundary pi_huge_alloc's memory starts on */

/* Zeroed anonymous memory of at least n bytes starting on a 2 MiB boundary,
   huge pages advised, for large buffers that are streamed or read into
   (weight copies, the neuron cache, benchmarks); NULL on failure. Free with
   pi_huge_free(p, n). */
void *pi_huge_alloc(size_t n);
void pi_huge_free(void *p, size_t n);

#endif
