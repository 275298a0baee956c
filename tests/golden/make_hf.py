#!/usr/bin/python3
"""Hugging Face-layout checkpoints and their expected outputs, from the project's reference.

Run:  /usr/bin/python3 tests/golden/make_hf.py

Each case writes tests/golden/hf/<case>/ as a checkpoint on the hub looks:
  config.json                        LlamaConfig / Qwen2Config keys (hidden_size, ...)
  model-0000{1,2}-of-00002.safetensors  tensors under Hugging Face's names
                                     (model.layers.{l}.self_attn.q_proj.weight, ...), with
                                     __metadata__ {"format": "pt"}, plus embed_tokens, norm, lm_head
  model.safetensors.index.json       {"metadata": {"total_size": ...}, "weight_map": {...}}
  input.safetensors                  x [B, P+N, dim]
  expected.safetensors               the --dump of the Meta-named equivalent, computed by
                                     make_golden.py's float64 reference (Meta's model.py with
                                     rope "half", which is what Hugging Face applies)
and cases.json beside them says how to run each (batch, prefill, steps, extra flags).

Independent parts: Llama 3.1's RoPE frequency scaling is written here after Hugging Face's
_compute_llama3_parameters and swapped into the reference's freqs_cis; Qwen2's missing o_proj
bias is the reference with wo.bias = 0; `--layers A:B` is the reference built on layers A..B-1.
"""
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_golden import (DT, TORCH_DTYPE, ModelArgs, build_model, draw_weights,  # noqa: E402
                         ffn_hidden_dim, read_safetensors, run_prefill_decode, write_safetensors)

OUT = os.path.join(HERE, "hf")
HF_NAMES = {
    "attention.wq": "self_attn.q_proj", "attention.wk": "self_attn.k_proj",
    "attention.wv": "self_attn.v_proj", "attention.wo": "self_attn.o_proj",
    "attention_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "feed_forward.w1": "mlp.gate_proj", "feed_forward.w2": "mlp.down_proj",
    "feed_forward.w3": "mlp.up_proj",
}


def hf_name(meta: str) -> str:
    _, l, rest = meta.split(".", 2)              # layers.{l}.attention.wq.weight
    module, kind = rest.rsplit(".", 1)
    return f"model.layers.{l}.{HF_NAMES[module]}.{kind}"


