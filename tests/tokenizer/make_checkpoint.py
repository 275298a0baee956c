#!/usr/bin/python3
"""A small Hugging Face-layout Llama checkpoint with the real Llama 3 vocabulary (128,256 tokens):
config.json (LlamaConfig keys), model.safetensors (BF16, Hugging Face's tensor names, the
embeddings and an untied lm_head), and the vocabulary's tokenizer.json and tokenizer_config.json.

Run:  /usr/bin/python3 make_checkpoint.py OUT_DIR TOKENIZER_DIR
Random weights (numpy, fixed seed): the text it generates is not language, but it goes through
every part of a real model and tokenizer.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

VOCAB, DIM, LAYERS, HEADS, KV_HEADS, HIDDEN = 128256, 64, 2, 4, 2, 160


def bf16(a):
    """float32 -> BF16 bits, rounding to nearest even."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def write_safetensors(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in tensors.items():
        raw = bf16(a).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def main():
    out, tok = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(21)
    head = DIM // HEADS

    def lin(o, i):
        return rng.uniform(-1, 1, (o, i)) / np.sqrt(i)

    t = {"model.embed_tokens.weight": rng.normal(0, 1, (VOCAB, DIM)),
         "model.norm.weight": np.ones(DIM), "lm_head.weight": lin(VOCAB, DIM)}
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        t[p + "self_attn.q_proj.weight"] = lin(HEADS * head, DIM)
        t[p + "self_attn.k_proj.weight"] = lin(KV_HEADS * head, DIM)
        t[p + "self_attn.v_proj.weight"] = lin(KV_HEADS * head, DIM)
        t[p + "self_attn.o_proj.weight"] = lin(DIM, HEADS * head)
        t[p + "mlp.gate_proj.weight"] = lin(HIDDEN, DIM)
        t[p + "mlp.up_proj.weight"] = lin(HIDDEN, DIM)
        t[p + "mlp.down_proj.weight"] = lin(DIM, HIDDEN)
        t[p + "input_layernorm.weight"] = np.ones(DIM)
        t[p + "post_attention_layernorm.weight"] = np.ones(DIM)
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": DIM,
              "intermediate_size": HIDDEN, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "vocab_size": VOCAB,
              "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 128000,
              "eos_token_id": 128001, "torch_dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, name), os.path.join(out, name))


if __name__ == "__main__":
    main()
