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
#      as GGUF by bench/gguf_layer.py): per weight type F32, BF16, F16 and per round,
#      `attn-cli bench --weight-types T` and llama.cpp's `llama-bench` (prefill P: -p P -n 0
#      -embd 1, every position through the whole layer, best of 3 repetitions; decode at depth P: -p 0 -n N -d P, one repetition) and
#      `llama-batched-bench` (-npp P -ntg G -npl 1,2,4,8,16 -pps, S_TG t/s) take turns (the
#      order swapped every other time), then `attn-cli bench --compute bf16 --weight-types bf16`
#      (on CPUs with AVX512-BF16) next to llama.cpp's BF16 rows. Each tool's figure is its best
#      round. One markdown table: | | attn-cli | llama.cpp | ratio |, ratio = attn-cli/llama.cpp.
#      Skipped with a message when llama.cpp can't be built because npm is unreachable.
# Usage: bench/compare.sh [--threads T] [--prefill P] [--steps N] [--rounds R] [--ntg G] [--no-llama] [--llama-only|--no-torch]   (defaults 2, 512, 128, 3, min(32, N))
# Progress and the tools' own logs go to stderr, the tables to stdout; parts 1-2 end with issue
# 10's targets, each PASS or MISS against figures of this same run (a MISS does not change the
# exit status). Parts 1-2 are skipped with a message when /usr/bin/python3 can't import torch.
# Exit status is non-zero if any benchmark fails. OPENBLAS_CORETYPE is passed through untouched
# and reported.
set -Eeuo pipefail
trap 'echo "compare.sh: failed: $BASH_COMMAND" >&2' ERR

usage() {
  sed -n 's/^# \{0,1\}Usage: //p' "$0" >&2
  exit 2
}

threads=2 prefill=512 steps=128 rounds=3 ntg="" torch=1 llama=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-llama) llama=0 && shift && continue ;;
    --llama-only | --no-torch) torch=0 && shift && continue ;;
    --threads) threads=${2-} ;;
    --prefill) prefill=${2-} ;;
    --steps) steps=${2-} ;;
    --rounds) rounds=${2-} ;;
    --ntg) ntg=${2-} ;;
    *) usage ;;
  esac
  [[ ${2-} =~ ^[1-9][0-9]*$ ]] || usage
  shift 2
done
[ -n "$ntg" ] || ntg=$((steps < 32 ? steps : 32))

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

