#!/usr/bin/env python3
"""bench/compare.sh's table of attn-cli against llama.cpp on the layer files, from the raw outputs
a run leaves in its folder (`--save DIR` keeps them): run by compare.sh at the end of its rounds,
and by tests/python/test_compare_report.py on a folder of made-up outputs (a report that fails
at the end of a real run costs the run).

Usage: compare_report.py DIR ROUNDS COMPUTE_BF16 OPENBLAS_CORETYPE LLAMA_SRC C_CTX DATE TOOK LOAD0
  LOAD1 "TYPES" "DEPTHS" LONG_ROUNDS N_STORIES THREADS LLAMA_BIN NTG BEFORE_BIN COMPUTE_Q8
"""
import json, os, re, statistics, subprocess, sys

(tmp, rounds, compute_bf16, coretype, lsrc, c_ctx, date, took, load0, load1, types, depths,
 long_rounds, n_stories, threads, llama_bin, ntg, before_bin, compute_q8) = sys.argv[1:]
rounds, compute_bf16, long_rounds = int(rounds), compute_bf16 == "1", int(long_rounds)
compute_q8 = compute_q8 == "1"
types, depths, n_stories = types.split(), [int(d) for d in depths.split()], int(n_stories)
q8c = [t for t in types if t.startswith("q")] if compute_q8 else []  # --compute q8's files
R = range(1, rounds + 1)
BATCHES = (1, 2, 4, 8, 16)
NAME = {"f32": "F32", "bf16": "BF16", "f16": "F16", "q8_0": "Q8_0", "q4_k_m": "Q4_K_M",
        "bf16c": "BF16, --compute bf16", "q8_0c": "Q8_0, --compute q8",
        "q4_k_mc": "Q4_K_M, --compute q8"}


def text(name):
    return open(f"{tmp}/{name}").read() if os.path.exists(f"{tmp}/{name}") else None


def load(name):
    """A file's JSON, or None when the program that writes it failed."""
    if not os.path.exists(f"{tmp}/{name}"):
        return None
    with open(f"{tmp}/{name}") as f:
        return json.load(f)


def cli(t, r):
    return load(f"cli.{t}.{r}.json")["weight_types"][0]


def lb(name, key):
    """llama-bench's one test of a -o json run: the best sample (key "best") or the mean."""
    tests = load(name)
    if tests is None:
        return None
    assert len(tests) == 1, name
    return max(tests[0]["samples_ts"]) if key == "best" else tests[0]["avg_ts"]


missing = []  # batched-bench rows absent from a run that did not fail


def bb_row(name, b):
    """llama-batched-bench's row of B = b (None when it failed or skipped it). The JSON lines
    are looked for anywhere in its stdout and its log, in case a log line ran into one."""
    if not os.path.exists(f"{tmp}/{name}"):
        return None
    found = re.findall(r'\{"n_kv_max"[^{}]*\}', (text(name) or "") + (text(f"{name}.log") or ""))
    rows = {j["pl"]: j for j in map(json.loads, found)}
    if b not in rows and f"{name} B={b}" not in missing:
        missing.append(f"{name} B={b}")
    return rows.get(b)


def bb(name, b):
    """llama-batched-bench's S_TG at B = b."""
    row = bb_row(name, b)
    return row["speed_tg"] if row else None


def batched(w, b, key="tokens_per_s"):
    return next(d[key] for d in w["batched_decode"] if d["batch"] == b)


# rows: (label, attn-cli's figure per round, llama.cpp's per round); a None is a failed run
rows = []
P = load("cli.f32.1.json")["prefill_positions"]
for t in types:
    rows.append((f"prefill {P}, {NAME[t]} weights (positions/s)",
                 [cli(t, r)["prefill_positions_per_s"] for r in R],
                 [lb(f"llama.{t}.{r}.pp.json", "best") for r in R]))
