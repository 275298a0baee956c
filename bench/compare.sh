#!/usr/bin/env bash
# attn-cli vs PyTorch eager (Debian's python3-torch) and vs llama.cpp on the same work, in one go:
#   1. one Llama-3-8B layer: `attn-cli bench --json` (F32, BF16 and F16 weights, decode steps
#      interleaved in the same rounds), `attn-cli bench --json --weight-types bf16` (a BF16-only
#      process, for its peak RSS) and bench/torch_layer.py --json --dtype float32 and bfloat16
#      (same prefill, steps and threads);
#   2. the seed notebook's workload as whole processes, import/startup included:
#      `attn-cli run` (best and median of 20) vs bench/torch_notebook.py (best and median of 5),
#      with hyperfine if installed, else a loop around `date +%s%N`;
#   3. llama.cpp (built once by bench/llama_cpp.sh from npm's node-llama-cpp, the layer written
#      as GGUF by bench/gguf_layer.py: F32, BF16, F16, and Q8_0 and Q4_K_M made from the F32 file
#      by llama.cpp's own llama-quantize, all cached next to the build), in R rounds; in each,
#      per weight type, `attn-cli bench` (drawn F32/BF16/F16 weights: --weight-types T; the
#      quantized ones: --weights FILE, the file's own types) and llama.cpp take turns (the order
#      swapped every other time): llama-bench (prefill P: -p P -n 0 -embd 1, every position
#      through the whole layer, best of 3 repetitions; decode at depth P: -p 0 -n N -d P, one
#      repetition) and llama-batched-bench (-npp P -ntg G -npl 1,2,4,8,16 -pps, S_TG t/s; the
#      quantized types -npl 1,4,16), then `attn-cli bench --compute bf16 --weight-types bf16`
#      (on CPUs with AVX512-BF16) next to llama.cpp's BF16 rows, and `attn-cli bench --weights
#      F --compute q8` for the Q8_0 and Q4_K_M files (on CPUs with AVX512-VNNI) next to
#      llama.cpp's rows of the same files;
#   4. long context (BF16 file, --long-rounds rounds, default 1: each fill is slow): decode at
#      depth D for each D of --long (8192,32768), B = 1 and 4: `attn-cli bench --weights F
#      --depth D --max-batch 4` against `llama-bench -p 0 -n G -d D` (B = 1) and
#      `llama-batched-bench -npp D -ntg G -npl 4 -pps` (B = 4);
#   5. stories260K, a real model: `attn-cli generate -m weights/stories260K.gguf -p "Once upon a
#      time" -n 400` against `llama-simple -m weights/stories260K.gguf -n 400 "Once upon a time"`
#      (both greedy), 3R runs each taking turns, tokens/s both by each tool's own timer (the
#      prompt and the decode loop: attn-cli's prompt eval + eval time, llama-simple's "speed")
#      and as whole processes (400 tokens over the wall time, loading included).
#   Parts 3-5 print one markdown table, each tool's best and median of its rounds:
#      | row | attn-cli best | median | llama.cpp best | median | ratio (best) | ratio (median) |
#      (ratio = attn-cli/llama.cpp, all rows rates), then per weight type the prefill's fraction
#      of attn-cli's measured FMA peak and the B=16/B=1 step-time ratio of each tool. A llama.cpp
#      program that fails (its AMX kernels crash on some KVM guests) leaves its cells "failed"
#      and the run goes on; --llama-bin DIR takes llama.cpp's programs from another build (those
#      it has). Skipped with a message when llama.cpp can't be built because npm is unreachable.
#   6. the busy scenario (bench/busy.sh: decode steps and whole processes, 1 and 2 threads, with
#      another process spinning on one core), its output as it prints it;
#   7. with --ik-bin DIR (a build of ikawrakow/ik_llama.cpp: bench/whole_model.sh's header says
#      how; without it, or without DIR/llama-bench, skipped with a message): ik_llama.cpp's
#      llama-bench beside llama.cpp's on the same layer files, decode -p 0 -n N -r 2 (no depth:
#      ik's -d is not llama.cpp's), by default and with -rtr 1 (run-time repacking), per round;
#   8. the whole model (bench/whole_model.sh: a drawn Llama-3.2-1B shape as GGUF Q8_0, Q4_K_M
#      and BF16, --model-types; TTFT after a 512-token prompt, decode at B = 1 and 4, peak RSS,
#      attn-cli against llama.cpp and, with --ik-bin, ik_llama.cpp), its table as it prints it;
#   9. with --before-bin FILE (an attn-cli binary built from an earlier commit): in part 3's
#      rounds, its `bench` right after attn-cli's on the same arguments, and a table of each
#      row's median before and after (a change's cost, measured in the same minutes), each run's
#      prefill and decode also as fractions of the FMA peak and stream it probed.
#   --save DIR keeps every tool's raw output (the bench JSON, llama.cpp's JSON and logs) in DIR.
# Usage: bench/compare.sh [--threads T] [--prefill P] [--steps N] [--rounds R] [--ntg G] [--no-llama] [--llama-only|--no-torch] [--no-quant] [--no-long] [--long D1,D2] [--long-rounds R] [--no-stories] [--no-busy] [--llama-bin DIR] [--ik-bin DIR] [--before-bin FILE] [--save DIR] [--no-model] [--model-types T1,T2]   (defaults 2, 512, 128, 3, min(32, N), long 8192,32768 in 1 round, model q8_0,q4_k_m,bf16)
# Progress and the tools' own logs go to stderr, the tables to stdout; parts 1-2 end with issue
# 10's targets, each PASS or MISS against figures of this same run (a MISS does not change the
# exit status). Parts 1-2 are skipped with a message when /usr/bin/python3 can't import torch.
# Exit status is non-zero if any attn-cli benchmark fails. OPENBLAS_CORETYPE is passed through
# untouched and reported. A full run (all parts, defaults) is estimated at 25-30 minutes on 2
# quiet cores (docs/perf/README.md says how; the long-context part is 5-8 of them);
# `--rounds 1 --prefill 64 --steps 8 --long 1024,2048` is a smoke run of a few minutes.
set -Eeuo pipefail
trap 'echo "compare.sh: failed: $BASH_COMMAND" >&2' ERR

