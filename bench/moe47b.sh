#!/usr/bin/env bash
# bench/moe47b.sh: a mixture of experts of Mixtral's shape (47B parameters,
# 8 experts, top-2, dReLU experts with planted sparsity) decoded from flash
# under memory budgets, against a peer (llama-bench) under the same limits.
#
# For each in-expert activity it generates the model with `pinfer gen-model
# --preset mixtral`: the plain GGUF the peer reads and pinfer's bundle file,
# written directly (no third copy); then bench/membench.sh runs pinfer and
# the peer alternated in a memory cgroup of budget + overhead at each budget,
# page cache dropped before every run; then the files are deleted (unless
# --keep). The disk space both files need is checked before anything is
# written. Needs root (cgroups, dropping the page cache).
set -eu -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROG=${0##*/}

usage() {
    cat <<EOF
usage: $PROG [options]
  --dir DIR             where the models are written (default: $ROOT/bench/models)
  --active F,F,...      in-expert activities to generate and run (default 0.10,0.15)
  --budgets S,S,...     pinfer memory budgets (default 8G,12G,16G)
  --preset NAME         gen-model preset (default mixtral; mixtral-l4 is a 4-layer model of
                        the same widths for a quick check)
  --peer PATH           llama-bench to compare with (default: none)
  --rounds N            alternated rounds per budget (default 3)
  -n N                  tokens generated per run (default 16)
  -t N                  threads (default 2)
  --pinfer PATH         the pinfer binary (default: build/release/pinfer)
  --gen-args "ARGS"     extra gen-model arguments (split on spaces), e.g. "--expert-skew 0.3"
  --keep                keep the generated files (and reuse files already there)
Exit status: 0 when every run finished, 1 when one failed, 2 on a usage error, 3 when the
machine lacks what is needed (root, disk space).
EOF
}

die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit "${EXIT:-2}"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

DIR=$ROOT/bench/models ACTIVE=0.10,0.15 BUDGETS=8G,12G,16G PRESET=mixtral PEER="" ROUNDS=3 NGEN=16 THREADS=2
PINFER=$ROOT/build/release/pinfer KEEP=0 GEN_ARGS=
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --keep) KEEP=1; shift; continue ;;
    --dir | --active | --budgets | --preset | --peer | --rounds | -n | -t | --pinfer | --gen-args)
        [ $# -ge 2 ] || die "option $1 needs a value" ;;
    *) usage >&2; die "unknown option '$1'" ;;
    esac
    case $1 in
    --dir) DIR=$2 ;;
    --active) ACTIVE=$2 ;;
    --budgets) BUDGETS=$2 ;;
    --preset) PRESET=$2 ;;
    --peer) PEER=$2 ;;
    --rounds) ROUNDS=$2 ;;
    -n) NGEN=$2 ;;
    -t) THREADS=$2 ;;
    --pinfer) PINFER=$2 ;;
    --gen-args) GEN_ARGS=$2 ;;
    esac
    shift 2
done
[ -x "$PINFER" ] || die "no pinfer binary at $PINFER (make first)"
[ -z "$PEER" ] || [ -x "$PEER" ] || die "--peer $PEER is not an executable"
[ "$(id -u)" = 0 ] || EXIT=3 die "needs root: memory cgroups and dropping the page cache"
mkdir -p "$DIR"

fail=0
IFS=, read -r -a acts <<<"$ACTIVE"
IFS=, read -r -a budgets <<<"$BUDGETS"
read -r -a gen_extra <<<"$GEN_ARGS"
for a in "${acts[@]}"; do
    plain=$DIR/$PRESET-a$a.gguf bundle=$DIR/$PRESET-a$a.pib
    if [ "$KEEP" = 1 ] && [ -s "$plain" ] && [ -s "$bundle" ]; then
        step "activity $a: reusing $plain and $bundle"
    else
        step "activity $a: generating $plain and $bundle"
        # gen-model checks the free space for both files itself and says what it needs
        if ! "$PINFER" gen-model --preset "$PRESET" --act drelu --active "$a" --predictor -t "$THREADS" \
            ${gen_extra[@]+"${gen_extra[@]}"} -o "$plain" --bundle-out "$bundle"; then
            rm -f "$plain" "$bundle"
            EXIT=3 die "generating the activity $a model failed (see above)"
        fi
    fi
    for b in "${budgets[@]}"; do
        step "activity $a, budget $b"
        args=(-m "$bundle" --mem-budget "$b" --rounds "$ROUNDS" -n "$NGEN" -r 1 -t "$THREADS" --no-free-run
              --pinfer "$PINFER")
        [ -z "$PEER" ] || args+=(--peer "$PEER" --peer-model "$plain" --peer-args "-mmp 1")
        "$ROOT/bench/membench.sh" "${args[@]}" || fail=1
    done
    if [ "$KEEP" = 0 ]; then
        rm -f "$plain" "$bundle"
        echo "deleted $plain and $bundle"
    fi
done
exit $fail
