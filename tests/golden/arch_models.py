#!/usr/bin/python3
"""Small GGUF test models, one per architecture of issue 48, written with llama.cpp's own gguf-py.

Each file carries the metadata keys, tensor names and shape rules llama.cpp's converter
(convert_hf_to_gguf.py, conversion/*.py) writes for that architecture, with drawn weights at small
dimensions (every matrix row a multiple of 256, so each K-quant applies without fallback) and a real
vocabulary copied from llama.cpp's models/ggml-vocab-*.gguf (its tokenizer.* keys).

  arch_models.py OUT_DIR                 write <name>.F32.gguf for every model in MODELS
  arch_models.py OUT_DIR --only qwen3    just those
  arch_models.py OUT_DIR --quantize      also run llama-quantize to every type of TYPES
                                         (<name>.<TYPE>.gguf; types llama-quantize lacks are skipped)

Needs PYTHONPATH=<llama.cpp src>/gguf-py (or LLAMA_CPP_SRC) and /usr/bin/python3 (numpy).
The weights are scaled so the logits spread over several units: greedy ids then do not flip on
rounding. Gemma's RMSNorm weights are stored as llama.cpp's converter stores them (the +1 added).
"""
import argparse
import math
import os
import pathlib
import subprocess
import sys

import numpy as np

LLAMA_CPP = pathlib.Path(os.environ.get(
    "LLAMA_CPP_ROOT", pathlib.Path.home() / ".cache/attn-cli/llama.cpp/3.22.1"))
SRC = pathlib.Path(os.environ.get("LLAMA_CPP_SRC", LLAMA_CPP / "src"))
QUANTIZE = LLAMA_CPP / "build/bin/llama-quantize"
sys.path.insert(0, str(SRC / "gguf-py"))
import gguf  # noqa: E402

# The types of the "Done when", as llama-quantize names them (F32 is the written file).
TYPES = ["F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
         "Q3_K_M", "Q2_K", "IQ4_XS"]

# One row per test model. Common dimensions: n_embd 256, 4 heads, 2 KV heads (GQA), n_ff 512.
# vocab: which llama.cpp vocab file lends its tokenizer (sizes kept so each F32 file stays small).
# Phi-3's LongRoPE factors are chosen by the context the model runs with (llama.cpp: long when
# n_ctx, padded to a multiple of 256, exceeds rope.scaling.original_context_length): at the tests'
# context of 256, phi3 (original 256) runs its short factors and phi4mini (original 16) its long
# ones, at positions past that original length.
MODELS = {
    "llama": dict(arch="llama", vocab="llama-spm", layers=3, seed=1),
    "llama3": dict(arch="llama", vocab="llama-spm", layers=3, seed=2, rope_freqs=True),
    "qwen2": dict(arch="qwen2", vocab="deepseek-coder", layers=3, seed=3),
    "qwen3": dict(arch="qwen3", vocab="deepseek-coder", layers=3, seed=14, head_dim=128),
    "gemma2": dict(arch="gemma2", vocab="llama-spm", layers=4, seed=5, head_dim=128),
    "gemma3": dict(arch="gemma3", vocab="llama-spm", layers=6, seed=6, head_dim=128,
                   n_ff=256),
    "phi3": dict(arch="phi3", vocab="phi-3", layers=3, seed=7, orig_ctx=256, max_ctx=2048),
    "phi4mini": dict(arch="phi3", vocab="deepseek-coder", layers=3, seed=8,
                     partial_rotary=0.75, orig_ctx=16, max_ctx=256),
    "granite": dict(arch="granite", vocab="deepseek-coder", layers=3, seed=9),
    "olmo2": dict(arch="olmo2", vocab="llama-spm", layers=3, seed=10),
}

N_EMBD, N_HEAD, N_HEAD_KV, N_FF = 256, 4, 2, 512
SLIDING_WINDOW = 8  # Gemma's: shorter than prompt + steps, so the window masks keys
# Blocks' output gains where the input token would otherwise decide the greedy chain (Granite's
# residual_scale shrinks the blocks; Qwen3's chain otherwise settles on one id at once).
OUT_GAIN = {"granite": 4.0, "qwen3": 2.0}


def vocab_fields(name):
    """The tokenizer.* keys of llama.cpp's models/ggml-vocab-<name>.gguf, as (key, value, type, sub)."""
    reader = gguf.GGUFReader(SRC / "models" / f"ggml-vocab-{name}.gguf")
    out = []
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if sub == gguf.GGUFValueType.STRING:
            value = [v.encode("utf-8") if isinstance(v, str) else v for v in value]
        out.append((key, value, vtype, sub))
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    return out, n_vocab