usage() {
  sed -n 's/^# \{0,1\}Usage: //p' "$0" >&2
  exit 2
}

threads=2 prefill=512 steps=128 rounds=3 ntg="" torch=1 llama=1
quant=1 long=1 long_depths=8192,32768 long_rounds=1 stories=1 busy=1 llama_bin="" ik_bin="" before_bin="" save=""
model=1 model_types=q8_0,q4_k_m,bf16
while [ $# -gt 0 ]; do
  case "$1" in
    --no-llama) llama=0 && shift && continue ;;
    --llama-only | --no-torch) torch=0 && shift && continue ;;
    --no-quant) quant=0 && shift && continue ;;
    --no-long) long=0 && shift && continue ;;
    --no-stories) stories=0 && shift && continue ;;
    --no-busy) busy=0 && shift && continue ;;
    --no-model) model=0 && shift && continue ;;
    --model-types)
      [[ ${2-} =~ ^(f32|bf16|q8_0|q4_k_m)(,(f32|bf16|q8_0|q4_k_m))*$ ]] || usage
      model_types=$2 && shift 2 && continue
      ;;
    --save)
      [ -n "${2-}" ] || usage
      save=$2 && shift 2 && continue
      ;;
    --before-bin)
      [ -x "${2-}" ] || usage
      before_bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") && shift 2 && continue
      ;;
    --ik-bin)
      [ -n "${2-}" ] || usage
      ik_bin=$2 && shift 2 && continue
      ;;
    --long)
      [[ ${2-} =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || usage
      long_depths=$2 && shift 2 && continue
      ;;
    --llama-bin)
      [ -d "${2-}" ] || usage
      llama_bin=$(cd "$2" && pwd) && shift 2 && continue
      ;;
    --threads) threads=${2-} ;;
    --prefill) prefill=${2-} ;;
    --steps) steps=${2-} ;;
    --rounds) rounds=${2-} ;;
    --long-rounds) long_rounds=${2-} ;;
    --ntg) ntg=${2-} ;;
    *) usage ;;
  esac
  [[ ${2-} =~ ^[1-9][0-9]*$ ]] || usage
  shift 2
