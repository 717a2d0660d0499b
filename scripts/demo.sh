#!/usr/bin/env bash
# `make demo`: show what pinfer does, end to end, on this machine.
set -eu
PINFER=${1:-build/release/pinfer}
cd "$(dirname "$0")/.."
MODELS=${PI_MODELS_DIR:-../shared/models}
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "pinfer on this machine"
"$PINFER" version

if [ -f "$MODELS/stories260K.gguf" ]; then
    step "pinfer inspect $MODELS/stories260K.gguf (a real trained TinyStories llama)"
    "$PINFER" inspect "$MODELS/stories260K.gguf" | head -n 40
    echo "..."
fi

step "pinfer bench-kernels: matvec weight streaming vs memory bandwidth (14336 x 4096)"
"$PINFER" bench-kernels --types q4_0,q8_0,f16 --ws-mib 600 --reps 3

printf '\nDone. See README.md for what each number means.\n'
