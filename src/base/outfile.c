/*
 * outfile.c — write to a temporary beside the target, rename on success.
 */
#include "base/outfile.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_BUF (1 << 20)

struct pi_outfile {
    FILE *f;
    char *path;   /* the target */
    char *tmp;    /* the temporary; NULL when written in place */
    char *dir;    /* the target's directory, for its fsync */
    char *buf;
    bool keep_mode;
    mode_t mode;  /* an existing target's permission bits */
};

static void outfile_free(pi_outfile *of) {
    free(of->path);
    free(of->tmp);
    free(of->dir);
    free(of->buf);
    free(of);
}

/* The directory part of path ("." when it has none). */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

pi_status pi_outfile_open(const char *path, pi_outfile **out) {
    *out = NULL;
    if (!path || !*path) return pi_error(PI_ERR_INVALID, "empty output path");
    /* A symbolic link is followed: the file it names is replaced, the link
       stays (as an editor saving through a link does). */
    char *real = NULL;
    struct stat lsb;
    if (lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode)) real = realpath(path, NULL);
    pi_outfile *of = calloc(1, sizeof *of);
    if (of) of->path = real ? real : strdup(path);
    else free(real);
    if (!of || !of->path || !(of->dir = dir_of(of->path)) || !(of->buf = malloc(OUT_BUF))) {
        if (of) outfile_free(of);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat sb;
    if (stat(of->path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            outfile_free(of);
            return pi_error(PI_ERR_INVALID, "%s: is a directory", path);
        }
        if (!S_ISREG(sb.st_mode)) {
            /* a device or FIFO: write in place */
            if (!(of->f = fopen(of->path, "wb"))) {
                int e = errno;
                outfile_free(of);
                return pi_error(PI_ERR_IO, "%s: cannot open for writing: %s", path, strerror(e));
            }
            setvbuf(of->f, of->buf, _IOFBF, OUT_BUF);
            *out = of;
            return PI_OK;
        }
        of->keep_mode = true;
        of->mode = sb.st_mode & 07777;
    }
    /* The temporary is hidden and named after the target, so a leftover from
       a killed run is easy to recognise. */
    const char *base = strrchr(of->path, '/');
    base = base ? base + 1 : of->path;
    size_t n = strlen(of->dir) + strlen(base) + 16;
    if (!(of->tmp = malloc(n))) {
        outfile_free(of);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(of->tmp, n, "%s/.%s.XXXXXX", of->dir, base);
    int fd = mkostemp(of->tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        pi_status st = pi_error(e == ENOENT ? PI_ERR_NOT_FOUND : PI_ERR_IO, "%s: cannot create a file in %s: %s",
                                path, of->dir, strerror(e));
        outfile_free(of);
        return st;
    }
    if (!(of->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(of->tmp);
        outfile_free(of);
        return pi_error(PI_ERR_IO, "%s: %s", path, strerror(e));
    }
    setvbuf(of->f, of->buf, _IOFBF, OUT_BUF);
    *out = of;
    return PI_OK;
}

FILE *pi_outfile_stream(pi_outfile *of) { return of->f; }

const char *pi_outfile_temp_path(const pi_outfile *of) { return of->tmp ? of->tmp : of->path; }

void pi_outfile_abort(pi_outfile *of) {
    if (!of) return;
    pi_error_saved saved;
    pi_error_save(&saved);
    if (of->f) fclose(of->f);
    if (of->tmp) unlink(of->tmp);
    outfile_free(of);
    pi_error_restore(&saved);
}

static pi_status fail(pi_outfile *of, const char *what, int e) {
    pi_status st = pi_error(PI_ERR_IO, "%s: %s: %s%s", of->path, what, strerror(e),
                            of->tmp ? " (the previous file, if any, is unchanged)" : "");
    if (of->f) fclose(of->f);
    of->f = NULL;
    if (of->tmp) unlink(of->tmp);
    outfile_free(of);
    return st;
}

pi_status pi_outfile_commit(pi_outfile *of) {
    if (!of) return pi_error(PI_ERR_INVALID, "no output file");
    errno = 0;
    if (fflush(of->f) != 0 || ferror(of->f)) return fail(of, "write failed", errno ? errno : EIO);
    if (!of->tmp) {
        FILE *f = of->f;
        of->f = NULL;
        if (fclose(f) != 0) return fail(of, "write failed", errno);
        outfile_free(of);
        return PI_OK;
    }
    const int fd = fileno(of->f);
    mode_t mode = of->mode;
    if (!of->keep_mode) {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    if (fchmod(fd, mode) != 0) return fail(of, "cannot set the file mode", errno);
    if (fsync(fd) != 0) return fail(of, "fsync failed", errno);
    FILE *f = of->f;
    of->f = NULL;
    if (fclose(f) != 0) return fail(of, "write failed", errno);
    if (rename(of->tmp, of->path) != 0) return fail(of, "cannot rename the new file into place", errno);
    /* The rename itself survives a crash only once the directory is synced. */
    int dfd = open(of->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(of->tmp);
    of->tmp = NULL;
    outfile_free(of);
    return PI_OK;
}

pi_status pi_outfile_check_distinct(const char *out, const char *in, const char *what) {
    struct stat so, si;
    if (!out || !in) return PI_OK;
    if (stat(out, &so) != 0) return PI_OK;
    if (S_ISDIR(so.st_mode)) return pi_error(PI_ERR_INVALID, "output %s is a directory", out);
    if (stat(in, &si) != 0) return PI_OK;
    if (so.st_dev == si.st_dev && so.st_ino == si.st_ino && S_ISREG(so.st_mode))
        return pi_error(PI_ERR_INVALID, "output %s is the same file as %s %s; write to another path", out,
                        what ? what : "the input", in);
    return PI_OK;
}
