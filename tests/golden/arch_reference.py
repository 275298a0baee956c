#!/usr/bin/python3
"""A float64 NumPy reference of the architectures of issue 48, on any GGUF type.

Written from each model's published equations (Meta's llama model.py and Llama 3's RoPE scaling,
Qwen2/Qwen3, Gemma 2/3 (gemma_pytorch and Hugging Face's modeling files), Phi-3 (LongRoPE), Granite,
OLMo 2), with the file's conventions taken where llama.cpp's converter fixes them (see NOTES).
Each tensor is widened with gguf-py's gguf.quants.dequantize, so the reference is exact on the
dequantized weights of every type.

  arch_reference.py MODEL.gguf [--n-ctx 256] [--steps 16] TOKEN...
prints the greedy ids after the prompt and each position's top logit.

NOTES (what an implementation must match; where llama.cpp's graph fixes a choice):
- RoPE pairs: llama and granite files rotate adjacent pairs (2i, 2i+1): the converter permuted
  Q/K rows from Hugging Face's halves; every other architecture here rotates halves (i, i+n_rot/2)
  as its checkpoint does (llama.cpp's NEOX). Partial rotary (rope.dimension_count < head_dim):
  the first n_rot dims of each head rotate, the rest pass.
- angle(pos, i) = pos * freq_scale * base^(-2i/n_rot) / factor[i]; cos and sin both multiplied
  by attn_factor (rope.scaling.attn_factor; Phi-3's LongRoPE magnitude, so scores scale by its
  square). factor: rope_freqs.weight (Llama 3), or Phi-3's rope_factors_long when the context
  (n_ctx) exceeds rope.scaling.original_context_length, else rope_factors_short (llama.cpp
  chooses by context size; Hugging Face by the current sequence length).
- freq_scale = 1/rope.scaling.factor (linear); Gemma 3 applies it and rope.freq_base only to
  global layers, its sliding layers use rope.freq_base_swa (default 10000) unscaled.
- Sliding window: a key at position j is hidden from the query at i when i - j >= sliding_window.
  Gemma 2: layers 0, 2, 4.. slide (pattern 2); Gemma 3: all but every 6th (il % 6 < 5 slide),
  unless attention.sliding_window_pattern is in the file. Phi-3's sliding_window is ignored
  (llama.cpp disables it).
- Gemma 2/3 query scale: 1/sqrt(key_length) (query_pre_attn_scalar is not in the GGUF; llama.cpp
  uses 1/sqrt(n_embd/n_head) only for the 27B models, 46 and 62 layers). Attention soft-cap
  cap*tanh(s/cap) on the scaled scores, before the mask; final soft-cap on the logits.
  Embeddings times sqrt(n_embd). Norm weights used as stored (the converter added the 1).
  GeGLU: gelu (tanh form) of gate times up.
- Granite: embeddings times embedding_scale, scores times attention.scale (instead of
  1/sqrt(head_dim)), each block's attention and FFN output times residual_scale before the
  residual add, logits divided by logit_scale.
- OLMo 2: no pre-norms; RMSNorm of the whole q (n_head*head_dim) and k (n_head_kv*head_dim)
  projections before RoPE; the attention and FFN outputs RMS-normed before the residual add.
- Qwen3 / Gemma 3: RMSNorm of each head of q and k (one head_dim weight) before RoPE.
- Phi-3: attn_qkv rows are q, k, v; ffn_up rows are gate then up (SwiGLU).
- Tied embeddings: output.weight absent means token_embd.weight.
"""
import argparse
import math
import os
import pathlib
import sys

import numpy as np

LLAMA_CPP = pathlib.Path(os.environ.get(
    "LLAMA_CPP_ROOT", pathlib.Path.home() / ".cache/attn-cli/llama.cpp/3.22.1"))
sys.path.insert(0, str(pathlib.Path(os.environ.get("LLAMA_CPP_SRC", LLAMA_CPP / "src")) / "gguf-py"))
import gguf  # noqa: E402

NEOX = {"qwen2", "qwen3", "gemma2", "gemma3", "phi3", "olmo2"}  # rotate halves; others pairs


