#!/usr/bin/env bash
# A whole model, not one layer (issue 52): a drawn Llama-3.2-1B-shaped model (16 blocks, dim
# 2048, 32 heads, 8 KV heads, FFN 8192, vocabulary 128,256, tied embeddings: 1.24 G weights)
# written as GGUF by bench/gguf_model.py (BF16 drawn; Q8_0 and Q4_K_M made by llama.cpp's own
# llama-quantize from the F32 file, 4.9 GB, kept in the cache: the free disk is checked first),
# timed the same way by each tool on the same files, R rounds taking turns:
#   attn-cli   decode --tokens-file: a 512-token prompt then N steps fed one token each, B = 1
#              (prompt eval time: the time to the first token's logits) and B = 4 (4 sequences);
#   llama.cpp  llama-bench -p 512 -n 0 (TTFT = 512 / its pp512 rate), -p 0 -n N -d 512 (B = 1),
#              llama-batched-bench -npp 512 -ntg N -npl 1,4 -pps (B = 4: its S_TG);
#   ik_llama.cpp (--ik-bin DIR: a build of ikawrakow/ik_llama.cpp, see below) llama-bench -p 512
#              -n 0 and -p 0 -n N, by default and with -rtr 1 (run-time repacking); its -d is not
#              llama.cpp's, so its decode is at depth 0, and it has no batched row here.
# Peak RSS of every process (/usr/bin/time's maximum resident set). One markdown table on stdout:
#   | weights | file GB | tool | TTFT 512, ms | decode B=1, tokens/s | decode B=4, tokens/s |
#   peak RSS MB |, medians of the rounds, the CPU named and the load average before and after.
# ik_llama.cpp is not built here. From a checkout the user points at (git clone
# https://github.com/ikawrakow/ik_llama.cpp), CPU only, as the issue measured it:
#   cmake -S SRC -B SRC/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
#     -DGGML_CUDA=OFF && cmake --build SRC/build -j2 --target llama-bench
# then --ik-bin SRC/build/bin. Without --ik-bin (or with a folder lacking llama-bench) its rows
# are skipped with a message.
# Usage: bench/whole_model.sh [--threads T] [--types q8_0,q4_k_m,bf16] [--prompt P] [--steps N] [--rounds R] [--ik-bin DIR] [--llama-bin DIR] [--compute f32|bf16|q8]   (defaults 2, q8_0,q4_k_m,bf16, 512, 32, 1, f32)
# --compute C runs attn-cli with --compute C (its rows are labelled so); llama.cpp's are unchanged.
# ATTN_CLI=PATH times another attn-cli. f32 is a type too (4.9 GB, slow: not by default).
# Exit status 0 also when llama.cpp cannot be fetched (a message says so); non-zero when an
# attn-cli run fails.
set -Eeuo pipefail
trap 'echo "whole_model.sh: failed: $BASH_COMMAND" >&2' ERR

usage() {
  sed -n 's/^# \{0,1\}Usage: //p' "$0" >&2
  exit 2
}

