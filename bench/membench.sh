#!/usr/bin/env bash
# bench/membench.sh: pinfer's decode speed inside a memory cgroup (limit =
# --mem-budget + overhead, page cache included), the same run without a
# cgroup, and optionally a peer (llama-bench) under the same limit.
# Needs root: it creates cgroups and drops the page cache.
set -eu -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROG=${0##*/}

usage() {
    cat <<EOF
usage: $PROG -m MODEL --mem-budget SIZE [options]
  -m MODEL              the model pinfer runs (a file, or a directory of bundle files)
  --mem-budget SIZE     pinfer's memory budget: 600M, 2G, 1.5GiB, 123456 (bytes; K/M/G/T
                        are powers of 1024), or a percentage of the model's size, e.g. 50%
  --overhead SIZE       added to the budget to make the cgroup limit (default 64M)
  --pinfer PATH         the pinfer binary (default: build/release/pinfer of this repository)
  --base PATH           also run this pinfer binary (e.g. the previous commit's build) with the
                        same command in a cgroup with the same limit
  --base-args "ARGS"    arguments for --base instead of pinfer's (e.g. when it lacks an option)
  --base-model FILE     the model file --base reads (default: MODEL), e.g. the bundle file the
                        previous commit's convert makes, for a comparison end to end
  --base-cache DIR      the cache directory (XDG_CACHE_HOME) --base runs with, instead of the
                        shared one: its hardware figures and achieved reads then stay its own
                        (a build with another hwprobe format rewrites the shared file, and each
                        build's achieved reads would reprice the other's plans)
  --rounds N            repeat the runs N times, alternating pinfer, base and peer (default 1);
                        the summary gives medians and the per-round ratios
  --peer PATH           also run this llama-bench in a cgroup with the same limit
  --peer-model GGUF     the model file the peer reads (default: MODEL; llama-bench cannot
                        read pinfer bundle files, give the plain GGUF of the same weights)
  -t N                  threads (default 2)
  -n N                  generated tokens per repetition (default 64)
  -r N                  repetitions (default 3)
  --no-free-run         skip the run of pinfer without a cgroup
  --drop-caches         drop the page cache before each run (default: on)
  --no-drop-caches      do not
  --no-budget-flag      do not pass --mem-budget to pinfer (for a pinfer that lacks it:
                        the cgroup alone limits it)
  --pinfer-args "ARGS"  extra arguments for pinfer bench (split on spaces)
  --peer-args "ARGS"    extra arguments for the peer, e.g. "-mmp 0" (split on spaces)
Exit status: 0 when pinfer ran in the cgroup, 1 when it failed or was OOM-killed,
2 on a usage error, 3 when the machine lacks what is needed (root, memory cgroups).
EOF
}

die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit "${EXIT:-2}"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
indent() { while IFS= read -r l; do printf '    %s\n' "$l"; done; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }

# bytes of SIZE ("600M", "1.5GiB", "123456", or "50%" of $2 bytes)
parse_size() {
    awk -v s="$1" -v whole="${2:-0}" 'BEGIN {
        if (s ~ /^[0-9]+(\.[0-9]+)?%$/) { if (whole <= 0) exit 1; printf "%.0f\n", whole * substr(s, 1, length(s) - 1) / 100; exit 0 }
        if (s !~ /^[0-9]+(\.[0-9]+)?([KkMmGgTt]([Ii]?[Bb]?))?$/) exit 1
        n = s; sub(/[KkMmGgTtIiBb]+$/, "", n); u = toupper(substr(s, length(n) + 1, 1))
        m = u == "K" ? 1024 : u == "M" ? 1048576 : u == "G" ? 1073741824 : u == "T" ? 1099511627776 : 1
        printf "%.0f\n", n * m }'
}

