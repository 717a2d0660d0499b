/*
 * test_example.c — the library as an application sees it:
 *  - `make install PREFIX=tmp` installs the header, libpinfer.a,
 *    libpinfer.so and pinfer.pc;
 *  - examples/simple.c compiles from the installed header and links through
 *    `pkg-config --cflags --libs pinfer` alone (and compiles with -Iinclude
 *    from the tree, no internal headers), and on stories260K prints
 *    llama2.c's greedy text;
 *  - include/pinfer.h is clean C++ (g++ -fsyntax-only) and strict C11;
 *  - the shared library exports the public API and nothing else.
 * Runs in the release suite (the sanitizer and cross builds make no shared
 * library an outside compiler could link), from the repository root.
 */
#include "test_util.h"

static int sh(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static bool have(const char *prog) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return sh(cmd) == 0;
}

int main(void) {
    const char *pinfer = getenv("PI_TEST_PINFER");
    if (!pinfer || !strstr(pinfer, "build/release/")) {
        fprintf(stderr, "skip: the example links the installed shared library; the release suite checks it\n");
        return PI_TEST_SKIP;
    }
    if (!have("pkg-config") || !have("g++") || !have("make")) {
        fprintf(stderr, "skip: needs make, pkg-config and g++ (Debian: pkgconf, g++)\n");
        return PI_TEST_SKIP;
    }
    char dir[256], cmd[4096], model[512], golden[512], out[512];
    t_tmp_path(dir, sizeof dir, "prefix");
    snprintf(out, sizeof out, "%s/simple.out", dir);

    /* the header alone: strict C11 from the tree, and C++ */
    CHECK(sh("cc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -Iinclude examples/simple.c") == 0);
    CHECK(sh("g++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -x c++ include/pinfer.h") == 0);
    CHECK(sh("printf '#include <pinfer.h>\\nint main() { pi_model *m = nullptr; return pi_model_open(\"x\", "
             "nullptr, &m) == PI_OK; }\\n' | g++ -std=c++11 -Wall -Werror -fsyntax-only -Iinclude -x c++ -") == 0);

    /* install, then build the example through pkg-config only. The binaries
       the other tests run meanwhile must be up to date: an install that
       rebuilt them (sources edited during the run) would replace them under
       those tests. (The shared library only this test uses may be built.) */
    const bool current = sh("make -s -q MODE=release build/release/pinfer build/release/libpinfer.a") == 0;
    CHECKF(current, "build/release is older than its sources (edited since the suite's build?): run the suite again "
           "rather than rebuild under the tests running beside this one");
    if (!current) return t_done("test_example");
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && make -s install MODE=release PREFIX='%s' >/dev/null", dir, dir);
    CHECK(sh(cmd) == 0);
    static const char *const files[] = {"include/pinfer.h", "lib/libpinfer.a", "lib/libpinfer.so",
                                        "lib/pkgconfig/pinfer.pc", "bin/pinfer"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        CHECKF(access(p, R_OK) == 0, "make install did not install %s", files[i]);
    }
    snprintf(cmd, sizeof cmd,
             "PKG_CONFIG_PATH='%s/lib/pkgconfig' sh -c 'cc -std=c11 -Wall -Wextra -Werror examples/simple.c "
             "$(pkg-config --cflags --libs pinfer) -Wl,-rpath,%s/lib -o %s/simple'",
             dir, dir, dir);
    CHECKF(sh(cmd) == 0, "%s", cmd);
    /* the static library links too, with Libs.private */
    snprintf(cmd, sizeof cmd,
             "PKG_CONFIG_PATH='%s/lib/pkgconfig' sh -c 'cc -std=c11 examples/simple.c "
             "$(pkg-config --cflags pinfer) %s/lib/libpinfer.a $(pkg-config --libs-only-l --static pinfer | "
             "sed s/-lpinfer//) -o %s/simple-static'",
             dir, dir, dir);
    CHECKF(sh(cmd) == 0, "%s", cmd);

    /* only the public API is exported */
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/lib/libpinfer.so' | awk '{print $3}' | grep -v '^pi_' | "
             "grep -v '^_' | grep -q .", dir);
    CHECK(sh(cmd) != 0);
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/lib/libpinfer.so' | grep -qw pi_model_open", dir);
    CHECK(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/lib/libpinfer.so' | grep -qw pi_lm_load", dir);
    CHECK(sh(cmd) != 0);

    if (t_fixture(model, sizeof model, "stories260K.gguf") &&
        t_fixture(golden, sizeof golden, "stories260K.greedy.txt")) {
        for (int k = 0; k < 2; k++) {
            snprintf(cmd, sizeof cmd, "%s/%s '%s' '' 256 > '%s'", dir, k ? "simple-static" : "simple", model, out);
            CHECKF(sh(cmd) == 0, "%s", cmd);
            size_t na = 0, nb = 0;
            char *a = t_read_file(out, &na), *b = t_read_file(golden, &nb);
            CHECKF(a && b && na == nb && !memcmp(a, b, na), "%s prints something else than %s",
                   k ? "simple-static" : "simple", golden);
            free(a);
            free(b);
        }
        snprintf(cmd, sizeof cmd, "%s/simple /nonexistent.gguf 2>'%s'; test $? -eq 1 && grep -q nonexistent '%s'",
                 dir, out, out);
        CHECK(sh(cmd) == 0);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    sh(cmd);
    return t_done("test_example");
}