for t in types:
    rows.append((f"decode at depth {P}, {NAME[t]} (steps/s)",
                 [cli(t, r)["decode_steps_per_s"] for r in R],
                 [lb(f"llama.{t}.{r}.tg.json", "mean") for r in R]))
for t in types:
    for b in BATCHES if not t.startswith("q") else (1, 4, 16):
        rows.append((f"batched decode B={b}, {NAME[t]} (tokens/s)",
                     [batched(cli(t, r), b) for r in R],
                     [bb(f"llama.{t}.{r}.bb.jsonl", b) for r in R]))
if compute_bf16:
    rows.append((f"--compute bf16: prefill {P}, BF16 (positions/s)",
                 [cli("bf16c", r)["prefill_positions_per_s"] for r in R],
                 [lb(f"llama.bf16.{r}.pp.json", "best") for r in R]))
    for b in BATCHES:
        rows.append((f"--compute bf16: batched decode B={b}, BF16 (tokens/s)",
                     [batched(cli("bf16c", r), b) for r in R],
                     [bb(f"llama.bf16.{r}.bb.jsonl", b) for r in R]))
for t in q8c:  # the same file as llama.cpp's rows: its arithmetic, 8-bit activations
    rows.append((f"--compute q8: prefill {P}, {NAME[t]} (positions/s)",
                 [cli(f"{t}c", r)["prefill_positions_per_s"] for r in R],
                 [lb(f"llama.{t}.{r}.pp.json", "best") for r in R]))
    rows.append((f"--compute q8: decode at depth {P}, {NAME[t]} (steps/s)",
                 [cli(f"{t}c", r)["decode_steps_per_s"] for r in R],
                 [lb(f"llama.{t}.{r}.tg.json", "mean") for r in R]))
    for b in (1, 4, 16):
        rows.append((f"--compute q8: batched decode B={b}, {NAME[t]} (tokens/s)",
                     [batched(cli(f"{t}c", r), b) for r in R],
                     [bb(f"llama.{t}.{r}.bb.jsonl", b) for r in R]))
LR = range(1, long_rounds + 1)
for d in depths:
    rows.append((f"decode at depth {d}, BF16, B=1 (steps/s)",
                 [batched(cli(f"long{d}", r), 1) for r in LR],
                 [lb(f"llama.long{d}.{r}.tg.json", "mean") for r in LR]))
    rows.append((f"decode at depth {d}, BF16, B=4 (tokens/s)",
                 [batched(cli(f"long{d}", r), 4) for r in LR],
                 [bb(f"llama.long{d}.{r}.bb.jsonl", 4) for r in LR]))


def own_rate(tool, r):
    """Tokens/s by the tool's own timer over the prompt and the decode loop."""
    err = text(f"stories.{tool}.{r}.err" if tool == "cli" else f"stories.llama.{r}.out.log")
    if tool == "llama":
        m = err and text(f"stories.llama.{r}.out") is not None and re.search(
            r"decoded (\d+) tokens in [\d.]+ s, speed: ([\d.]+) t/s", err)
        return (float(m.group(2)), int(m.group(1))) if m else (None, None)
    prompt = float(re.search(r"prompt eval time =\s*([\d.]+) ms", err).group(1))
    m = re.search(r"\n\s*eval time =\s*([\d.]+) ms /\s*(\d+) runs", err)
    n = int(m.group(2)) + 1  # the first token comes from the prompt's logits
    return n / ((prompt + float(m.group(1))) / 1e3), n


def whole_rate(tool, r):
    rate, n = own_rate(tool, r)
    return None if rate is None else n / (int(text(f"stories.{tool}.{r}.us")) / 1e6)


S = range(1, n_stories + 1)
if n_stories:
    rows.append(("stories260K generate 400 tokens, own timer (tokens/s)",
                 [own_rate("cli", r)[0] for r in S], [own_rate("llama", r)[0] for r in S]))
    rows.append(("stories260K generate 400 tokens, whole process (tokens/s)",
                 [whole_rate("cli", r) for r in S], [whole_rate("llama", r) for r in S]))