# ---- options
MODEL="" BUDGET_ARG="" OVERHEAD_ARG=64M PINFER=$ROOT/build/release/pinfer PEER="" PEER_MODEL=""
THREADS=2 NGEN=64 REPS=3 FREE_RUN=1 DROP="" BUDGET_FLAG=1 PINFER_EXTRA="" PEER_EXTRA=""
BASE="" BASE_EXTRA="" BASE_EXTRA_SET=0 BASE_MODEL="" BASE_CACHE="" ROUNDS=1
while [ $# -gt 0 ]; do
    opt=$1
    case $opt in
    -h | --help) usage; exit 0 ;;
    --no-free-run) FREE_RUN=0; shift; continue ;;
    --drop-caches) DROP=1; shift; continue ;;
    --no-drop-caches) DROP=0; shift; continue ;;
    --no-budget-flag) BUDGET_FLAG=0; shift; continue ;;
    -m | --mem-budget | --overhead | --pinfer | --peer | --peer-model | -t | -n | -r | --pinfer-args | --peer-args | \
        --base | --base-args | --base-model | --base-cache | --rounds)
        [ $# -ge 2 ] || die "option $opt needs a value" ;;
    *) usage >&2; die "unknown option '$opt'" ;;
    esac
    v=$2
    shift 2
    case $opt in
    -m) MODEL=$v ;;
    --mem-budget) BUDGET_ARG=$v ;;
    --overhead) OVERHEAD_ARG=$v ;;
    --pinfer) PINFER=$v ;;
    --peer) PEER=$v ;;
    --peer-model) PEER_MODEL=$v ;;
    --pinfer-args) PINFER_EXTRA=$v ;;
    --peer-args) PEER_EXTRA=$v ;;
    --base) BASE=$v ;;
    --base-args) BASE_EXTRA=$v BASE_EXTRA_SET=1 ;;
    --base-model) BASE_MODEL=$v ;;
    --base-cache) BASE_CACHE=$v ;;
    -t | -n | -r | --rounds)
        [[ $v =~ ^[1-9][0-9]*$ ]] || die "$opt expects a positive whole number, got '$v'"
        case $opt in -t) THREADS=$v ;; -n) NGEN=$v ;; -r) REPS=$v ;; --rounds) ROUNDS=$v ;; esac ;;
    esac
done
[ -n "$MODEL" ] || { usage >&2; die "-m MODEL is required"; }
[ -n "$BUDGET_ARG" ] || { usage >&2; die "--mem-budget SIZE is required"; }
[ -e "$MODEL" ] || die "model not found: $MODEL"
[ -x "$PINFER" ] || die "pinfer not found or not executable: $PINFER (build it with make)"
PEER_MODEL=${PEER_MODEL:-$MODEL}
BASE_MODEL=${BASE_MODEL:-$MODEL}
[ -f "$BASE_MODEL" ] || die "base model not found (or not a file): $BASE_MODEL"
if [ -n "$PEER" ]; then
    [ -x "$PEER" ] || die "peer not found or not executable: $PEER"
    [ -f "$PEER_MODEL" ] || die "peer model not found (or not a file): $PEER_MODEL"
fi
read -r -a PINFER_EXTRA_A <<<"$PINFER_EXTRA"
read -r -a PEER_EXTRA_A <<<"$PEER_EXTRA"
[ -z "$BASE" ] || [ -x "$BASE" ] || die "base binary not found or not executable: $BASE"
[ -z "$BASE_CACHE" ] || [ -n "$BASE" ] || die "--base-cache needs --base"
[ -z "$BASE_CACHE" ] || mkdir -p "$BASE_CACHE" || die "cannot create the base's cache directory $BASE_CACHE"

if [ -d "$MODEL" ]; then
    MODEL_BYTES=$(du -sb "$MODEL" | awk '{ print $1 }')
else
    MODEL_BYTES=$(stat -L -c %s "$MODEL")
