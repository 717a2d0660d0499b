/*
 * outfile.h — output files that never lose data.
 *
 * A file is written to a temporary beside its target (same directory, so the
 * final rename is atomic), flushed and fsync'd, and renamed over the target
 * only when everything was written. A failure at any point (disk full, a file
 * size limit, an error in the producer) removes the temporary and leaves a
 * previous file at the target untouched. An input that is mapped while its
 * output is written is never truncated under the mapping, even when both
 * paths name the same file.
 *
 * A target that is a symbolic link is followed: the file it names is
 * replaced and the link stays.
 *
 * A target that exists and is not a regular file (a device such as /dev/null
 * or /dev/full, a FIFO, /dev/stdout) is written in place: there is nothing to
 * replace, and such a path must never be renamed over.
 */
#ifndef PI_BASE_OUTFILE_H
#define PI_BASE_OUTFILE_H

#include "base/status.h"

#include <stdio.h>

typedef struct pi_outfile pi_outfile;

/* Open an output for path. On error (directory missing or not writable) a
   message naming path is set. */
pi_status pi_outfile_open(const char *path, pi_outfile **out);

/* The stream to write to (fully buffered). */
FILE *pi_outfile_stream(pi_outfile *of);

/* The temporary's path while open (the target itself when written in place). */
const char *pi_outfile_temp_path(const pi_outfile *of);

/* Finish: flush, fsync, rename over the target (a new file gets mode 0666
   less the umask, a replaced file keeps its mode), fsync the directory. On
   any error the temporary is removed and the target is untouched; the
   message names the target and the cause. Frees of in every case. */
pi_status pi_outfile_commit(pi_outfile *of);

/* Give up: remove the temporary, leave the target untouched. Frees of; NULL
   is a no-op. Keeps the current error message. */
void pi_outfile_abort(pi_outfile *of);

/* PI_ERR_INVALID, with a message naming both, when out names the same file
   as in (same device and inode, through hard links or symbolic links), or a
   directory; PI_OK otherwise, also when either does not exist. `what`
   describes in for the message (e.g. "the input model"). */
pi_status pi_outfile_check_distinct(const char *out, const char *in, const char *what);

#endif
