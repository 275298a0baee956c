#!/usr/bin/env bash
# Start-up cost of attn-cli as whole processes, against an empty C program compiled here
# (issue 23: the notebook's `attn-cli run` at most 6 ms above it; issue 52: `run` on the notebook's
# config and `generate -m weights/stories260K.gguf -n 1` under 2 ms above it, by median). Best and
# median of N runs after a warm-up, a markdown table on stdout; with perf installed, each
# command's CPU time (task-clock, mean of N) beside its wall time: on a loaded machine the wall
# time waits for a core, the CPU time does not. The CPU and the load average are named.
# Usage: bench/startup.sh [build dir or attn-cli path] [runs, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-build}
runs=${2:-20}
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

# CPU milliseconds of "$@" (perf stat's task-clock, the mean of the runs), or "-" without perf.
cpu_ms() {
  if ! command -v perf >/dev/null; then
    echo -
    return
  fi
  perf stat -x, -e task-clock -r "$runs" "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ { printf "%.2f", $1 }' ||
    echo -
}

cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
family=$(sed -n 's/^cpu family\s*: //p' /proc/cpuinfo | head -1)
model=$(sed -n 's/^model\s*: //p' /proc/cpuinfo | head -1)
echo "CPU: $cpu (family $family, model $model, $(nproc) cores); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $runs runs each; load average $(cut -d' ' -f1-3 /proc/loadavg) before"
echo
echo "| command | best ms | median ms | median - C median, ms | CPU ms |"
echo "|---|---:|---:|---:|---:|"
read -r base_best base_median < <(time_ms "$tmp/empty")
echo "| empty C program (cc -O2) | $base_best | $base_median | 0 | $(cpu_ms "$tmp/empty") |"
row() {
  local label=$1 best median
  shift
  read -r best median < <(time_ms "$@")
  echo "| $label | $best | $median | $(awk -v a="$median" -v b="$base_median" 'BEGIN { printf "%.2f", a - b }') | $(cpu_ms "$@") |"
}
row "attn-cli --version" "$cli" --version
row "attn-cli run (the seed notebook's ModelArgs)" "$cli" run
row "attn-cli run --config configs/nb004-mha.json (the notebook's config)" "$cli" run --config configs/nb004-mha.json
row "attn-cli generate -m weights/stories260K.gguf -n 1 -p 'Once upon a time'" \
  "$cli" generate -m weights/stories260K.gguf -n 1 -p 'Once upon a time'
row "attn-cli run --config configs/mha.json" "$cli" run --config configs/mha.json
row "attn-cli decode --config configs/mha.json --prefill 1 --steps 1" \
  "$cli" decode --config configs/mha.json --prefill 1 --steps 1
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after"
