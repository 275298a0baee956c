#!/usr/bin/python3
"""Drawn llama models as GGUF files for llama.cpp, ik_llama.cpp and attn-cli (timing only).

  /usr/bin/python3 bench/gguf_model.py --llama-src DIR --out DIR [--shape layer|llama-3.2-1b]
                                       [--types f32,bf16,f16] [--seed 42]
                                       [--quantize BIN/llama-quantize]

Writes DIR/<file>-<type>-s<seed>-v1.gguf for each type (skipped when it is there already: written
to a temporary name, then renamed) and prints their paths, one a line, in --types order; the
free disk is checked first (the F32 file of llama-3.2-1b is 4.9 GB). Shapes (SHAPES below):

  layer         `attn-cli bench`'s layer: one Llama-3-8B block (dim 4096, 32 heads, 8 KV heads,
                FFN 14336), a 259-token byte vocabulary with token_embd and output sized to it
                (files layer-<type>-...: bench/gguf_layer.py's, which this script succeeds).
  llama-3.2-1b  a whole model shaped as Llama 3.2 1B: 16 blocks, dim 2048, 32 heads, 8 KV heads,
                FFN 8192, vocabulary 128,256, tied embeddings (no output.weight: the head reads
                token_embd), 1.24 G weights (files llama-3.2-1b-<type>-...).

The quantized types q8_0 and q4_k_m (llama.cpp's Q4_K_M mixture: Q4_K, with Q6_K for attn_v,
ffn_down and the tied token_embd), and q4_1, q5_0, q5_1, q3_k_m, q2_k, iq4_nl, iq4_xs are what
llama.cpp users run: llama.cpp's own `llama-quantize` (--quantize) makes them from the F32 file
(written first if need be), as a user would.

Values are drawn as attn-cli draws them, uniform in +-1/sqrt(fan_in) with the norm weights ones,
but from numpy's generator, so they are NOT attn-cli's values: the files are for timing only.
The matrices are in the file's type (F32, BF16 rounded to nearest even as ggml does, F16), and
so is a tied token_embd (it is the head); the norms are F32, and so is the layer's token_embd.
The vocabulary is SentencePiece-style: <unk>, <s>, </s>, <0x00>..<0xFF>, then (llama-3.2-1b)
pieces "w<i>" up to its size. The `gguf`
package is llama.cpp's own gguf-py, from the sources bench/llama_cpp.sh cloned (--llama-src).
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

VERSION = "v1"  # bump when the files' contents change, so that cached files are rewritten
# name: file prefix, dim, heads, KV heads, FFN, blocks, vocabulary (None: the byte vocabulary),
# tied embeddings
SHAPES = {
    "layer": ("layer", 4096, 32, 8, 14336, 1, None, False),
    "llama-3.2-1b": ("llama-3.2-1b", 2048, 32, 8, 8192, 16, 128256, True),
}
EPS, THETA = 1e-5, 500000.0
DRAWN = ("f32", "bf16", "f16")
# --types spelling: llama-quantize's type
QUANTIZED = {"q8_0": "Q8_0", "q4_k_m": "Q4_K_M", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1",
             "q3_k_m": "Q3_K_M", "q2_k": "Q2_K", "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS"}
# bytes per weight of each type, for the disk check (K-quant mixtures: their largest part)
BYTES_PER_WEIGHT = {"f32": 4, "bf16": 2, "f16": 2, "q8_0": 34 / 32}


class Shape:
    def __init__(self, name):
        (self.prefix, self.dim, self.heads, self.kv_heads, self.ffn, self.blocks, self.n_vocab,
         self.tied) = SHAPES[name]
        self.head_dim = self.dim // self.heads

    def vocab(self):
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
        # llama.cpp's token types: 1 normal, 2 unknown, 3 control, 6 byte
        types = [2, 3, 3] + [6] * 256
        if self.n_vocab:
            extra = self.n_vocab - len(tokens)
            tokens += [f"w{i}" for i in range(extra)]
            types += [1] * extra
        return tokens, [0.0] * len(tokens), types

    def matrix_shapes(self):
        """One block's matrices, [out_features, in_features] as GGUF stores them."""
        d, kv = self.dim, self.kv_heads * self.head_dim
        return {"attn_q": (d, d), "attn_k": (kv, d), "attn_v": (kv, d), "attn_output": (d, d),
                "ffn_gate": (self.ffn, d), "ffn_up": (self.ffn, d), "ffn_down": (d, self.ffn)}

    def weights(self):
        per_block = sum(r * c for r, c in self.matrix_shapes().values())
        embd = len(self.vocab()[0]) * self.dim
        return per_block * self.blocks + embd * (1 if self.tied else 2)


def uniform(rng, rows, cols):
    m = rng.random((rows, cols), dtype=np.float32)
    m *= np.float32(2.0 / np.sqrt(cols))
    m -= np.float32(1.0 / np.sqrt(cols))
    return m


