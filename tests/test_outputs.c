/*
 * test_outputs.c — outputs never lose data (base/outfile.h and the commands
 * that write files):
 *  1. pi_outfile: a commit replaces the target and keeps its mode; a new file
 *     gets 0666 & ~umask; an abort leaves the old file byte-identical and no
 *     temporary in the directory; a device (/dev/null, /dev/full) is written
 *     in place and never removed; pi_outfile_check_distinct sees the same
 *     file through hard and symbolic links;
 *  2. the pinfer binary ($PI_TEST_PINFER, $PI_TEST_RUNNER as a prefix):
 *     convert (--reorder, --bundle, --from-llama2c), gen-model (--vocab),
 *     profile, train-predictor, plan and hwprobe refuse an -o that is one of
 *     their inputs (also through a hard link or a symlink) with exit status 2
 *     and a message, leaving the input byte-identical; gen-model under
 *     `ulimit -f` fails with a message and leaves the previous file at -o
 *     byte-identical and no temporary; a successful gen-model over an
 *     existing file replaces it (keeping its mode); convert shows progress
 *     and a summary line.
 * Everything is written under a temp directory that is removed at the end;
 * the llama2.c fixtures are copied there, never written to.
 */
#include "base/outfile.h"
#include "test_util.h"

#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>

static char g_dir[256];
static const char *g_pinfer, *g_runner;

/* g_dir/name into buf. */
static const char *in_dir(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}

static bool write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Whether the file holds exactly n bytes equal to want. */
static bool holds(const char *path, const void *want, size_t n) {
    size_t got_n = 0;
    char *got = t_read_file(path, &got_n);
    bool same = got && got_n == n && !memcmp(got, want, n);
    free(got);
    return same;
}

static bool holds_text(const char *path, const char *text) { return holds(path, text, strlen(text)); }

/* Entries of g_dir whose name starts with '.' other than . and .. (the
   outfile temporaries are hidden). */
