#!/usr/bin/python3
"""Golden fixtures from the seed notebooks' own attention classes.

Run:  /usr/bin/python3 tests/golden/make_notebooks.py  [--seeds ../shared/seeds]

The class definitions are cut out of the notebook texts in ../shared/seeds/ at generation time
(they are never copied into this repository) and run as the notebooks call them, in eval mode
(dropout off) and float64, on drawn weights and inputs rounded to float32 (the values stored in
the fixtures). Each case writes tests/golden/notebooks/<case>/{config.json, weights.safetensors,
input.safetensors, expected.safetensors}; expected has the layout of `attn-cli --dump`
(CONTRACT.md section 5). The manifest cases.json says how to run each case and how each class's
weights map to the contract's names.

Mapping (attn-cli's block `attention` is out = x + wo(attn(x)), the notebooks' TransformerBlock):
  * a class with an output projection (w_out, output_proj) maps it to wo; its expected output is
    x + class(x): the residual that block `attention` adds is added to the class's output.
  * a class without one (ScaledDotProductAttention, SelfAttentionV1, SelfAttentionV2) gets
    wo = identity and bo = 0, so the block computes x + class(x) exactly.
  * single-projection classes (V2, V3: proj -> [Q | K | V]) are split row-wise into wq, wk, wv.
  * the attention weights are what the class computes before its dropout: the
    `attention_weights` property where the class has one, otherwise the input of its dropout
    module (a forward pre-hook), the class's own tensor.
  * 002's TransformerBlock keeps its caches as float32 plain attributes; they are made float64
    (the same zeros) so the block runs in float64 like every other case.
"""
import argparse
import contextlib
import glob
import io
import json
import math
import os
import shutil
import struct
import sys
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "notebooks")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from export_weights import encoder_input, encoder_layer_weights  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


# ------------------------------------------------------------------------------------------
# Cutting classes out of the notebook texts
# ------------------------------------------------------------------------------------------
def seed_text(seeds: str, number: str) -> str:
    (path,) = glob.glob(os.path.join(seeds, number + "_*.txt"))
    with open(path, encoding="utf-8") as f:
        return f.read()


def cut(text: str, header: str) -> str:
    """The definition that starts with the line `header`, up to the next unindented line."""
    lines = text.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith(header)]
    assert len(starts) == 1, f"{header!r}: found {len(starts)} times"
    out = [lines[starts[0]]]
    for l in lines[starts[0] + 1:]:
        if l.strip() and not l[0].isspace():
            break
        out.append(l)
    return "\n".join(out) + "\n"


def load_classes(seeds: str, number: str, headers: list) -> dict:
    ns = {"torch": torch, "nn": nn, "F": F, "math": math, "Optional": Optional, "Tuple": Tuple}
    text = seed_text(seeds, number)
    for h in headers:
        exec(compile(cut(text, h), f"seed {number}: {h}", "exec"), ns)
    return ns


# ------------------------------------------------------------------------------------------
# Fixture files
# ------------------------------------------------------------------------------------------
ST = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8"), torch.int32: ("I32", "<i4"),
      torch.uint8: ("U8", "u1"), torch.bool: ("BOOL", "u1")}


def write_safetensors(path: str, tensors: dict) -> None:
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        dtype, np_dtype = ST[t.dtype]
        data = (t.to(torch.uint8) if t.dtype == torch.bool else t).numpy().astype(np_dtype).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def f32(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float32)


def round_module(m: nn.Module) -> nn.Module:
    """float64, holding exactly the float32 values the fixture stores."""
    m.double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.float().double())
    return m


def draw(*shape) -> torch.Tensor:
    return torch.rand(*shape, dtype=torch.float32).double()  # the notebooks use torch.rand


