/*
 * mapfile.h — read-only whole-file memory mapping.
 */
#ifndef PI_BASE_MAPFILE_H
#define PI_BASE_MAPFILE_H

#include "status.h"

#include <stddef.h>

typedef struct pi_mapping {
    const void *data;
    size_t size;
} pi_mapping;

/* Map a whole file read-only. An empty file is PI_ERR_FORMAT ("empty file"),
   anything the OS refuses PI_ERR_IO; messages name the path. */
pi_status pi_map_file(const char *path, pi_mapping *out);
void pi_unmap_file(pi_mapping *m); /* accepts a zeroed mapping */

#endif
