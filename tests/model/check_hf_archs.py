#!/usr/bin/python3
"""Hugging Face folders of the architectures of issue 48 (ctest model.hf_archs).

Each test model of tests/golden/arch_models.py named in MODELS (its F32 GGUF, kept in the cache
check_archs.py uses) is written back as the Hugging Face checkpoint llama.cpp's converter would
have read: config.json with the model type's own keys (Qwen3Config's head_dim, GraniteConfig's
multipliers, Phi3Config's LongRoPE rope_scaling, original_max_position_embeddings and
partial_rotary_factor) and model.safetensors under Hugging Face's names (Phi-3's fused qkv_proj and
gate_up_proj as they are; q and k rows put back from llama.cpp's pair order where its converter
permuted them: granite). attn-cli's logits on the folder are then held to the float64 reference of
the GGUF file (tests/golden/arch_reference.py, itself checked against llama.cpp by check_archs.py)
as check_archs.py holds the GGUF: prefill and 16 greedy steps within 1e-5 relative, the same greedy
ids (near-ties aside). Skips (77) when llama.cpp's sources are not cached.
"""
import json
import pathlib
import struct
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_archs as ca  # noqa: E402  (exits 77 without llama.cpp's sources)

gguf = ca.arch_models.gguf
MODELS = ["qwen3", "granite", "olmo2", "phi3", "phi4mini"]

LAYER_NAMES = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "attn_qkv": "self_attn.qkv_proj", "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm", "ffn_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm", "ffn_gate": "mlp.gate_proj",
    "ffn_down": "mlp.down_proj", "ffn_up": "mlp.up_proj",
}
TOKEN_NAMES = {"token_embd.weight": "model.embed_tokens.weight",
               "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}


def write_safetensors(path, tensors):
    """F32 tensors in the safetensors layout: a JSON header, then the data in order."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for t in tensors.values():
            f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())


def unpermute(w, n_head):
    """llama.cpp's LlamaModel.permute undone: rows of each head from pairs back to halves."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


def hf_tensor_name(name, arch):
    if name in TOKEN_NAMES:
        return TOKEN_NAMES[name]
    _, layer, rest = name.split(".", 2)
    base = rest[: -len(".weight")]
    if arch == "olmo2" and base == "post_attention_norm":
        return f"model.layers.{layer}.post_attention_layernorm.weight"
    if arch == "phi3" and base == "ffn_up":
        return f"model.layers.{layer}.mlp.gate_up_proj.weight"
    return f"model.layers.{layer}.{LAYER_NAMES[base]}.weight"


def hf_folder(gguf_path, name, out):
    """config.json and model.safetensors of the GGUF test model, written into `out`."""
    spec = ca.arch_models.MODELS[name]
    arch = spec["arch"]
    r = gguf.GGUFReader(gguf_path)
    n_head, n_kv = ca.arch_models.N_HEAD, ca.arch_models.N_HEAD_KV
    head_dim = spec.get("head_dim", ca.arch_models.N_EMBD // n_head)
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.")}
    cfg = {
        "model_type": arch, "hidden_act": "silu", "hidden_size": ca.arch_models.N_EMBD,
        "num_hidden_layers": spec["layers"], "num_attention_heads": n_head,
        "num_key_value_heads": n_kv, "intermediate_size": spec.get("n_ff", ca.arch_models.N_FF),
        "rms_norm_eps": kv[f"{arch}.attention.layer_norm_rms_epsilon"],
        "rope_theta": kv.get(f"{arch}.rope.freq_base", 10000.0),
        "max_position_embeddings": kv[f"{arch}.context_length"],
        "vocab_size": len(r.fields["tokenizer.ggml.tokens"].data),
        "tie_word_embeddings": "output.weight" not in {t.name for t in r.tensors},
        "torch_dtype": "float32",
    }
    if head_dim != ca.arch_models.N_EMBD // n_head:
        cfg["head_dim"] = head_dim
    if arch == "granite":
        cfg |= {"embedding_multiplier": kv["granite.embedding_scale"],
                "residual_multiplier": kv["granite.residual_scale"],
                "attention_multiplier": kv["granite.attention.scale"],
                "logits_scaling": kv["granite.logit_scale"]}
    tensors = {}
    for t in r.tensors:
        w = np.array(t.data, dtype=np.float32).reshape(list(reversed(t.shape.tolist())))
        if t.name.startswith("rope_factors_"):
            continue
        if arch == "granite" and t.name.endswith(("attn_q.weight", "attn_k.weight")):
            w = unpermute(w, n_head if "attn_q" in t.name else n_kv)
        tensors[hf_tensor_name(t.name, arch)] = w
    if arch == "phi3":
        factors = {t.name: np.array(t.data, dtype=np.float32) for t in r.tensors
                   if t.name.startswith("rope_factors_")}
        cfg["original_max_position_embeddings"] = kv["phi3.rope.scaling.original_context_length"]
        # attention_factor left to Phi3's default, as the GGUF's converter computed it
        cfg["rope_scaling"] = {"type": "longrope",
                               "short_factor": factors["rope_factors_short.weight"].tolist(),
                               "long_factor": factors["rope_factors_long.weight"].tolist()}
        if "partial_rotary" in spec:
            cfg["partial_rotary_factor"] = spec["partial_rotary"]
        window = kv.get("phi3.attention.sliding_window", 0)
        cfg["sliding_window"] = int(window) if window else None
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    write_safetensors(out / "model.safetensors", tensors)


def main():
    t0 = time.time()
    d = ca.models_dir()
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            path = ca.model_file(d, name, "F32")
            _, ids, want, _ = ca.reference(path)
            folder = pathlib.Path(tmp) / name
            hf_folder(path, name, folder)
            ca.check_attn(name, "HF", folder, ids, want)
    print(f"{len(ca.failures)} failed ({time.time() - t0:.1f} s)")
    return 1 if ca.failures else 0


if __name__ == "__main__":
    sys.exit(main())