def draw(shape, seed):
    """Every block's matrices (a list of dicts), token_embd and output (None when tied)."""
    rng = np.random.default_rng(seed)
    blocks = [{name: uniform(rng, r, c) for name, (r, c) in shape.matrix_shapes().items()}
              for _ in range(shape.blocks)]
    n_vocab = len(shape.vocab()[0])
    embd = rng.random((n_vocab, shape.dim), dtype=np.float32)
    embd -= np.float32(0.5)
    embd *= np.float32(0.04)
    output = None
    if not shape.tied:  # as gguf_layer.py drew it, so that its cached files stay the same
        output = ((rng.random((n_vocab, shape.dim), dtype=np.float32) * 2 - 1) /
                  np.sqrt(shape.dim)).astype(np.float32)
    return blocks, embd, output


def write(gguf, shape, path, wtype, blocks, embd, output):
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
    w.add_name(f"attn-cli bench {shape.prefix} ({wtype}, timing only)")
    w.add_file_type(int(file_type))
    w.add_vocab_size(len(shape.vocab()[0]))
    w.add_context_length(131072)
    w.add_embedding_length(shape.dim)
    w.add_block_count(shape.blocks)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(THETA)
    w.add_layer_norm_rms_eps(EPS)
    tokens, scores, types = shape.vocab()
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

    ones = np.ones(shape.dim, dtype=np.float32)
    # tied: token_embd is the head too, in the file's type as a converted model has it
    t, raw = typed(embd) if shape.tied else (embd, None)
    w.add_tensor("token_embd.weight", t, raw_dtype=raw)
    for b, mats in enumerate(blocks):
        w.add_tensor(f"blk.{b}.attn_norm.weight", ones)
        for name, m in mats.items():
            t, raw = typed(m)
            w.add_tensor(f"blk.{b}.{name}.weight", t, raw_dtype=raw)
        w.add_tensor(f"blk.{b}.ffn_norm.weight", ones)
    w.add_tensor("output_norm.weight", ones)
    if output is not None:
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
    print(f"gguf_model.py: {os.path.basename(binary)} -> {path}", file=sys.stderr)
    subprocess.run([binary, f32_path, tmp, qtype], check=True, stdout=sys.stderr)
    os.replace(tmp, path)


def check_disk(folder, shape, todo):
    """Refuses (exit 2) when the files to write would leave less than 1 GB free."""
    need = sum(shape.weights() * BYTES_PER_WEIGHT.get(t, 34 / 32) for t in todo)
    free = shutil.disk_usage(folder).free
    print(f"gguf_model.py: {shape.prefix}: {shape.weights() / 1e9:.2f} G weights; writing "
          f"{', '.join(todo)}: about {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free in {folder}",
          file=sys.stderr)
    if need + 1e9 > free:
        sys.exit(f"gguf_model.py: not enough free disk in {folder} for {', '.join(todo)} "
                 f"({need / 1e9:.1f} GB and 1 GB to spare, {free / 1e9:.1f} GB free)")


def main(argv=None, prog="gguf_model.py", default_shape="llama-3.2-1b"):
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--llama-src", required=True, help="llama.cpp's sources (for gguf-py)")
    p.add_argument("--out", required=True, help="folder of the GGUF files")
    p.add_argument("--shape", default=default_shape, choices=sorted(SHAPES))
    p.add_argument("--types", default="f32,bf16,f16")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--quantize", help="llama.cpp's llama-quantize, for the quantized types")
    a = p.parse_args(argv)
    sys.path.insert(0, os.path.join(a.llama_src, "gguf-py"))
    import gguf  # noqa: E402 (llama.cpp's own, from --llama-src)

    shape = Shape(a.shape)
    types = a.types.split(",")
    bad = [t for t in types if t not in DRAWN and t not in QUANTIZED]
    if bad:
        p.error(f"--types: unknown {bad}")
    if any(t in QUANTIZED for t in types) and not a.quantize:
        p.error("--types " + ", ".join(QUANTIZED) + " need --quantize (llama.cpp's llama-quantize)")
    os.makedirs(a.out, exist_ok=True)

    def name(t):
        return os.path.join(a.out, f"{shape.prefix}-{t}-s{a.seed}-{VERSION}.gguf")

    paths = [name(t) for t in types]
    quantized = [(t, name(t)) for t in types if t in QUANTIZED and not os.path.exists(name(t))]
    drawn = [t for t in types if t in DRAWN] + (["f32"] if quantized else [])
    todo = [(t, name(t)) for t in dict.fromkeys(drawn) if not os.path.exists(name(t))]
    if todo or quantized:
        check_disk(a.out, shape, [t for t, _ in todo + quantized])
    if todo:
        print(f"gguf_model.py: drawing {shape.prefix} (seed {a.seed})", file=sys.stderr)
        blocks, embd, output = draw(shape, a.seed)
        for t, path in todo:
            print(f"gguf_model.py: writing {path}", file=sys.stderr)
            write(gguf, shape, path, t, blocks, embd, output)
        del blocks, embd, output
    for t, path in quantized:
        quantize(a.quantize, name("f32"), path, QUANTIZED[t])
    for path in paths:
        print(f"gguf_model.py: {path}: {os.path.getsize(path) / 1e9:.2f} GB", file=sys.stderr)
        print(path)


if __name__ == "__main__":
    main()
