#!/usr/bin/env bash
# One Llama-3-8B layer on 2 MPI ranks of one thread each against one process of 2 threads, in the
# same session, and the ratios. Usage: bench/model_parallel.sh [build dir] [extra bench flags]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}  # the folder tools/demo.sh builds
shift || true
cli=$build/apps/attn-cli
if [ ! -x "$cli" ]; then
  echo "$0: no $cli: build it with tools/demo.sh (or cmake -S . -B $build && cmake --build $build)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed 's/"max_batch_size"/"model_parallel_size": 2,\n  "max_batch_size"/' configs/llama3-8b-layer.json >"$tmp/mp2.json"
echo "== mpirun -np 2 $cli bench --config <llama3-8b-layer, model_parallel_size 2> --threads 1 $*" >&2
mpirun --allow-run-as-root --oversubscribe -np 2 "$cli" bench --config "$tmp/mp2.json" --threads 1 --json "$@" >"$tmp/mp2.out"
echo "== $cli bench --config configs/llama3-8b-layer.json --threads 2 $*" >&2
"$cli" bench --config configs/llama3-8b-layer.json --threads 2 --json "$@" >"$tmp/one.out"
/usr/bin/python3 - "$tmp/mp2.out" "$tmp/one.out" <<'PY'
import json, sys
mp, one = (json.load(open(p)) for p in sys.argv[1:3])
print(f"{'':34s}{'2 ranks x 1 thread':>20s}{'1 process x 2 threads':>24s}{'ratio':>8s}")
for key, label in [("prefill_positions_per_s", "prefill positions/s"), ("decode_steps_per_s", "decode steps/s"),
                   ("decode_ms_median", "decode ms/step (median)"), ("stream_gbs", "streaming read GB/s (per rank)")]:
    print(f"{label:34s}{mp[key]:20.2f}{one[key]:24.2f}{mp[key] / one[key]:8.2f}")
print(f"{'allreduce ms per decode step':34s}{mp['decode_allreduce_ms_per_step']:20.3f}"
      f"   ({100 * mp['decode_allreduce_share']:.1f}% of a step, {mp['allreduces_per_step']} allreduces of 4096 floats)")
print(f"{'one allreduce alone, us':34s}{mp['allreduce_alone_us']:20.1f}   (4096 floats, ranks in step)")
print(f"{'allreduce ms in the prefill':34s}{mp['prefill_allreduce_ms']:20.2f}   ({100 * mp['prefill_allreduce_share']:.1f}%)")
print(f"{'weights MB per rank':34s}{mp['weight_bytes_per_rank'] / 1e6:20.1f}{one['weight_bytes'] / 1e6:24.1f}")
print(f"{'peak resident MB per rank':34s}{' / '.join(f'{x:.0f}' for x in mp['peak_rss_mb_per_rank']):>20s}{one['peak_rss_mb']:24.0f}")
print(f"OpenBLAS core: {one['openblas_core']}; matmul: {one['matmul']}")
PY