fi
BUDGET=$(parse_size "$BUDGET_ARG" "$MODEL_BYTES") || die "--mem-budget expects a size such as 600M, 2G or 50%, got '$BUDGET_ARG'"
OVERHEAD=$(parse_size "$OVERHEAD_ARG" "$MODEL_BYTES") || die "--overhead expects a size such as 64M, got '$OVERHEAD_ARG'"
[ "$BUDGET" -gt 0 ] || die "--mem-budget must be above 0"
LIMIT=$((BUDGET + OVERHEAD))

EXIT=3
[ "$(id -u)" -eq 0 ] || die "needs root: it creates memory cgroups and drops the page cache (run it with sudo)"
[ -n "$DROP" ] || DROP=1

# ---- cgroup: v2 when its memory controller is enabled, else v1
CGV="" CGROOT=""
for d in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    if [ -f "$d/cgroup.controllers" ] && grep -qw memory "$d/cgroup.controllers"; then
        CGV=2 CGROOT=$d
        break
    fi
done
if [ -z "$CGV" ]; then
    d=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ { print $2; exit }' /proc/mounts)
    if [ -n "$d" ] && [ -f "$d/memory.limit_in_bytes" ]; then CGV=1 CGROOT=$d; fi
fi
[ -n "$CGV" ] || die "no memory cgroup controller found (cgroup v1 'memory' mount or cgroup v2 with 'memory' in cgroup.controllers)"
if [ "$CGV" = 2 ] && ! grep -qw memory "$CGROOT/cgroup.subtree_control"; then
    echo +memory >"$CGROOT/cgroup.subtree_control" || die "cannot enable the memory controller in $CGROOT/cgroup.subtree_control"
fi