def heads(t: torch.Tensor, n: int) -> torch.Tensor:  # [B, T, n*hd] -> [B, n, T, hd]
    B, T, D = t.shape
    return t.reshape(B, T, n, D // n).transpose(1, 2)


class Capture:
    """Records the input of a module's forward: the probabilities a dropout receives."""

    def __init__(self, module: nn.Module):
        self.seen = []
        module.register_forward_pre_hook(lambda mod, args: self.seen.append(args[0].detach().clone()))


def linear_weights(prefix: str, lin: Optional[nn.Linear], dim: int, rows=None) -> dict:
    """nn.Linear to wX.weight/bias; None is the identity (a class without that projection)."""
    if lin is None:
        return {prefix + ".weight": torch.eye(dim, dtype=torch.float64),
                prefix + ".bias": torch.zeros(dim, dtype=torch.float64)}
    w, b = lin.weight, lin.bias
    if rows is not None:
        w = w[rows]
        b = None if b is None else b[rows]
    out = {prefix + ".weight": w}
    if b is not None:
        out[prefix + ".bias"] = b
    return out


def attention_names(q, k, v, o, dim: int, qkv=None) -> dict:
    """q, k, v, o: nn.Linear or None; qkv: one nn.Linear [3*dim, dim] to split into q, k, v."""
    out = {}
    p = "layers.0.attention."
    if qkv is not None:
        for i, n in enumerate("qkv"):
            out.update(linear_weights(p + "w" + n, qkv, dim, slice(i * dim, (i + 1) * dim)))
    else:
        for n, lin in zip("qkv", (q, k, v)):
            out.update(linear_weights(p + "w" + n, lin, dim))
    out.update(linear_weights(p + "wo", o, dim))
    return out


# ------------------------------------------------------------------------------------------
# Cases: each returns (config, weights, input, expected, run) with run = how attn-cli runs it
# ------------------------------------------------------------------------------------------
def base_config(dim, n_heads, B, T, **kw) -> dict:
    c = {"dim": dim, "n_heads": n_heads, "n_kv_heads": n_heads, "block": "attention", "rope": "none",
         "max_batch_size": B, "max_seq_len": T}
    c.update(kw)
    return c


def prefill_case(x, y, k, v, probs=None) -> dict:
    exp = {"input": x, "prefill.output": x + y, "cache.0.k": k, "cache.0.v": v}
    if probs is not None:
        exp["attn.0.prefill"] = probs
    return exp


def case_sdpa(ns):
    B, T, D = 2, 5, 16
    m = round_module(ns["ScaledDotProductAttention"](D))
    x = draw(B, T, D)
    y = m(x)  # hidden_states, mask=None
    exp = prefill_case(x, y, heads(m.w_k(x), 1), heads(m.w_v(x), 1))
    w = attention_names(m.w_q, m.w_k, m.w_v, None, D)
    cfg = base_config(D, 1, B, T, attention_bias=True, mask="none")
    return cfg, w, {"x": x}, exp, {"prefill": T, "steps": 0, "attention_weights": False}


def case_mha(ns):
    B, T, D, H = 2, 6, 32, 4
    m = round_module(ns["MHA"](D, H))
    cap = Capture(m.dropout)
    x = draw(B, T, D)
    y = m(x)  # mask=None
    exp = prefill_case(x, y, heads(m.w_k(x), H), heads(m.w_v(x), H), cap.seen[0])
    w = attention_names(m.w_q, m.w_k, m.w_v, m.w_out, D)
    cfg = base_config(D, H, B, T, attention_bias=True, mask="none")
    return cfg, w, {"x": x}, exp, {"prefill": T, "steps": 0, "attention_weights": True}


def case_mha_v2(ns):
    """test_attn's loop: a prefill of 10 with its all-ones mask, then 4 cached one-token steps."""
    B, P, N, D, H = 1, 10, 4, 64, 8
    m = round_module(ns["MHA_v2"](hidden_size=D, num_heads=H))
    cap = Capture(m.dropout)
    x = draw(B, P + N, D)
    mask = torch.ones(1, 1, P, P)
    out, past = m(x[:, :P], mask, None, True)
    exp = {"input": x, "prefill.output": x[:, :P] + out}
    for i in range(1, N + 1):
        xi = x[:, P + i - 1:P + i]
        out, past = m(xi, None, past, True)
        exp[f"decode.{i}.output"] = xi + out
    exp["cache.0.k"], exp["cache.0.v"] = past
    exp["attn.0.prefill"] = cap.seen[0]
    for i in range(1, N + 1):
        exp[f"attn.0.decode.{i}"] = cap.seen[i]
    w = attention_names(m.w_q, m.w_k, m.w_v, m.w_out, D)
    cfg = base_config(D, H, B, P + N, attention_bias=True, mask="none")
    # The all-ones mask, as a padding mask that keeps every position (F32, as torch.ones gives).
    inp = {"x": x, "attention_mask": torch.ones(B, P + N)}
    return cfg, w, inp, exp, {"prefill": P, "steps": N, "attention_weights": True}


def case_v1(ns):
    m = round_module(ns["SelfAttentionV1"](hidden_dim=4))
    X = draw(3, 2, 4)
    Y = m(X)
    exp = prefill_case(X, Y, heads(m.key_proj(X), 1), heads(m.value_proj(X), 1),
                       m.attention_weights.unsqueeze(1))
    w = attention_names(m.query_proj, m.key_proj, m.value_proj, None, 4)
    # wo is the identity, biasless as the class: attention_bias false.
    w = {k: v for k, v in w.items() if not k.endswith(".bias")}
    cfg = base_config(4, 1, 3, 2, mask="none")
    return cfg, w, {"x": X}, exp, {"prefill": 2, "steps": 0, "attention_weights": True}


def case_v2(ns):
    m = round_module(ns["SelfAttentionV2"](4))
    X = draw(3, 2, 4)
    Y = m(X)
    Q, K, V = torch.split(m.proj(X), 4, dim=2)
    exp = prefill_case(X, Y, heads(K, 1), heads(V, 1), m.attention_weights.unsqueeze(1))
    w = attention_names(None, None, None, None, 4, qkv=m.proj)
    cfg = base_config(4, 1, 3, 2, attention_bias=True, mask="none")
    return cfg, w, {"x": X}, exp, {"prefill": 2, "steps": 0, "attention_weights": True}


NB001_MASK = [[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]]


def padded_case(m, X, mask2d, dtype, probs_of):
    """001's V3 and InterView: a [3, 4] padding mask, repeated over the query axis."""
    mask = mask2d.unsqueeze(1).repeat(1, 4, 1)
    Y = m(X, mask)
    Q, K, V = probs_of["qkv"](X)
    exp = prefill_case(X, Y, heads(K, 1), heads(V, 1), probs_of["probs"]().unsqueeze(1))
    cfg = base_config(2, 1, 3, 4, attention_bias=True, mask="none")
    return cfg, {"x": X, "attention_mask": mask2d.to(dtype)}, exp


def case_v3(ns):
    m = round_module(ns["SelfAttentionV3"](dim=2))
    cap = Capture(m.dropout)
    X = draw(3, 4, 2)
    probs = {"qkv": lambda X: torch.split(m.proj(X), 2, dim=-1), "probs": lambda: cap.seen[0]}
    cfg, inp, exp = padded_case(m, X, torch.tensor(NB001_MASK), torch.int64, probs)
    w = attention_names(None, None, None, m.output_proj, 2, qkv=m.proj)
    return cfg, w, inp, exp, {"prefill": 4, "steps": 0, "attention_weights": True}


def case_interview(ns):
    m = round_module(ns["SelfAttentionInterView"](2))
    X = draw(3, 4, 2)
    probs = {"qkv": lambda X: (m.query_proj(X), m.key_proj(X), m.value_proj(X)),
             "probs": lambda: m.attention_weights}
    cfg, inp, exp = padded_case(m, X, torch.tensor(NB001_MASK), torch.bool, probs)
    w = attention_names(m.query_proj, m.key_proj, m.value_proj, m.output_proj, 2)
    return cfg, w, inp, exp, {"prefill": 4, "steps": 0, "attention_weights": True}


def case_multihead(ns):
    m = round_module(ns["MultiHeadAttention"](128, 8))
    cap = Capture(m.attention_dropout)
    X = draw(3, 2, 128)
    with contextlib.redirect_stdout(io.StringIO()):  # the class prints attention_weights.shape
        Y = m(X)  # the notebook's call: no mask
    exp = prefill_case(X, Y, heads(m.key_proj(X), 8), heads(m.value_proj(X), 8), cap.seen[0])
    w = attention_names(m.query_proj, m.key_proj, m.value_proj, m.output_proj, 128)
    cfg = base_config(128, 8, 3, 2, attention_bias=True, mask="none")
    return cfg, w, {"x": X}, exp, {"prefill": 2, "steps": 0, "attention_weights": True}


def case_llama_block(ns):
    """002: llama_block(x_src, start_pos=0, freqs_cis=None, mask=None), then 3 cached steps."""
    config = ns["ModelArgs"]()
    blk = round_module(ns["TransformerBlock"](1, config))
    a = blk.attention
    a.cache_k, a.cache_v = a.cache_k.double(), a.cache_v.double()
    P, N = 7, 3
    x = torch.randn(1, P + N, 18, dtype=torch.float32).double()  # x_src = torch.randn(1, 7, 18)
    exp = {"input": x, "prefill.output": blk(x[:, :P], start_pos=0, freqs_cis=None, mask=None)}
    for i in range(1, N + 1):
        pos = P + i - 1
        exp[f"decode.{i}.output"] = blk(x[:, pos:pos + 1], start_pos=pos, freqs_cis=None, mask=None)
    exp["cache.0.k"] = a.cache_k[:1, :P + N].transpose(1, 2)
    exp["cache.0.v"] = a.cache_v[:1, :P + N].transpose(1, 2)
    w = {"layers.0.attention." + n + ".weight": getattr(a, n).weight for n in ("wq", "wk", "wv", "wo")}
    cfg = {"dim": 18, "n_layers": 1, "n_heads": 6, "n_kv_heads": 2, "vocab_size": -1, "multiple_of": 10,
           "norm_eps": 1e-5, "rope_theta": 500000, "max_batch_size": 2, "max_seq_len": 17,
           "model_parallel_size": 1, "block": "attention", "rope": "none", "mask": "none"}
    return cfg, w, {"x": x}, exp, {"prefill": P, "steps": N, "attention_weights": False}


def encoder_case(batch_first: bool, norm_first=False, activation="relu"):
    """000: transformer_layer(src, src_key_padding_mask=padding_mask...), padding found as the
    notebook finds it: (src == 0).all(dim=-1). Smaller than the notebook's d_model 512."""
    B, T, D, H, FF = 3, 6, 32, 8, 64
    layer = nn.TransformerEncoderLayer(d_model=D, nhead=H, dim_feedforward=FF, batch_first=batch_first,
                                       norm_first=norm_first, activation=activation)
    round_module(layer)
    src = draw(B, T, D)
    for b, n in enumerate([6, 4, 5]):
        src[b, n:] = 0  # padded positions are zero rows, as the notebook assumes
    if not batch_first:
        src = src.transpose(0, 1).contiguous()  # (seq_length, batch_size, d_model)
    padding_mask = (src == 0).all(dim=-1)
    if batch_first:
        out = layer(src, src_key_padding_mask=padding_mask)
    else:
        out = layer(src, src_key_padding_mask=padding_mask.transpose(0, 1))
        padding_mask = padding_mask.transpose(0, 1)
        out = out.transpose(0, 1)
    inp = encoder_input(src, padding_mask, batch_first)
    x = inp["x"]
    W = layer.self_attn.in_proj_weight
    bias = layer.self_attn.in_proj_bias
    kv_in = layer.norm1(x) if norm_first else x
    k = kv_in @ W[D:2 * D].T + bias[D:2 * D]
    v = kv_in @ W[2 * D:].T + bias[2 * D:]
    exp = {"input": x, "prefill.output": out, "cache.0.k": heads(k, H), "cache.0.v": heads(v, H)}
    cfg = {"dim": D, "n_heads": H, "block": "encoder", "ffn_hidden": FF, "norm_eps": layer.norm1.eps,
           "activation": activation, "norm_first": norm_first, "max_batch_size": B, "max_seq_len": T}
    return cfg, encoder_layer_weights(layer), inp, exp, {"prefill": T, "steps": 0, "attention_weights": False}


CASES = [
    ("nb000_sdpa", "000", "ScaledDotProductAttention(16)(hidden_states) (mask=None)", case_sdpa),
    ("nb000_mha", "000", "MHA(32, 4)(hidden_states) (mask=None)", case_mha),
    ("nb000_mha_v2_cache", "000",
     "MHA_v2(64, 8): prefill 10 with mask=torch.ones(1,1,10,10), then 4 steps with past_key_value",
     case_mha_v2),
    ("nb000_encoder_batch_first", "000",
     "nn.TransformerEncoderLayer(32, 8, 64, batch_first=True)(src, src_key_padding_mask)",
     lambda ns: encoder_case(True)),
    ("nb000_encoder_seq_first", "000",
     "nn.TransformerEncoderLayer(32, 8, 64)(src [T, B, d], src_key_padding_mask=padding_mask.transpose(0, 1))",
     lambda ns: encoder_case(False)),
    ("nb000_encoder_norm_first_gelu", "000",
     "nn.TransformerEncoderLayer(32, 8, 64, batch_first=True, norm_first=True, activation='gelu') (beyond the notebook)",
     lambda ns: encoder_case(True, True, "gelu")),
    ("nb001_self_attention_v1", "001", "SelfAttentionV1(4)(X [3, 2, 4]) and attention_weights", case_v1),
    ("nb001_self_attention_v2", "001", "SelfAttentionV2(4)(X [3, 2, 4]) and attention_weights", case_v2),
    ("nb001_self_attention_v3", "001",
     "SelfAttentionV3(2)(X [3, 4, 2], attention_mask) and its softmax (dropout's input)", case_v3),
    ("nb001_self_attention_interview", "001",
     "SelfAttentionInterView(2)(X [3, 4, 2], mask) and attention_weights", case_interview),
    ("nb001_multi_head_attention", "001", "MultiHeadAttention(128, 8)(X [3, 2, 128]) (no mask)",
     case_multihead),
    ("nb002_llama_block", "002",
     "llama_block(x_src, start_pos=0, freqs_cis=None, mask=None), then 3 steps at start_pos 7, 8, 9",
     case_llama_block),
]

HEADERS = {
    "000": ["class ScaledDotProductAttention(", "class MHA(", "class MHA_v2("],
    "001": ["class SelfAttentionV1(", "class SelfAttentionV2(", "class SelfAttentionV3(",
            "class SelfAttentionInterView(", "class MultiHeadAttention("],
    "002": ["class ModelArgs:", "def repeat_kv(", "class Attention(", "class TransformerBlock("],
}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default=os.path.join(ROOT, "..", "shared", "seeds"))
    a = p.parse_args()
    spaces = {n: load_classes(a.seeds, n, h) for n, h in HEADERS.items()}
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    manifest = []
    for i, (name, nb, call, make) in enumerate(CASES):
        torch.manual_seed(1000 + i)
        with torch.no_grad() if "encoder" not in name else contextlib.nullcontext():
            cfg, w, inp, exp, run = make(spaces[nb])
        d = os.path.join(OUT, name)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        write_safetensors(os.path.join(d, "weights.safetensors"), {k: f32(v) for k, v in w.items()})
        write_safetensors(os.path.join(d, "input.safetensors"),
                          {k: f32(v) if v.is_floating_point() else v for k, v in inp.items()})
        write_safetensors(os.path.join(d, "expected.safetensors"), {k: f32(v) for k, v in exp.items()})
        manifest.append({"name": name, "notebook": nb, "call": call, **run,
                         "batch": int(inp["x"].shape[0]),
                         "tolerance": {"rtol": RTOL, "atol": ATOL}})
        print(f"{name}: {len(exp)} expected tensors")
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=2)


if __name__ == "__main__":
    main()
