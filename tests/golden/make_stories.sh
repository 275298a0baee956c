#!/usr/bin/env bash
# make_stories.sh [LLAMA2C_SRC]: the golden text of stories260K (tests/golden/stories260K/).
#
# The reference is llama2.c's own run.c, the exact F32 forward of this model, unmodified: for
# each case of cases.tsv, `./run stories260K.bin -z tok512.bin -t 0.0 -n STEPS -i PROMPT`
# (greedy), its stdout written to <name>.txt as it prints it. run.c's -n counts positions,
# BOS and the prompt included (its loop forwards STEPS tokens: the first n-1 feed the prompt's
# n tokens, BOS included, each later one chooses a token), so STEPS = n + 199 chooses exactly
# 200 tokens, what `attn-cli generate -n 200` chooses; n comes from run.c's own encode (count.c
# below compiles run.c with its TESTING switch, which drops its main). run.c also stops when it
# chooses BOS (token 1: the TinyStories separator): no case here reaches that within 200.
#
# llama.cpp's llama-simple (greedy, 200 tokens; it keeps the KV cache in F16) is compared with
# run.c's text when its build is in the cache folder (bench/llama_cpp.sh): llama_simple.txt says
# per case whether it agrees, and where an F16 cache tipped a near tie, the first character at
# which the texts part. llama-simple's text is not a fixture.
#
# LLAMA2C_SRC: a llama2.c checkout (run.c); without it, the pinned commit is cloned from GitHub.
# Deterministic: a rerun writes the same files.
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd -P)
root=$(cd -- "$here/../.." && pwd -P)
out=$here/stories260K
commit=350e04fe35433e6d2941dce5a1f53308f87058eb  # karpathy/llama2.c master, 2024-05-29
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT

src=${1:-${LLAMA2C_SRC:-}}
if [ -z "$src" ]; then
  git clone -q https://github.com/karpathy/llama2.c "$work/llama2.c"
  git -C "$work/llama2.c" checkout -q "$commit"
  src=$work/llama2.c
fi
if [ -d "$src/.git" ] || git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$src" show "$commit:run.c" >"$work/run.c"  # a checkout or a bare mirror
else
  cp "$src/run.c" "$work/run.c"
fi
cat >"$work/count.c" <<'C'
// How many tokens run.c's encode makes of argv[2], BOS included.
#define TESTING
#include "run.c"
int main(int argc, char** argv) {
  (void)argc;
  Tokenizer t;
  build_tokenizer(&t, argv[1], 512);
  int* ids = malloc((strlen(argv[2]) + 3) * sizeof(int));
  int n = 0;
  encode(&t, argv[2], 1, 0, ids, &n);
  printf("%d\n", n);
  return 0;
}
C
# As llama2.c's Makefile builds `run` (-O3, no fast math).
cc -O3 -o "$work/run" "$work/run.c" -lm
cc -O2 -o "$work/count" "$work/count.c" -lm

model=$root/weights/stories260K.bin
tok=$root/weights/tok512.bin
gguf=$root/weights/stories260K.gguf
simple_dir=${ATTN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/attn-cli}/llama.cpp/3.22.1/build/bin
simple=$simple_dir/llama-simple
report=$out/llama_simple.txt
if [ -x "$simple" ]; then
  printf '# llama.cpp 3.22.1 (node-llama-cpp) llama-simple -m stories260K.gguf -n 200 PROMPT\n' >"$report"
  printf '# against run.c (F32). llama-simple keeps the KV cache in F16.\n' >>"$report"
else
  echo "llama-simple not built ($simple): no comparison with llama.cpp" >&2
fi

while IFS=$'\t' read -r name prompt; do
  [[ $name == '#'* ]] && continue
  n=$("$work/count" "$tok" "$prompt")
  steps=$((n + 199))
  (cd "$work" && ./run "$model" -z "$tok" -t 0.0 -n "$steps" -i "$prompt") \
    </dev/null >"$out/$name.txt" 2>/dev/null
  printf '%s: %d prompt tokens, run.c -n %d\n' "$name" "$n" "$steps"
  [ -x "$simple" ] || continue
  # llama-simple prints BOS as "<s>" and a space after it; run.c strips both.
  LD_LIBRARY_PATH=$simple_dir "$simple" -m "$gguf" -n 200 "$prompt" </dev/null 2>/dev/null |
    sed '1s/^<s> \{0,1\}//' >"$work/simple.txt"
  if cmp -s "$out/$name.txt" "$work/simple.txt"; then
    printf '%s: the same text\n' "$name" >>"$report"
  else
    at=$(cmp "$out/$name.txt" "$work/simple.txt" 2>/dev/null | sed -n 's/.* byte \([0-9]*\),.*/\1/p' || true)
    printf '%s: differs from byte %s: run.c "...%s" llama-simple "...%s"\n' "$name" "$at" \
      "$(tail -c +$((at > 20 ? at - 20 : 1)) "$out/$name.txt" | head -c 40 | tr '\n' ' ')" \
      "$(tail -c +$((at > 20 ? at - 20 : 1)) "$work/simple.txt" | head -c 40 | tr '\n' ' ')" >>"$report"
  fi
done <"$out/cases.tsv"
if [ -f "$report" ]; then cat "$report"; fi
