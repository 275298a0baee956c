#!/usr/bin/env bash
# A busy machine: decode steps of the small configs with another process spinning on one core
# (started here: a shell busy loop), on 1 thread and on 2, alternating, and the same quiet.
# Prints, per config, the median and worst decode step time over ROUNDS runs of each, and the
# ratio of 2 threads to 1 (the target: no more than 1.10 with the load). Then whole processes,
# start to exit, 1 and 2 threads taking turns: `decode` of mha (prefill 10, 4 steps) and
# `generate` on stories260K (issue 39's scenarios), median and worst, against the same 1.10.
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

# A whole process's wall time in microseconds.
process_us() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}

# "median worst" in ms of a list of microseconds on stdin.
median_worst() {
  sort -n | awk '{v[NR]=$1} END {printf "%.2f %.2f", v[int((NR+1)/2)]/1000, v[NR]/1000}'
}

whole() {  # <label> <args...> (the thread count is appended)
  local name=$1
  shift
  local a b
  a=$(mktemp)
  b=$(mktemp)
  for _ in $(seq "$rounds"); do  # interleaved: both see the same moments of the machine
    process_us "$cli" "$@" -t 1 >>"$a"
    process_us "$cli" "$@" -t 2 >>"$b"
  done
  local one two
  one=$(median_worst <"$a")
  two=$(median_worst <"$b")
  rm -f "$a" "$b"
  awk -v n="$name" -v a="$one" -v b="$two" 'BEGIN {
    split(a, x, " "); split(b, y, " "); r = y[1] / x[1];
    printf "  %-10s 1 thread: median %6.2f ms, worst %6.2f | 2 threads: median %6.2f ms, worst %6.2f | 2 vs 1: %.2fx (target 1.10: %s)\n",
      n, x[1], x[2], y[1], y[2], r, r <= 1.10 ? "met" : "MISSED" }'
}

whole_all() {
  whole decode decode --config configs/mha.json --weights weights/mha.safetensors --prefill 10 --steps 4
  whole generate generate -m weights/stories260K.gguf -p "Once upon a time" -n 32
}

echo "quiet, decode steps:"
run_all
echo "quiet, whole processes:"
whole_all
bash -c 'while :; do :; done' &
load=$!
trap 'kill $load 2>/dev/null || true' EXIT
echo "busy (another process spinning on one core), decode steps:"
run_all
echo "busy, whole processes:"
whole_all