class Model:
    """A GGUF's config and tensors, widened to float64."""

    def __init__(self, path, n_ctx=64):
        r = gguf.GGUFReader(str(path))
        self.kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.")}
        self.arch = self.kv["general.architecture"]
        self.t = {}
        for t in r.tensors:
            data = t.data
            if t.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F64):
                data = gguf.quants.dequantize(data, t.tensor_type)
            self.t[t.name] = np.asarray(data, dtype=np.float64)
        a = self.arch
        g = lambda key, default=None: self.kv.get(f"{a}.{key}", default)  # noqa: E731
        self.n_layer = g("block_count")
        self.n_embd = g("embedding_length")
        self.n_head = g("attention.head_count")
        self.n_head_kv = g("attention.head_count_kv", self.n_head)
        self.head_dim = g("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = g("rope.dimension_count", self.head_dim)
        self.eps = g("attention.layer_norm_rms_epsilon")
        self.base = g("rope.freq_base", 10000.0)
        self.base_swa = g("rope.freq_base_swa", 10000.0 if a == "gemma3" else self.base)
        factor = g("rope.scaling.factor", g("rope.scale_linear", 0.0))
        self.freq_scale = 1.0 / factor if factor else 1.0
        self.attn_factor = g("rope.scaling.attn_factor", 1.0)
        self.n_swa = g("attention.sliding_window", 0)
        self.attn_cap = g("attn_logit_softcapping", 0.0)
        self.final_cap = g("final_logit_softcapping", 0.0)
        self.emb_scale = g("embedding_scale", 0.0)
        self.res_scale = g("residual_scale", 0.0)
        self.logit_scale = g("logit_scale", 0.0)
        self.attn_scale = g("attention.scale", 0.0)
        self.is_swa = self._swa_layers(g("attention.sliding_window_pattern"))
        self.rope_factors = self.t.get("rope_freqs.weight")
        if "rope_factors_long.weight" in self.t:
            orig = g("rope.scaling.original_context_length", g("context_length"))
            self.rope_factors = self.t["rope_factors_long.weight" if n_ctx > orig
                                       else "rope_factors_short.weight"]
        self.out = self.t.get("output.weight", self.t["token_embd.weight"])
        self.gelu = gelu_tanh

    def _swa_layers(self, pattern):
        n = self.n_layer
        if self.arch not in ("gemma2", "gemma3", "olmo2") or not self.n_swa:
            return [False] * n
        if isinstance(pattern, list):
            return [bool(p) for p in pattern]
        p = pattern if pattern is not None else {"gemma2": 2, "gemma3": 6, "olmo2": 4}[self.arch]
        return [p == 0 or il % p < p - 1 for il in range(n)]

    def w(self, name):
        return self.t[name]

    def q_scale(self):
        if self.arch == "granite" and self.attn_scale:
            return self.attn_scale
        if (self.arch, self.n_layer) in (("gemma2", 46), ("gemma3", 62)):
            return 1.0 / math.sqrt(self.n_embd // self.n_head)
        return 1.0 / math.sqrt(self.head_dim)


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * x * (1.0 + 0.044715 * x * x)))


def gelu_f16_table(x):
    """llama.cpp's CPU GELU (GGML_GELU_FP16): the input rounded to F16, the tanh form in float32
    rounded to F16 again; exact past +-10. Only to validate the rest of the reference against
    llama.cpp: never what an exact implementation should match."""
    x16 = x.astype(np.float32).astype(np.float16).astype(np.float32)
    y = (0.5 * x16 * (1.0 + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * x16
                                    * (1.0 + np.float32(0.044715) * x16 * x16))))
    y = y.astype(np.float16).astype(np.float64)
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, y))


def rope(x, pos, m, il):
    """x [T, heads, head_dim] rotated at positions pos [T] (see NOTES)."""
    swa = m.is_swa[il]
    base = m.base_swa if swa else m.base
    scale = 1.0 if (swa and m.arch == "gemma3") else m.freq_scale
    half = m.n_rot // 2
    inv = base ** (-2.0 * np.arange(half) / m.n_rot)
    if m.rope_factors is not None:
        inv = inv / m.rope_factors
    ang = np.outer(pos * scale, inv)[:, None, :]  # [T, 1, half]
    cos, sin = np.cos(ang) * m.attn_factor, np.sin(ang) * m.attn_factor
    out = x.copy()
    if m.arch in NEOX:
        a, b = x[..., :half], x[..., half:2 * half]
        out[..., :half], out[..., half:2 * half] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2], out[..., 1:2 * half:2] = a * cos - b * sin, a * sin + b * cos
    return out


