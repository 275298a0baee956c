#!/usr/bin/env bash
# Issue 46: a model's file is opened once per process (its format told, its GGUF parsed, its
# config, tokenizer and tensors read from that one descriptor and mapping), counted with strace
# for each front: attn-cli generate, run and view, and Python's Model.from_pretrained.
# Usage: tests/model_opens.sh attn-cli source-dir [python3 python-module-dir]
# Skipped (exit 77) where strace is missing or may not trace (a container without ptrace).
set -uo pipefail
cli=$1
cd "$2" || exit 1
python=${3:-}
pydir=${4:-}
if ! command -v strace >/dev/null || ! strace -f -qq -e trace=none true 2>/dev/null; then
  echo "SKIP: strace is missing or cannot trace here"
  exit 77
fi
# LeakSanitizer cannot run under ptrace (a sanitized build's processes would end with its fatal
# error): leaks are the other tests' business.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# opens <file> <label> <command...>: the command's openat calls of <file>, which must be one.
opens() {
  local file=$1 label=$2
  shift 2
  strace -f -qq -e trace=openat -o "$out/trace" "$@" >/dev/null 2>"$out/err"
  local status=$?
  local n
  n=$(grep -c "\"[^\"]*$file\"" "$out/trace")
  if [ "$status" -ne 0 ]; then
    echo "FAIL: $label exited $status: $(head -c 300 "$out/err")"
    failed=1
  elif [ "$n" -ne 1 ]; then
    echo "FAIL: $label opened $file $n times"
    grep "$file" "$out/trace" | head -20
    failed=1
  else
    echo "ok: $label opened $file once"
  fi
}

gguf=weights/stories260K.gguf
opens stories260K.gguf "generate -m GGUF" "$cli" generate -m $gguf -p "Once upon a time" -n 4
opens stories260K.gguf "run -m GGUF" "$cli" run -m $gguf -p "Lily saw a ball" --steps 2
opens stories260K.gguf "view -m GGUF" "$cli" view -m $gguf -p "Lily saw a ball" -n 2 --out "$out/v.html"
opens stories260K.bin "generate -m llama2.c" "$cli" generate -m weights/stories260K.bin \
  --tokenizer weights/tok512.bin -p "Once" -n 2
hf=tests/golden/model/hf_untied_f32
opens hf_untied_f32/model.safetensors "run -m HF folder" "$cli" run -m $hf --tokens 1,2,3 --steps 1
opens weights/mha.safetensors "decode --weights safetensors" "$cli" decode --config configs/mha.json \
  --weights weights/mha.safetensors --prefill 3 --steps 2
if [ -n "$pydir" ]; then
  for model in $gguf weights/stories260K.bin $hf; do
    name=$(basename "$model")
    [ "$model" = "$hf" ] && name=hf_untied_f32/model.safetensors
    tok=
    [ "$model" = weights/stories260K.bin ] && tok=", tokenizer='weights/tok512.bin'"
    opens "$name" "Python from_pretrained($model)" env PYTHONPATH="$pydir" "$python" -c \
      "import attn; m = attn.Model.from_pretrained('$model'$tok); m.forward([[1, 2, 3]])"
  done
fi
[ "$failed" -eq 0 ] && echo "model opens: all once" || exit 1
