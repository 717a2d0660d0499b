/*
 * test_serve.c — `pinfer serve` driven by real clients: runs each node:test
 * file in tests/serve/ (the official `openai` npm client, the server under
 * bad input and load, the chat page in headless Chromium) against the
 * pinfer binary of this build ($PI_TEST_PINFER). A file exits 77 to skip
 * (a fixture, Chromium or its npm packages absent); the whole test skips
 * when Node, the packages (scripts/deps.sh installs them, pinned, with
 * npm ci) or a build with the server are missing, and under an emulator.
 */
#include "test_util.h"

#include <glob.h>

int main(void) {
    const char *pinfer, *runner;
    if (!t_pinfer_binary(&pinfer, &runner)) return PI_TEST_SKIP;
    if (t_emulated()) {
        fprintf(stderr, "skip: the server tests run natively, not under %s\n", runner);
        return PI_TEST_SKIP;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s serve --port 0 -m /nonexistent 2>&1 | grep -q 'no HTTP server'", pinfer);
    if (t_sh(cmd) == 0) {
        fprintf(stderr, "skip: this build has no server (libmicrohttpd-dev missing)\n");
        return PI_TEST_SKIP;
    }
    if (t_sh("node --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skip: node is not installed (Debian: nodejs)\n");
        return PI_TEST_SKIP;
    }
    if (access("tests/serve/node_modules/openai/package.json", R_OK)) {
        fprintf(stderr, "skip: the npm packages are not installed: npm ci --prefix tests/serve\n");
        return PI_TEST_SKIP;
    }
    glob_t g;
    if (glob("tests/serve/*.test.mjs", 0, NULL, &g) || g.gl_pathc == 0) {
        fprintf(stderr, "no tests in tests/serve/\n");
        return 1;
    }
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        snprintf(cmd, sizeof cmd, "PI_TEST_PINFER='%s' node '%s' 2>&1", pinfer, g.gl_pathv[i]);
        const int st = t_sh(cmd);
        const char *what = st == 0 ? "passed" : st == PI_TEST_SKIP ? "skipped" : "FAILED";
        fprintf(stderr, "== %s: %s (exit %d)\n", g.gl_pathv[i], what, st);
        if (st == 0) passed++;
        else if (st == PI_TEST_SKIP) skipped++;
        else failed++;
    }
    globfree(&g);
    fprintf(stderr, "test_serve: %d files passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed) return 1;
    return passed ? 0 : PI_TEST_SKIP;
}
