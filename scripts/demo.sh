#!/usr/bin/env bash
# `make demo`: pinfer end to end on this machine, on a model it generates.
set -eu
PINFER=${1:-build/release/pinfer}
cd "$(dirname "$0")/.."
MODELS=${PI_MODELS_DIR:-../shared/models}
WORK=${PI_DEMO_DIR:-build/demo}
mkdir -p "$WORK"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "pinfer on this machine"
"$PINFER" version

VOCAB=()
[ -f "$MODELS/vocab/ggml-vocab-llama-spm.gguf" ] && VOCAB=(--vocab "$MODELS/vocab/ggml-vocab-llama-spm.gguf")
step "generate a llama model with random weights (dim 1024, 8 layers, Q4_0)"
"$PINFER" gen-model -o "$WORK/small-q4_0.gguf" --preset small --type q4_0 ${VOCAB[@]+"${VOCAB[@]}"}
"$PINFER" inspect "$WORK/small-q4_0.gguf" | sed -n '1,8p;/^totals/,$p'

step "run it: random weights give random text, but every stage of inference runs"
"$PINFER" run -m "$WORK/small-q4_0.gguf" -p "The quick brown fox" -n 24 --seed 1

if [ -f "$MODELS/stories260K.gguf" ]; then
    step "a real trained model: stories260K (TinyStories), greedy"
    "$PINFER" run -m "$MODELS/stories260K.gguf" -p "Once upon a time" -n 60 --temp 0
fi

step "pinfer bench: prompt (pp) and decode (tg) speed vs the memory-bandwidth bound"
"$PINFER" bench -m "$WORK/small-q4_0.gguf" -p 128 -n 32 -r 3

step "pinfer bench-kernels: matvec weight streaming vs memory bandwidth (14336 x 4096)"
"$PINFER" bench-kernels --types q4_0,q8_0,f16 --ws-mib 600 --reps 3

printf '\nDone. See README.md for what each number means.\n'
