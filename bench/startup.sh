#!/usr/bin/env bash
# Start-up cost of attn-cli as whole processes, against an empty C program compiled here
# (issue 23: the notebook's `attn-cli run` at most 6 ms above it). Best and median of N runs after a
# warm-up, a markdown table on stdout.
# Usage: bench/startup.sh [build dir or attn-cli path] [runs, default 40]
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-build}
runs=${2:-40}
cli=$target
[ -d "$target" ] && cli=$target/apps/attn-cli
if [ ! -x "$cli" ]; then
  echo "$0: no $cli: build it (cmake -S . -B build && cmake --build build)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo 'int main(void) { return 0; }' >"$tmp/empty.c"
cc -O2 -o "$tmp/empty" "$tmp/empty.c"

# Best and median wall time of "$@" in ms, stdout and stderr discarded; a loop of date +%s%N
# rather than hyperfine, which is not always installed, so the numbers compare across machines.
time_ms() {
  local i t0 t1
  for i in 1 2 3; do "$@" >/dev/null 2>&1; done
  for ((i = 0; i < runs; i++)); do
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000))
  done | sort -n | awk '{ a[NR] = $1 } END { printf "%.2f %.2f\n", a[1] / 1000, a[int((NR + 1) / 2)] / 1000 }'
}

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $runs runs each"
echo
echo "| command | best ms | median ms | best - C baseline, ms |"
echo "|---|---:|---:|---:|"
read -r base_best base_median < <(time_ms "$tmp/empty")
echo "| empty C program (cc -O2) | $base_best | $base_median | 0 |"
row() {
  local label=$1 best median
  shift
  read -r best median < <(time_ms "$@")
  echo "| $label | $best | $median | $(awk -v a="$best" -v b="$base_best" 'BEGIN { printf "%.2f", a - b }') |"
}
row "attn-cli --version" "$cli" --version
row "attn-cli run (the seed notebook's ModelArgs)" "$cli" run
row "attn-cli run --config configs/mha.json" "$cli" run --config configs/mha.json
row "attn-cli decode --config configs/mha.json --prefill 1 --steps 1" \
  "$cli" decode --config configs/mha.json --prefill 1 --steps 1
