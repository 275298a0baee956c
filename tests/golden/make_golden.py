#!/usr/bin/python3
"""Golden fixtures for attn-cli: an independent PyTorch reference.

Run:  /usr/bin/python3 tests/golden/make_golden.py

The model follows Meta's llama `model.py` (ModelArgs, RMSNorm, precompute_freqs_cis,
apply_rotary_emb, repeat_kv, Attention with cache_k/cache_v, FeedForward,
TransformerBlock) as the notebooks in shared/seeds/ show it, with the contract's
extensions (`block`, `rope`, `attention_bias`). It computes in float64 from exactly
the values stored in the fixture files; the C++ engine computes in float32 and is
compared with |got - exp| <= atol + rtol * |exp|.

For each case it writes tests/golden/<case>/{config.json, weights.safetensors,
input.safetensors, expected.safetensors} and the manifest tests/golden/cases.json.
`expected.safetensors` has the layout of `attn-cli --dump` (CONTRACT.md section 5).

Self-checks (assertions, so the reference itself is tested):
  * every case: one prefill of all P+N positions at start_pos 0 gives the same rows
    and the same caches as prefill P + N decode steps;
  * every file written is read back by a small strict safetensors reader;
  * load_state_dict(strict=True) ties the contract's tensor names to the modules;
  * the same model run in float32 stays well inside the stated tolerance.
"""

import json
import math
import os
import struct
import sys
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-4, 1e-5  # |got - exp| <= ATOL + RTOL * |exp|


# --------------------------------------------------------------------------------------
# Config (contract section 1): Meta's ModelArgs + extensions
# --------------------------------------------------------------------------------------
@dataclass
class ModelArgs:
    dim: int
    n_heads: int
    n_layers: int = 1
    n_kv_heads: Optional[int] = None
    vocab_size: int = -1
    multiple_of: int = 256
    ffn_dim_multiplier: Optional[float] = None
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    max_batch_size: int = 32
    max_seq_len: int = 2048
    model_parallel_size: int = 1
    block: str = "llama"            # "llama" | "attention"
    rope: str = "interleaved"       # "interleaved" | "half" | "none"
    attention_bias: bool = False

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def ffn_hidden_dim(args: ModelArgs) -> int:
    """Meta's FeedForward sizing (contract section 1), called with hidden_dim = 4*dim."""
    hidden_dim = 4 * args.dim
    hidden_dim = int(2 * hidden_dim / 3)
    if args.ffn_dim_multiplier is not None:
        hidden_dim = int(args.ffn_dim_multiplier * hidden_dim)
    return args.multiple_of * ((hidden_dim + args.multiple_of - 1) // args.multiple_of)


# --------------------------------------------------------------------------------------
# The model (Meta's llama model.py, float64, single rank)
# --------------------------------------------------------------------------------------
DT = torch.float64


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=DT))

    def _norm(self, x):  # x: [B, T, dim]
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):  # Meta upcasts with .float(); we already are in float64
        return self._norm(x) * self.weight


