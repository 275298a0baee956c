#!/usr/bin/env bash
# Long run: one Llama-3-8B layer decoded to a full 2048-position cache (prefill 512, then 1536
# steps), reporting resident memory after the prefill and at the end (flat: everything is
# allocated before the first step) and the decode step time against cache depth. Then asks for
# one step past the cache, which must be refused before any work with nothing on stdout.
#   bench/long_run.sh [build-dir] [extra attn-cli flags, e.g. --threads 2]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}  # the folder tools/demo.sh builds
shift || true
cli=$build/apps/attn-cli
if [ ! -x "$cli" ]; then
  echo "$0: no $cli: build it with tools/demo.sh (or cmake -S . -B $build && cmake --build $build)" >&2
  exit 2
fi
config=configs/llama3-8b-layer.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$cli" run --config "$config" --prefill 512 --steps 1536 --json "$@" >"$out/trace" 2>"$out/err" &
pid=$!
# Resident memory once a second, with the number of events printed so far (the depth).
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$rss" ] && echo "$(wc -l <"$out/trace") $rss $hwm" >>"$out/rss"
  sleep 1
done
wait "$pid"
/usr/bin/python3 - "$out/trace" "$out/rss" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
rss = [tuple(map(int, l.split())) for l in open(sys.argv[2])]
pre = next(e for e in events if e["event"] == "prefill")
dec = [e for e in events if e["event"] == "decode"]
summ = events[-1]
print(f"prefill 512 positions: {pre['ms']:.1f} ms; OpenBLAS core {summ.get('blas_core')}; threads {summ.get('threads')}")
print("decode step time against cache depth (median ms of the steps in each range):")
for lo in range(512, 2048, 256):
    ms = sorted(e["ms"] for e in dec if lo <= e["start_pos"] < lo + 256)
    if ms:
        print(f"  depth {lo:4d}..{lo + 255:4d}: {ms[len(ms) // 2]:7.2f} ms  (p10 {ms[len(ms) // 10]:.2f}, p90 {ms[len(ms) * 9 // 10]:.2f}, {len(ms)} steps)")
after = [r for r in rss if r[0] >= 2]  # config and prefill printed
if after:
    print(f"resident memory after the prefill: {after[0][1] / 1024:.1f} MB; at the last sample (depth {511 + after[-1][0] - 2}): {after[-1][1] / 1024:.1f} MB; peak {max(r[2] for r in rss) / 1024:.1f} MB")
print(f"last event: decode step {dec[-1]['step']}, cache_k {dec[-1]['cache_k']}")
PY
echo "one step past the cache:"
set +e
"$cli" run --config "$config" --prefill 512 --steps 1537 --json "$@" >"$out/trace2" 2>"$out/err2"
echo "  exit $?, stdout $(wc -c <"$out/trace2") bytes, stderr: $(cat "$out/err2")"
