#!/usr/bin/env bash
# Builds attn-cli (Release) and runs the default demo: the seed notebook's GQA block, then the
# whole LLaMA block at notebook scale.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
set -x
./build/apps/attn-cli run
./build/apps/attn-cli decode --config configs/llama-tiny.json --weights weights/llama-tiny.safetensors --steps 4
