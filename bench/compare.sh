#!/usr/bin/env bash
# attn-cli vs PyTorch eager (Debian's python3-torch) on the same work, in one go:
#   1. one Llama-3-8B layer: `attn-cli bench --json` and bench/torch_layer.py --json
#      (same prefill, steps and threads);
#   2. the seed notebook's workload as whole processes, import/startup included:
#      `attn-cli run` (best and median of 20) vs bench/torch_notebook.py (best and median of 5),
#      with hyperfine if installed, else a loop around `date +%s%N`.
# Usage: bench/compare.sh [--threads T] [--prefill P] [--steps N]   (defaults 2, 512, 128)
# Progress and the tools' own logs go to stderr, the table to stdout. Exit status is non-zero
# if any benchmark fails. OPENBLAS_CORETYPE is passed through untouched and reported.
set -Eeuo pipefail
trap 'echo "compare.sh: failed: $BASH_COMMAND" >&2' ERR

usage() {
  sed -n 's/^# \{0,1\}Usage: //p' "$0" >&2
  exit 2
}

threads=2 prefill=512 steps=128
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=${2-} ;;
    --prefill) prefill=${2-} ;;
    --steps) steps=${2-} ;;
    *) usage ;;
  esac
  [[ ${2-} =~ ^[1-9][0-9]*$ ]] || usage
  shift 2
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=/usr/bin/python3
cli=./build/apps/attn-cli
start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$cli" ]; then
  echo "== building attn-cli" >&2
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build build -j2 >&2
fi

shape=(--threads "$threads" --prefill "$prefill" --steps "$steps")
echo "== attn-cli bench ${shape[*]}" >&2
"$cli" bench --json "${shape[@]}" >"$tmp/bench_cli.json"
echo "== bench/torch_layer.py ${shape[*]}" >&2
"$py" bench/torch_layer.py --json "${shape[@]}" >"$tmp/bench_torch.json"

if command -v hyperfine >/dev/null; then timer=$(hyperfine --version); else timer=""; fi

# time_runs NAME RUNS CMD...: wall seconds of each run, one per line, in $tmp/NAME.times
# (after one untimed warm-up run; the commands' output is discarded).
time_runs() {
  local name=$1 runs=$2 t0 t1 i
  shift 2
  echo "== $runs runs of: $*" >&2
  if [ -n "$timer" ]; then
    hyperfine -N --warmup 1 --runs "$runs" --export-json "$tmp/$name.json" \
      "$(printf '%q ' "$@")" >&2
    "$py" -c 'import json, sys; print(*json.load(sys.stdin)["results"][0]["times"], sep="\n")' \
      <"$tmp/$name.json" >"$tmp/$name.times"
  else
    "$@" >/dev/null 2>&1 # warm-up
    for ((i = 0; i < runs; i++)); do
      t0=$(date +%s%N)
      "$@" >/dev/null 2>&1
      t1=$(date +%s%N)
      echo "$((t1 - t0))e-9" >>"$tmp/$name.times"
    done
  fi
}
time_runs cli 20 "$cli" run
time_runs torch 5 "$py" bench/torch_notebook.py

"$py" - "$tmp" "${OPENBLAS_CORETYPE-unset}" "${timer:-a bash loop, date +%s%N}" "$(date -R)" \
  "$((SECONDS - start))" <<'EOF'
import json, statistics, sys

tmp, coretype, timer, date, took = sys.argv[1:]
c, t = (json.load(open(f"{tmp}/bench_{n}.json")) for n in ("cli", "torch"))
times = {n: sorted(float(s) * 1e3 for s in open(f"{tmp}/{n}.times")) for n in ("cli", "torch")}
rows = []

def row(name, a, b, fmt, faster=None):
    rows.append((name, fmt.format(a), fmt.format(b), f"{faster:.2f}x" if faster else ""))

print(f"One Llama-3-8B layer, fp32, batch 1: prefill {c['prefill_positions']} positions, "
      f"{c['decode_steps']} decode steps (median step)\n")
row("prefill ms", c["prefill_ms"], t["prefill_ms"], "{:.1f}", t["prefill_ms"] / c["prefill_ms"])
row("prefill positions/s", c["prefill_positions_per_s"], t["prefill_positions_per_s"], "{:.1f}")
row("prefill GFLOP/s", c["prefill_gflops"], t["prefill_gflops"], "{:.1f}")
row("decode ms/step (median)", c["decode_ms_median"], t["decode_ms_median"], "{:.2f}")
row("decode ms/step p10 .. p90", f"{c['decode_ms_p10']:.1f} .. {c['decode_ms_p90']:.1f}",
    f"{t['decode_ms_p10']:.1f} .. {t['decode_ms_p90']:.1f}", "{}")
row("decode steps/s", c["decode_steps_per_s"], t["decode_steps_per_s"], "{:.2f}",
    c["decode_steps_per_s"] / t["decode_steps_per_s"])
row("decode GB/s of weights", c["decode_gbs"], t["decode_gbs"], "{:.2f}")
row(f"  of stream read {c['stream_gbs']:.1f} GB/s", c["decode_gbs"] / c["stream_gbs"],
    t["decode_gbs"] / c["stream_gbs"], "{:.0%}")
for label, f in (("best", min), ("median", statistics.median)):
    row(f"notebook process, {label} ms", f(times["cli"]), f(times["torch"]), "{:.1f}",
        f(times["torch"]) / f(times["cli"]))

head = ("", "attn-cli", f"torch {t['torch_version']}", "attn-cli faster by")
w = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
for r in [head] + rows:
    print(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}  {r[3]:>{w[3]}}")
print(f"\nattn-cli decode of B sequences at once, same rounds (kernels: {c['matmul_isa']}; "
      f"stream read: {c['stream_pattern']}):")
print(f"{'B':>4}  {'ms/step':>8}  {'steps/s':>8}  {'tokens/s':>9}  {'step vs B=1':>11}")
for d in c["batched_decode"]:
    print(f"{d['batch']:>4}  {d['ms_median']:>8.2f}  {d['steps_per_s']:>8.2f}  "
          f"{d['tokens_per_s']:>9.1f}  {d['step_vs_batch1']:>10.2f}x")
print(f"\nnotebook process: attn-cli run x{len(times['cli'])}, torch_notebook.py "
      f"x{len(times['torch'])}, timed with {timer}")
print(f"OPENBLAS_CORETYPE={coretype}; OpenBLAS core: attn-cli {c['openblas_core']}, torch "
      f"{t['openblas_core']} (BLAS_INFO={t['blas_info']})")
print(f"threads: attn-cli {c['threads']}, torch {t['threads']} (OpenBLAS {t['openblas_threads']}); "
      f"peak RSS MB: attn-cli {c['peak_rss_mb']:.0f}, torch {t['peak_rss_mb']:.0f}")
print(f"date: {date}; compare took {took} s")
EOF