threads=2 types=q8_0,q4_k_m,bf16 prompt=512 steps=32 rounds=1 ik_bin="" llama_bin="" compute=f32
while [ $# -gt 0 ]; do
  case "$1" in
    --ik-bin | --llama-bin)
      [ -n "${2-}" ] || usage
      if [ "$1" = --ik-bin ]; then ik_bin=$2; else llama_bin=$2; fi
      shift 2 && continue
      ;;
    --types)
      [[ ${2-} =~ ^(f32|bf16|q8_0|q4_k_m)(,(f32|bf16|q8_0|q4_k_m))*$ ]] || usage
      types=$2 && shift 2 && continue
      ;;
    --compute)
      [[ ${2-} =~ ^(f32|bf16|q8)$ ]] || usage
      compute=$2 && shift 2 && continue
      ;;
    --threads) threads=${2-} ;;
    --prompt) prompt=${2-} ;;
    --steps) steps=${2-} ;;
    --rounds) rounds=${2-} ;;
    *) usage ;;
  esac
  [[ ${2-} =~ ^[1-9][0-9]*$ ]] || usage
  shift 2
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=/usr/bin/python3
cli=${ATTN_CLI:-./build/apps/attn-cli}  # ATTN_CLI: another build
[ -x "$cli" ] || { echo "whole_model.sh: no $cli: build attn-cli first" >&2 && exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rc=0
lbin=$(bench/llama_cpp.sh) || rc=$?
if [ "$rc" = 3 ]; then
  echo "whole_model.sh: llama.cpp could not be fetched (npm or its registry unreachable):" \
    "no GGUF files and no llama.cpp rows; skipped"
  exit 0
elif [ "$rc" != 0 ]; then
  exit "$rc"
fi
[ -n "$llama_bin" ] || llama_bin=$lbin
lsrc=$(bench/llama_cpp.sh --src)
cache=${lbin%/build/bin}
ik=""
if [ -z "$ik_bin" ]; then
  echo "whole_model.sh: no --ik-bin: the ik_llama.cpp rows are skipped (this script's header" \
    "says how to build it)" >&2
elif [ -x "$ik_bin/llama-bench" ]; then
  ik=$(cd "$ik_bin" && pwd)/llama-bench
else
  echo "whole_model.sh: --ik-bin $ik_bin has no llama-bench: the ik_llama.cpp rows are skipped" \
    "(this script's header says how to build it)" >&2
fi

echo "== bench/gguf_model.py --shape llama-3.2-1b (cached in $cache/gguf)" >&2
"$py" bench/gguf_model.py --llama-src "$lsrc" --out "$cache/gguf" --shape llama-3.2-1b \
  --types "$types" --quantize "$lbin/llama-quantize" >"$tmp/ggufs"
mapfile -t ggufs <"$tmp/ggufs"
IFS=, read -r -a names <<<"$types"

# The prompts: BOS then ids drawn past the byte tokens, P + N per sequence (attn-cli feeds the
# last N as the decode steps), one sequence for B = 1 and four for B = 4.
"$py" - "$tmp" "$prompt" "$steps" <<'EOF'
import json, sys
import numpy as np
tmp, p, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(7)
seqs = [[1] + rng.integers(259, 128256, p + n - 1).tolist() for _ in range(4)]
json.dump(seqs[:1], open(f"{tmp}/ids1.json", "w"))
json.dump(seqs, open(f"{tmp}/ids4.json", "w"))
EOF

# timed OUT CMD...: CMD's stdout in OUT, its stderr in OUT.log, its peak RSS (KiB) in OUT.rss;
# a failure leaves OUT absent and is listed in $tmp/failed
: >"$tmp/failed"
timed() {
  local out=$1 status=0
  shift
  echo "== ${*##*/}" >&2
  /usr/bin/time -f %M -o "$out.rss" "$@" >"$out.part" 2>"$out.log" || status=$?
  if [ "$status" = 0 ]; then
    mv "$out.part" "$out"
  else
    tail -n 5 "$out.log" >&2
    echo "${1##*/} ${*:2} (exit $status)" >>"$tmp/failed"
    rm -f "$out.part"
  fi
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
start=$SECONDS
ctx=$((4 * (prompt + steps)))
for ((r = 1; r <= rounds; r++)); do
  for i in "${!names[@]}"; do
    t=${names[i]} f=${ggufs[i]}
    echo "== round $r of $rounds, ${t^^}" >&2
    for b in 1 4; do
      timed "$tmp/cli.$t.$b.$r" "$cli" decode -m "$f" --tokens-file "$tmp/ids$b.json" \
        -n "$steps" -t "$threads" --compute "$compute"
      [ -f "$tmp/cli.$t.$b.$r" ] || exit 1
    done
    timed "$tmp/llama.$t.pp.$r" "$llama_bin/llama-bench" -m "$f" -t "$threads" -p "$prompt" \
      -n 0 -r 1 -o json
    timed "$tmp/llama.$t.tg.$r" "$llama_bin/llama-bench" -m "$f" -t "$threads" -p 0 \
      -n "$steps" -d "$prompt" -r 1 -o json
    timed "$tmp/llama.$t.bb.$r" "$llama_bin/llama-batched-bench" -m "$f" -t "$threads" \
      -c "$ctx" -npp "$prompt" -ntg "$steps" -npl 1,4 -pps --output-format jsonl
    if [ -n "$ik" ]; then
      for rtr in 0 1; do
        timed "$tmp/ik$rtr.$t.pp.$r" "$ik" -m "$f" -t "$threads" -p "$prompt" -n 0 -r 1 \
          -rtr "$rtr" -o json
        timed "$tmp/ik$rtr.$t.tg.$r" "$ik" -m "$f" -t "$threads" -p 0 -n "$steps" -r 1 \
          -rtr "$rtr" -o json
      done
    fi
  done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

CLI_LABEL="attn-cli$([ "$compute" = f32 ] || echo " --compute $compute")" \
  "$py" - "$tmp" "$types" "$rounds" "$prompt" "$steps" "$threads" "$load0" "$load1" \
  "$((SECONDS - start))" "${ggufs[@]}" <<'EOF'
import json, os, re, statistics, sys
tmp, types, rounds, P, N, T, load0, load1, took = sys.argv[1:10]
files = sys.argv[10:]
types, rounds = types.split(","), int(rounds)


def read(path):
    return open(path).read() if os.path.exists(path) else None


def rss_mb(path):
    text = read(path + ".rss")
    return int(text.split()[-1]) / 1024 if text and os.path.exists(path) else None


def cli(t, b, r):
    """attn-cli decode's own lines: prompt eval ms, and tokens/s over the median step."""
    err = read(f"{tmp}/cli.{t}.{b}.{r}.log") or ""
    pe = re.search(r"prompt eval time = ([\d.]+) ms", err)
    step = re.search(r"median ([\d.]+)\)", err)
    if not pe or not step:
        return None
    return float(pe.group(1)), b * 1e3 / float(step.group(1)), rss_mb(f"{tmp}/cli.{t}.{b}.{r}")


def bench_ts(path):
    text = read(path)
    if not text:
        return None
    rows = json.loads(text)
    return rows[0]["avg_ts"] if rows else None


def batched(path, pl):
    for line in (read(path) or "").splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if row.get("pl") == pl:
                return row["speed_tg"]
    return None


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def cell(v, fmt):
    return "failed" if v is None else format(v, fmt)


def cpu():
    info = open("/proc/cpuinfo").read()
    get = lambda k: (re.search(rf"^{k}\s*: (.*)$", info, re.M) or [None, "?"])[1]
    return f"{get('model name')} (family {get('cpu family')}, model {get('model')})"


print(f"Whole model: a drawn Llama-3.2-1B shape (16 blocks, dim 2048, 32/8 heads, FFN 8192, "
      f"vocabulary 128,256, tied embeddings), prompt {P}, {N} decode steps, {T} threads, "
      f"{rounds} round(s), medians; {cpu()}")
print()
print("| weights | file GB | tool | TTFT {P}, ms | decode B=1, tokens/s | decode B=4, tokens/s "
      "| peak RSS MB |".replace("{P}", P))
print("|---|---:|---|---:|---:|---:|---:|")
R = range(1, rounds + 1)
for t, f in zip(types, files):
    gb = f"{os.path.getsize(f) / 1e9:.2f}"
    c1 = [cli(t, 1, r) for r in R]
    c4 = [cli(t, 4, r) for r in R]
    ok1, ok4 = [c for c in c1 if c], [c for c in c4 if c]
    print(f"| {t.upper()} | {gb} | {os.environ['CLI_LABEL']} | {cell(med([c[0] for c in ok1]), '.0f')} | "
          f"{cell(med([c[1] for c in ok1]), '.2f')} | {cell(med([c[1] for c in ok4]), '.2f')} | "
          f"{cell(med([c[2] for c in ok1]), '.0f')} / {cell(med([c[2] for c in ok4]), '.0f')} "
          f"(B=1 / B=4) |")
    pp = med([bench_ts(f"{tmp}/llama.{t}.pp.{r}") for r in R])
    tg = med([bench_ts(f"{tmp}/llama.{t}.tg.{r}") for r in R])
    bb = med([batched(f"{tmp}/llama.{t}.bb.{r}", 4) for r in R])
    rss = med([rss_mb(f"{tmp}/llama.{t}.{k}.{r}") for k in ("pp", "tg", "bb") for r in R])
    print(f"| {t.upper()} | {gb} | llama.cpp | {cell(pp and int(P) / pp * 1e3, '.0f')} | "
          f"{cell(tg, '.2f')} | {cell(bb, '.2f')} | {cell(rss, '.0f')} |")
    for rtr in (0, 1):
        if not os.path.exists(f"{tmp}/ik{rtr}.{t}.pp.1.log"):
            continue
        pp = med([bench_ts(f"{tmp}/ik{rtr}.{t}.pp.{r}") for r in R])
        tg = med([bench_ts(f"{tmp}/ik{rtr}.{t}.tg.{r}") for r in R])
        rss = med([rss_mb(f"{tmp}/ik{rtr}.{t}.{k}.{r}") for k in ("pp", "tg") for r in R])
        name = "ik_llama.cpp" + (" -rtr 1" if rtr else "")
        print(f"| {t.upper()} | {gb} | {name} | {cell(pp and int(P) / pp * 1e3, '.0f')} | "
              f"{cell(tg, '.2f')} (depth 0) | - | {cell(rss, '.0f')} |")
print()
failed = open(f"{tmp}/failed").read().split("\n")
failed = [f for f in failed if f]
if failed:
    print("runs that failed (their cells say \"failed\"): " + "; ".join(failed))
print(f"TTFT: attn-cli's prompt eval time (the prompt through every block and the head's last "
      f"row); llama.cpp's: {P} / its pp{P} rate. Decode: attn-cli's median step after the "
      f"prompt; llama-bench -d {P}; batched-bench's S_TG at 4 sequences. The whole model took "
      f"{took} s; load average (1, 5, 15 min) {load0} before, {load1} after (a shared machine).")
EOF