def attention(h, m, il):
    p = f"blk.{il}."
    T, hd = h.shape[0], m.head_dim
    if p + "attn_qkv.weight" in m.t:
        qkv = h @ m.w(p + "attn_qkv.weight").T
        nq, nk = m.n_head * hd, m.n_head_kv * hd
        q, k, v = qkv[:, :nq], qkv[:, nq:nq + nk], qkv[:, nq + nk:]
    else:
        q, k, v = (h @ m.w(p + f"attn_{n}.weight").T for n in "qkv")
    for n, name in ((0, "q"), (1, "k"), (2, "v")):
        b = m.t.get(p + f"attn_{name}.bias")
        if b is not None:
            if n == 0:
                q = q + b
            elif n == 1:
                k = k + b
            else:
                v = v + b
    if m.arch == "olmo2":  # over the whole projection
        q, k = rms(q, m.w(p + "attn_q_norm.weight"), m.eps), rms(k, m.w(p + "attn_k_norm.weight"), m.eps)
    q = q.reshape(T, m.n_head, hd)
    k = k.reshape(T, m.n_head_kv, hd)
    v = v.reshape(T, m.n_head_kv, hd)
    if m.arch in ("qwen3", "gemma3"):  # per head
        q, k = rms(q, m.w(p + "attn_q_norm.weight"), m.eps), rms(k, m.w(p + "attn_k_norm.weight"), m.eps)
    pos = np.arange(T, dtype=np.float64)
    q, k = rope(q, pos, m, il), rope(k, pos, m, il)
    group = m.n_head // m.n_head_kv
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("ihd,jhd->hij", q, k) * m.q_scale()
    if m.attn_cap:
        s = m.attn_cap * np.tanh(s / m.attn_cap)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    hidden = j > i
    if m.is_swa[il]:
        hidden |= (i - j) >= m.n_swa
    s = np.where(hidden[None], -np.inf, s)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    o = np.einsum("hij,jhd->ihd", s, v).reshape(T, m.n_head * hd)
    return o @ m.w(p + "attn_output.weight").T


def ffn(h, m, il):
    p = f"blk.{il}."
    if p + "ffn_gate.weight" in m.t:
        gate, up = h @ m.w(p + "ffn_gate.weight").T, h @ m.w(p + "ffn_up.weight").T
    else:  # Phi-3's fused gate/up
        gu = h @ m.w(p + "ffn_up.weight").T
        gate, up = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
    act = m.gelu(gate) if m.arch in ("gemma2", "gemma3") else gate / (1.0 + np.exp(-gate))
    return (act * up) @ m.w(p + "ffn_down.weight").T


def hidden_states(m, tokens):
    """The final normed hidden state of every position [T, n_embd]."""
    x = m.w("token_embd.weight")[np.asarray(tokens)]
    if m.arch in ("gemma2", "gemma3"):
        x = x * math.sqrt(m.n_embd)
    if m.emb_scale:
        x = x * m.emb_scale
    post = m.arch in ("gemma2", "gemma3", "olmo2")
    rs = m.res_scale or 1.0
    for il in range(m.n_layer):
        p = f"blk.{il}."
        h = x if m.arch == "olmo2" else rms(x, m.w(p + "attn_norm.weight"), m.eps)
        a = attention(h, m, il)
        if post:
            a = rms(a, m.w(p + "post_attention_norm.weight"), m.eps)
        x = x + a * rs
        h = x if m.arch == "olmo2" else rms(x, m.w(p + "ffn_norm.weight"), m.eps)
        f = ffn(h, m, il)
        if post:
            f = rms(f, m.w(p + "post_ffw_norm.weight"), m.eps)
        x = x + f * rs
    return rms(x, m.w("output_norm.weight"), m.eps)


def logits_of(m, h):
    z = h @ m.out.T
    if m.logit_scale:
        z = z / m.logit_scale
    if m.final_cap:
        z = m.final_cap * np.tanh(z / m.final_cap)
    return z


def run(m, prompt, steps):
    """(ids, logits): the greedy ids after the prompt and the logits of every position of
    prompt + ids[:-1] ([len(prompt) + steps - 1... rows]: prefill rows then one per step)."""
    tokens = list(prompt)
    rows = list(logits_of(m, hidden_states(m, tokens)))
    ids = []
    for s in range(steps):
        nxt = int(np.argmax(rows[-1]))
        ids.append(nxt)
        if s + 1 == steps:
            break
        tokens.append(nxt)
        rows.append(logits_of(m, hidden_states(m, tokens)[-1:])[0])
    return ids, np.array(rows)


def forced(m, tokens):
    """The logits of every position of tokens (teacher forcing; causal, so equal to decoding)."""
    return logits_of(m, hidden_states(m, tokens))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("tokens", nargs="+", type=int)
    ap.add_argument("--n-ctx", type=int, default=256)  # check_archs.py's (Phi-3: which factors)
    ap.add_argument("--steps", type=int, default=16)
    a = ap.parse_args()
    m = Model(a.model, a.n_ctx)
    ids, rows = run(m, a.tokens, a.steps)
    print("greedy", *ids)
    for r in rows:
        top = np.sort(r)[-2:]
        print(f"max {top[1]:.6f} margin {top[1] - top[0]:.6f} spread {r.std():.3f}")


if __name__ == "__main__":
    main()
