#!/usr/bin/env bash
# Runs each libFuzzer harness for a fixed time on a corpus seeded from the committed fixtures,
# with its dictionary. Exits non-zero on the first finding; the crashing input is left in
# <build>/fuzz-artifacts/ (copy it to fuzz/regressions/<harness>/ and fix the bug).
#   fuzz/run.sh <build-dir> <seconds per harness> [harness ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
seconds=$2
shift 2
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(safetensors config input index hf_config tokenizer tokens session gguf
  llama2c llama_tokenizer tokenizer_text gguf_config hook_name chat_template)
mkdir -p "$build/fuzz-artifacts"
for h in "${harnesses[@]}"; do
  corpus=$build/fuzz-corpus/$h
  mkdir -p "$corpus"
  case $h in
    safetensors) seeds=(tests/golden/*/*.safetensors weights/*.safetensors) ;;
    config) seeds=(configs/*.json tests/golden/*/config.json) ;;
    input) seeds=(tests/golden/*/input.safetensors) ;;
    index) seeds=(tests/golden/hf/*/*.index.json) ;;
    hf_config) seeds=() ;;  # made below: a pick byte, then each Hugging Face config
    tokenizer) seeds=(fuzz/seeds/tokenizer/*) ;;
    tokens) seeds=(fuzz/seeds/tokens/*) ;;
    session) seeds=() ;;  # made below: sessions attn-cli saves from the harness's model
    gguf) seeds=(tests/golden/gguf/*.gguf weights/*.gguf) ;;
    llama2c) seeds=(fuzz/seeds/llama2c/*) ;;
    llama_tokenizer) seeds=(fuzz/seeds/llama_tokenizer/*) ;;
    tokenizer_text) seeds=(fuzz/seeds/tokenizer_text/*) ;;
    gguf_config) seeds=(tests/golden/gguf_config/*.gguf) ;;
    hook_name) seeds=(fuzz/seeds/hook_name/*) ;;
    # The committed feature template and llama.cpp's templates where the cache holds them.
    chat_template) seeds=(tests/golden/chat_templates/*.jinja
                          "$HOME"/.cache/attn-cli/llama.cpp/3.22.1/src/models/templates/*.jinja) ;;
  esac
  if [ "$h" = hf_config ]; then
    for c in tests/golden/hf/*/config.json; do
      printf '\x0b' | cat - "$c" >"$corpus/seed-$(echo "$c" | tr / _)"
    done
  fi
  if [ "$h" = session ]; then
    for n in 1 5; do  # the config and seed fuzz_session opens its drawn model with
      "$build/apps/attn-cli" generate --config fuzz/seeds/session/config.json --seed 42 -t 1 \
        --tokens 1,2,3 -n "$n" --save-session "$corpus/seed-$n.safetensors" >/dev/null 2>&1
    done
  fi
  for s in "${seeds[@]}" fuzz/regressions/"$h"/*; do
    [ -f "$s" ] || continue  # a pattern that matched nothing
    # Small seeds only: the harness's speed scales with input size.
    if [ "$(stat -c %s "$s")" -le 65536 ]; then cp "$s" "$corpus/seed-$(echo "$s" | tr / _)"; fi
  done
  echo "== fuzz_$h for ${seconds}s"
  log=$build/fuzz-artifacts/$h.log
  status=0
  nice "$build/fuzz/fuzz_$h" -max_total_time="$seconds" -dict="fuzz/dict/$h.dict" \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$h-" -max_len="${ATTN_FUZZ_MAX_LEN:-8192}" \
    "$corpus" >"$log" 2>&1 || status=$?
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done [0-9]+ runs" "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log"
    echo "fuzz_$h found a failure (exit $status; input in $build/fuzz-artifacts/)"
    exit 1
  fi
done
