#!/usr/bin/env bash
# Builds attn-cli (Release) and runs the default demo: the seed notebook's GQA block, the whole
# LLaMA block at notebook scale, then a real trained model (weights/stories260K.gguf, llama2.c's
# TinyStories model): a story from a prompt, and its last layer's attention over a sentence as a
# token-labelled heatmap (stories260K-heatmap.png).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
set -x
./build/apps/attn-cli run
./build/apps/attn-cli decode --config configs/llama-tiny.json --weights weights/llama-tiny.safetensors --steps 4
./build/apps/attn-cli generate -m weights/stories260K.gguf -p "Once upon a time" -n 200
./build/apps/attn-cli heatmap -m weights/stories260K.gguf --layer 4 -n 1 \
  -p "Lily saw a big red ball in the park. She ran to the ball and" --out stories260K-heatmap.png
