/*
 * mapfile.c — open + fstat + mmap, with errors that name the file.
 */
#include "mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

pi_status pi_map_file(const char *path, pi_mapping *out) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pi_error(errno == ENOENT ? PI_ERR_NOT_FOUND : PI_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return pi_error(PI_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return pi_error(PI_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return pi_error(PI_ERR_FORMAT, "%s: empty file", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return pi_error(PI_ERR_IO, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    return PI_OK;
}

void pi_unmap_file(pi_mapping *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}