CG=""  # the cgroup in use, removed on exit
cg_remove() {
    if [ -z "$CG" ] || [ ! -d "$CG" ]; then CG=""; return 0; fi
    local pid _
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        [ -s "$CG/cgroup.procs" ] || break
        # only processes this script started are in it
        while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$CG/cgroup.procs"
        sleep 0.2
    done
    rmdir "$CG" 2>/dev/null || printf '%s: warning: could not remove cgroup %s\n' "$PROG" "$CG" >&2
    CG=""
}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/membench.XXXXXX")
CHILD="" SAMPLER=""  # the command running now; the memory.current sampler (v2 without memory.peak)
cleanup() {
    if [ -n "$SAMPLER" ]; then kill "$SAMPLER" 2>/dev/null || true; fi
    if [ -n "$CHILD" ]; then
        kill -KILL "$CHILD" 2>/dev/null || true
        wait "$CHILD" 2>/dev/null || true  # reaped, it leaves the cgroup
    fi
    cg_remove
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo; printf "%s: interrupted\n" "$PROG" >&2; exit 130' INT TERM HUP

cg_create() { # $1: label
    CG=$CGROOT/pinfer-membench.$$.$1
    mkdir "$CG" || die "cannot create cgroup $CG"
    if [ "$CGV" = 1 ]; then
        echo "$LIMIT" >"$CG/memory.limit_in_bytes"
        # no swapping of anonymous memory (memory.memsw.limit_in_bytes would do it too,
        # but some kernels then stop counting memory.failcnt)
        echo 0 >"$CG/memory.swappiness" 2>/dev/null || true
        [ "$(cat "$CG/memory.limit_in_bytes")" -le "$LIMIT" ] || die "the kernel did not take the limit in $CG"
    else
        echo "$LIMIT" >"$CG/memory.max"
        [ ! -f "$CG/memory.swap.max" ] || echo 0 >"$CG/memory.swap.max" 2>/dev/null || true
    fi
}
drop_caches() {
    [ "$DROP" = 1 ] || return 0
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || { printf '%s: warning: cannot drop the page cache; runs may profit from earlier ones\n' "$PROG" >&2; DROP=0; }
}
oom_kills() {
    if [ "$CGV" = 1 ]; then awk '$1 == "oom_kill" { print $2; f = 1 } END { if (!f) print 0 }' "$CG/memory.oom_control"
    else awk '$1 == "oom_kill" { print $2; f = 1 } END { if (!f) print 0 }' "$CG/memory.events"; fi
}

# run_cg LABEL LOG ERRLOG CMD...: run CMD in a fresh cgroup; stdout to LOG (and to the
# user, indented, when ERRLOG is "-": then stderr goes along with stdout). Sets RC, PEAK,
# PEAK_HOW, OOM, FAILCNT, SECS.
run_cg() {
    local label=$1 log=$2 err=$3
    shift 3
    drop_caches
    cg_create "$label"
    PEAK_HOW=""
    if [ "$CGV" = 2 ] && [ ! -f "$CG/memory.peak" ]; then
        PEAK_HOW=" (sampled every 0.1 s: this kernel has no memory.peak)"
        (m=0; while [ -f "$CG/memory.current" ]; do
            c=$(cat "$CG/memory.current" 2>/dev/null) || break
            [ "$c" -le "$m" ] || { m=$c; echo "$m" >"$TMP/peak.$label"; }
            sleep 0.1
        done) &
        SAMPLER=$!
    fi
    local t0=$SECONDS
    run_child "$log" "$err" "$CG" "$@"
    SECS=$((SECONDS - t0))
    OOM=$(oom_kills)
    if [ "$CGV" = 1 ]; then
        PEAK=$(cat "$CG/memory.max_usage_in_bytes")
        FAILCNT=$(cat "$CG/memory.failcnt")
    else
        FAILCNT=$(awk '$1 == "max" { print $2 }' "$CG/memory.events")
        if [ -z "$SAMPLER" ]; then PEAK=$(cat "$CG/memory.peak")
        else
            kill "$SAMPLER" 2>/dev/null || true
            wait "$SAMPLER" 2>/dev/null || true
            SAMPLER=""
            PEAK=$(cat "$TMP/peak.$label" 2>/dev/null || echo 0)
        fi
    fi
    cg_remove
}

# run_child LOG ERR CGROUP CMD...: run CMD, in CGROUP unless that is empty, with its stdout
# in LOG; when ERR is "-" its stderr goes along and both are shown to the user, indented,
# else stderr goes to the file ERR. Sets RC. CMD runs in the background and this waits
# for it, so that a signal to this script runs the trap at once (which kills CMD).
run_child() {
    local log=$1 err=$2 cg=$3 reader=""
    shift 3
    if [ "$err" = - ]; then
        rm -f "$TMP/fifo"
        mkfifo "$TMP/fifo"
        tee "$log" <"$TMP/fifo" | indent &
        reader=$!
        in_cgroup "$cg" "$@" >"$TMP/fifo" 2>&1 &
    else
        in_cgroup "$cg" "$@" >"$log" 2>"$err" &
    fi
    CHILD=$!
    RC=0
    wait "$CHILD" 2>/dev/null || RC=$?
    CHILD=""
    if [ -n "$reader" ]; then wait "$reader" || true; fi
}
# (run in a subshell) move it into cgroup $1 unless $1 is empty, then become the command
in_cgroup() {
    if [ -n "$1" ]; then echo "$BASHPID" >"$1/cgroup.procs" || exit 125; fi
    shift
    exec "$@"
}

tg_of() { awk '$1 ~ /^tg[0-9]+$/ && $3 ~ /^[0-9.]+$/ { print $3; exit }' "$1"; }

# avg_ts of the first tg row (n_prompt 0, n_gen > 0) of llama-bench's CSV (fields quoted)
peer_tg_of() {
    awk '
    function split_csv(line, f,   n, i, c, q, cur) {
        n = 0; cur = ""; q = 0
        for (i = 1; i <= length(line); i++) {
            c = substr(line, i, 1)
            if (c == "\"") q = !q
            else if (c == "," && !q) { f[++n] = cur; cur = "" }
            else if (c != "\r") cur = cur c
        }
        f[++n] = cur
        return n
    }
    {
        n = split_csv($0, f)
        if (!ts) { for (i = 1; i <= n; i++) { if (f[i] == "n_prompt") np = i; if (f[i] == "n_gen") ng = i; if (f[i] == "avg_ts") ts = i }; next }
        if (np && ng && n >= ts && f[np] == 0 && f[ng] > 0) { print f[ts]; exit }
    }' "$1"
}

# ---- what will run
step "setup"
printf 'model:        %s (%s bytes, %s MiB)\n' "$MODEL" "$MODEL_BYTES" "$(mib "$MODEL_BYTES")"
printf 'budget:       %s = %s bytes (%s MiB)\n' "$BUDGET_ARG" "$BUDGET" "$(mib "$BUDGET")"
printf 'cgroup limit: budget + %s MiB overhead = %s bytes (%s MiB), cgroup v%s at %s\n' \
    "$(mib "$OVERHEAD")" "$LIMIT" "$(mib "$LIMIT")" "$CGV" "$CGROOT"
printf 'page cache:   %s before each run\n' "$([ "$DROP" = 1 ] && echo dropped || echo 'NOT dropped')"
printf 'rounds:       %s (pinfer%s%s, alternated)\n' "$ROUNDS" "${BASE:+, base}" "${PEER:+, peer}"

# the disk's figures the floor is computed from (pinfer hwprobe's cache for the model's filesystem)
# hwfile CACHE_DIR MODEL: where pinfer keeps the hwprobe figures of MODEL's filesystem
hwfile() { printf '%s/pinfer/hwprobe-%s.txt' "$1" "$(stat -L -c %d "$2")"; }
# probe_now LABEL CACHE_DIR BINARY MODEL: measure the missing figures here, outside the cgroup:
# the first planned run would measure them inside, and the memory-bandwidth buffer alone is
# larger than a small budget
probe_now() {
    printf '%-14snone in %s yet: measuring it now, outside the cgroup\n' "$1:" "$2"
    XDG_CACHE_HOME=$2 "$3" hwprobe -m "$4" --quick 2>&1 | tail -n 1 | sed 's/^/              /'
}
HWFILE=$(hwfile "${XDG_CACHE_HOME:-$HOME/.cache}" "$MODEL")
if [ -f "$HWFILE" ]; then
    printf 'hwprobe:      %s (%s)\n' "$HWFILE" "$(date -r "$HWFILE" '+%Y-%m-%d %H:%M')"
    awk '$1 == "read" && ($2 == 4096 || $2 == 8192) && ($3 == 1 || $3 == 32 || $3 == 128) {
             printf "              %s KiB random reads, queue depth %s: %.1fK reads/s%s\n", $2 / 1024, $3, $4 / 1000, $6 == "est" ? " (est)" : "" }
         $1 == "seq_read_gbs" { printf "              sequential reads: %.2f GB/s\n", $2 }
         $1 == "read_cpu_us" { printf "              CPU per random read: %.2f us\n", $2 }' "$HWFILE"