def precompute_freqs_cis(head_dim: int, end: int, theta: float) -> torch.Tensor:
    """[end, head_dim/2] complex128: e^{i * t * theta^(-2i/head_dim)}, angles in float64."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=DT)[: head_dim // 2] / head_dim))
    t = torch.arange(end, dtype=DT)
    freqs = torch.outer(t, freqs)                       # [end, head_dim/2]
    return torch.polar(torch.ones_like(freqs), freqs)  # complex128


def reshape_for_broadcast(freqs_cis, x):  # freqs_cis [T, D/2] -> [1, T, 1, D/2]
    shape = [d if i == 1 or i == x.ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb_interleaved(xq, xk, freqs_cis):
    """Meta: pairs (x[2i], x[2i+1]) as complex numbers. xq [B,T,H,D], xk [B,T,Hkv,D]."""
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))  # [B,T,H,D/2] complex
    xk_ = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def rotate_half(x):  # Hugging Face: (x1, x2) -> (-x2, x1) on the two halves of head_dim
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_emb_half(xq, xk, freqs_cis):
    """Hugging Face: pairs (x[i], x[i+D/2]), same frequencies. xq [B,T,H,D]."""
    cos = torch.cat((freqs_cis.real, freqs_cis.real), dim=-1)[None, :, None, :]  # [1,T,1,D]
    sin = torch.cat((freqs_cis.imag, freqs_cis.imag), dim=-1)[None, :, None, :]
    return xq * cos + rotate_half(xq) * sin, xk * cos + rotate_half(xk) * sin


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torch.repeat_interleave(x, dim=2, repeats=n_rep): [B,S,Hkv,D] -> [B,S,Hkv*n_rep,D]."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_kv_heads = args.kv_heads
        self.n_local_heads = args.n_heads // args.model_parallel_size
        self.n_local_kv_heads = self.n_kv_heads // args.model_parallel_size
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = args.head_dim
        self.rope = args.rope
        bias = args.attention_bias
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=bias, dtype=DT)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=bias, dtype=DT)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=bias, dtype=DT)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=bias, dtype=DT)
        # KV cache: [max_batch_size, max_seq_len, n_kv_heads, head_dim] (plain tensors, as Meta)
        self.cache_k = torch.zeros(
            (args.max_batch_size, args.max_seq_len, self.n_local_kv_heads, self.head_dim), dtype=DT)
        self.cache_v = torch.zeros_like(self.cache_k)

    def forward(self, x, start_pos: int, freqs_cis, mask):
        bsz, seqlen, _ = x.shape                                   # x: [B, T, dim]
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)     # [B, T, H, D]
        xk = xk.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)  # [B, T, Hkv, D]
        xv = xv.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)  # [B, T, Hkv, D]

        if self.rope == "interleaved":
            xq, xk = apply_rotary_emb_interleaved(xq, xk, freqs_cis)
        elif self.rope == "half":
            xq, xk = apply_rotary_emb_half(xq, xk, freqs_cis)

        self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv
        keys = self.cache_k[:bsz, : start_pos + seqlen]      # [B, S, Hkv, D], S = start_pos+T
        values = self.cache_v[:bsz, : start_pos + seqlen]

        keys = repeat_kv(keys, self.n_rep)                   # [B, S, H, D]
        values = repeat_kv(values, self.n_rep)

        xq = xq.transpose(1, 2)                              # [B, H, T, D]
        keys = keys.transpose(1, 2)                          # [B, H, S, D]
        values = values.transpose(1, 2)                      # [B, H, S, D]
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)  # [B,H,T,S]
        if mask is not None:
            scores = scores + mask                           # [T, S] broadcast
        scores = F.softmax(scores, dim=-1)                   # Meta: .float() then type_as; f64 here
        output = torch.matmul(scores, values)                # [B, H, T, D]
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)  # [B, T, H*D]
        return self.wo(output)                               # [B, T, dim]


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False, dtype=DT)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False, dtype=DT)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False, dtype=DT)

    def forward(self, x):  # x: [B, T, dim] -> [B, T, dim]
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.block = args.block
        self.attention = Attention(args)
        if args.block == "llama":
            self.feed_forward = FeedForward(args.dim, ffn_hidden_dim(args))
            self.attention_norm = RMSNorm(args.dim, eps=args.norm_eps)
            self.ffn_norm = RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x, start_pos: int, freqs_cis, mask):
        if self.block == "attention":  # the notebooks' TransformerBlock: no norms, no FFN
            return x + self.attention(x, start_pos, freqs_cis, mask)
        h = x + self.attention(self.attention_norm(x), start_pos, freqs_cis, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """vocab_size -1: consumes hidden states, no embedding, no final norm, no output head."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.layers = nn.ModuleList(TransformerBlock(l, args) for l in range(args.n_layers))
        self.freqs_cis = None
        if args.rope != "none":
            self.freqs_cis = precompute_freqs_cis(args.head_dim, args.max_seq_len * 2, args.rope_theta)

    @torch.inference_mode()
    def forward(self, h, start_pos: int):  # h: [B, T, dim]
        seqlen = h.shape[1]
        freqs_cis = None
        if self.freqs_cis is not None:
            freqs_cis = self.freqs_cis[start_pos: start_pos + seqlen]  # [T, D/2]
        mask = None
        if seqlen > 1:  # causal, offset by start_pos: [T, start_pos + T]
            mask = torch.full((seqlen, seqlen), float("-inf"), dtype=DT)
            mask = torch.triu(mask, diagonal=1)
            mask = torch.hstack([torch.zeros((seqlen, start_pos), dtype=DT), mask]).type_as(h)
        for layer in self.layers:
            h = layer(h, start_pos, freqs_cis, mask)
        return h


