#!/usr/bin/python3
"""One Llama-3-8B layer in PyTorch eager, timed the way `attn-cli bench` times its own.

The model is Meta's llama model.py (RMSNorm, precompute_freqs_cis, apply_rotary_emb with
complex numbers, Attention with cache_k/cache_v and repeat_kv, FeedForward, TransformerBlock)
with nn.Linear for the parallel linears, batch 1, random weights (normal * 0.02).

  /usr/bin/python3 bench/torch_layer.py [--prefill 512] [--steps 128] [--threads 2]
                                        [--dtype float32|bfloat16] [--json]

--dtype bfloat16 does what a PyTorch user would: the fp32 layer, its weights drawn as above, is
converted with model.to(torch.bfloat16) (weights and norm weights), the KV cache cache_k/cache_v
(plain tensors, which Module.to leaves alone) is converted to bfloat16 too, and so is the input;
freqs_cis stays complex64 and Meta's code still does rotary and softmax in fp32 (.float() then
.type_as). torch's bf16 matmuls (the linears and attention's) go to oneDNN's matmul, not to
OpenBLAS; ONEDNN_VERBOSE=1 shows the kernel it picked (brg:avx512_core_bf16 on a CPU with
avx512_bf16), which is threaded by torch's OpenMP pool (torch.set_num_threads).

Warm-up: a prefill of min(P, 32) and 3 decode steps. Then the best of 3 prefills of P positions
(as attn-cli bench takes it) and N decode steps at start_pos P+i, each timed alone. Percentiles are taken as attn-cli takes them
(sorted[n/2], sorted[n/10], sorted[9n/10]); GFLOP/s uses attn-cli's flop count.
torch's fp32 matmuls go to OpenBLAS (BLAS_INFO=generic), whose pthreads pool ignores
torch.set_num_threads: it gets openblas_set_num_threads(T) too. The JSON has "dtype" (the
--dtype given) and "weight_bytes": every parameter (the 7 matrices and the 2 norm weights, as
attn-cli counts them) at that dtype's size.
"""
import argparse
import ctypes
import json
import math
import re
import resource
import sys
import time
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelArgs:  # configs/llama3-8b-layer.json
    dim: int = 4096
    n_heads: int = 32
    n_kv_heads: int = 8
    multiple_of: int = 1024
    ffn_dim_multiplier: Optional[float] = 1.3
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    max_batch_size: int = 1
    max_seq_len: int = 2048


def linear(in_features: int, out_features: int) -> nn.Linear:
    return nn.utils.skip_init(nn.Linear, in_features, out_features, bias=False)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


def precompute_freqs_cis(dim: int, end: int, theta: float):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def reshape_for_broadcast(freqs_cis, x):
    shape = [d if i == 1 or i == x.ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep: int):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.n_heads, args.n_kv_heads
        self.n_rep = self.n_heads // self.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = linear(args.dim, args.n_heads * self.head_dim)
        self.wk = linear(args.dim, self.n_kv_heads * self.head_dim)
        self.wv = linear(args.dim, self.n_kv_heads * self.head_dim)
        self.wo = linear(args.n_heads * self.head_dim, args.dim)
        shape = (args.max_batch_size, args.max_seq_len, self.n_kv_heads, self.head_dim)
        self.cache_k = torch.zeros(shape)
        self.cache_v = torch.zeros(shape)

    def forward(self, x, start_pos: int, freqs_cis, mask):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)

        self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv
        keys = repeat_kv(self.cache_k[:bsz, : start_pos + seqlen], self.n_rep)
        values = repeat_kv(self.cache_v[:bsz, : start_pos + seqlen], self.n_rep)

        xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


