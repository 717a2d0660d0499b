#!/usr/bin/env bash
# Build and run the test suites; end with one line "N passed, N failed, N skipped".
#   scripts/test.sh              every suite this machine can run: release, asan, neon
#   scripts/test.sh SUITE...     only these (release | asan | neon)
# Each test binary exits 0 (pass), 77 (skip) or anything else (fail), and runs
# under a timeout. JOBS tests (default: the number of cores) run at once, each
# into its own log; a test's lines are printed whole when it ends. Output of a
# failing test is shown; passing tests print one line.
set -u
cd "$(dirname "$0")/.."

suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(release asan neon)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
pass=0; fail=0; skip=0; failed=(); n=0
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

# One test into $results/N.out (what to print) and $results/N.rc (its
# verdict, written last: the file's presence says the test ended).
run_one() { # n, suite, runner-prefix, binary
    local n=$1 suite=$2 prefix=$3 bin=$4 name log rc t0 t1 out
    name="$suite/$(basename "$bin")"
    log=$results/$n.log out=$results/$n.out
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout "$TEST_TIMEOUT" $prefix "$bin" >"$log" 2>&1
    rc=$?
    t1=$(date +%s)
    if [ $rc -eq 0 ]; then
        printf 'PASS  %-40s %4ss\n' "$name" $((t1 - t0)) >"$out"
    elif [ $rc -eq 77 ]; then
        printf 'SKIP  %-40s %s\n' "$name" "$(grep -m1 -i skip "$log")" >"$out"
    else
        [ $rc -eq 124 ] && echo "timeout after ${TEST_TIMEOUT}s" >>"$log"
        { printf 'FAIL  %-40s (exit %d)\n' "$name" $rc; sed 's/^/      | /' "$log" | tail -n 60; } >"$out"
    fi
    echo "$(basename "$bin") $((t1 - t0))" >"$results/$n.time"
    echo "$rc $name" >"$results/$n.rc.tmp" && mv "$results/$n.rc.tmp" "$results/$n.rc"
}

# Print and count the tests that have ended (in the order they were started).
pending=()
reap() {
    local keep=() n rc name
    for n in "${pending[@]}"; do
        if [ -f "$results/$n.rc" ]; then
            read -r rc name <"$results/$n.rc"
            cat "$results/$n.out"
            case $rc in
            0) pass=$((pass + 1)) ;;
            77) skip=$((skip + 1)) ;;
            *) fail=$((fail + 1)); failed+=("$name") ;;
            esac
        else
            keep+=("$n")
        fi
    done
    pending=("${keep[@]}")
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
    # the longest tests of the suite's last run start first (on a fresh
    # checkout, those that have been the longest), so that the suite does
    # not end waiting for one long test
    times=build/$suite/test-times.txt
    if [ ! -f "$times" ]; then
        k=100
        for t in test_offload test_predictor test_genmodel test_quantize test_model test_habits test_kernels \
            test_cli test_serve test_kquant test_quant_k test_machine_output; do
            echo "$t $k"; k=$((k - 1))
        done >"$times"
    fi
    bins=()
    for bin in build/$suite/tests/test_*; do
        [ -x "$bin" ] && [ -f "$bin" ] || continue
        case $bin in *.o | *.d) continue ;; esac
        bins+=("$bin")
    done
    mapfile -t bins < <(for bin in "${bins[@]}"; do
        t=$( [ -f "$times" ] && awk -v b="$(basename "$bin")" '$1 == b { print $2 }' "$times")
        echo "${t:-0} $bin"
    done | sort -k1,1nr -k2 | cut -d' ' -f2-)
    first=$((n + 1))
    for bin in "${bins[@]}"; do
        while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; reap; done
        n=$((n + 1))
        pending+=("$n")
        run_one "$n" "$suite" "$prefix" "$bin" &
    done
    wait
    reap
    for ((k = first; k <= n; k++)); do [ -f "$results/$k.time" ] && cat "$results/$k.time"; done >"$times.tmp" &&
        mv "$times.tmp" "$times"
done

[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