def build_model(args: ModelArgs, weights: dict, dtype=DT) -> Transformer:
    model = Transformer(args)
    model.load_state_dict({k: v.to(DT) for k, v in weights.items()}, strict=True)
    if dtype != DT:  # only for the float32 tolerance check
        model = model.to(dtype)
        for layer in model.layers:
            layer.attention.cache_k = layer.attention.cache_k.to(dtype)
            layer.attention.cache_v = layer.attention.cache_v.to(dtype)
        if model.freqs_cis is not None:
            model.freqs_cis = model.freqs_cis.to(torch.complex64)
    return model


# --------------------------------------------------------------------------------------
# The run: prefill P, then N decode steps (contract section 3), dumped as section 5
# --------------------------------------------------------------------------------------
def run_prefill_decode(model: Transformer, x, P: int, N: int) -> dict:
    """x: [B, P+N, dim]. Returns the dump dict (float64)."""
    B = x.shape[0]
    dump = {"input": x[:, : P + N]}
    dump["prefill.output"] = model(x[:, 0:P], start_pos=0)                    # [B, P, dim]
    for i in range(1, N + 1):
        dump[f"decode.{i}.output"] = model(x[:, P + i - 1: P + i], start_pos=P + i - 1)  # [B,1,dim]
    for l, layer in enumerate(model.layers):  # [B, Hkv, P+N, D], filled part only
        dump[f"cache.{l}.k"] = layer.attention.cache_k[:B, : P + N].transpose(1, 2).contiguous()
        dump[f"cache.{l}.v"] = layer.attention.cache_v[:B, : P + N].transpose(1, 2).contiguous()
    return dump


def check_full_prefill_matches(args, weights, x, P, N, dump):
    """Self-check: one prefill of all P+N positions == prefill P + N decode steps."""
    model = build_model(args, weights)
    full = model(x[:, : P + N], start_pos=0)  # [B, P+N, dim]
    stepped = torch.cat([dump["prefill.output"]] + [dump[f"decode.{i}.output"] for i in range(1, N + 1)], 1)
    err = (full - stepped).abs().max().item()
    assert err < 1e-12, f"full prefill vs prefill+decode differ by {err}"
    B = x.shape[0]
    for l, layer in enumerate(model.layers):
        k = layer.attention.cache_k[:B, : P + N].transpose(1, 2)
        v = layer.attention.cache_v[:B, : P + N].transpose(1, 2)
        assert (k - dump[f"cache.{l}.k"]).abs().max().item() < 1e-12
        assert (v - dump[f"cache.{l}.v"]).abs().max().item() < 1e-12
    return err


def float32_tolerance_use(args, weights, x, P, N, dump) -> float:
    """Run the same model in float32; return max |f32 - f64| / (atol + rtol*|f64|) (must be << 1)."""
    model = build_model(args, weights, dtype=torch.float32)
    d32 = run_prefill_decode(model, x.to(torch.float32), P, N)
    worst = 0.0
    for name, exp in dump.items():
        got = d32[name].to(DT)
        worst = max(worst, ((got - exp).abs() / (ATOL + RTOL * exp.abs())).max().item())
    return worst


