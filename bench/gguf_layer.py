#!/usr/bin/python3
"""The layer `attn-cli bench` draws (one Llama-3-8B layer) as a one-layer llama GGUF for llama.cpp.

  /usr/bin/python3 bench/gguf_layer.py --llama-src DIR --out DIR [--types f32,bf16,f16]
                                       [--seed 42] [--quantize BIN/llama-quantize]

Writes DIR/layer-<type>-s<seed>-v1.gguf for each type (skipped when it is there already: written
to a temporary name, then renamed) and prints their paths, one a line, in --types order.
The quantized types q8_0 and q4_k_m (llama.cpp's Q4_K_M mixture: Q4_K, with Q6_K for attn_v and
ffn_down), and q4_1, q5_0, q5_1, q3_k_m, q2_k, iq4_nl, iq4_xs (llama-quantize's mixtures of those
names) are what llama.cpp users run: llama.cpp's own `llama-quantize` (--quantize) makes them
from the F32 file (written first if need be), as a user would.

The shape is configs/llama3-8b-layer.json's: dim 4096, 32 heads, 8 KV heads (head dim 128), FFN
14336 (ffn_dim_multiplier 1.3, multiple_of 1024), RMS norm eps 1e-5, rope theta 500000; one
block. The values are drawn as attn-cli draws them, uniform in +-1/sqrt(fan_in) with the norm
weights ones, but from numpy's generator, so they are NOT attn-cli's values: the files are for
timing only. The seven matrices are in the file's type (F32, BF16 rounded to nearest even as
ggml does, F16); the norms are F32. llama.cpp needs a vocabulary: a 259-token SentencePiece-style
byte vocabulary (<unk>, <s>, </s>, <0x00>..<0xFF>), with token_embd and output sized to it
(output in the file's type, token_embd F32). The `gguf` package is llama.cpp's own gguf-py, from
the sources bench/llama_cpp.sh cloned (--llama-src).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

DIM, HEADS, KV_HEADS, FFN, EPS, THETA = 4096, 32, 8, 14336, 1e-5, 500000.0
HEAD_DIM = DIM // HEADS
VERSION = "v1"  # bump when the file's contents change, so that cached files are rewritten
DRAWN = ("f32", "bf16", "f16")
# --types spelling: llama-quantize's type (issue 48's types after Q4_K_M)
QUANTIZED = {"q8_0": "Q8_0", "q4_k_m": "Q4_K_M", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1",
             "q3_k_m": "Q3_K_M", "q2_k": "Q2_K", "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS"}


def vocab():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    # llama.cpp's token types: 2 unknown, 3 control, 6 byte
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    return tokens, scores, types


def matrices(seed):
    """The layer's matrices, [out_features, in_features] as GGUF stores them (numpy order)."""
    rng = np.random.default_rng(seed)
    shapes = {
        "attn_q": (DIM, DIM),
        "attn_k": (KV_HEADS * HEAD_DIM, DIM),
        "attn_v": (KV_HEADS * HEAD_DIM, DIM),
        "attn_output": (DIM, DIM),
        "ffn_gate": (FFN, DIM),
        "ffn_up": (FFN, DIM),
        "ffn_down": (DIM, FFN),
    }
    out = {}
    for name, (rows, cols) in shapes.items():
        m = rng.random((rows, cols), dtype=np.float32)
        m *= np.float32(2.0 / np.sqrt(cols))
        m -= np.float32(1.0 / np.sqrt(cols))
        out[name] = m
    return out, rng


def write(gguf, path, wtype, mats, embd, output):
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "bf16": gguf.GGMLQuantizationType.BF16,
             "f16": gguf.GGMLQuantizationType.F16}[wtype]
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
                 "f16": gguf.LlamaFileType.MOSTLY_F16}[wtype]

    def typed(a):
        if wtype == "f32":
            return a, None
        if wtype == "f16":
            return a.astype(np.float16), None
        return gguf.quants.quantize(a, qtype), qtype  # uint8 bytes of BF16

    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name(f"attn-cli bench layer ({wtype}, timing only)")
    w.add_file_type(int(file_type))
    w.add_vocab_size(len(vocab()[0]))
    w.add_context_length(131072)
    w.add_embedding_length(DIM)
    w.add_block_count(1)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(THETA)
    w.add_layer_norm_rms_eps(EPS)
    tokens, scores, types = vocab()
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    ones = np.ones(DIM, dtype=np.float32)
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("blk.0.attn_norm.weight", ones)
    for name, m in mats.items():
        t, raw = typed(m)
        w.add_tensor(f"blk.0.{name}.weight", t, raw_dtype=raw)
    w.add_tensor("blk.0.ffn_norm.weight", ones)
    w.add_tensor("output_norm.weight", ones)
    t, raw = typed(output)
    w.add_tensor("output.weight", t, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def quantize(binary, f32_path, path, qtype):
    """llama-quantize F32 -> qtype, its log on stderr, written to a temporary name then renamed."""
    tmp = path + ".tmp"
    print(f"gguf_layer.py: {os.path.basename(binary)} -> {path}", file=sys.stderr)
    subprocess.run([binary, f32_path, tmp, qtype], check=True, stdout=sys.stderr)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llama-src", required=True, help="llama.cpp's sources (for gguf-py)")
    p.add_argument("--out", required=True, help="folder of the GGUF files")
    p.add_argument("--types", default="f32,bf16,f16")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--quantize", help="llama.cpp's llama-quantize, for the quantized types")
    a = p.parse_args()
    sys.path.insert(0, os.path.join(a.llama_src, "gguf-py"))
    import gguf  # noqa: E402 (llama.cpp's own, from --llama-src)

    types = a.types.split(",")
    bad = [t for t in types if t not in DRAWN and t not in QUANTIZED]
    if bad:
        p.error(f"--types: unknown {bad}")
    if any(t in QUANTIZED for t in types) and not a.quantize:
        p.error("--types " + ", ".join(QUANTIZED) + " need --quantize (llama.cpp's llama-quantize)")
    os.makedirs(a.out, exist_ok=True)

    def name(t):
        return os.path.join(a.out, f"layer-{t}-s{a.seed}-{VERSION}.gguf")

    paths = [name(t) for t in types]
    quantized = [(t, name(t)) for t in types if t in QUANTIZED and not os.path.exists(name(t))]
    drawn = [t for t in types if t in DRAWN] + (["f32"] if quantized else [])
    todo = [(t, name(t)) for t in dict.fromkeys(drawn) if not os.path.exists(name(t))]
    if todo:
        print(f"gguf_layer.py: drawing the layer (seed {a.seed})", file=sys.stderr)
        mats, rng = matrices(a.seed)
        n_vocab = len(vocab()[0])
        embd = ((rng.random((n_vocab, DIM), dtype=np.float32) - 0.5) * 0.04).astype(np.float32)
        output = ((rng.random((n_vocab, DIM), dtype=np.float32) * 2 - 1) / np.sqrt(DIM)).astype(
            np.float32)
        for t, path in todo:
            print(f"gguf_layer.py: writing {path}", file=sys.stderr)
            write(gguf, path, t, mats, embd, output)
    for t, path in quantized:
        quantize(a.quantize, name("f32"), path, QUANTIZED[t])
    for path in paths:
        print(path)


if __name__ == "__main__":
    main()
