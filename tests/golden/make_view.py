#!/usr/bin/python3
"""Golden fixtures for attn-cli view's per-head figures (entropy, first, prev, diag).

Run:  /usr/bin/python3 tests/golden/make_view.py
      (Debian's python with torch; deterministic: a rerun rewrites a byte-identical file)

For make_observer.py's two golden token models (meta_f32: GQA 4/2, Meta's RoPE; hf_untied_f32:
GQA 4/2, rotate_half), it runs make_observer's float64 reference (make_model's LlamaLM with
forward hooks) over the committed prompt (7 tokens, prefill at start_pos 0) and STEPS = 3 decode
steps feeding the greedy ids, and takes the softmax probabilities [B, H, seqlen, S] of every
call and layer. Query row t of a layer is the prefill's row t (t < 7) or decode step t-6's only
row; causal, so row t holds keys 0..t. For each view (a layer range, a query head range and a
query row range, as `--layers A:B --heads A:B --positions A:B` cut them) it writes the figures
attn-cli view computes (docs/contract.md §3), per shown layer and head, over the shown rows t:

  entropy  mean of -sum_j p[t][j] ln p[t][j]  (nats; 0 ln 0 = 0)
  first    mean of p[t][0]
  prev     mean over t >= 1 of p[t][t-1]      (null when no shown row has t >= 1)
  diag     mean of p[t][t]

into tests/golden/view/cases.json, with the prompt ids, the steps and the greedy ids (the view
chooses greedy[0..2], feeds them, and names greedy[3] as the token chosen next).

Self-checks (assertions): every row sums to 1 within 1e-12 and is 0 past the causal mask.
"""

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_model import CASES  # noqa: E402
from make_observer import NAMES, load_case, run  # noqa: E402

OUT = os.path.join(HERE, "view")
STEPS = 3  # make_observer's: prefill, then decode.1 .. decode.3
VIEWS = [  # (layers, heads, positions) as A:B; None: all
    (None, None, None),
    ("1:2", "1:3", "2:9"),
    ("0:1", "3:4", "9:10"),   # the last row only (a decode step's)
    ("1:2", "0:4", "0:1"),    # the first row only: prev has no row
    ("0:2", "2:4", "6:8"),    # the prefill's last row and the first decode step's
]


def rows_of(tensors, layer, prompt_len):
    """Query rows of one layer: [T][H] -> probabilities over keys 0..t (float64)."""
    pre = tensors[f"prefill.{layer}.attn_probs"][0]  # [H, P, P]
    rows = [pre[:, t, : t + 1] for t in range(prompt_len)]
    for i in range(1, STEPS + 1):
        d = tensors[f"decode.{i}.{layer}.attn_probs"][0]  # [H, 1, P + i]
        rows.append(d[:, 0, :])
    for t, r in enumerate(rows):
        assert r.shape[1] == t + 1
        assert (r.sum(-1) - 1).abs().max().item() < 1e-12
    return rows


def cut(text, n):
    if text is None:
        return 0, n
    a, b = (int(v) for v in text.split(":"))
    return a, b


def figures(rows, head, t0, t1):
    ent, first, prev, diag, n_prev = 0.0, 0.0, 0.0, 0.0, 0
    for t in range(t0, t1):
        p = rows[t][head]
        nz = p[p > 0]
        ent += -(nz * torch.log(nz)).sum().item()
        first += p[0].item()
        diag += p[t].item()
        if t >= 1:
            prev += p[t - 1].item()
            n_prev += 1
    n = t1 - t0
    return [ent / n, first / n, prev / n_prev if n_prev else None, diag / n]


def make_case(c):
    weights, expected = load_case(c)
    tensors, _ = run(c, weights, expected)
    tokens = expected["tokens"].to(torch.int64)[0].tolist()
    greedy = expected["greedy"].to(torch.int64)[0].tolist()
    T = len(tokens) + STEPS
    layers = {l: rows_of(tensors, l, len(tokens)) for l in range(c.args.n_layers)}
    views = []
    for lt, ht, pt in VIEWS:
        l0, l1 = cut(lt, c.args.n_layers)
        h0, h1 = cut(ht, c.args.n_heads)
        t0, t1 = cut(pt, T)
        stats = [[figures(layers[l], h, t0, t1) for h in range(h0, h1)] for l in range(l0, l1)]
        views.append({"layers": lt or "", "heads": ht or "", "positions": pt or "",
                      "stats": stats})
    return {"name": c.name, "model": f"model/{c.name}", "tokens": tokens, "steps": STEPS,
            "greedy": greedy[: STEPS + 1], "views": views}


def main():
    cases = [make_case(c) for c in CASES if c.name in NAMES]
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"names": ["entropy", "first", "prev", "diag"], "tolerance": 2e-6,
                   "cases": cases}, f, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], len(c["views"]), "views, greedy", c["greedy"])


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