static int hidden_entries(void) {
    DIR *d = opendir(g_dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static mode_t mode_of(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_mode & 07777 : (mode_t)-1;
}

/* Write text to path through a pi_outfile and commit (or abort). */
static pi_status put(const char *path, const char *text, bool commit) {
    pi_outfile *of;
    pi_status st = pi_outfile_open(path, &of);
    if (st) return st;
    fputs(text, pi_outfile_stream(of));
    if (!commit) {
        pi_outfile_abort(of);
        return PI_OK;
    }
    return pi_outfile_commit(of);
}

/* ---- 1. pi_outfile ---- */

static void test_outfile(void) {
    char path[320], hard[320], sym[320], other[320];
    in_dir(path, sizeof path, "unit.txt");
    in_dir(hard, sizeof hard, "unit-hard.txt");
    in_dir(sym, sizeof sym, "unit-sym.txt");
    in_dir(other, sizeof other, "other.txt");

    /* a new file: 0666 less the umask, for two umasks */
    static const mode_t masks[] = {022, 027};
    const mode_t saved = umask(022);
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        unlink(path);
        umask(masks[i]);
        CHECKF(put(path, "first\n", true) == PI_OK, "%s", pi_last_error());
        CHECKF(mode_of(path) == (0666 & ~masks[i]), "mode %o under umask %o", (unsigned)mode_of(path),
               (unsigned)masks[i]);
        CHECK(holds_text(path, "first\n"));
    }
    umask(saved);

    /* a commit replaces the content and keeps the old file's mode */
    CHECK(chmod(path, 0604) == 0);
    CHECKF(put(path, "second, longer\n", true) == PI_OK, "%s", pi_last_error());
    CHECK(holds_text(path, "second, longer\n"));
    CHECKF(mode_of(path) == 0604, "mode %o after a replacing commit", (unsigned)mode_of(path));
    CHECK(hidden_entries() == 0);

    /* an abort, and a temporary written to and abandoned: the old bytes stay */
    CHECK(put(path, "never seen\n", false) == PI_OK);
    CHECK(holds_text(path, "second, longer\n"));
    CHECK(hidden_entries() == 0);
    pi_outfile *of = NULL;
    CHECK(pi_outfile_open(path, &of) == PI_OK);
    if (of) {
        const char *tmp = pi_outfile_temp_path(of);
        CHECKF(strcmp(tmp, path) && strncmp(tmp, g_dir, strlen(g_dir)) == 0, "temporary %s", tmp);
        for (int i = 0; i < 4096; i++) fputs("0123456789abcdef", pi_outfile_stream(of));
        CHECK(fflush(pi_outfile_stream(of)) == 0 && hidden_entries() == 1); /* the temporary holds 64 KiB */
        pi_outfile_abort(of);
    }
    CHECK(holds_text(path, "second, longer\n"));
    CHECK(hidden_entries() == 0);
    pi_outfile_abort(NULL);

    /* a missing directory fails at open, naming the path */
    char missing[400];
    snprintf(missing, sizeof missing, "%s/no-such-dir/x.txt", g_dir);
    CHECK(pi_outfile_open(missing, &of) != PI_OK && of == NULL && strstr(pi_last_error(), missing));

    /* devices are written in place and stay devices */
    struct stat sb;
    CHECKF(put("/dev/null", "discarded\n", true) == PI_OK, "%s", pi_last_error());
    CHECK(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
    if (access("/dev/full", W_OK) == 0) {
        CHECK(pi_outfile_open("/dev/full", &of) == PI_OK);
        if (of) {
            CHECK(!strcmp(pi_outfile_temp_path(of), "/dev/full"));
            fputs("no room\n", pi_outfile_stream(of));
            pi_status st = pi_outfile_commit(of);
            CHECKF(st == PI_ERR_IO && strstr(pi_last_error(), "/dev/full"), "%d %s", st, pi_last_error());
        }
        CHECK(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode));
        CHECK(pi_outfile_open("/dev/full", &of) == PI_OK);
        pi_outfile_abort(of);
        CHECK(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode));
    }

    /* the same file by any name; different or missing files pass */
    CHECK(write_file(other, "other\n"));
    CHECK(link(path, hard) == 0 && symlink(path, sym) == 0);
    CHECK(pi_outfile_check_distinct(path, path, "the input") == PI_ERR_INVALID);
    CHECK(pi_outfile_check_distinct(hard, path, "the input model") == PI_ERR_INVALID &&
          strstr(pi_last_error(), "the input model") && strstr(pi_last_error(), hard));
    CHECK(pi_outfile_check_distinct(path, sym, "the input") == PI_ERR_INVALID);
    CHECK(pi_outfile_check_distinct(sym, hard, "the input") == PI_ERR_INVALID);
    CHECK(pi_outfile_check_distinct(other, path, "the input") == PI_OK);
    CHECK(pi_outfile_check_distinct(missing, path, "the input") == PI_OK);
    CHECK(pi_outfile_check_distinct(path, missing, "the input") == PI_OK);
    CHECK(pi_outfile_check_distinct(path, NULL, "the input") == PI_OK);
    CHECK(pi_outfile_check_distinct(g_dir, path, "the input") == PI_ERR_INVALID);
    /* writing through a symlink replaces the file it names; the link stays */
    CHECKF(put(sym, "through the link\n", true) == PI_OK, "%s", pi_last_error());
    struct stat lsb;
    CHECK(lstat(sym, &lsb) == 0 && S_ISLNK(lsb.st_mode) && holds_text(path, "through the link\n"));
    CHECK(hidden_entries() == 0);
    unlink(path);
    unlink(hard);
    unlink(sym);
    unlink(other);
}

/* ---- 2. the commands ---- */

/* Run `pinfer ARGS` (stdout to /dev/null, stderr to err), optionally under
   `ulimit -f blocks` (512-byte blocks); returns the exit status. */
static int pinfer_limited(const char *args, const char *err, long blocks) {
    char cmd[4096];
    if (blocks > 0)
        snprintf(cmd, sizeof cmd, "sh -c 'ulimit -f %ld; exec %s %s %s' >/dev/null 2>%s", blocks, g_runner, g_pinfer,
                 args, err);
    else snprintf(cmd, sizeof cmd, "%s %s %s >/dev/null 2>%s", g_runner, g_pinfer, args, err);
    return t_sh(cmd);
}

static int pinfer(const char *args, const char *err) { return pinfer_limited(args, err, 0); }