def naive_reference(args: ModelArgs, weights: dict, x: torch.Tensor) -> dict:
    """A second, independent implementation: numpy float64, one position at a time, explicit
    loops over heads, the rotation written out as 2x2 rotations, query head h reading kv head
    h // n_rep. Returns outputs [B, T, dim] and caches [B, Hkv, T, D] per layer."""
    W = {k: v.to(DT).numpy() for k, v in weights.items()}
    B, T, dim = x.shape
    H, Hkv, D = args.n_heads, args.kv_heads, args.head_dim
    n_rep = H // Hkv
    inv_freq = np.array([args.rope_theta ** (-2.0 * i / D) for i in range(D // 2)])
    # pairs (a, b) rotated together: interleaved (2i, 2i+1); half (i, i + D/2)
    pairs = [(2 * i, 2 * i + 1) if args.rope == "interleaved" else (i, i + D // 2) for i in range(D // 2)]

    def lin(name, v):
        y = W[name + ".weight"] @ v
        return y + W[name + ".bias"] if name + ".bias" in W else y

    def rms(name, v):
        return v / math.sqrt(np.mean(v * v) + args.norm_eps) * W[name]

    def rot(v, t):  # v: [D] at absolute position t
        if args.rope == "none":
            return v
        out = v.copy()
        for i, (a, b) in enumerate(pairs):
            c, s = math.cos(t * inv_freq[i]), math.sin(t * inv_freq[i])
            out[a], out[b] = v[a] * c - v[b] * s, v[a] * s + v[b] * c
        return out

    xs = x.to(DT).numpy()
    out = np.zeros((B, T, dim))
    caches = {}
    for b in range(B):
        kc = np.zeros((args.n_layers, Hkv, T, D))
        vc = np.zeros((args.n_layers, Hkv, T, D))
        for t in range(T):
            h = xs[b, t]
            for l in range(args.n_layers):
                pre = f"layers.{l}."
                a_in = rms(pre + "attention_norm.weight", h) if args.block == "llama" else h
                q = lin(pre + "attention.wq", a_in).reshape(H, D)
                k = lin(pre + "attention.wk", a_in).reshape(Hkv, D)
                v = lin(pre + "attention.wv", a_in).reshape(Hkv, D)
                for j in range(Hkv):
                    kc[l, j, t], vc[l, j, t] = rot(k[j], t), v[j]
                heads = []
                for hh in range(H):
                    qh = rot(q[hh], t)
                    sc = np.array([qh @ kc[l, hh // n_rep, s] / math.sqrt(D) for s in range(t + 1)])
                    p = np.exp(sc - sc.max())
                    p /= p.sum()
                    heads.append(sum(p[s] * vc[l, hh // n_rep, s] for s in range(t + 1)))
                h = h + lin(pre + "attention.wo", np.concatenate(heads))
                if args.block == "llama":
                    f_in = rms(pre + "ffn_norm.weight", h)
                    g = lin(pre + "feed_forward.w1", f_in)
                    u = lin(pre + "feed_forward.w3", f_in)
                    h = h + lin(pre + "feed_forward.w2", g / (1.0 + np.exp(-g)) * u)
            out[b, t] = h
        for l in range(args.n_layers):
            caches.setdefault(l, ([], []))
            caches[l][0].append(kc[l])
            caches[l][1].append(vc[l])
    return {"out": out, **{f"cache.{l}.{kv}": np.stack(caches[l][i]) for l in caches for i, kv in enumerate("kv")}}


def check_naive_matches(args, weights, x, P, N, dump) -> float:
    ref = naive_reference(args, weights, x)
    stepped = torch.cat([dump["prefill.output"]] + [dump[f"decode.{i}.output"] for i in range(1, N + 1)], 1)
    err = float(np.abs(stepped.numpy() - ref["out"]).max())
    for l in range(args.n_layers):
        for kv in "kv":
            err = max(err, float(np.abs(dump[f"cache.{l}.{kv}"].numpy() - ref[f"cache.{l}.{kv}"]).max()))
    assert err < 1e-12, f"naive reference differs by {err}"
    return err


# --------------------------------------------------------------------------------------
# Weights: contract section 2 names and shapes, drawn deterministically
# --------------------------------------------------------------------------------------
def weight_specs(args: ModelArgs):
    """Ordered (name, shape, kind) in contract section 2 naming, nn.Linear layout [out, in]."""
    D, Hd, Hkv, dim = args.head_dim, args.n_heads, args.kv_heads, args.dim
    specs = []
    for l in range(args.n_layers):
        a = f"layers.{l}.attention"
        linears = [("wq", Hd * D, dim), ("wk", Hkv * D, dim), ("wv", Hkv * D, dim), ("wo", dim, Hd * D)]
        for n, out_f, in_f in linears:
            specs.append((f"{a}.{n}.weight", [out_f, in_f], "linear"))
        if args.attention_bias:
            for n, out_f, _ in linears:
                specs.append((f"{a}.{n}.bias", [out_f], "bias"))
        if args.block == "llama":
            hid = ffn_hidden_dim(args)
            specs.append((f"layers.{l}.attention_norm.weight", [dim], "norm"))
            specs.append((f"layers.{l}.ffn_norm.weight", [dim], "norm"))
            specs.append((f"layers.{l}.feed_forward.w1.weight", [hid, dim], "linear"))
            specs.append((f"layers.{l}.feed_forward.w2.weight", [dim, hid], "linear"))
            specs.append((f"layers.{l}.feed_forward.w3.weight", [hid, dim], "linear"))
    return specs


TORCH_DTYPE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def draw_weights(args: ModelArgs, dtype: str) -> dict:
    """f32 draws, rounded to the storage dtype: these rounded values are what we compute with."""
    weights = {}
    for name, shape, kind in weight_specs(args):
        if kind == "linear":   # normal / sqrt(in_features)
            w = torch.randn(shape) / math.sqrt(shape[1])
        elif kind == "norm":   # 1 + 0.1 * normal
            w = 1.0 + 0.1 * torch.randn(shape)
        else:                  # bias: 0.1 * normal
            w = 0.1 * torch.randn(shape)
        weights[name] = w.to(TORCH_DTYPE[dtype])
    return weights


# --------------------------------------------------------------------------------------
# safetensors, by hand (no python package): <u64 LE header len><JSON header><data>
# --------------------------------------------------------------------------------------
ST_DTYPE = {torch.float32: ("F32", 4), torch.float16: ("F16", 2), torch.bfloat16: ("BF16", 2),
            torch.int32: ("I32", 4)}  # I32: make_model.py's token ids


def tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: reinterpret the bits
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    np_dtype = {torch.float32: "<f4", torch.float16: "<f2", torch.int32: "<i4"}[t.dtype]
    return t.numpy().astype(np_dtype).tobytes()


def print_table(hdr, rows) -> None:
    """The summary the generators print: a header and rows, in aligned columns."""
    table = [hdr] + [tuple(str(v) for v in r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(hdr))]
    for r in table:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))


def write_safetensors(path: str, tensors: dict) -> None:
    """Tensors tile the data section in insertion order; header padded with spaces to 8."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t)
        header[name] = {"dtype": ST_DTYPE[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def read_safetensors(path: str) -> dict:
    """Strict reader, used to check every file written (tiling, sizes, dtypes)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and 8 + n <= len(raw)
    pairs = json.loads(raw[8: 8 + n].decode("utf-8"), object_pairs_hook=lambda kv: kv)
    assert len({k for k, _ in pairs}) == len(pairs), "duplicate keys"
    header = dict(pairs)
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out, spans = {}, []
    for name, info in header.items():
        info = dict(info)
        dt = {v[0]: k for k, v in ST_DTYPE.items()}[info["dtype"]]
        b, e = info["data_offsets"]
        assert e - b == math.prod(info["shape"]) * ST_DTYPE[dt][1], name
        spans.append((b, e))
        buf = bytearray(data[b:e])
        if dt == torch.bfloat16:
            t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if buf else torch.empty(0, dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"])
    pos = 0
    for b, e in sorted(spans):
        assert b == pos, f"{path}: hole or overlap at {b}"
        pos = e
    assert pos == len(data), f"{path}: trailing bytes"
    return out


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    args: ModelArgs
    batch: int
    prefill: int
    steps: int
    dtype: str
    seed: int
    description: str


SEED_ARGS = dict(dim=18, n_layers=1, n_heads=6, n_kv_heads=2, vocab_size=-1, multiple_of=10,
                 norm_eps=1e-5, rope_theta=500000.0, max_batch_size=2, max_seq_len=17,
                 model_parallel_size=1, block="attention", rope="none", attention_bias=False)

CASES = [
    Case("seed_gqa", ModelArgs(**SEED_ARGS), 1, 7, 10, "F32", 2,
         "the seed notebook's ModelArgs exactly (dim 18, 6 heads, 2 kv heads, head_dim 3), "
         "block attention, rope none; P+N fills max_seq_len 17"),
    Case("mha_llama_interleaved", ModelArgs(dim=32, n_heads=4, n_kv_heads=4, multiple_of=32,
         rope_theta=10000.0, max_batch_size=1, max_seq_len=16), 1, 5, 4, "F32", 11,
         "MHA (4 heads = 4 kv heads, head_dim 8), llama block, Meta's interleaved RoPE, theta 1e4"),
    Case("mqa_llama_half", ModelArgs(dim=32, n_heads=8, n_kv_heads=1, multiple_of=16, rope="half",
         max_batch_size=2, max_seq_len=12, norm_eps=1e-6), 1, 4, 3, "F32", 12,
         "MQA (8 heads, 1 kv head, head_dim 4), llama block, Hugging Face rotate_half RoPE"),
    Case("gqa_llama_interleaved_b2", ModelArgs(dim=48, n_heads=6, n_kv_heads=2, multiple_of=32,
         max_batch_size=4, max_seq_len=20), 2, 6, 3, "F32", 13,
         "GQA (6 heads, 2 kv heads, n_rep 3, head_dim 8), llama block, interleaved RoPE, batch 2"),
    Case("attention_bias_interleaved", ModelArgs(dim=24, n_heads=4, n_kv_heads=2, block="attention",
         attention_bias=True, rope_theta=100.0, max_batch_size=2, max_seq_len=10), 2, 3, 3, "F32", 14,
         "block attention with attention_bias (wq/wk/wv/wo biases), GQA head_dim 6, interleaved RoPE "
         "theta 100, batch 2"),
    Case("llama_3layers_ffnmult_half", ModelArgs(dim=24, n_layers=3, n_heads=4, n_kv_heads=2,
         multiple_of=16, ffn_dim_multiplier=1.3, rope="half", max_batch_size=2, max_seq_len=8), 2, 4, 4, "F32", 15,
         "3 stacked llama layers, ffn_dim_multiplier 1.3 (ffn_hidden 96), GQA head_dim 6, half RoPE, "
         "batch 2, P+N fills max_seq_len 8"),
    Case("f16_llama_gqa_interleaved", ModelArgs(dim=32, n_heads=8, n_kv_heads=2, multiple_of=32,
         attention_bias=True, max_batch_size=1, max_seq_len=16), 1, 3, 3, "F16", 16,
         "F16 weights (and biases, norms), GQA 8/2 head_dim 4, llama block, interleaved RoPE"),
    Case("bf16_llama_mqa_half", ModelArgs(dim=32, n_heads=4, n_kv_heads=1, multiple_of=32,
         rope="half", attention_bias=True, max_batch_size=2, max_seq_len=16), 2, 3, 4, "BF16", 17,
         "BF16 weights (and biases, norms), MQA head_dim 8, llama block, half RoPE, batch 2"),
    Case("prefill1_llama_none", ModelArgs(dim=24, n_heads=6, n_kv_heads=3, multiple_of=16,
         rope="none", max_batch_size=1, max_seq_len=6), 1, 1, 5, "F32", 18,
         "prefill of 1 position, then 5 decode steps; GQA 6/3 head_dim 4, llama block, no RoPE; "
         "P+N fills max_seq_len 6"),
    Case("mha_attention_half", ModelArgs(dim=24, n_heads=3, n_kv_heads=None, block="attention",
         rope="half", rope_theta=10000.0, max_batch_size=1, max_seq_len=9), 1, 3, 5, "F32", 19,
         "n_kv_heads null (= n_heads 3, MHA), head_dim 8, block attention, half RoPE, theta 1e4"),
]


def check_half_is_permuted_interleaved(c: Case):
    """Self-check of the two RoPE layouts: `half` on wq/wk whose rows are permuted within each
    head to (0,2,4,..,1,3,5,..) (what HF's llama conversion script does) gives the same outputs
    as `interleaved` on the original weights, and the same k cache up to that permutation."""
    torch.manual_seed(c.seed)
    weights = draw_weights(c.args, c.dtype)
    x = torch.randn(c.batch, c.prefill + c.steps, c.args.dim).to(DT)
    D = c.args.head_dim
    perm_head = torch.cat([torch.arange(0, D, 2), torch.arange(1, D, 2)])  # [D]
    permuted = dict(weights)
    for name, w in weights.items():
        if any(f".attention.{n}." in name for n in ("wq", "wk")):
            heads = w.shape[0] // D
            rows = (perm_head[None, :] + D * torch.arange(heads)[:, None]).reshape(-1)
            permuted[name] = w[rows]
    a_int = ModelArgs(**{**asdict(c.args), "rope": "interleaved"})
    a_half = ModelArgs(**{**asdict(c.args), "rope": "half"})
    d_int = run_prefill_decode(build_model(a_int, weights), x, c.prefill, c.steps)
    d_half = run_prefill_decode(build_model(a_half, permuted), x, c.prefill, c.steps)
    for name in d_int:
        exp = d_int[name][..., perm_head] if name.endswith(".k") else d_int[name]
        assert (d_half[name] - exp).abs().max().item() < 1e-12, name


def check_coverage(cases):
    """The brief's required coverage, so an edited case list cannot silently drop one."""
    assert ffn_hidden_dim(ModelArgs(**SEED_ARGS)) == 50  # the contract's worked example
    a = [c.args for c in cases]
    assert any(x.kv_heads == x.n_heads for x in a) and any(x.kv_heads == 1 for x in a)
    assert any(1 < x.kv_heads < x.n_heads for x in a)
    assert {x.rope for x in a} == {"interleaved", "half", "none"}
    assert {x.block for x in a} == {"llama", "attention"}
    assert any(x.attention_bias for x in a) and any(x.n_layers == 3 for x in a)
    assert any(x.ffn_dim_multiplier is not None and x.block == "llama" for x in a)
    assert {c.dtype for c in cases} == {"F32", "F16", "BF16"}
    assert any(c.batch == 2 for c in cases) and any(c.prefill == 1 for c in cases)
    assert any(c.prefill + c.steps == c.args.max_seq_len for c in cases)
    assert any(asdict(c.args) == SEED_ARGS | {"n_layers": 1, "ffn_dim_multiplier": None} for c in cases)


def validate(c: Case):
    a = c.args
    assert a.dim % a.n_heads == 0 and a.n_heads % a.kv_heads == 0
    assert a.kv_heads % a.model_parallel_size == 0
    if a.rope != "none":
        assert a.head_dim % 2 == 0 and a.head_dim >= 4
    assert c.batch <= a.max_batch_size and c.prefill + c.steps <= a.max_seq_len
    assert c.steps >= 3 and c.prefill >= 1


def make_case(c: Case) -> dict:
    validate(c)
    torch.manual_seed(c.seed)
    weights = draw_weights(c.args, c.dtype)                                   # storage dtype
    x = torch.randn(c.batch, c.prefill + c.steps, c.args.dim)                # [B, P+N, dim] f32
    x64 = x.to(DT)

    model = build_model(c.args, weights)
    dump = run_prefill_decode(model, x64, c.prefill, c.steps)
    full_err = check_full_prefill_matches(c.args, weights, x64, c.prefill, c.steps, dump)
    naive_err = check_naive_matches(c.args, weights, x64, c.prefill, c.steps, dump)
    tol_use = float32_tolerance_use(c.args, weights, x64, c.prefill, c.steps, dump)
    assert tol_use < 0.1, f"{c.name}: a float32 run uses {tol_use:.3f} of the tolerance"

    out = os.path.join(HERE, c.name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(asdict(c.args), f, indent=2)
        f.write("\n")
    files = {
        "weights.safetensors": weights,
        "input.safetensors": {"x": x},
        "expected.safetensors": {k: v.to(torch.float32) for k, v in dump.items()},
    }
    for fname, tensors in files.items():
        path = os.path.join(out, fname)
        write_safetensors(path, tensors)
        back = read_safetensors(path)
        assert list(back) == list(tensors)
        for k in tensors:
            assert back[k].dtype == tensors[k].dtype and torch.equal(back[k], tensors[k]), (path, k)
    assert torch.equal(files["expected.safetensors"]["input"], x)

    # This script's files only: the per-rank weights beside them are another script's.
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if ".rank" not in f)
    assert size < 200_000, f"{c.name}: {size} bytes"
    return dict(size=size, full_err=full_err, naive_err=naive_err, tol_use=tol_use,
                max_abs=max(v.abs().max().item() for v in dump.values()))


def main():
    check_coverage(CASES)
    check_half_is_permuted_interleaved(CASES[3])  # GQA, batch 2, head_dim 8
    check_half_is_permuted_interleaved(CASES[4])  # with biases (the wq/wk biases are permuted too)
    rows, manifest = [], []
    for c in CASES:
        r = make_case(c)
        a = c.args
        manifest.append({
            "name": c.name, "batch": c.batch, "prefill": c.prefill, "steps": c.steps,
            "tolerance": {"rtol": RTOL, "atol": ATOL},
            "weights_dtype": c.dtype,
            "description": c.description,
        })
        rows.append((c.name, a.block, a.rope, f"{a.dim}/{a.n_heads}/{a.kv_heads}/{a.head_dim}",
                     a.n_layers, "y" if a.attention_bias else "n",
                     ffn_hidden_dim(a) if a.block == "llama" else "-",
                     f"{c.batch}/{c.prefill}/{c.steps}", f"{c.prefill + c.steps}/{a.max_seq_len}",
                     c.dtype, r["size"], f"{r['full_err']:.1e}", f"{r['naive_err']:.1e}", f"{r['tol_use']:.4f}", f"{r['max_abs']:.2f}"))
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")

    hdr = ("case", "block", "rope", "dim/H/Hkv/D", "L", "bias", "ffn", "B/P/N", "P+N/max",
           "dtype", "bytes", "full-pf", "naive", "f32/tol", "max|y|")
    print_table(hdr, rows)
    total = sum(r[10] for r in rows) + os.path.getsize(os.path.join(HERE, "cases.json"))
    print(f"\n{len(rows)} cases, {total} bytes of fixtures; tolerance rtol {RTOL} atol {ATOL}")
    print("full-pf: max |prefill(P+N) - (prefill P + N decodes)| in float64 (asserted < 1e-12)")
    print("naive: max |Meta-style reference - numpy per-position loop reference| (asserted < 1e-12)")
    print("f32/tol: worst |f32 run - f64| / (atol + rtol*|exp|) (asserted < 0.1)")


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