def llama3_inv_freq(head_dim, theta, s):
    """Hugging Face's _compute_llama3_parameters, in float64."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=DT) / head_dim))
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / s["low_freq_factor"], old / s["high_freq_factor"]
    wavelen = 2 * math.pi / inv
    out = torch.where(wavelen > low_wavelen, inv / s["factor"], inv)
    smooth = (old / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
    smoothed = (1 - smooth) * out / s["factor"] + smooth * out
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, out)


CASES = [
    dict(name="llama31_gqa_bf16", seed=31, batch=2, prefill=5, steps=3, dtype="BF16",
         args=dict(dim=32, n_layers=2, n_heads=8, n_kv_heads=2, multiple_of=32, rope="half",
                   rope_theta=500000.0, norm_eps=1e-5, max_batch_size=2, max_seq_len=16),
         hf=dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="silu",
                 max_position_embeddings=131072, tie_word_embeddings=False,
                 rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8}),
         flags="--max-seq-len 16 --max-batch 2",
         description="Llama 3.1 layout: GQA 8/2 head_dim 4, 2 layers, llama3 rope_scaling, "
                     "BF16 in two shards with an index"),
    dict(name="qwen2_qkv_bias", seed=32, batch=1, prefill=4, steps=3, dtype="F32",
         args=dict(dim=24, n_layers=1, n_heads=4, n_kv_heads=2, multiple_of=16, rope="half",
                   rope_theta=10000.0, norm_eps=1e-6, attention_bias=True, max_batch_size=1,
                   max_seq_len=8),
         hf=dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], hidden_act="silu",
                 max_position_embeddings=8, sliding_window=4, use_sliding_window=False,
                 max_window_layers=28),
         flags="", description="Qwen2 layout: q/k/v biases and no o_proj bias, GQA head_dim 6"),
    dict(name="llama_layers_1_3", seed=33, batch=1, prefill=3, steps=3, dtype="F32",
         args=dict(dim=16, n_layers=4, n_heads=4, n_kv_heads=4, multiple_of=16, rope="half",
                   rope_theta=10000.0, norm_eps=1e-6, max_batch_size=1, max_seq_len=8),
         hf=dict(model_type="llama", hidden_act="silu", max_position_embeddings=8),
         flags="--layers 1:3", layers=(1, 3),
         description="a 4-layer checkpoint run as --layers 1:3 (its layers 1 and 2)"),
]


def hf_config(c, a: ModelArgs) -> dict:
    cfg = dict(hidden_size=a.dim, num_hidden_layers=a.n_layers, num_attention_heads=a.n_heads,
               num_key_value_heads=a.kv_heads, intermediate_size=ffn_hidden_dim(a),
               rms_norm_eps=a.norm_eps, rope_theta=a.rope_theta, vocab_size=16,
               torch_dtype={"F32": "float32", "BF16": "bfloat16"}[c["dtype"]],
               bos_token_id=1, eos_token_id=2, transformers_version="4.44.0")
    if a.attention_bias and c["hf"]["model_type"] != "qwen2":
        cfg["attention_bias"] = True
    return cfg | c["hf"]


def write_shards(out, weights: dict, dtype, dim):
    """Splits the HF-named tensors (plus embedding, final norm, head) over two files."""
    torch_dtype = TORCH_DTYPE[dtype]
    named = {"model.embed_tokens.weight": torch.randn(16, dim).to(torch_dtype)}
    named |= {hf_name(k): v for k, v in weights.items()}
    named |= {"model.norm.weight": torch.ones(dim).to(torch_dtype),
              "lm_head.weight": torch.randn(16, dim).to(torch_dtype)}
    names = list(named)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map, total = {}, 0
    for i, part in enumerate(halves, 1):
        fname = f"model-{i:05d}-of-00002.safetensors"
        write_safetensors(os.path.join(out, fname), {n: named[n] for n in part})
        back = read_safetensors(os.path.join(out, fname))
        assert all(torch.equal(back[n], named[n]) for n in part)
        weight_map |= {n: fname for n in part}
        total += sum(named[n].numel() * named[n].element_size() for n in part)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")


def reference(c, a: ModelArgs, weights: dict, x):
    """The Meta-named equivalent run by make_golden's reference."""
    if "layers" in c:  # the checkpoint's layers A..B-1 renumbered from 0
        lo, hi = c["layers"]
        a = ModelArgs(**{**a.__dict__, "n_layers": hi - lo})
        weights = {f"layers.{int(k.split('.')[1]) - lo}.{k.split('.', 2)[2]}": v
                   for k, v in weights.items() if lo <= int(k.split(".")[1]) < hi}
    model = build_model(a, weights)
    scaling = c["hf"].get("rope_scaling")
    if scaling:
        inv = llama3_inv_freq(a.head_dim, a.rope_theta, scaling)
        angles = torch.outer(torch.arange(a.max_seq_len * 2, dtype=DT), inv)
        model.freqs_cis = torch.polar(torch.ones_like(angles), angles)
    return run_prefill_decode(model, x.to(DT), c["prefill"], c["steps"])


def make_case(c) -> dict:
    torch.manual_seed(c["seed"])
    a = ModelArgs(**c["args"])
    weights = draw_weights(a, c["dtype"])
    if c["hf"]["model_type"] == "qwen2":  # Qwen2 has no o_proj bias: the reference's is 0
        for k in [k for k in weights if k.endswith("wo.bias")]:
            del weights[k]
    x = torch.randn(c["batch"], c["prefill"] + c["steps"], a.dim)
    ref_weights = dict(weights)
    for k in list(ref_weights):
        if k.endswith("wq.bias") and c["hf"]["model_type"] == "qwen2":
            ref_weights[k.replace("wq.bias", "wo.bias")] = torch.zeros(a.dim).to(weights[k].dtype)
    dump = reference(c, a, ref_weights, x)
    out = os.path.join(OUT, c["name"])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(hf_config(c, a), f, indent=2)
        f.write("\n")
    write_shards(out, weights, c["dtype"], a.dim)
    write_safetensors(os.path.join(out, "input.safetensors"), {"x": x})
    write_safetensors(os.path.join(out, "expected.safetensors"),
                      {k: v.to(torch.float32) for k, v in dump.items()})
    return {k: c[k] for k in ("name", "batch", "prefill", "steps", "flags", "description")}


def main():
    manifest = [make_case(c) for c in CASES]
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    for m in manifest:
        print(f"{m['name']}: {m['description']}")


if __name__ == "__main__":
    main()
