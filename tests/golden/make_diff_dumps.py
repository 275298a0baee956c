#!/usr/bin/python3
"""Golden fixtures for `attn-cli diff`: the float64 PyTorch reference's run written as a dump,
every tensor under the name attn-cli's dump gives it, the activations under TransformerLens's
hook names.

Run:  /usr/bin/python3 tests/golden/make_diff_dumps.py
      (Debian's python with torch; deterministic: a rerun rewrites byte-identical files)

It reruns make_observer.py's float64 reference (make_model's Meta Transformer.forward with forward
hooks) on the case meta_f32: a prefill of the 7 prompt tokens, then 3 decode steps feeding the
greedy ids 0..2, which is what

  attn-cli run -m tests/golden/model/meta_f32/weights.safetensors \\
      --tokens 22,48,85,50,105,47,46,124,50,48 -n 3 --all-logits \\
      --dump D --dump-activations all

computes, and writes tests/golden/diff/:

  meta_f32_tl.safetensors        every tensor F32
  meta_f32_tl_mixed.safetensors  the same tensors in turn as F64, F16 and BF16 (files saved from
                                 torch in other dtypes)

with the names (contract section 5; TransformerLens's hooks for the activations):

  input                      [1, 10, dim]           the embeddings of the 10 tokens
  prefill.output             [1, 7, dim]            the last block's output
  decode.{i}.output          [1, 1, dim]
  cache.{l}.k, cache.{l}.v   [1, n_kv_heads, 10, D]  k after RoPE, v
  prefill.logits             [1, 7, vocab]          every prefill position (--all-logits)
  decode.{i}.logits          [1, 1, vocab]
  blocks.{l}.hook_resid_pre, attn.hook_q, attn.hook_k (before RoPE), attn.hook_rot_q,
  attn.hook_rot_k, attn.hook_v, attn.hook_pattern, hook_attn_out, hook_resid_mid, hook_mlp_out,
  hook_resid_post, and ln_final.hook_normalized: the prefill's; decode.{i}.<the same>: step i's.

The hook names are spelled here from TransformerLens's HookedTransformer (hook_q/hook_k before
the rotary embedding, hook_rot_q/hook_rot_k after), not read from attn-cli.
Self-check: each file is read back by make_golden's strict reader (F64 by its bytes).
"""

import json
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_golden import tensor_bytes  # noqa: E402
from make_model import CASES  # noqa: E402
from make_observer import SITES, STEPS, load_case, run  # noqa: E402

OUT = os.path.join(HERE, "diff")
CASE = "meta_f32"

# make_observer's site -> TransformerLens's hook, below blocks.{l}.
HOOKS = {"resid_pre": "hook_resid_pre", "q_in": "attn.hook_q", "k_in": "attn.hook_k",
         "q": "attn.hook_rot_q", "k": "attn.hook_rot_k", "v": "attn.hook_v",
         "attn_probs": "attn.hook_pattern", "attn_out": "hook_attn_out",
         "resid_mid": "hook_resid_mid", "mlp_out": "hook_mlp_out",
         "resid_post": "hook_resid_post"}


def dump(c, sites, logits):
    """The reference's run as attn-cli's dump names it, float64."""
    L = c.args.n_layers
    calls = ["prefill"] + [f"decode.{i}" for i in range(1, STEPS + 1)]
    out = {"input": torch.cat([sites[f"{k}.0.resid_pre"] for k in calls], dim=1)}
    out["prefill.output"] = sites[f"prefill.{L - 1}.resid_post"]
    for i in range(1, STEPS + 1):
        out[f"decode.{i}.output"] = sites[f"decode.{i}.{L - 1}.resid_post"]
    for l in range(L):  # [B, seqlen, n_kv_heads, D] per call -> [B, n_kv_heads, T, D]
        for kv in ("k", "v"):
            out[f"cache.{l}.{kv}"] = torch.cat([sites[f"{k}.{l}.{kv}"] for k in calls],
                                               dim=1).transpose(1, 2)
    out["prefill.logits"] = logits[0]
    for i in range(1, STEPS + 1):
        out[f"decode.{i}.logits"] = logits[i][:, -1:]
    for k in calls:
        prefix = "" if k == "prefill" else k + "."
        for l in range(L):
            for site in SITES:
                out[f"{prefix}blocks.{l}.{HOOKS[site]}"] = sites[f"{k}.{l}.{site}"]
        out[f"{prefix}ln_final.hook_normalized"] = sites[f"{k}.final_norm"]
    return out


def write(path, tensors):
    """safetensors as make_golden writes it, with F64 besides."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        if t.dtype == torch.float64:
            data, dtype = t.numpy().astype("<f8").tobytes(), "F64"
        else:
            data, dtype = tensor_bytes(t), {torch.float32: "F32", torch.float16: "F16",
                                            torch.bfloat16: "BF16"}[t.dtype]
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)) + hjson + b"".join(blobs))


def read_back(path):
    """The names, dtypes and values of a file, checked to tile its data section."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__")
    body, end, out = raw[8 + n:], 0, {}
    np_types = {"F64": "<f8", "F32": "<f4", "F16": "<f2"}
    for name, h in header.items():
        b, e = h["data_offsets"]
        assert b == end, name
        end = e
        if h["dtype"] == "BF16":
            bits = torch.frombuffer(bytearray(body[b:e]), dtype=torch.int16)
            t = bits.view(torch.bfloat16).to(torch.float64)
        else:
            import numpy as np
            t = torch.from_numpy(np.frombuffer(body[b:e], dtype=np_types[h["dtype"]]).astype("<f8"))
        out[name] = (h["dtype"], t.reshape(h["shape"]))
    assert end == len(body)
    return out


def main():
    c = next(c for c in CASES if c.name == CASE)
    weights, expected = load_case(c)
    sites, logits = run(c, weights, expected)
    tensors = dump(c, sites, logits)
    os.makedirs(OUT, exist_ok=True)
    f32 = {k: v.to(torch.float32) for k, v in tensors.items()}
    types = (torch.float64, torch.float16, torch.bfloat16)
    mixed = {k: v.to(types[i % 3]) for i, (k, v) in enumerate(tensors.items())}
    for name, ts in (("meta_f32_tl", f32), ("meta_f32_tl_mixed", mixed)):
        path = os.path.join(OUT, name + ".safetensors")
        write(path, ts)
        back = read_back(path)
        assert list(back) == list(ts)
        for k, t in ts.items():
            assert torch.equal(back[k][1], t.to(torch.float64)), k
        print(f"{path}: {len(ts)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
