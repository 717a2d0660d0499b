#!/usr/bin/env bash
# Build and run the test suites; end with one line "N passed, N failed, N skipped".
#   scripts/test.sh              every suite this machine can run: release, asan, neon
#   scripts/test.sh SUITE...     only these (release | asan | neon)
# Each test binary exits 0 (pass), 77 (skip) or anything else (fail), and runs
# under a timeout. Output of a failing test is shown; passing tests print one line.
set -u
cd "$(dirname "$0")/.."

suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(release asan neon)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
pass=0; fail=0; skip=0; failed=()

run_one() { # suite, runner-prefix, binary
    local suite=$1 prefix=$2 bin=$3 name log rc t0 t1
    name="$suite/$(basename "$bin")"
    log=$(mktemp)
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout "$TEST_TIMEOUT" $prefix "$bin" >"$log" 2>&1
    rc=$?
    t1=$(date +%s)
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); printf 'PASS  %-40s %4ss\n' "$name" $((t1 - t0))
    elif [ $rc -eq 77 ]; then
        skip=$((skip + 1)); printf 'SKIP  %-40s %s\n' "$name" "$(grep -m1 -i skip "$log")"
    else
        fail=$((fail + 1)); failed+=("$name")
        [ $rc -eq 124 ] && echo "timeout after ${TEST_TIMEOUT}s" >>"$log"
        printf 'FAIL  %-40s (exit %d)\n' "$name" $rc
        sed 's/^/      | /' "$log" | tail -n 60
    fi
    rm -f "$log"
}

for suite in "${suites[@]}"; do
    prefix=""
    makeargs=(MODE="$suite")
    case $suite in
    release | asan) ;;
    neon)
        if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
            skip=$((skip + 1))
            echo "SKIP  neon/*  (needs gcc-aarch64-linux-gnu and qemu-user; as root, make test installs them)"
            continue
        fi
        makeargs+=(CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar)
        prefix="qemu-aarch64 -cpu max"
        ;;
    *) echo "unknown suite '$suite' (release, asan, neon)" >&2; exit 2 ;;
    esac
    echo "== $suite: building"
    if ! make --no-print-directory -s -j"$JOBS" "${makeargs[@]}" tests >build.log.$suite 2>&1; then
        fail=$((fail + 1)); failed+=("$suite/build")
        echo "FAIL  $suite/build"; tail -n 40 build.log.$suite | sed 's/^/      | /'
        rm -f build.log.$suite
        continue
    fi
    rm -f build.log.$suite
    export PI_TEST_PINFER="build/$suite/pinfer" PI_TEST_RUNNER="$prefix"
    for bin in build/$suite/tests/test_*; do
        [ -x "$bin" ] && [ -f "$bin" ] || continue
        case $bin in *.o | *.d) continue ;; esac
        run_one "$suite" "$prefix" "$bin"
    done
done

[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