def best_median(values):
    v = [x for x in values if x is not None]
    return (max(v), statistics.median(v)) if v else (None, None)


def cell(x):
    return "failed" if x is None else f"{x:.2f}"


def ratio(a, b):
    return "" if a is None or b is None else f"{a / b:.2f}x"


def lscpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    f = dict(l.split(":", 1) for l in out.splitlines() if ":" in l)
    g = lambda k: f.get(k, "?").strip()  # noqa: E731
    return f"{g('Model name')} (family {g('CPU family')}, model {g('Model')})"


c0 = load("cli.f32.1.json")
lpp0 = (load("llama.f32.1.pp.json") or [{}])[0]
bb0 = bb_row("llama.f32.1.bb.jsonl", 1) or {}
commit = subprocess.run(["git", "-C", lsrc, "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
fa = {-1: "auto", 0: "off", 1: "on"}
print(f"attn-cli vs llama.cpp, one Llama-3-8B layer (dim 4096, 32 heads, 8 KV heads, FFN 14336), "
      f"{c0['threads']} threads; each tool's best and median of {rounds} round(s), the tools "
      f"taking turns")
print(f"CPU: {lscpu()}; attn-cli {c0['version']}: kernels {c0['kernels']}, OpenBLAS core "
      f"{c0['openblas_core']}, OPENBLAS_CORETYPE={coretype}")
print(f"llama.cpp: node-llama-cpp@3.22.1's sources (commit {commit}), programs from {llama_bin}, "
      f"backend {lpp0.get('backends', '?')}, cpu_info \"{lpp0.get('cpu_info', '?')}\", flash_attn "
      f"{fa.get(lpp0.get('flash_attn'), lpp0.get('flash_attn', '?'))}, KV cache "
      f"{lpp0.get('type_k', '?')}/{lpp0.get('type_v', '?')} (attn-cli's: F32), n_batch "
      f"{lpp0.get('n_batch', '?')}, n_ubatch {lpp0.get('n_ubatch', '?')}; batched-bench -c {c_ctx} "
      f"-pps -ntg {ntg} (flash_attn {fa.get(bb0.get('flash_attn'), bb0.get('flash_attn', '?'))})")
print("the GGUF layer has the same shape and distribution as attn-cli's drawn layer, not its "
      "values (timing only); the Q8_0 and Q4_K_M rows run the same file in both tools")
if not compute_bf16:
    print("--compute bf16 rows left out: this CPU has no AVX512-BF16 (attn-cli refuses it)")
if not compute_q8:
    print("--compute q8 rows left out: this CPU has no AVX512-VNNI (attn-cli refuses it)")
if depths:
    print(f"long context: BF16 weights (the exact path of both tools, no 8-bit activations; half "
          f"F32's bytes, so the cache's share of a step shows), {long_rounds} round(s) (each depth "
          f"is filled first: slow)")
print()
print("| row | attn-cli best | median | llama.cpp best | median | ratio (best) | ratio (median) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for label, ours, theirs in rows:
    (ob, om), (tb, tm) = best_median(ours), best_median(theirs)
    print(f"| {label} | {cell(ob)} | {cell(om)} | {cell(tb)} | {cell(tm)} | {ratio(ob, tb)} | "
          f"{ratio(om, tm)} |")
print()

# prefill against the FMA peak, and what a batch of 16 costs against one sequence
fmt = lambda v: "failed" if v is None else f"{v:.0%}"  # noqa: E731
kinds = types + (["bf16c"] if compute_bf16 else []) + [f"{t}c" for t in q8c]
src = {k: ("bf16" if k == "bf16c" else k[:-1] if k.endswith("c") else k) for k in kinds}
print(f"attn-cli's prefill of {P} against its FMA peak ({c0['fma_isa']}, measured in each run), "
      f"best / median round; B=16 step time / B=1 step time, median of the rounds:")
print("| weights | prefill of FMA peak, best | median | attn-cli B=16/B=1 step | "
      "llama.cpp B=16/B=1 step |")
print("|---|---:|---:|---:|---:|")
for k in kinds:
    pf = best_median([cli(k, r)["prefill_fraction_of_fma_peak"] for r in R])
    ours = statistics.median(batched(cli(k, r), 16, "step_vs_batch1") for r in R)
    theirs = [16 * bb(f"llama.{src[k]}.{r}.bb.jsonl", 1) / bb(f"llama.{src[k]}.{r}.bb.jsonl", 16)
              for r in R if bb(f"llama.{src[k]}.{r}.bb.jsonl", 16)]
    print(f"| {NAME[k]} | {fmt(pf[0])} | {fmt(pf[1])} | {ours:.2f}x | "
          f"{f'{statistics.median(theirs):.2f}x' if theirs else 'failed'} |")
print()
print(f"attn-cli: prefill the best of 3 passes, decode the median step of {c0['decode_steps']}, "
      f"batched the median step of each B at depth {P} (long context: at depth D after an untimed "
      f"fill, `bench --depth D`); llama.cpp: llama-bench pp the best of 3 repetitions, tg the "
      f"mean of its tokens after a depth of P (long: D), batched-bench S_TG (B x G tokens over "
      f"their time, the prompt decoded once and copied, -pps)")
if n_stories:
    print(f"stories260K: {n_stories} runs each; own timer: attn-cli's prompt eval + eval time, "
          f"llama-simple's \"decoded N tokens in T s\" (its prompt and decode loop); whole "
          f"process: 400 tokens over the wall time of the process, loading included")
failed = open(f"{tmp}/failed").read().splitlines()
if failed:
    print(f"llama.cpp runs that failed ({len(failed)}; their cells say \"failed\"):")
    for f in failed:
        print(f"  {f}")
if missing:
    print(f"llama-batched-bench rows absent from runs that did not fail (also \"failed\"): "
          f"{', '.join(missing)}")
if before_bin:
    kinds = types + (["bf16c"] if compute_bf16 else [])

    def pair(k, get):
        """(median before, median after) of a figure over the rounds, None where absent."""
        b = [get(load(f"before.{k}.{r}.json")["weight_types"][0]) for r in R]
        a = [get(cli(k, r)) for r in R]
        return statistics.median(b), statistics.median(a)

    b0 = load(f"before.{kinds[0]}.1.json")
    print()
    print(f"before/after, the same rounds (each attn-cli bench run right after the other): "
          f"before {before_bin} ({b0['version']}), after {c0['version']}; medians of {rounds} "
          f"round(s), rates (higher is faster)")
    print("The machine's own limits move between runs (its stream read by 30% within minutes): "
          "each run's prefill is also given as its fraction of the FMA peak and its decode of the "
          "stream, both probed in that run.")
    print("| row | before | after | after / before | before, of its peak or stream | after |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in kinds:
        figures = [("prefill (positions/s)", lambda w: w["prefill_positions_per_s"],
                    lambda w: w["prefill_fraction_of_fma_peak"]),
                   ("decode (steps/s)", lambda w: w["decode_steps_per_s"],
                    lambda w: w["decode_fraction_of_stream"])]
        for b in BATCHES if not k.startswith("q") else (1, 4, 16):
            figures.append((f"batched B={b} (tokens/s)", lambda w, b=b: batched(w, b), None))
        for label, get, fraction in figures:
            bv, av = pair(k, get)
            bf, af = pair(k, fraction) if fraction else (None, None)
            frac = f"{bf:.0%} | {af:.0%}" if fraction else " | "
            print(f"| {NAME[k]} {label} | {bv:.2f} | {av:.2f} | {av / bv:.3f} | {frac} |")
print(f"date: {date}; compare took {took} s; load average (1, 5, 15 min) {load0} before the "
      f"rounds, {load1} after (a shared machine: other work slows either tool)")
