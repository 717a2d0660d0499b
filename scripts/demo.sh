#!/usr/bin/env bash
# `make demo`: the whole pinfer story on a model it generates, in a few minutes:
# generate a sparse (ReLU) model -> profile it -> train activation predictors
# -> convert to a bundle file -> measure the machine -> plan for a memory budget
# well below the model -> run it dense, sparse and offloaded, and compare.
set -eu
PINFER=${1:-build/release/pinfer}
cd "$(dirname "$0")/.."
MODELS=${PI_MODELS_DIR:-../shared/models}
WORK=${PI_DEMO_DIR:-build/demo}
mkdir -p "$WORK"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
T=${PI_DEMO_THREADS:-2}

step "pinfer on this machine"
"$PINFER" version

VOCAB=()
[ -f "$MODELS/vocab/ggml-vocab-llama-spm.gguf" ] && VOCAB=(--vocab "$MODELS/vocab/ggml-vocab-llama-spm.gguf")
M=$WORK/relu-d2048-l8.gguf
step "1. generate a ReLU llama (dim 2048, 8 layers, FFN 5632, Q4_0) whose FFN neurons fire like a trained one's"
"$PINFER" gen-model -o "$M" --preset 7b-l8 --dim 2048 --layers 8 --ffn 5632 --n-head 16 --n-head-kv 4 \
    --type q4_0 --act relu --active 0.1 --skew 1 ${VOCAB[@]+"${VOCAB[@]}"} -t "$T"

step "2. profile: how often each FFN neuron fires (512 sampled tokens)"
"$PINFER" profile -m "$M" --tokens 512 -o "$WORK/stats.gguf" -t "$T" | tail -4

# any UTF-8 text will do for random weights; Debian ships these with base-files
TEXT=$WORK/calib.txt
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 README.md 2>/dev/null > "$TEXT" || cp README.md "$TEXT"
step "3. train an activation predictor per layer (rank 128) on $(wc -c < "$TEXT") bytes of text"
"$PINFER" train-predictor -m "$M" --text "$TEXT" -o "$WORK/relu-pred.gguf" --rank 128 --epochs 6 --tokens 16000 \
    -t "$T" | tail -13

B=$WORK/relu-pred.bundle.gguf
step "4. convert: neurons in order of activity, FFN as 4 KiB neuron bundles for O_DIRECT reads"
"$PINFER" convert -m "$WORK/relu-pred.gguf" --reorder "$WORK/stats.gguf" --bundle -o "$B"

# The demo keeps its figures apart from the user's cached ones (a quick probe
# would replace a full one): the same cache file the planner and bench use.
export XDG_CACHE_HOME="$(cd "$WORK" && pwd)/cache"
step "5. measure this machine: kernels, memory bandwidth, flash random reads (quick)"
"$PINFER" hwprobe -m "$B" --quick

SIZE=$(stat -c %s "$M")
BUDGET=$((SIZE * 65 / 100))
step "6. plan for a budget of 65% of the model file ($((BUDGET >> 20)) of $((SIZE >> 20)) MiB; attention and the output head alone are 40%)"
"$PINFER" plan -m "$B" --mem-budget "$BUDGET" -c 512 -t "$T" -o "$WORK/plan.txt"

# A probe's random offsets and the engine's reads of the same cold bundles are
# different workloads, and a virtual disk's rate drifts: the plan is checked by
# decoding under it, and the reads that run achieved price the plan made again.
step "6b. check the plan on this disk: bench decodes 64 tokens under it; the reads it achieves price the plan again"
"$PINFER" bench -m "$B" --plan "$WORK/plan.txt" -c 512 -p 0 -n 64 -r 3 --greedy -t "$T" 2>&1 \
    | grep -E "reads achieved|output head read|^tg64" || true
"$PINFER" plan -m "$B" --mem-budget "$BUDGET" -c 512 -t "$T" -o "$WORK/plan.txt" 2>&1 | grep -E "predicted|priced" || true

step "7. run: offloaded under the budget, then dense and sparse in memory (same greedy text)"
run() { # label, args...: prints "label tok/s peak-MiB"
    local label=$1; shift
    "$PINFER" run -p "Once upon a time" -n 64 --temp 0 --ignore-eos -t "$T" -c 512 "$@" > "$WORK/$label.out" 2> "$WORK/$label.err"
    local tps rss
    tps=$(sed -n 's/.*generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' "$WORK/$label.err")
    rss=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$WORK/$label.err")
    printf '%s %s %s\n' "$label" "$tps" "$rss"
}
# the offloaded run first, right after the bench that priced the plan: the
# disk's rate drifts within a minute, and the in-memory runs take seconds
R_OFF=$(run offloaded -m "$B" --plan "$WORK/plan.txt" --stats)
R_DENSE=$(run dense -m "$B" --dense)
R_SPARSE=$(run sparse -m "$B" --plan "$WORK/plan.txt" --in-memory) # the plan's predictor thresholds, in memory
grep -E "memory budget|per token" "$WORK/offloaded.err" || true
SAME=no
cmp -s "$WORK/sparse.out" "$WORK/offloaded.out" && SAME=yes
PRED=$(sed -n 's/^predicted_tok_s \(.*\)/\1/p' "$WORK/plan.txt")

step "results ($T threads)"
printf '%-28s %10s %16s\n' "mode" "tok/s" "peak RSS (MiB)"
for r in "$R_DENSE" "$R_SPARSE" "$R_OFF"; do
    set -- $r
    printf '%-28s %10s %16s\n' "$1" "$2" "$3"
done
printf '%-28s %10.2f %16s\n' "offloaded, planner predicted" "$PRED" "$((BUDGET >> 20)) (budget)"
printf 'model file %d MiB; offloaded text identical to in-memory sparse: %s\n' "$((SIZE >> 20))" "$SAME"
printf '\nFiles are in %s. See README.md for what each number means.\n' "$WORK"