else
    probe_now hwprobe "${XDG_CACHE_HOME:-$HOME/.cache}" "$PINFER" "$MODEL"
fi
if [ -n "$BASE_CACHE" ] && [ ! -f "$(hwfile "$BASE_CACHE" "$BASE_MODEL")" ]; then
    probe_now "base hwprobe" "$BASE_CACHE" "$BASE" "$BASE_MODEL"
fi

PCMD=(bench -m "$MODEL")
[ "$BUDGET_FLAG" = 0 ] || PCMD+=(--mem-budget "$BUDGET")
PCMD+=(-p 0 -n "$NGEN" -r "$REPS" -t "$THREADS")
PARGS=("${PCMD[@]}" ${PINFER_EXTRA_A[@]+"${PINFER_EXTRA_A[@]}"})
BCMD=("${PCMD[@]}")
BCMD[2]=$BASE_MODEL
if [ "$BASE_EXTRA_SET" = 1 ]; then
    read -r -a BASE_EXTRA_A <<<"$BASE_EXTRA"
    BARGS=("${BCMD[@]}" ${BASE_EXTRA_A[@]+"${BASE_EXTRA_A[@]}"})
else
    BARGS=("${BCMD[@]}" ${PINFER_EXTRA_A[@]+"${PINFER_EXTRA_A[@]}"})