/* The file's bytes, kept to compare against later (caller frees). */
static char *snapshot(const char *path, size_t *n) {
    char *p = t_read_file(path, n);
    CHECKF(p != NULL, "cannot read %s", path);
    return p;
}

/* `pinfer ARGS` is refused as a usage error naming the clash, and the file
   at `kept` still holds its n bytes. */
static void refused(const char *args, const char *err, const char *kept, const char *bytes, size_t n) {
    int rc = pinfer(args, err);
    CHECKF(rc == 2 && t_file_has(err, "same file"), "pinfer %s: exit %d, stderr does not say 'same file'", args, rc);
    CHECKF(holds(kept, bytes, n), "pinfer %s changed %s", args, kept);
    CHECKF(hidden_entries() == 0, "pinfer %s left a temporary", args);
}

/* Shape options of a small generated model: with --vocab-size a byte-level
   tokenizer of 300 tokens; SMALL_SHAPE alone takes the default vocabulary
   when the fixture exists (or the one --vocab names). */
#define SMALL_SHAPE "--preset tiny --layers 2 --dim 128 --ffn 256 --n-head 4 --n-head-kv 2 --type q8_0 --act relu"
#define SMALL_MODEL SMALL_SHAPE " --vocab-size 300"

static void test_commands(void) {
    char model[320], stats[320], hard[320], sym[320], bundle[320], err[320], text[320], args[2048];
    in_dir(model, sizeof model, "m.gguf");
    in_dir(stats, sizeof stats, "m.stats");
    in_dir(hard, sizeof hard, "m-hard.gguf");
    in_dir(sym, sizeof sym, "m-sym.gguf");
    in_dir(bundle, sizeof bundle, "m.bundle");
    in_dir(err, sizeof err, "err.txt");
    in_dir(text, sizeof text, "text.txt");

    snprintf(args, sizeof args, "gen-model -o %s " SMALL_MODEL, model);
    CHECK(pinfer(args, err) == 0);
    CHECKF(t_file_has(err, "gen-model: wrote") && t_file_has(err, "MiB/s"), "gen-model's summary line");
    snprintf(args, sizeof args, "profile -m %s --tokens 16 --seed 1 -t 2 -o %s", model, stats);
    CHECK(pinfer(args, err) == 0);
    CHECK(write_file(text, "Once upon a time there was a small model that wrote files.\n"));
    CHECK(link(model, hard) == 0 && symlink(model, sym) == 0);
    size_t n_model = 0, n_stats = 0, n_text = 0;
    char *b_model = snapshot(model, &n_model), *b_stats = snapshot(stats, &n_stats), *b_text = snapshot(text, &n_text);
    if (!b_model || !b_stats || !b_text) goto out;

    /* convert: -o is the model, by its name, a hard link or a symlink, either way round */
    const char *const same[] = {model, hard, sym};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "convert -m %s --reorder %s -o %s", model, stats, same[i]);
        refused(args, err, model, b_model, n_model);
        snprintf(args, sizeof args, "convert -m %s --bundle -o %s", same[i], model);
        refused(args, err, model, b_model, n_model);
        snprintf(args, sizeof args, "convert -m %s --reorder %s --bundle -o %s", model, stats, same[i]);
        refused(args, err, model, b_model, n_model);
    }
    CHECK(t_file_has(err, "the input model"));
    snprintf(args, sizeof args, "convert -m %s --reorder %s -o %s", model, stats, stats);
    refused(args, err, stats, b_stats, n_stats);

    /* a conversion that goes ahead shows its progress and a summary */
    snprintf(args, sizeof args, "convert -m %s --reorder %s --bundle -o %s", model, stats, bundle);
    CHECK(pinfer(args, err) == 0);
    CHECKF(t_file_has(err, "convert: ") && t_file_has(err, "(100%)") && t_file_has(err, "MiB/s") &&
               t_file_has(err, "convert: wrote"),
           "convert's progress and summary");

    /* the other commands: -o is an input */
    snprintf(args, sizeof args, "gen-model -o %s --vocab %s " SMALL_SHAPE, sym, model);
    refused(args, err, model, b_model, n_model);
    snprintf(args, sizeof args, "profile -m %s --tokens 4 -o %s", model, model);
    refused(args, err, model, b_model, n_model);
    snprintf(args, sizeof args, "profile -m %s --text %s -o %s", model, text, text);
    refused(args, err, text, b_text, n_text);
    snprintf(args, sizeof args, "train-predictor -m %s --text %s -o %s", model, text, hard);
    refused(args, err, model, b_model, n_model);
    snprintf(args, sizeof args, "train-predictor -m %s --text %s -o %s", model, text, text);
    refused(args, err, text, b_text, n_text);
    snprintf(args, sizeof args, "plan -m %s --mem-budget 1G -o %s", model, model);
    refused(args, err, model, b_model, n_model);
    snprintf(args, sizeof args, "hwprobe -m %s -o %s --quick", model, sym);
    refused(args, err, model, b_model, n_model);

    /* convert --from-llama2c: copies of the fixtures, -o naming either */
    char fix_bin[512], fix_tok[512], bin[320], tok[320];
    if (t_fixture(fix_bin, sizeof fix_bin, "stories260K.bin") && t_fixture(fix_tok, sizeof fix_tok, "tok512.bin")) {
        in_dir(bin, sizeof bin, "s.bin");
        in_dir(tok, sizeof tok, "t.bin");
        snprintf(args, sizeof args, "cp %s %s && cp %s %s", fix_bin, bin, fix_tok, tok);
        CHECK(t_sh(args) == 0);
        size_t n_bin = 0, n_tok = 0;
        char *b_bin = snapshot(bin, &n_bin), *b_tok = snapshot(tok, &n_tok);
        if (b_bin && b_tok) {
            snprintf(args, sizeof args, "convert --from-llama2c %s --tokenizer %s -o %s", bin, tok, bin);
            refused(args, err, bin, b_bin, n_bin);
            snprintf(args, sizeof args, "convert --from-llama2c %s --tokenizer %s -o %s", bin, tok, tok);
            refused(args, err, tok, b_tok, n_tok);
        }
        free(b_bin);
        free(b_tok);
        unlink(bin);
        unlink(tok);
    }

    /* gen-model past `ulimit -f`: fails with a message, the good file stays */
    CHECK(chmod(model, 0640) == 0);
    snprintf(args, sizeof args, "gen-model -o %s --seed 2 " SMALL_MODEL, model);
    int rc = pinfer_limited(args, err, 64); /* 32 KiB */
    CHECKF(rc != 0 && rc != 128 && t_file_has(err, "pinfer: gen-model:") && t_file_has(err, model),
           "gen-model under ulimit -f: exit %d", rc);
    CHECKF(holds(model, b_model, n_model), "gen-model under ulimit -f changed %s", model);
    CHECKF(hidden_entries() == 0, "gen-model under ulimit -f left a temporary");
    /* without the limit it replaces the file, keeping its mode; the hard
       link still holds the old bytes (a new file took the name) */
    CHECK(pinfer(args, err) == 0);
    size_t n_new = 0;
    char *b_new = t_read_file(model, &n_new);
    CHECKF(b_new && !(n_new == n_model && !memcmp(b_new, b_model, n_model)), "gen-model --seed 2 did not replace %s",
           model);
    free(b_new);
    CHECKF(mode_of(model) == 0640, "mode %o after gen-model replaced the file", (unsigned)mode_of(model));
    CHECK(holds(hard, b_model, n_model));
    CHECK(hidden_entries() == 0);
out:
    free(b_model);
    free(b_stats);
    free(b_text);
}

int main(void) {
    t_tmp_path(g_dir, sizeof g_dir, "outputs");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    t_sh(cmd);
    if (mkdir(g_dir, 0755) != 0) {
        fprintf(stderr, "cannot create %s\n", g_dir);
        return 1;
    }
    test_outfile();
    g_pinfer = getenv("PI_TEST_PINFER");
    g_runner = getenv("PI_TEST_RUNNER");
    if (!g_runner) g_runner = "";
    const bool have_binary = g_pinfer && access(g_pinfer, X_OK) == 0;
    if (have_binary) test_commands();
    t_sh(cmd);
    if (!have_binary && !t_failures) {
        fprintf(stderr, "skip: PI_TEST_PINFER does not name the pinfer binary (pi_outfile passed %d checks)\n",
                t_checks);
        return PI_TEST_SKIP;
    }
    return t_done("test_outputs");
}