def ffn_hidden_dim(args: ModelArgs) -> int:
    hidden_dim = int(2 * (4 * args.dim) / 3)
    if args.ffn_dim_multiplier is not None:
        hidden_dim = int(args.ffn_dim_multiplier * hidden_dim)
    return args.multiple_of * ((hidden_dim + args.multiple_of - 1) // args.multiple_of)


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.w1 = linear(dim, hidden_dim)
        self.w2 = linear(hidden_dim, dim)
        self.w3 = linear(dim, hidden_dim)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, ffn_hidden_dim(args))
        self.attention_norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x, start_pos: int, freqs_cis, mask):
        h = x + self.attention(self.attention_norm(x), start_pos, freqs_cis, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Layer(nn.Module):
    """Meta's Transformer.forward around one block: no embedding, no final norm, no output."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.block = TransformerBlock(args)
        self.freqs_cis = precompute_freqs_cis(args.dim // args.n_heads, args.max_seq_len * 2,
                                              args.rope_theta)

    def forward(self, h, start_pos: int):
        seqlen = h.shape[1]
        freqs_cis = self.freqs_cis[start_pos: start_pos + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"))
            mask = torch.triu(mask, diagonal=1)
            mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask]).type_as(h)
        return self.block(h, start_pos, freqs_cis, mask)


def openblas():
    """torch's OpenBLAS (already loaded by torch), or None if this torch uses another BLAS."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib
    except (OSError, AttributeError):
        return None


def blas_info() -> str:
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return m.group(1) if m else "?"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prefill", type=int, default=512)
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    args = ModelArgs()
    P, N = a.prefill, a.steps
    dtype = getattr(torch, a.dtype)
    if P < 1 or N < 1 or a.threads < 1 or P + N > args.max_seq_len:
        p.error(f"need --prefill, --steps, --threads >= 1 and P + N <= {args.max_seq_len}")

    torch.set_num_threads(a.threads)
    blas = openblas()
    if blas is not None:
        blas.openblas_set_num_threads(a.threads)
    torch.manual_seed(0)
    with torch.inference_mode():
        model = Layer(args)
        mats = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
        for w in mats:
            w.normal_(0.0, 0.02)  # = torch.randn * 0.02, in place
        x = torch.randn(1, P + N, args.dim)
        if dtype != torch.float32:
            model.to(dtype)  # parameters and buffers; the KV cache is neither:
            attn = model.block.attention
            attn.cache_k, attn.cache_v = attn.cache_k.to(dtype), attn.cache_v.to(dtype)
            x = x.to(dtype)

        P0 = min(P, 32)
        model(x[:, :P0], 0)
        for i in range(3):
            model(x[:, :1], P0 + i)  # any input row will do; start_pos as in a real decode

        prefill_s = math.inf
        for _ in range(3):  # best of 3, as attn-cli bench takes it
            t0 = time.perf_counter()
            model(x[:, :P], 0)
            prefill_s = min(prefill_s, time.perf_counter() - t0)
        step_ms = []
        for i in range(N):
            t0 = time.perf_counter()
            model(x[:, P + i: P + i + 1], P + i)
            step_ms.append((time.perf_counter() - t0) * 1e3)

    step_ms.sort()
    med, p10, p90 = step_ms[N // 2], step_ms[N // 10], step_ms[N * 9 // 10]
    hd = args.dim // args.n_heads
    gflop = (2 * P * sum(w.numel() for w in mats) + 4 * P * (P + 1) / 2 * args.n_heads * hd) / 1e9
    weight_bytes = sum(t.numel() * t.element_size() for t in model.parameters())  # as attn-cli
    r = {
        "dtype": a.dtype,
        "prefill_positions": P,
        "prefill_ms": prefill_s * 1e3,
        "prefill_positions_per_s": P / prefill_s,
        "prefill_gflop": gflop,
        "prefill_gflops": gflop / prefill_s,
        "decode_steps": N,
        "decode_ms_median": med,
        "decode_ms_p10": p10,
        "decode_ms_p90": p90,
        "decode_steps_per_s": 1e3 / med,
        "decode_gbs": weight_bytes / (med * 1e-3) / 1e9,
        "weight_bytes": weight_bytes,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": torch.get_num_threads(),
        "openblas_threads": blas.openblas_get_num_threads() if blas else None,
        "openblas_core": blas.openblas_get_corename().decode() if blas else None,
        "blas_info": blas_info(),
        "torch_version": torch.__version__,
    }
    if a.json:
        print(json.dumps(r))
    else:
        print(f"torch {r['torch_version']}, {a.dtype}, threads {r['threads']}, "
              f"BLAS {r['blas_info']} (OpenBLAS core {r['openblas_core']}, "
              f"{r['openblas_threads']} threads)")
        print(f"prefill: {r['prefill_ms']:10.2f} ms / {P} positions "
              f"({r['prefill_positions_per_s']:.2f} positions/s, "
              f"{r['prefill_gflops']:.1f} GFLOP/s of {gflop:.1f} GFLOP)")
        print(f"decode:  {med:10.2f} ms per step median, p10 {p10:.2f}, p90 {p90:.2f} ({N} steps, "
              f"{r['decode_steps_per_s']:.2f} steps/s, {r['decode_gbs']:.2f} GB/s of "
              f"{weight_bytes / 1e6:.1f} MB weights)")
        print(f"peak resident memory: {r['peak_rss_mb']:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