# -- part 3: attn-cli against llama.cpp
llama_part() {
  local lbin lsrc rc=0 cache r i k t first model c_ctx
  local -a ggufs types=(f32 bf16 f16)
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
  echo "== bench/gguf_layer.py (cached in $cache/gguf)" >&2
  "$py" bench/gguf_layer.py --llama-src "$lsrc" --out "$cache/gguf" --types f32,bf16,f16 \
    >"$tmp/ggufs"
  mapfile -t ggufs <"$tmp/ggufs"
  # --compute bf16 needs AVX512-BF16 (attn-cli refuses it otherwise)
  local compute_bf16=0
  grep -qw avx512_bf16 /proc/cpuinfo && compute_bf16=1
  # batched-bench's context: every sequence's prompt and tokens (the KV cache is per sequence)
  c_ctx=$((16 * (prefill + ntg)))
  local -a cli_shape=(--threads "$threads" --prefill "$prefill" --steps "$steps")
  local load0
  load0=$(cut -d' ' -f1-3 /proc/loadavg)

  # run_cli NAME ARGS...: one attn-cli bench process, its JSON in $tmp/NAME.json
  run_cli() {
    local name=$1
    shift
    echo "== attn-cli bench --json ${cli_shape[*]} $*" >&2
    "$cli" bench --json "${cli_shape[@]}" "$@" >"$tmp/$name.json"
  }
  # run_llama NAME MODEL: llama-bench's prefill and decode rows and batched-bench's, into
  # $tmp/NAME.pp.json, NAME.tg.json, NAME.bb.jsonl
  run_llama() {
    local name=$1 model=$2
    # -embd 1: every position's output is kept, so the layer's FFN runs on all P rows. Without
    # it llama.cpp keeps only the last position's row from the last layer's attention on (its
    # logits are all a prompt needs): a one-layer prefill then skips 80% of its products and
    # ran 3.1x faster (pp128 F32, Zen 3).
    echo "== llama-bench -m ${model##*/} -t $threads -p $prefill -n 0 -r 3 -embd 1" >&2
    "$lbin/llama-bench" -m "$model" -t "$threads" -p "$prefill" -n 0 -r 3 -embd 1 -o json \
      >"$tmp/$name.pp.json"
    echo "== llama-bench -m ${model##*/} -t $threads -p 0 -n $steps -d $prefill -r 1" >&2
    "$lbin/llama-bench" -m "$model" -t "$threads" -p 0 -n "$steps" -d "$prefill" -r 1 -o json \
      >"$tmp/$name.tg.json"
    echo "== llama-batched-bench -m ${model##*/} -t $threads -c $c_ctx -npp $prefill" \
      "-ntg $ntg -npl 1,2,4,8,16 -pps" >&2
    "$lbin/llama-batched-bench" -m "$model" -t "$threads" -c "$c_ctx" -npp "$prefill" \
      -ntg "$ntg" -npl 1,2,4,8,16 -pps --output-format jsonl >"$tmp/$name.bb.log" 2>&1 || {
      cat "$tmp/$name.bb.log" >&2
      return 1
    }
    grep '^{"n_kv_max"' "$tmp/$name.bb.log" >"$tmp/$name.bb.jsonl"
  }

  # Rounds: per weight type, attn-cli and llama.cpp take turns, attn-cli first on even turns.
  k=0
  for ((r = 1; r <= rounds; r++)); do
    for i in 0 1 2; do
      t=${types[i]} model=${ggufs[i]}
      echo "== round $r of $rounds, ${t^^} weights" >&2
      if ((k++ % 2 == 0)); then first=cli; else first=llama; fi
      if [ "$first" = cli ]; then run_cli "cli.$t.$r" --weight-types "$t"; fi
      run_llama "llama.$t.$r" "$model"
      if [ "$first" = llama ]; then run_cli "cli.$t.$r" --weight-types "$t"; fi
      if [ "$t" = bf16 ] && [ "$compute_bf16" = 1 ]; then
        run_cli "cli.bf16c.$r" --weight-types bf16 --compute bf16
      fi
    done
  done

  "$py" - "$tmp" "$rounds" "$compute_bf16" "${OPENBLAS_CORETYPE-unset}" "$lsrc" "$c_ctx" \
    "$(date -R)" "$((SECONDS - start))" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, subprocess, sys

tmp, rounds, compute_bf16, coretype, lsrc, c_ctx, date, took, load0, load1 = sys.argv[1:]
rounds, compute_bf16 = int(rounds), compute_bf16 == "1"
R = range(1, rounds + 1)
BATCHES = (1, 2, 4, 8, 16)


def load(name):
    with open(f"{tmp}/{name}") as f:
        return json.load(f)


def cli(t, r):
    return load(f"cli.{t}.{r}.json")


def lb_test(name):
    """llama-bench's one test of a -o json run."""
    tests = load(name)
    assert len(tests) == 1, name
    return tests[0]


def bb_rows(name):
    with open(f"{tmp}/{name}") as f:
        return {j["pl"]: j for j in map(json.loads, f)}


def best(values):
    return max(values)


# figures: (label, attn-cli rate, llama.cpp rate), each the best of the rounds
rows = []
for t in ("f32", "bf16", "f16"):
    w = lambda r: cli(t, r)["weight_types"][0]  # noqa: E731
    pp = best(w(r)["prefill_positions_per_s"] for r in R)
    lpp = best(max(lb_test(f"llama.{t}.{r}.pp.json")["samples_ts"]) for r in R)
    p = cli(t, 1)["prefill_positions"]
    rows.append((f"prefill {p}, {t.upper()} weights (positions/s)", pp, lpp))
for t in ("f32", "bf16", "f16"):
    w = lambda r: cli(t, r)["weight_types"][0]  # noqa: E731
    tg = best(w(r)["decode_steps_per_s"] for r in R)
    ltg = best(lb_test(f"llama.{t}.{r}.tg.json")["avg_ts"] for r in R)
    p = cli(t, 1)["prefill_positions"]
    rows.append((f"decode at depth {p}, {t.upper()} (steps/s)", tg, ltg))
for t in ("f32", "bf16", "f16"):
    for b in BATCHES:
        ours = best(d["tokens_per_s"] for r in R for d in cli(t, r)["weight_types"][0]
                    ["batched_decode"] if d["batch"] == b)
        theirs = best(bb_rows(f"llama.{t}.{r}.bb.jsonl")[b]["speed_tg"] for r in R)
        rows.append((f"batched decode B={b}, {t.upper()} (tokens/s)", ours, theirs))
if compute_bf16:
    w = lambda r: load(f"cli.bf16c.{r}.json")["weight_types"][0]  # noqa: E731
    p = cli("bf16", 1)["prefill_positions"]
    rows.append((f"--compute bf16: prefill {p}, BF16 (positions/s)",
                 best(w(r)["prefill_positions_per_s"] for r in R),
                 best(max(lb_test(f"llama.bf16.{r}.pp.json")["samples_ts"]) for r in R)))
    for b in BATCHES:
        rows.append((f"--compute bf16: batched decode B={b}, BF16 (tokens/s)",
                     best(d["tokens_per_s"] for r in R for d in w(r)["batched_decode"]
                          if d["batch"] == b),
                     best(bb_rows(f"llama.bf16.{r}.bb.jsonl")[b]["speed_tg"] for r in R)))


def lscpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    f = dict(l.split(":", 1) for l in out.splitlines() if ":" in l)
    g = lambda k: f.get(k, "?").strip()  # noqa: E731
    return f"{g('Model name')} (family {g('CPU family')}, model {g('Model')})"


c0, lpp0, lbb0 = cli("f32", 1), lb_test("llama.f32.1.pp.json"), bb_rows("llama.f32.1.bb.jsonl")[1]
commit = subprocess.run(["git", "-C", lsrc, "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
print(f"attn-cli vs llama.cpp, one Llama-3-8B layer (dim 4096, 32 heads, 8 KV heads, FFN 14336), "
      f"{c0['threads']} threads; each tool's best of {rounds} round(s), the tools taking turns")
print(f"CPU: {lscpu()}; attn-cli {c0['version']}: kernels {c0['kernels']}, OpenBLAS core "
      f"{c0['openblas_core']}, OPENBLAS_CORETYPE={coretype}")
fa = {-1: "auto", 0: "off", 1: "on"}
print(f"llama.cpp: node-llama-cpp@3.22.1's sources (commit {commit}, GGML_NATIVE=ON), backend "
      f"{lpp0.get('backends', '?')}, cpu_info \"{lpp0.get('cpu_info', '?')}\", flash_attn "
      f"{fa.get(lpp0.get('flash_attn'), lpp0.get('flash_attn'))}, KV cache "
      f"{lpp0.get('type_k', '?')}/{lpp0.get('type_v', '?')}, n_batch {lpp0.get('n_batch', '?')}, "
      f"n_ubatch {lpp0.get('n_ubatch', '?')}; batched-bench -c {c_ctx} -pps -ntg {lbb0['tg']} "
      f"(flash_attn {fa.get(lbb0['flash_attn'], lbb0['flash_attn'])})")
print("the GGUF layer has the same shape and distribution as attn-cli's drawn layer, not its "
      "values (timing only)")
if not compute_bf16:
    print("--compute bf16 rows left out: this CPU has no AVX512-BF16 (attn-cli refuses it)")
print()
print("| | attn-cli | llama.cpp | ratio |")
print("|---|---:|---:|---:|")
for label, ours, theirs in rows:
    print(f"| {label} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x |")
print()
print("attn-cli: prefill the best of 3 passes, decode the median step of "
      f"{c0['decode_steps']}, batched the median step of each B at depth {c0['prefill_positions']}"
      f"; llama.cpp: llama-bench pp the best of 3 repetitions, tg the mean of "
      f"{lb_test('llama.f32.1.tg.json')['n_gen']} tokens after a {c0['prefill_positions']}-token "
      f"depth, batched-bench S_TG (B x {lbb0['tg']} tokens over their time, prompt shared)")
print(f"date: {date}; compare took {took} s; load average (1, 5, 15 min) {load0} before the "
      f"rounds, {load1} after (a shared machine: other work slows either tool)")
EOF
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