class Drawer:
    """Weights drawn from one seeded generator, in a fixed order (the file is reproducible)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def matrix(self, n_out, n_in, gain=1.0):
        # rows (n_out) of n_in: GGUF's ne = [n_in, n_out]; std gain/sqrt(n_in) keeps activations O(1)
        return (self.rng.standard_normal((n_out, n_in)) * gain / math.sqrt(n_in)).astype(np.float32)

    def norm(self, n, center=1.0):
        return (center + 0.1 * self.rng.standard_normal(n)).astype(np.float32)

    def bias(self, n):
        return (0.1 * self.rng.standard_normal(n)).astype(np.float32)

    def embedding(self, n_vocab, n_embd, std):
        return (self.rng.standard_normal((n_vocab, n_embd)) * std).astype(np.float32)


def llama3_rope_factors(head_dim, base, factor=32.0, low=1.0, high=4.0, old_ctx=8192):
    """rope_freqs.weight as conversion/llama.py computes it for rope_type llama3 (Llama 3.2's)."""
    freqs = 1.0 / (np.float32(base) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)))
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            factors.append(1)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def longrope_factors(rng, n):
    """Phi-3's short and long factors: short near 1, long growing with the dimension (as trained)."""
    short = 1.0 + 0.05 * rng.random(n)
    long = 1.0 + np.linspace(0.0, 1.0, n) ** 2 * 40.0 * (1.0 + 0.1 * rng.random(n))
    return short.astype(np.float32), long.astype(np.float32)