done
[ -n "$ntg" ] || ntg=$((steps < 32 ? steps : 32))
[ "$long" = 0 ] || [ "$llama" = 0 ] || for d in ${long_depths//,/ }; do
  ((d >= prefill)) || { echo "compare.sh: --long $d: each depth must be at least --prefill" \
    "$prefill (attn-cli fills it with prefills of P positions)" >&2 && exit 2; }
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=/usr/bin/python3
cli=./build/apps/attn-cli
start=$SECONDS
tmp=$(mktemp -d)
trap '[ -z "$save" ] || { mkdir -p "$save" && cp -r "$tmp"/. "$save"; }; rm -rf "$tmp"' EXIT

if [ ! -x "$cli" ]; then
  echo "== building attn-cli" >&2
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build build -j2 >&2
fi

# -- parts 1 and 2: attn-cli against PyTorch eager
torch_part() {
shape=(--threads "$threads" --prefill "$prefill" --steps "$steps")
echo "== attn-cli bench ${shape[*]}" >&2
"$cli" bench --json "${shape[@]}" >"$tmp/bench_cli.json"
echo "== attn-cli bench --weight-types bf16 ${shape[*]}" >&2
"$cli" bench --json --weight-types bf16 "${shape[@]}" >"$tmp/bench_cli_bf16.json"
echo "== bench/torch_layer.py --dtype float32 ${shape[*]}" >&2
"$py" bench/torch_layer.py --json --dtype float32 "${shape[@]}" >"$tmp/bench_torch.json"
echo "== bench/torch_layer.py --dtype bfloat16 ${shape[*]}" >&2
"$py" bench/torch_layer.py --json --dtype bfloat16 "${shape[@]}" >"$tmp/bench_torch_bf16.json"

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


def load(name):
    with open(f"{tmp}/{name}") as f:
        return json.load(f)


c, c_bf16, t, tb = (load(f"bench_{n}.json") for n in ("cli", "cli_bf16", "torch", "torch_bf16"))
times = {n: sorted(float(s) * 1e3 for s in open(f"{tmp}/{n}.times")) for n in ("cli", "torch")}
first = c["weight_types"][0]["weight_type"]  # what c's top-level figures describe
types = {w["weight_type"]: w for w in c["weight_types"]}


def cpu_model():
    with open("/proc/cpuinfo") as f:
        return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")


def table(head, rows, left=1, indent=""):
    """Prints head and rows (lists of strings) in columns, the first `left` ones left-aligned."""
    w = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    for r in [head] + rows:
        cells = (f"{s:<{w[i]}}" if i < left else f"{s:>{w[i]}}" for i, s in enumerate(r))
        print((indent + "  ".join(cells)).rstrip())


def times_x(r):
    return f"{r:.2f}x" if r else ""


def vs_f32(w, key):
    """w's decode_vs_first or prefill_vs_first as a ratio to F32's, same rounds."""
    return w[key] / types["F32"][key]


# -- the layer, attn-cli (its first weight type) vs torch F32 and BF16, and the notebook process
rows = []


def row(name, fmt, cli, torch_f32, torch_bf16=None, faster=None, faster_bf16=None):
    cells = (fmt.format(v) if v is not None else "" for v in (cli, torch_f32, torch_bf16))
    rows.append([name, *cells, times_x(faster), times_x(faster_bf16)])


def layer_row(name, key, fmt, faster=None):
    """A row for the three layer runs; faster: None, "time" (torch / attn-cli) or "rate"."""
    ratios = [None, None]
    if faster:
        ratios = [x[key] / c[key] if faster == "time" else c[key] / x[key] for x in (t, tb)]
    row(name, fmt, c[key], t[key], tb[key], *ratios)


def spread(x):
    return f"{x['decode_ms_p10']:.1f} .. {x['decode_ms_p90']:.1f}"


print(f"One Llama-3-8B layer, batch 1: prefill {c['prefill_positions']} positions, "
      f"{c['decode_steps']} decode steps (median step); attn-cli with {first} weights, "
      f"torch with float32 and with bfloat16 (model.to)\n")
layer_row("prefill ms", "prefill_ms", "{:.1f}", "time")
layer_row("prefill positions/s", "prefill_positions_per_s", "{:.1f}")
layer_row("prefill GFLOP/s", "prefill_gflops", "{:.1f}")
layer_row("decode ms/step (median)", "decode_ms_median", "{:.2f}")
row("decode ms/step p10 .. p90", "{}", spread(c), spread(t), spread(tb))
layer_row("decode steps/s", "decode_steps_per_s", "{:.2f}", "rate")
layer_row("decode GB/s of its weights", "decode_gbs", "{:.2f}")
row(f"  of stream read {c['stream_gbs']:.1f} GB/s", "{:.0%}", c["decode_gbs"] / c["stream_gbs"],
    t["decode_gbs"] / c["stream_gbs"])
for label, f in (("best", min), ("median", statistics.median)):
    row(f"notebook process, {label} ms", "{:.1f}", f(times["cli"]), f(times["torch"]),
        faster=f(times["torch"]) / f(times["cli"]))
table(["", f"attn-cli {first}", f"torch {t['torch_version']} F32", "torch BF16",
       "attn-cli faster than torch F32", "than torch BF16"], rows)

# -- attn-cli per weight type
print(f"\nattn-cli by weight type, decode steps of all types interleaved in the same rounds "
      f"(FMA peak: {c['fma_isa']} {c['fma_peak_gflops']:.1f} GFLOP/s):")
table(["type", "weights MB", "prefill pos/s", "GFLOP/s", "of FMA peak", "decode steps/s", "GB/s",
       "stream GB/s", "of stream", "decode vs F32", "prefill vs F32"],
      [[w["weight_type"], f"{w['weight_bytes'] / 1e6:.1f}", f"{w['prefill_positions_per_s']:.1f}",
        f"{w['prefill_gflops']:.1f}", f"{w['prefill_fraction_of_fma_peak']:.0%}",
        f"{w['decode_steps_per_s']:.2f}", f"{w['decode_gbs']:.2f}", f"{w['stream_gbs']:.2f}",
        f"{w['decode_fraction_of_stream']:.0%}",
        times_x(vs_f32(w, "decode_vs_first")) if "F32" in types else "",
        times_x(vs_f32(w, "prefill_vs_first")) if "F32" in types else ""]
       for w in c["weight_types"]])

print(f"\nattn-cli decode of B sequences at once, same rounds (kernels: {c['matmul_isa']}; "
      f"stream read: {c['stream_pattern']}):")
for w in c["weight_types"]:
    print(f"  {w['weight_type']} weights:")
    table(["B", "ms/step", "p10 .. p90", "steps/s", "tokens/s", "step vs B=1"],
          [[str(d["batch"]), f"{d['ms_median']:.2f}", f"{d['ms_p10']:.2f} .. {d['ms_p90']:.2f}",
            f"{d['steps_per_s']:.2f}", f"{d['tokens_per_s']:.1f}", f"{d['step_vs_batch1']:.2f}x"]
           for d in w["batched_decode"]], left=0, indent="  ")

# -- issue 10's targets: each check returns (goal met or None, measured, same-run reference)
# and raises KeyError naming a weight type or batch size this run did not produce.
targets = []


def target(name, check, *args):
    try:
        ok, measured, reference = check(*args)
        status = "" if ok is None else "PASS" if ok else "MISS"
    except KeyError as e:
        status, measured, reference = "n/a", f"{e.args[0]} not run", ""
    targets.append([status, name, measured, reference])


def rate_vs_f32(wt, goal, ratio, rate, unit):
    """wt's rate against F32's in the same rounds: ratio is the *_vs_first key, rate the figure."""
    w, f32 = types[wt], types["F32"]
    r = vs_f32(w, ratio)
    return (r >= goal, f"{r:.2f}x ({w[rate]:.2f} {unit})", f"F32 {f32[rate]:.2f} {unit}")


def decode_of_stream(wt, goal):
    w = types[wt]
    r = w["decode_fraction_of_stream"]
    return (r >= goal, f"{r:.0%} ({w['decode_gbs']:.2f} GB/s)",
            f"its stream read {w['stream_gbs']:.2f} GB/s of {w['weight_bytes'] / 1e6:.1f} MB")


def rss_bf16_only(slack_mb):
    # peak_rss_mb is ru_maxrss in KiB / 1024 (MiB); kv_cache_mb and the rest are 1e6 bytes.
    rss = c_bf16["peak_rss_mb"] * 2**20 / 1e6
    w, kv = c_bf16["weight_bytes"] / 1e6, c_bf16["kv_cache_mb"]
    wt = c_bf16["weight_types"][0]["weight_type"]
    return (rss <= w + kv + slack_mb,
            f"{rss:.1f} MB = {c_bf16['peak_rss_mb']:.1f} MiB ({wt}-only process)",
            f"weights {w:.1f} + KV cache {kv:.1f} + {slack_mb} = {w + kv + slack_mb:.1f} MB")


def batches(wt):
    return {f"B={d['batch']}": d for d in types[wt]["batched_decode"]}


def batched_step(wt, bs, goal):
    b = batches(wt)
    steps = [b[f"B={n}"]["step_vs_batch1"] for n in bs]
    return (max(steps) <= goal, ", ".join(f"B={n} {s:.2f}x" for n, s in zip(bs, steps)),
            f"B=1 {b['B=1']['ms_median']:.2f} ms/step")


def batched_tokens(wt, n, goal):
    b = batches(wt)
    r = b[f"B={n}"]["tokens_per_s"] / b["B=1"]["tokens_per_s"]
    return (r >= goal, f"{r:.1f}x ({b[f'B={n}']['tokens_per_s']:.1f} tokens/s)",
            f"B=1 {b['B=1']['tokens_per_s']:.1f} tokens/s")


def prefill_of_fma(wt, goal):
    w = types[wt]
    r = w["prefill_fraction_of_fma_peak"]
    return (r >= goal, f"{r:.0%} ({w['prefill_gflops']:.1f} GFLOP/s)",
            f"{c['fma_isa']} FMA peak {c['fma_peak_gflops']:.1f} GFLOP/s")


def prefill_vs_torch(wt, x, goal):
    w = types[wt]
    r = x["prefill_ms"] / w["prefill_ms"]
    return (r >= goal if goal else None, f"{r:.2f}x ({w['prefill_ms']:.1f} ms)",
            f"torch {x['dtype']} {x['prefill_ms']:.1f} ms")


for wt in ("BF16", "F16"):
    target(f"{wt} decode steps/s >= 1.8x F32", rate_vs_f32, wt, 1.8, "decode_vs_first",
           "decode_steps_per_s", "steps/s")
    target(f"{wt} decode >= 85% of its stream read", decode_of_stream, wt, 0.85)
    target(f"{wt} prefill >= 0.95x F32", rate_vs_f32, wt, 0.95, "prefill_vs_first",
           "prefill_positions_per_s", "positions/s")
target("BF16-only peak RSS <= weights + KV cache + 64 MB", rss_bf16_only, 64)
target("F32 batched step B=2,4,8,16 <= 1.25x B=1", batched_step, "F32", (2, 4, 8, 16), 1.25)
target("F32 batched tokens/s B=16 >= 12x B=1", batched_tokens, "F32", 16, 12)
target("F32 prefill >= 85% of FMA peak", prefill_of_fma, "F32", 0.85)
target("F32 prefill >= 1.25x PyTorch F32", prefill_vs_torch, "F32", t, 1.25)
target("  F32 prefill vs PyTorch BF16 (shown only)", prefill_vs_torch, "F32", tb, None)
target("  BF16 prefill vs PyTorch BF16 (shown only)", prefill_vs_torch, "BF16", tb, None)

cpu = cpu_model()
print(f"\nissue 10 targets ({cpu}; OpenBLAS core {c['openblas_core']}; "
      f"attn-cli kernels {c['matmul_isa']}, {c['threads']} threads):")
table(["", "target", "measured", "same-run reference"], targets, left=4)

print(f"\nnotebook process: attn-cli run x{len(times['cli'])}, torch_notebook.py "
      f"x{len(times['torch'])}, timed with {timer}")
print(f"CPU: {cpu}; OPENBLAS_CORETYPE={coretype}; OpenBLAS core: attn-cli {c['openblas_core']}, "
      f"torch {t['openblas_core']} (BLAS_INFO={t['blas_info']})")
print(f"threads: attn-cli {c['threads']}, torch {t['threads']} (OpenBLAS {t['openblas_threads']}); "
      f"peak RSS MB: attn-cli {c['peak_rss_mb']:.0f} (all types), "
      f"{c_bf16['peak_rss_mb']:.0f} (BF16 only), torch {t['peak_rss_mb']:.0f} (float32), "
      f"{tb['peak_rss_mb']:.0f} (bfloat16)")
print(f"date: {date}; compare took {took} s")
EOF
}

# -- parts 3-5: attn-cli against llama.cpp
llama_part() {
  local lbin lsrc rc=0 cache r i k t first model c_ctx d
  local -a ggufs types=(f32 bf16 f16) depths
  echo "== bench/llama_cpp.sh (builds llama.cpp once; long the first time)" >&2
  lbin=$(bench/llama_cpp.sh) || rc=$?
  if [ "$rc" = 3 ]; then
    echo "compare.sh: llama.cpp could not be fetched (npm or its registry unreachable); the" \
      "llama.cpp comparison is skipped"
    return 0
  elif [ "$rc" != 0 ]; then
    echo "compare.sh: bench/llama_cpp.sh failed (exit $rc)" >&2
    return "$rc"
  fi
  lsrc=$(bench/llama_cpp.sh --src)
  cache=${lbin%/build/bin}
  [ "$quant" = 0 ] || types+=(q8_0 q4_k_m)
  echo "== bench/gguf_layer.py (cached in $cache/gguf)" >&2
  "$py" bench/gguf_layer.py --llama-src "$lsrc" --out "$cache/gguf" \
    --types "$(IFS=,; echo "${types[*]}")" --quantize "$lbin/llama-quantize" >"$tmp/ggufs"
  mapfile -t ggufs <"$tmp/ggufs"
  IFS=, read -r -a depths <<<"$long_depths"
  [ "$long" = 1 ] || depths=()
  # --compute bf16 needs AVX512-BF16 (attn-cli refuses it otherwise)
  local compute_bf16=0
  grep -qw avx512_bf16 /proc/cpuinfo && compute_bf16=1
  # --compute q8 needs AVX512-VNNI (attn-cli refuses it otherwise)
  local compute_q8=0
  grep -qw avx512_vnni /proc/cpuinfo && compute_q8=1
  # batched-bench's context: every sequence's prompt and tokens (the KV cache is per sequence)
  c_ctx=$((16 * (prefill + ntg)))
  local -a cli_shape=(--threads "$threads" --prefill "$prefill" --steps "$steps")
  local load0
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  : >"$tmp/failed"

  # tool NAME: llama.cpp's program NAME, from --llama-bin when it has it
  tool() {
    if [ -n "$llama_bin" ] && [ -x "$llama_bin/$1" ]; then echo "$llama_bin/$1"; else echo "$lbin/$1"; fi
  }
  # llama OUT CMD...: one llama.cpp program, stdout into OUT; a failure (a crash in its AMX
  # kernels on some KVM guests) is recorded in $tmp/failed and leaves OUT absent
  llama() {
    local out=$1 status=0
    shift
    echo "== ${*##*/}" >&2
    "$@" >"$out.part" 2>"$out.log" || status=$?
    if [ "$status" = 0 ]; then
      mv "$out.part" "$out"
    else
      tail -n 5 "$out.log" >&2
      echo "${1##*/} ${*:2} (exit $status)" >>"$tmp/failed"
      rm -f "$out.part"
    fi
  }
  # batched OUT NPL ARGS...: llama-batched-bench -npl NPL ARGS into OUT (llama's), once more
  # when a B of NPL has no row in a run that did not fail (seen twice in small runs on a loaded
  # machine; its log goes to stderr)
  batched() {
    local out=$1 npl=$2 try
    shift 2
    for try in 1 2; do
      llama "$out" "$(tool llama-batched-bench)" "$@" -npl "$npl" -pps --output-format jsonl
      [ -f "$out" ] || return 0
      [ "$(cat "$out" "$out.log" | grep -o '{"n_kv_max"' | wc -l)" -lt "$(echo "${npl//,/ }" | wc -w)" ] ||
        return 0
      echo "compare.sh: llama-batched-bench -npl $npl gave fewer rows (try $try); its log:" >&2
      cat "$out" "$out.log" >&2
    done
  }
  # run_cli NAME ARGS...: one attn-cli bench process, its JSON in $tmp/NAME.json
  run_cli() {
    local name=$1
    shift
    echo "== attn-cli bench --json $*" >&2
    "$cli" bench --json "$@" >"$tmp/$name.json"
    if [ -n "$before_bin" ] && [[ $name != cli.long* ]]; then
      echo "== before: $before_bin bench --json $*" >&2
      "$before_bin" bench --json "$@" >"$tmp/before.${name#cli.}.json"
    fi
  }
  # run_llama NAME MODEL NPL: llama-bench's prefill and decode rows and batched-bench's (-npl
  # NPL), into $tmp/NAME.pp.json, NAME.tg.json, NAME.bb.jsonl
  run_llama() {
    local name=$1 model=$2 npl=$3
    # -embd 1: every position's output is kept, so the layer's FFN runs on all P rows. Without
    # it llama.cpp keeps only the last position's row from the last layer's attention on (its
    # logits are all a prompt needs): a one-layer prefill then skips 80% of its products and
    # ran 3.1x faster (pp128 F32, Zen 3).
    llama "$tmp/$name.pp.json" "$(tool llama-bench)" -m "$model" -t "$threads" -p "$prefill" \
      -n 0 -r 3 -embd 1 -o json
    llama "$tmp/$name.tg.json" "$(tool llama-bench)" -m "$model" -t "$threads" -p 0 -n "$steps" \
      -d "$prefill" -r 1 -o json
    batched "$tmp/$name.bb.jsonl" "$npl" -m "$model" -t "$threads" -c "$c_ctx" -npp "$prefill" \
      -ntg "$ntg"
  }

  # Rounds: per weight type, attn-cli and llama.cpp take turns, attn-cli first on even turns.
  k=0
  for ((r = 1; r <= rounds; r++)); do
    for i in "${!types[@]}"; do
      t=${types[i]} model=${ggufs[i]}
      echo "== round $r of $rounds, ${t^^} weights" >&2
      local -a weights=(--weight-types "$t")
      local npl=1,2,4,8,16
      if [[ $t == q* ]]; then weights=(--weights "$model") npl=1,4,16; fi
      if ((k++ % 2 == 0)); then first=cli; else first=llama; fi
      if [ "$first" = cli ]; then run_cli "cli.$t.$r" "${cli_shape[@]}" "${weights[@]}"; fi
      run_llama "llama.$t.$r" "$model" "$npl"
      if [ "$first" = llama ]; then run_cli "cli.$t.$r" "${cli_shape[@]}" "${weights[@]}"; fi
      if [ "$t" = bf16 ] && [ "$compute_bf16" = 1 ]; then
        run_cli "cli.bf16c.$r" "${cli_shape[@]}" --weight-types bf16 --compute bf16
      fi
      if [[ $t == q* ]] && [ "$compute_q8" = 1 ]; then
        run_cli "cli.${t}c.$r" "${cli_shape[@]}" "${weights[@]}" --compute q8
      fi
    done
  done
  # Long context, BF16 file: each tool fills its cache to depth D (attn-cli once for B = 1 and
  # 4, llama-bench and batched-bench once each), the tools taking turns.
  for ((r = 1; r <= long_rounds; r++)); do
    for d in "${depths[@]}"; do
      echo "== long context round $r of $long_rounds, depth $d" >&2
      if ((k++ % 2 == 0)); then first=cli; else first=llama; fi
      local -a long_cli=(--threads "$threads" --prefill "$prefill" --steps "$ntg" --depth "$d"
        --max-batch 4 --max-seq-len $((d + ntg)) --weights "${ggufs[1]}")
      if [ "$first" = cli ]; then run_cli "cli.long$d.$r" "${long_cli[@]}"; fi
      llama "$tmp/llama.long$d.$r.tg.json" "$(tool llama-bench)" -m "${ggufs[1]}" -t "$threads" \
        -p 0 -n "$ntg" -d "$d" -r 1 -o json
      batched "$tmp/llama.long$d.$r.bb.jsonl" 4 -m "${ggufs[1]}" -t "$threads" \
        -c $((4 * (d + ntg))) -npp "$d" -ntg "$ntg"
      if [ "$first" = llama ]; then run_cli "cli.long$d.$r" "${long_cli[@]}"; fi
    done
  done
  # stories260K, whole processes: attn-cli generate and llama-simple take turns.
  local n_stories=0 t0 t1
  [ "$stories" = 0 ] || n_stories=$((3 * rounds))
  for ((r = 1; r <= n_stories; r++)); do
    echo "== stories260K run $r of $n_stories: attn-cli generate, llama-simple" >&2
    t0=$(date +%s%N)
    "$cli" generate -m weights/stories260K.gguf -p "Once upon a time" -n 400 -t "$threads" \
      >"$tmp/stories.cli.$r.out" 2>"$tmp/stories.cli.$r.err"
    t1=$(date +%s%N)
    echo "$(((t1 - t0) / 1000))" >"$tmp/stories.cli.$r.us"
    t0=$(date +%s%N)
    llama "$tmp/stories.llama.$r.out" "$(tool llama-simple)" -m weights/stories260K.gguf -n 400 \
      "Once upon a time"
    t1=$(date +%s%N)
    echo "$(((t1 - t0) / 1000))" >"$tmp/stories.llama.$r.us"
  done

  "$py" bench/compare_report.py "$tmp" "$rounds" "$compute_bf16" "${OPENBLAS_CORETYPE-unset}" \
    "$lsrc" "$c_ctx" "$(date -R)" "$((SECONDS - start))" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    "${types[*]}" "${depths[*]}" "$long_rounds" "$n_stories" "$threads" \
    "${llama_bin:-$lbin}" "$ntg" "$before_bin" "$compute_q8"
}

# -- part 6: the busy scenario
busy_part() {
  echo
  echo "The busy scenario: bench/busy.sh (another process spinning on one core)"
  bench/busy.sh build 2>&1
}

# -- part 7: ik_llama.cpp's llama-bench beside llama.cpp's on the layer files
ik_part() {
  local lbin lsrc rc=0 cache ik t f r rtr
  local -a files types=(f32 bf16 f16)
  [ "$quant" = 0 ] || types+=(q8_0 q4_k_m)
  echo
  if [ -z "$ik_bin" ] || [ ! -x "$ik_bin/llama-bench" ]; then
    echo "ik_llama.cpp: skipped (${ik_bin:+no llama-bench in $ik_bin; }--ik-bin DIR: a build of" \
      "ikawrakow/ik_llama.cpp, made as bench/whole_model.sh's header says)"
    return 0
  fi
  ik=$(cd "$ik_bin" && pwd)/llama-bench
  lbin=$(bench/llama_cpp.sh) || rc=$?
  if [ "$rc" != 0 ]; then
    echo "ik_llama.cpp: skipped (no llama.cpp build for the layer files)"
    return 0
  fi
  lsrc=$(bench/llama_cpp.sh --src)
  cache=${lbin%/build/bin}
  "$py" bench/gguf_layer.py --llama-src "$lsrc" --out "$cache/gguf" \
    --types "$(IFS=,; echo "${types[*]}")" --quantize "$lbin/llama-quantize" >"$tmp/ik_ggufs"
  mapfile -t files <"$tmp/ik_ggufs"
  local lb=$lbin/llama-bench
  [ -z "$llama_bin" ] || [ ! -x "$llama_bin/llama-bench" ] || lb=$llama_bin/llama-bench
  for ((r = 1; r <= rounds; r++)); do
    for i in "${!types[@]}"; do
      t=${types[i]} f=${files[i]}
      echo "== ik_llama.cpp round $r of $rounds, ${t^^}: llama.cpp, ik, ik -rtr 1" >&2
      "$lb" -m "$f" -t "$threads" -p 0 -n "$steps" -r 2 -o json \
        >"$tmp/ikl.$t.$r.json" 2>"$tmp/ikl.$t.$r.log" || rm -f "$tmp/ikl.$t.$r.json"
      for rtr in 0 1; do
        "$ik" -m "$f" -t "$threads" -p 0 -n "$steps" -r 2 -rtr "$rtr" -o json \
          >"$tmp/ik$rtr.$t.$r.json" 2>"$tmp/ik$rtr.$t.$r.log" || rm -f "$tmp/ik$rtr.$t.$r.json"
      done
    done
  done
  "$py" - "$tmp" "$rounds" "$steps" "$threads" "$(git -C "$ik_bin/../.." rev-parse --short HEAD \
    2>/dev/null || git -C "$ik_bin/../../src" rev-parse --short HEAD 2>/dev/null || echo '?')" "${types[@]}" <<'EOF'
import json, statistics, sys
tmp, rounds, steps, threads, commit = sys.argv[1:6]
types = sys.argv[6:]


def ts(path):
    try:
        return json.load(open(path))[0]["avg_ts"]
    except (OSError, ValueError, IndexError, KeyError):
        return None


def cell(name, t):
    v = [x for x in (ts(f"{tmp}/{name}.{t}.{r}.json") for r in range(1, int(rounds) + 1)) if x]
    return f"{statistics.median(v):.1f}" if v else "failed"


print(f"ik_llama.cpp ({commit}) beside llama.cpp on the layer files: decode tokens/s, "
      f"llama-bench -p 0 -n {steps} -r 2 -t {threads} (depth 0), medians of {rounds} round(s)")
print()
print("| weights | llama.cpp | ik_llama.cpp | ik_llama.cpp -rtr 1 |")
print("|---|---:|---:|---:|")
for t in types:
    print(f"| {t.upper()} | {cell('ikl', t)} | {cell('ik0', t)} | {cell('ik1', t)} |")
EOF
}

# -- part 8: the whole model, bench/whole_model.sh's table
model_part() {
  echo
  bench/whole_model.sh --threads "$threads" --types "$model_types" --rounds "$rounds" \
    ${ik_bin:+--ik-bin "$ik_bin"} ${llama_bin:+--llama-bin "$llama_bin"}
}

if [ "$torch" = 1 ]; then
  if "$py" -c 'import torch' 2>/dev/null; then
    torch_part
  else
    echo "compare.sh: $py can't import torch (Debian: apt install python3-torch); the PyTorch" \
      "comparison is skipped" >&2
  fi
fi
if [ "$llama" = 1 ]; then
  [ "$torch" = 0 ] || echo
  llama_part
fi
if [ "$busy" = 1 ]; then
  busy_part
fi
if [ "$llama" = 1 ]; then
  ik_part
fi
if [ "$llama" = 1 ] && [ "$model" = 1 ]; then
  model_part
fi
