#!/bin/sh
# Steering stories260K with a control vector, as llama.cpp's llama-cvector-generator and
# --control-vector-scaled do it: a direction from prompt pairs ("she" against "he" stories), then
# the same prompt generated without it and with it added after each layer, both signs.
#
#   sh examples/steering.sh [build/apps/attn-cli]
set -e
SCALES=${SCALES:-"0 -1"}
cli=${1:-build/apps/attn-cli}
here=$(dirname "$0")
model=$here/../weights/stories260K.gguf
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '%s\n' "Lily was a little girl. She" "The girl said she" "Mom told her daughter she" \
  "Sue smiled. She" > "$dir/positive.txt"
printf '%s\n' "Tim was a little boy. He" "The boy said he" "Dad told his son he" \
  "Tom smiled. He" > "$dir/negative.txt"
"$cli" cvector -m "$model" --positive-file "$dir/positive.txt" \
  --negative-file "$dir/negative.txt" --method mean -o "$dir/she.gguf" -t 1 2>/dev/null
for scale in $SCALES; do
  echo "--- scale $scale"
  "$cli" generate -m "$model" -p "Once upon a time, there was a little" -n 40 -t 1 \
    --control-vector-scaled "$dir/she.gguf:$scale" 2>/dev/null
  echo
done
