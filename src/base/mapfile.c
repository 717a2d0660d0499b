/*
 * mapfile.c — open + fstat + mmap, with errors that name the file.
 */
#include "mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOAD_CHUNK (64u << 20)

static size_t huge_round(size_t n) { return (n + PI_HUGE_PAGE - 1) & ~(size_t)(PI_HUGE_PAGE - 1); }

void *pi_huge_alloc(size_t n) {
    /* a huge page's more, trimmed so that the memory starts on a huge page:
       kernels before 6.7 place anonymous mappings on any 4 KiB page, and the
       huge pages then cover only the aligned middle */
    const size_t len = huge_round(n ? n : 1);
    uint8_t *m = mmap(NULL, len + PI_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    const size_t head = (PI_HUGE_PAGE - (uintptr_t)m % PI_HUGE_PAGE) % PI_HUGE_PAGE; /* < PI_HUGE_PAGE */
    uint8_t *p = m + head;
    if (head) munmap(m, head);
    munmap(p + len, PI_HUGE_PAGE - head); /* the rest of the extra page, never empty */
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE); /* advice only: without THP the memory still works */
#endif
    return p;
}

void pi_huge_free(void *p, size_t n) {
    if (p) munmap(p, huge_round(n ? n : 1));
}

/* Read the whole file into fresh anonymous memory (huge pages advised). */
static pi_status load_anon(const char *path, int fd, size_t size, pi_mapping *out) {
    size_t len = huge_round(size);
    void *p = pi_huge_alloc(size);
    if (!p) return pi_error(PI_ERR_NOMEM, "%s: cannot allocate %zu MiB to load the file (try --mmap)", path, len >> 20);
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    size_t done = 0;
    while (done < size) {
        size_t want = size - done < LOAD_CHUNK ? size - done : LOAD_CHUNK;
        ssize_t r = pread(fd, (char *)p + done, want, (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            munmap(p, len);
            return pi_error(PI_ERR_IO, "%s: read failed at byte %zu of %zu: %s", path, done, size,
                            e ? strerror(e) : "unexpected end of file");
        }
        /* the page-cache copy of what was read is not needed twice */
        posix_fadvise(fd, (off_t)done, (off_t)r, POSIX_FADV_DONTNEED);
        done += (size_t)r;
    }
    mprotect(p, len, PROT_READ); /* weights are read-only from here on */
    out->data = p;
    out->size = size;
    out->mapped = len;
    return PI_OK;
}

pi_status pi_map_file(const char *path, pi_mapping *out) { return pi_map_file_mode(path, PI_MAP_FILE, out); }

pi_status pi_map_file_mode(const char *path, pi_map_mode mode, pi_mapping *out) {
    out->data = NULL;
    out->size = 0;
    out->mapped = 0;
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
    if ((uint64_t)st.st_size > SIZE_MAX / 2) {
        close(fd);
        return pi_error(PI_ERR_UNSUPPORTED, "%s: file too large to map", path);
    }
    if (mode == PI_MAP_LOAD) {
        pi_status rs = load_anon(path, fd, (size_t)st.st_size, out);
        close(fd);
        return rs;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return pi_error(PI_ERR_IO, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    out->mapped = (size_t)st.st_size;
    return PI_OK;
}

void pi_unmap_file(pi_mapping *m) {
    if (m->data) munmap((void *)m->data, m->mapped);
    m->data = NULL;
    m->size = 0;
    m->mapped = 0;
}
