#!/usr/bin/python3
"""Hugging Face folders of the Gemma test models of arch_models.py, from the same drawn weights.

  arch_hf.py MODEL.F32.gguf OUT_DIR     writes OUT_DIR/config.json and OUT_DIR/model.safetensors

The inverse of llama.cpp's converter for Gemma 2 and 3 (conversion/gemma*.py): tensors renamed to
Hugging Face's (q/k rows unpermuted: Gemma's checkpoints rotate halves as llama.cpp's NEOX does),
every RMSNorm weight stored as w - 1 (Gemma2RMSNorm / Gemma3RMSNorm multiply by 1 + w; the
converter adds the 1), and a Gemma2Config / Gemma3TextConfig with the file's metadata. The norm
weights sit in [0.5, 8), where w - 1 and its sum with 1 are exact in float32: the folder holds
the GGUF's model bit for bit, and attn-cli's logits on both are the same bits.

Needs PYTHONPATH=<llama.cpp src>/gguf-py (or LLAMA_CPP_SRC) and /usr/bin/python3 (numpy).
"""
import json
import os
import pathlib
import struct
import sys

import numpy as np

LLAMA_CPP = pathlib.Path(os.environ.get(
    "LLAMA_CPP_ROOT", pathlib.Path.home() / ".cache/attn-cli/llama.cpp/3.22.1"))
sys.path.insert(0, str(pathlib.Path(os.environ.get("LLAMA_CPP_SRC", LLAMA_CPP / "src")) / "gguf-py"))
import gguf  # noqa: E402

# llama.cpp's layer tensor -> Hugging Face's (Gemma2DecoderLayer / Gemma3DecoderLayer)
LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
TOKEN = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}


def hf_name(name):
    if name in TOKEN:
        return TOKEN[name]
    _, layer, rest = name.split(".", 2)  # blk.{l}.attn_q.weight
    module, kind = rest.rsplit(".", 1)
    return f"model.layers.{layer}.{LAYER[module]}.{kind}"


def write_safetensors(path, tensors):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors.values():
            f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())


def config(kv, arch, n_vocab):
    g = lambda key, default=None: kv.get(f"{arch}.{key}", default)  # noqa: E731
    head_dim = g("attention.key_length")
    c = {
        "architectures": ["Gemma2ForCausalLM" if arch == "gemma2" else "Gemma3ForCausalLM"],
        "model_type": "gemma2" if arch == "gemma2" else "gemma3_text",
        "hidden_size": g("embedding_length"), "num_hidden_layers": g("block_count"),
        "num_attention_heads": g("attention.head_count"),
        "num_key_value_heads": g("attention.head_count_kv"), "head_dim": head_dim,
        "intermediate_size": g("feed_forward_length"), "vocab_size": n_vocab,
        "rms_norm_eps": g("attention.layer_norm_rms_epsilon"),
        "max_position_embeddings": g("context_length"),
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": head_dim,  # llama.cpp's 1/sqrt(key_length) below 27B
        "sliding_window": g("attention.sliding_window"),
        "final_logit_softcapping": g("final_logit_softcapping"),
        "tie_word_embeddings": True, "torch_dtype": "float32",
    }
    if arch == "gemma2":
        c.update(rope_theta=g("rope.freq_base", 10000.0),
                 attn_logit_softcapping=g("attn_logit_softcapping"))
    else:
        factor = g("rope.scaling.factor")
        c.update(rope_theta=g("rope.freq_base"), rope_local_base_freq=g("rope.freq_base_swa"),
                 sliding_window_pattern=6, attn_logit_softcapping=None,
                 rope_scaling={"rope_type": "linear", "factor": factor} if factor else None)
    return c


def write_folder(gguf_path, out):
    r = gguf.GGUFReader(str(gguf_path))
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.")}
    arch = kv["general.architecture"]
    if arch not in ("gemma2", "gemma3"):
        sys.exit(f"{gguf_path}: {arch} is not a Gemma model")
    tensors = {}
    for t in r.tensors:
        if t.tensor_type != gguf.GGMLQuantizationType.F32:
            sys.exit(f"{gguf_path}: {t.name} is not F32")
        data = np.array(t.data, dtype=np.float32).reshape([int(n) for n in reversed(t.shape)])
        if t.name.endswith("norm.weight"):
            data = data - np.float32(1)
        tensors[hf_name(t.name)] = data
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n_vocab = tensors["model.embed_tokens.weight"].shape[0]
    (out / "config.json").write_text(json.dumps(config(kv, arch, n_vocab), indent=2) + "\n")
    write_safetensors(out / "model.safetensors", tensors)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    write_folder(sys.argv[1], sys.argv[2])