fi

# the median of the numbers on stdin, printed with FMT (default %.2f)
median() { tr ' ' '\n' | awk -v fmt="${1:-%.2f}" 'NF { v[n++] = $1 + 0 } END { if (!n) { print "-"; exit }
    for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    printf fmt, n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }

# The planner's figure of a pinfer bench log ("plan: predicted N tok/s"); empty where the
# log has none.
plan_of() { grep -a -o 'plan: predicted [0-9.]* tok/s' "$1" | tail -n 1 | awk '{ print $3 }'; }

# Per-round lists of the planner's error (measured / predicted - 1, in %) and of the
# time per token over the I/O floor, summarised: each value, the median, how many rounds
# are within the limit (LIMIT: the error's magnitude in %, or the ratio).
signed_pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", (a / b - 1) * 100 }'; }
within() { # LIST LIMIT ABS(0/1): "k of n"
    echo "$1" | tr ' ' '\n' | awk -v lim="$2" -v abs="$3" 'NF { n++; v = $1 + 0; if (abs && v < 0) v = -v; k += v <= lim }
        END { printf "%d of %d", k, n }'
}
spread() { tr ' ' '\n' | awk 'NF { v = $1 + 0; if (!n || v < lo) lo = v; if (!n || v > hi) hi = v; n++ }
    END { if (n < 2 || lo <= 0) print "-"; else printf "%.2f", hi / lo }'; }

# pinfer_cg LABEL BINARY ARGS...: one pinfer bench in a fresh cgroup. Sets TG (empty on
# failure), STATE, FLOOR and CORES (the floor lines), PLAN (the planner's tok/s), FLOOR_X
# (time per token over the I/O floor), PEAKMIB.
pinfer_cg() {
    local label=$1 bin=$2
    shift 2
    step "$label in a cgroup limited to $(mib "$LIMIT") MiB (round $ROUND of $ROUNDS)"
    echo "\$ $bin $*"
    run_cg "$label" "$TMP/$label.log" - "$bin" "$@"
    TG=$(tg_of "$TMP/$label.log") STATE="" PEAKMIB=$(mib "$PEAK")
    FLOOR=$(grep -a '^I/O floor:' "$TMP/$label.log" | tail -n 1 || true)
    CORES=$(grep -a '^cores:' "$TMP/$label.log" | tail -n 1 || true)
    PLAN=$(plan_of "$TMP/$label.log" || true)
    FLOOR_X=$(echo "$FLOOR" | awk 'match($0, /[0-9.]+x the floor/) { print substr($0, RSTART, RLENGTH - 11) }')
    printf 'exit status %s after %s s; cgroup peak %s MiB%s, limit hit %s times, OOM kills %s\n' \
        "$RC" "$SECS" "$PEAKMIB" "$PEAK_HOW" "$FAILCNT" "$OOM"
    if [ "$OOM" -gt 0 ]; then STATE="killed by the OOM killer at limit $(mib "$LIMIT") MiB"; TG=""
    elif [ "$RC" -ne 0 ] || [ -z "$TG" ]; then STATE="failed (exit status $RC)"; TG=""; fi
    [ "$PEAK" -le "$LIMIT" ] || STATE="${STATE:+$STATE; }peak ABOVE the limit"
    if [ "$RC" -ne 0 ] && [ "$BUDGET_FLAG" = 1 ] && grep -q "unknown option '--mem-budget'" "$TMP/$label.log"; then
        printf '%s: %s does not accept --mem-budget; run with --no-budget-flag to let the cgroup alone limit it\n' \
            "$PROG" "$bin" >&2
    fi
}

P_TGS="" B_TGS="" Q_TGS="" R_BASE="" R_PEER="" P_PLANS="" P_ERRS="" P_FLOORS="" P_FAILS=0 P_OOM=0 P_PEAK_MAX=0 P_FLOOR="" P_CORES="" P_STATE="" B_STATE="" Q_STATE=""
for ROUND in $(seq 1 "$ROUNDS"); do
    pinfer_cg pinfer "$PINFER" "${PARGS[@]}"
    P_TG=$TG
    [ -z "$STATE" ] || P_STATE=$STATE
    [ -n "$TG" ] || P_FAILS=$((P_FAILS + 1))
    [ "$OOM" -eq 0 ] || P_OOM=$((P_OOM + OOM))
    [ "$PEAK" -le "$P_PEAK_MAX" ] || P_PEAK_MAX=$PEAK
    [ -z "$FLOOR" ] || P_FLOOR=$FLOOR
    [ -z "$CORES" ] || P_CORES=$CORES
    P_TGS="$P_TGS $P_TG"
    if [ -n "$P_TG" ] && [ -n "$PLAN" ] && awk -v p="$PLAN" 'BEGIN { exit !(p > 0) }'; then
        P_PLANS="$P_PLANS $PLAN"
        P_ERRS="$P_ERRS $(signed_pct "$P_TG" "$PLAN")"
    fi
    [ -z "$P_TG" ] || [ -z "$FLOOR_X" ] || P_FLOORS="$P_FLOORS $FLOOR_X"
    if [ -n "$BASE" ]; then
        if [ -n "$BASE_CACHE" ]; then
            pinfer_cg base env "XDG_CACHE_HOME=$BASE_CACHE" "$BASE" "${BARGS[@]}"
        else
            pinfer_cg base "$BASE" "${BARGS[@]}"
        fi
        [ -z "$STATE" ] || B_STATE=$STATE
        B_TGS="$B_TGS $TG"
        [ -z "$P_TG" ] || [ -z "$TG" ] || R_BASE="$R_BASE $(ratio "$P_TG" "$TG")"
    fi
    if [ -n "$PEER" ]; then
        QCMD=("$PEER" -m "$PEER_MODEL" -p 0 -n "$NGEN" -r "$REPS" -t "$THREADS" -o csv ${PEER_EXTRA_A[@]+"${PEER_EXTRA_A[@]}"})
        step "peer in a cgroup limited to $(mib "$LIMIT") MiB (round $ROUND of $ROUNDS)"
        echo "\$ ${QCMD[*]}"
        run_cg peer "$TMP/peer.csv" "$TMP/peer.err" "${QCMD[@]}"
        indent <"$TMP/peer.csv"
        Q_TG=$(peer_tg_of "$TMP/peer.csv")
        [ -z "$Q_TG" ] || Q_TG=$(awk -v v="$Q_TG" 'BEGIN { printf "%.2f", v }')
        printf 'exit status %s after %s s; cgroup peak %s MiB%s, limit hit %s times, OOM kills %s\n' \
            "$RC" "$SECS" "$(mib "$PEAK")" "$PEAK_HOW" "$FAILCNT" "$OOM"
        if [ "$OOM" -gt 0 ]; then
            Q_STATE="killed by the OOM killer at limit $(mib "$LIMIT") MiB"; Q_TG=""
        elif [ "$RC" -ne 0 ] || [ -z "$Q_TG" ]; then
            Q_STATE="failed (exit status $RC)"; Q_TG=""
            echo "peer's last messages:"
            tail -n 8 "$TMP/peer.err" | indent
        fi
        Q_TGS="$Q_TGS $Q_TG"
        [ -z "$P_TG" ] || [ -z "$Q_TG" ] || R_PEER="$R_PEER $(ratio "$P_TG" "$Q_TG")"
    fi
done

# ---- pinfer without a cgroup, once
F_TG=""
if [ "$FREE_RUN" = 1 ] && [ "$P_FAILS" -gt 0 ] && [ "$P_OOM" -eq 0 ]; then
    printf '\n(no run without a cgroup: pinfer failed for a reason other than memory)\n'
    FREE_RUN=0
fi
if [ "$FREE_RUN" = 1 ]; then
    step "the same pinfer command without a cgroup"
    drop_caches
    t0=$SECONDS
    run_child "$TMP/free.log" - "" "$PINFER" "${PARGS[@]}"
    F_RC=$RC
    F_TG=$(tg_of "$TMP/free.log")
    printf 'exit status %s after %s s\n' "$F_RC" "$((SECONDS - t0))"
fi

# ---- summary
step "summary"
P_MED=$(echo "$P_TGS" | median)
printf 'budget:                   %s MiB (%s bytes; %s)\n' "$(mib "$BUDGET")" "$BUDGET" "$BUDGET_ARG"
printf 'cgroup limit:             %s MiB (%s bytes; budget + %s MiB)\n' "$(mib "$LIMIT")" "$LIMIT" "$(mib "$OVERHEAD")"
printf 'pinfer in the cgroup:     %s tok/s median (tg%s, %s threads; rounds:%s)%s\n' "$P_MED" "$NGEN" "$THREADS" \
    "$P_TGS" "${P_STATE:+; $P_STATE}"
printf 'cgroup peak memory:       %s MiB%s, %s the limit\n' "$(mib "$P_PEAK_MAX")" "$PEAK_HOW" \
    "$([ "$P_PEAK_MAX" -le "$LIMIT" ] && echo 'within' || echo 'ABOVE')"
printf 'OOM kills:                %s\n' "$P_OOM"
if [ -n "$P_ERRS" ]; then
    printf 'planner:                  predicted%s tok/s; measured/predicted - 1 (%%):%s; median %s%%, within ±20%% in %s rounds\n' \
        "$P_PLANS" "$P_ERRS" "$(echo "$P_ERRS" | median %+.1f)" "$(within "$P_ERRS" 20 1)"
fi
if [ -n "$P_FLOORS" ]; then
    printf 'time per token / floor:  %s; median %sx, within 1.25x in %s rounds\n' \
        "$(echo "$P_FLOORS" | awk '{ for (i = 1; i <= NF; i++) printf " %sx", $i }')" \
        "$(echo "$P_FLOORS" | median)" "$(within "$P_FLOORS" 1.25 0)"
fi
[ "$ROUNDS" -lt 2 ] || printf "rounds' spread:           fastest/slowest pinfer round %s\n" "$(echo "$P_TGS" | spread)"
[ -z "$P_FLOOR" ] || printf 'last run, %s\n' "$P_FLOOR"
[ -z "$P_CORES" ] || printf 'last run, %s\n' "$P_CORES"
if [ "$FREE_RUN" = 1 ]; then
    if [ -n "$F_TG" ]; then
        printf 'pinfer without a cgroup:  %s tok/s; limited/unlimited = %s\n' "$F_TG" "$([ "$P_MED" != - ] && ratio "$P_MED" "$F_TG" || echo -)"
    else
        printf 'pinfer without a cgroup:  failed (exit status %s)\n' "$F_RC"
    fi
fi
if [ -n "$BASE" ]; then
    printf 'base under the limit:     %s tok/s median (rounds:%s)%s\n' "$(echo "$B_TGS" | median)" "$B_TGS" "${B_STATE:+; $B_STATE}"
    printf 'pinfer/base:              %s median of rounds (per round:%s)\n' "$(echo "$R_BASE" | median)" "$R_BASE"
fi
if [ -n "$PEER" ]; then
    printf 'peer under the limit:     %s tok/s median (rounds:%s)%s\n' "$(echo "$Q_TGS" | median)" "$Q_TGS" "${Q_STATE:+; $Q_STATE}"
    printf 'pinfer/peer:              %s median of rounds (per round:%s)\n' "$(echo "$R_PEER" | median)" "$R_PEER"
fi
[ "$P_OOM" -eq 0 ] && [ "$P_FAILS" -eq 0 ] || exit 1
