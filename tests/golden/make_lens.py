#!/usr/bin/python3
"""Golden fixtures for the logit lens: what each block's output predicts.

Run:  /usr/bin/python3 tests/golden/make_lens.py
      (Debian's python with torch; deterministic: a rerun rewrites byte-identical files)

For three of make_model.py's committed cases, read back from their files (weights, prompts and
greedy tokens), it runs make_observer.py's float64 reference (make_model's Meta
Transformer.forward(tokens, start_pos) with forward hooks) over a prefill of the T = 7 prompt
tokens at start_pos 0 and then N = 3 decode steps feeding greedy[0..2] at start_pos 7, 8, 9, and
puts every block's output through the model's own final RMSNorm and output head, on the raw
weights (nothing folded):

  lens_l = output(norm(resid_post_l))          [B, seqlen, vocab_size], float64

  meta_f32       GQA 4/2, 2 layers, vocab 128, batch 1
  meta_bf16      MHA 4 heads, 2 layers, BF16 weights, vocab 250, batch 2
  hf_untied_f32  GQA 4/2, 2 layers, rotate_half RoPE, vocab 64, batch 1

Each case writes tests/golden/lens/<case>.safetensors with, for every call c in prefill,
decode.1, decode.2, decode.3 and every block l:

  {c}.{l}.top_ids     I32 [B, seqlen, K + 1]  the K + 1 = 6 highest logits' ids, highest first,
                                              ties to the lower id
  {c}.{l}.top_logits  F32 [B, seqlen, K + 1]  their logits
  {c}.{l}.logits      F32 [B, seqlen, V]      the whole lens (meta_f32 only: a small case)

The (K+1)-th is there so that a test can tell a top-k whose order the tolerance decides (the gap
between the k-th and (k+1)-th under it) from one it must match id for id. Tolerance: rtol 1e-4,
atol 1e-4, make_model.py's for logits (LOGITS_ATOL: logits are sums over dim).

Self-checks (assertions):
  * the last block's lens equals the hooked run's logits (make_model's head) to 1e-12, and those
    equal make_model's committed expected.safetensors to 1e-6;
  * norm(resid_post) of the last block equals the hooked final_norm to 1e-12;
  * the same model run in float32 stays inside 0.1 of the tolerance on every lens logit;
  * the file is read back by make_golden's strict safetensors reader.
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixtures import CHECKED_HEADER, checked_row, make_cases, tol_use, write_checked  # noqa: E402
from make_golden import DT  # noqa: E402
from make_model import LOGITS_ATOL, LOGITS_RTOL, LlamaLM  # noqa: E402
from make_observer import STEPS, load_case, run  # noqa: E402

OUT = os.path.join(HERE, "lens")
NAMES = ("meta_f32", "meta_bf16", "hf_untied_f32")
FULL = ("meta_f32",)
K = 5


def calls():
    return ["prefill"] + [f"decode.{i}" for i in range(1, STEPS + 1)]


def top(lens: torch.Tensor, n: int):
    """[B, T, V] -> ids [B, T, n] int32 and logits [B, T, n]: highest first, ties to the lower id
    (a stable sort of the negated logits)."""
    order = np.argsort(-lens.numpy(), axis=-1, kind="stable")[..., :n]
    ids = torch.from_numpy(order.astype(np.int32))
    return ids, torch.gather(lens, -1, ids.to(torch.int64))


def lenses(c, weights, expected, dtype=DT):
    """{"{call}.{l}": lens [B, seqlen, V]} of every call and block, in `dtype`."""
    tensors, logits = run(c, weights, expected, dtype)
    model = LlamaLM(c.args, weights, dtype)  # only its norm and head are used
    out = {}
    with torch.inference_mode():
        for i, call in enumerate(calls()):
            for l in range(c.args.n_layers):
                normed = model.norm(tensors[f"{call}.{l}.resid_post"])
                out[f"{call}.{l}"] = model.output(normed)
            last = c.args.n_layers - 1
            tight = 1e-12 if dtype == DT else 1e-5
            normed = model.norm(tensors[f"{call}.{last}.resid_post"])
            assert (normed - tensors[f"{call}.final_norm"]).abs().max().item() < tight
            err = (out[f"{call}.{last}"] - logits[i]).abs().max().item()
            assert err < tight, f"{c.name} {call}: the last lens differs from the logits by {err}"
    return out


def make_case(c) -> dict:
    weights, expected = load_case(c)
    lens = lenses(c, weights, expected)
    # The run is make_model's: its prefill logits are the committed ones.
    last = c.args.n_layers - 1
    err = (lens[f"prefill.{last}"] - expected["logits"].to(DT)).abs().max().item()
    assert err < 1e-6, f"{c.name}: the last lens differs from make_model's logits by {err}"
    l32 = lenses(c, weights, expected, torch.float32)
    use = max(tol_use(l32[k], v, LOGITS_RTOL, LOGITS_ATOL) for k, v in lens.items())
    assert use < 0.1, f"{c.name}: a float32 run uses {use:.3f} of the tolerance"

    tensors = {}
    for name, v in lens.items():
        ids, logits = top(v, K + 1)
        tensors[f"{name}.top_ids"] = ids.contiguous()
        tensors[f"{name}.top_logits"] = logits.to(torch.float32).contiguous()
        if c.name in FULL:
            tensors[f"{name}.logits"] = v.to(torch.float32).contiguous()
    return dict(size=write_checked(OUT, c.name, tensors), tensors=len(tensors), logits_err=err,
                tol_use=use)


def main():
    make_cases(OUT, NAMES, make_case,
               lambda c, r: {"name": c.name, "model": f"model/{c.name}", "steps": STEPS, "k": K,
                             "full": c.name in FULL,
                             "tolerance": {"rtol": LOGITS_RTOL, "atol": LOGITS_ATOL}},
               checked_row, CHECKED_HEADER,
               ["logits: max |last block's lens - make_model's expected logits| (asserted < 1e-6)",
                "f32/tol: worst |f32 lens - f64| / (atol + rtol*|exp|) (asserted < 0.1)"])


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