def write_model(name, spec, path):
    arch = spec["arch"]
    d = Drawer(spec["seed"])
    fields, n_vocab = vocab_fields(spec["vocab"])
    L = spec["layers"]
    head_dim = spec.get("head_dim", N_EMBD // N_HEAD)
    n_ff = spec.get("n_ff", N_FF)
    q_dim, kv_dim = N_HEAD * head_dim, N_HEAD_KV * head_dim
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"attn-cli test {name}")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_block_count(L)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    tensors = {}
    gemma = arch in ("gemma2", "gemma3")
    # Norm weights: Gemma's converter adds 1 to the checkpoint's (w - 1) form, so both sit near 1.
    norm = lambda n: d.norm(n)  # noqa: E731

    # -- metadata, as each converter writes it
    if arch in ("llama", "granite"):
        w.add_context_length(131072 if spec.get("rope_freqs") else 4096)
        w.add_rope_freq_base(500000.0 if spec.get("rope_freqs") else 10000.0)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_vocab_size(n_vocab)
        w.add_rope_dimension_count(head_dim)
    if arch == "granite":
        w.add_attention_scale(0.09)      # attention_multiplier (replaces 1/sqrt(head_dim))
        w.add_embedding_scale(12.0)      # embedding_multiplier
        w.add_residual_scale(0.22)       # residual_multiplier
        w.add_logit_scale(2.0)           # logits_scaling (logits divided by it)
    if arch in ("qwen2", "qwen3"):
        w.add_context_length(32768)
        w.add_rope_freq_base(1000000.0)
        w.add_layer_norm_rms_eps(1e-6)
    if arch == "qwen3":
        w.add_key_length(head_dim)       # head_dim 128 != n_embd / n_head
        w.add_value_length(head_dim)
    if arch == "gemma2":
        w.add_context_length(8192)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_attn_logit_softcapping(3.0)   # Gemma 2's 50.0, lowered so tanh bends the scores
        w.add_final_logit_softcapping(6.0)  # Gemma 2's 30.0, lowered likewise
        w.add_sliding_window(SLIDING_WINDOW)
    if arch == "gemma3":
        w.add_context_length(131072)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_rope_freq_base(1000000.0)     # global layers
        w.add_rope_freq_base_swa(10000.0)   # sliding layers (rope_parameters.sliding_attention)
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)  # Gemma 3 4B+: global layers only
        w.add_rope_scaling_factor(8.0)
        w.add_sliding_window(SLIDING_WINDOW)  # pattern: llama.cpp's default 6 (layer 5 global)
    if arch == "phi3":
        rot = int(spec.get("partial_rotary", 1.0) * N_EMBD) // N_HEAD
        orig_ctx, max_ctx = spec["orig_ctx"], spec["max_ctx"]  # Phi-3-mini-128k's 4096, 131072
        w.add_context_length(max_ctx)
        w.add_rope_scaling_orig_ctx_len(orig_ctx)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_dimension_count(rot)
        w.add_rope_freq_base(10000.0)
        w.add_sliding_window(0 if "partial_rotary" in spec else 2047)  # 0 marks Phi-4
        w.add_rope_scaling_type(gguf.RopeScalingType.LONGROPE)
        scale = max_ctx / orig_ctx
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(orig_ctx)))
    if arch == "olmo2":
        w.add_context_length(4096)
        w.add_rope_freq_base(500000.0)
        w.add_layer_norm_rms_eps(1e-6)
    for key, value, vtype, sub in fields:
        w.add_key_value(key, value, vtype, sub)

    # -- tensors; the embedding's scale spreads the (tied) logits over several units
    # (Gemma's sqrt(n_embd) and Granite's embedding_scale multiply the input: a smaller embedding
    # and a larger output norm keep the blocks, not the input token, deciding the next one).
    emb_std = {"gemma2": 0.05, "gemma3": 0.05, "granite": 0.02}.get(arch, 0.25)
    tensors["token_embd.weight"] = d.embedding(n_vocab, N_EMBD, emb_std)
    tensors["output_norm.weight"] = d.norm(N_EMBD, {"granite": 20.0}.get(arch, 4.0 if gemma else 1.0))
    if arch == "olmo2":  # required by llama.cpp's olmo2; the others tie to token_embd
        tensors["output.weight"] = d.matrix(n_vocab, N_EMBD, gain=4.0)
    if spec.get("rope_freqs"):
        tensors["rope_freqs.weight"] = llama3_rope_factors(head_dim, 500000.0)
    if arch == "phi3":
        short, long = longrope_factors(d.rng, rot // 2)
        tensors["rope_factors_long.weight"] = long
        tensors["rope_factors_short.weight"] = short
    for i in range(L):
        p = f"blk.{i}."
        if arch != "olmo2":
            tensors[p + "attn_norm.weight"] = norm(N_EMBD)
        if arch == "phi3":  # fused q, k, v rows, in that order
            tensors[p + "attn_qkv.weight"] = d.matrix(q_dim + 2 * kv_dim, N_EMBD, gain=1.5)
        else:
            tensors[p + "attn_q.weight"] = d.matrix(q_dim, N_EMBD, gain=1.5)
            tensors[p + "attn_k.weight"] = d.matrix(kv_dim, N_EMBD, gain=1.5)
            tensors[p + "attn_v.weight"] = d.matrix(kv_dim, N_EMBD)
        if arch == "qwen2":
            tensors[p + "attn_q.bias"] = d.bias(q_dim)
            tensors[p + "attn_k.bias"] = d.bias(kv_dim)
            tensors[p + "attn_v.bias"] = d.bias(kv_dim)
        if arch in ("qwen3", "gemma3"):  # per head: one weight of head_dim shared by all heads
            tensors[p + "attn_q_norm.weight"] = norm(head_dim)
            tensors[p + "attn_k_norm.weight"] = norm(head_dim)
        if arch == "olmo2":  # over the whole projection
            tensors[p + "attn_q_norm.weight"] = norm(q_dim)
            tensors[p + "attn_k_norm.weight"] = norm(kv_dim)
        tensors[p + "attn_output.weight"] = d.matrix(N_EMBD, q_dim, gain=OUT_GAIN.get(arch, 1.0))
        if gemma or arch == "olmo2":
            tensors[p + "post_attention_norm.weight"] = norm(N_EMBD)
        if arch != "olmo2":
            tensors[p + "ffn_norm.weight"] = norm(N_EMBD)
        if arch == "phi3":  # fused gate then up: ffn_up has 2 * n_ff rows
            tensors[p + "ffn_up.weight"] = d.matrix(2 * n_ff, N_EMBD)
        else:
            tensors[p + "ffn_gate.weight"] = d.matrix(n_ff, N_EMBD)
            tensors[p + "ffn_up.weight"] = d.matrix(n_ff, N_EMBD)
        tensors[p + "ffn_down.weight"] = d.matrix(N_EMBD, n_ff, gain=OUT_GAIN.get(arch, 1.0))
        if gemma or arch == "olmo2":
            tensors[p + "post_ffw_norm.weight"] = norm(N_EMBD)
    for tname, data in tensors.items():
        w.add_tensor(tname, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(f32_path, out_path, qtype):
    """llama-quantize as users run it (fallbacks included); False when this build lacks the type."""
    r = subprocess.run([str(QUANTIZE), str(f32_path), str(out_path), qtype, "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(f"llama-quantize {qtype} of {f32_path.name} failed:\n{r.stdout[-2000:]}\n")
        return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--only", nargs="*", default=None, choices=sorted(MODELS))
    ap.add_argument("--quantize", action="store_true", help="also every type of TYPES")
    ap.add_argument("--types", nargs="*", default=None, help="subset of TYPES for --quantize")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    names = a.only or list(MODELS)
    for name in names:
        f32 = a.out / f"{name}.F32.gguf"
        if not f32.exists():
            tmp = f32.with_suffix(".tmp")
            write_model(name, MODELS[name], tmp)
            tmp.rename(f32)
        if a.quantize:
            if not QUANTIZE.exists():
                sys.exit(f"{QUANTIZE} is absent (llama.cpp's build)")
            for t in a.types or TYPES:
                out = a.out / f"{name}.{t}.gguf"
                if not out.exists():
                    tmp = out.with_suffix(".tmp")
                    if quantize(f32, tmp, t):
                        tmp.rename(out)


if __name__ == "__main__":
    main()
