#!/usr/bin/env bash
# A busy machine: decode steps of the small configs with another process spinning on one core
# (started here: a shell busy loop), on 1 thread and on 2, alternating, and the same quiet.
# Prints, per config, the median and worst decode step time over ROUNDS runs of each, and the
# ratio of 2 threads to 1 (the target: no more than 1.10 with the load).
#   bench/busy.sh [build-dir] [rounds]   (defaults: build, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-10}
cli=$build/apps/attn-cli
[ -x "$cli" ] || { echo "$0: no $cli (tools/demo.sh builds it)" >&2; exit 2; }
core=$("$cli" run -n 1 --json 2>/dev/null | grep -o '"blas_core":"[^"]*"' | cut -d'"' -f4)
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores," \
  "OpenBLAS core: $core (opened only by products that need it)"

# The median and the worst of the decode steps' "ms" over `rounds` runs: "median worst".
steps_ms() {  # <threads> <config args...>
  local t=$1
  shift
  for _ in $(seq "$rounds"); do
    "$cli" decode "$@" --prefill 8 --steps 8 -t "$t" --json 2>/dev/null |
      { grep '"event":"decode"' || true; } | sed 's/.*"ms":\([0-9.e+-]*\).*/\1/'
  done | sort -g | awk '{v[NR]=$1} END {printf "%.3f %.3f", v[int((NR+1)/2)], v[NR]}'
}

report() {  # <label>
  local name=$1
  shift
  local one two
  one=$(steps_ms 1 "$@")
  two=$(steps_ms 2 "$@")
  awk -v n="$name" -v a="$one" -v b="$two" 'BEGIN {
    split(a, x, " "); split(b, y, " ");
    printf "  %-10s 1 thread: median %7.3f ms, worst %7.3f | 2 threads: median %7.3f ms, worst %7.3f | 2 vs 1: %.2fx\n",
      n, x[1], x[2], y[1], y[2], y[1] / x[1] }'
}

run_all() {
  report mha --config configs/mha.json --weights weights/mha.safetensors
  report gqa --config configs/gqa.json --weights weights/gqa.safetensors
  report mqa --config configs/mqa.json --weights weights/mqa.safetensors
  report llama-tiny --config configs/llama-tiny.json --weights weights/llama-tiny.safetensors
}

echo "quiet:"
run_all
bash -c 'while :; do :; done' &
load=$!
trap 'kill $load 2>/dev/null || true' EXIT
echo "busy (another process spinning on one core):"
run_all
