#!/usr/bin/python3
"""A small llama model in each GGUF type llama.cpp's llama-quantize makes, and each file's F32
twin dequantized by gguf-py: run by tests/kernels/test_quant.cpp at test time into a temporary
folder (the files are megabytes each: not committed), skipped there without llama.cpp's build.

  /usr/bin/python3 tests/golden/make_quant_models.py OUT_DIR [TYPE ...]

Needs llama.cpp's cached sources (gguf-py, for the writer and numpy's dequantization) and its
build (llama-quantize), as bench/llama_cpp.sh makes them. Writes into OUT_DIR:
  f32.gguf          a llama of 2 layers, every matrix's rows whole 256-weight blocks (dim 256, FFN
                    512, 4 heads, 2 KV heads), weights drawn (seeded) so that logits spread over
                    several units, a 320-token vocabulary of its own
  <type>.gguf       f32.gguf through `llama-quantize f32.gguf <type>.gguf <TYPE>` (its mixture:
                    norms stay F32, output and token_embd may take another type)
  <type>-f32.gguf   <type>.gguf with every tensor dequantized to F32 by gguf-py
                    (gguf.quants.dequantize, independent of attn-cli's widening)
  <type>.types      the ggml type names <type>.gguf holds, one per line, for the test to check
                    that the file holds the type it is about
  other.gguf        f32.gguf with blk.0.attn_q.weight stored as Q8_1 (a type no row reads)
TYPES default to Q4_1 Q5_0 Q5_1 Q3_K_M Q2_K IQ4_NL IQ4_XS F16 BF16.
"""
import os
import subprocess
import sys

import numpy as np

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                     "attn-cli", "llama.cpp", "3.22.1")
sys.path.insert(0, os.path.join(CACHE, "src", "gguf-py"))
import gguf  # noqa: E402 (llama.cpp's own)
from gguf import GGMLQuantizationType as Q  # noqa: E402

TYPES = ["Q4_1", "Q5_0", "Q5_1", "Q3_K_M", "Q2_K", "IQ4_NL", "IQ4_XS", "F16", "BF16"]
DIM, FFN, LAYERS, HEADS, KV_HEADS, VOCAB = 256, 512, 2, 4, 2, 320


def vocab(w: "gguf.GGUFWriter") -> None:
    """A SentencePiece vocabulary: control tokens, the 256 byte tokens, a few words."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += [f"\u2581w{i}" for i in range(VOCAB - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (VOCAB - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(VOCAB - 259)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def tensors(rng: np.random.Generator) -> dict:
    """name -> F32 array in ggml's order of dimensions reversed (numpy's [rows, cols])."""
    t = {}

    def mat(name, rows, cols, scale):
        t[name] = (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    mat("token_embd.weight", VOCAB, DIM, 16.0)
    head = DIM // HEADS
    for i in range(LAYERS):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = (1 + 0.1 * rng.standard_normal(DIM)).astype(np.float32)
        mat(p + "attn_q.weight", DIM, DIM, 2.0)
        mat(p + "attn_k.weight", KV_HEADS * head, DIM, 2.0)
        mat(p + "attn_v.weight", KV_HEADS * head, DIM, 1.0)
        mat(p + "attn_output.weight", DIM, DIM, 1.0)
        t[p + "ffn_norm.weight"] = (1 + 0.1 * rng.standard_normal(DIM)).astype(np.float32)
        mat(p + "ffn_gate.weight", FFN, DIM, 1.0)
        mat(p + "ffn_up.weight", FFN, DIM, 1.0)
        mat(p + "ffn_down.weight", DIM, FFN, 1.0)
    t["output_norm.weight"] = (1 + 0.1 * rng.standard_normal(DIM)).astype(np.float32)
    mat("output.weight", VOCAB, DIM, 8.0)
    return t


def header(w: "gguf.GGUFWriter") -> None:
    w.add_context_length(128)
    w.add_embedding_length(DIM)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_rope_dimension_count(DIM // HEADS)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(0)
    vocab(w)


def write_f32(path: str, other: bool = False) -> None:
    w = gguf.GGUFWriter(path, "llama")
    header(w)
    for name, a in tensors(np.random.default_rng(48)).items():
        if other and name == "blk.0.attn_q.weight":  # Q8_1: 32 weights in 36 bytes, any bytes
            raw = np.random.default_rng(1).integers(0, 256, (a.shape[0], a.shape[1] // 32 * 36),
                                                    dtype=np.uint8)
            raw.reshape(-1, 36)[:, 0:4] = np.array([0x3C00, 0], "<u2").view(np.uint8)
            w.add_tensor(name, raw, raw_dtype=Q.Q8_1)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def dequantized_twin(src: str, dst: str) -> list:
    """dst: src with every tensor F32 (gguf-py's numpy); returns the types src holds."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch=None)
    for field in r.fields.values():
        if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ALIGNMENT:
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(field.name, field.contents(), vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(field.name, field.contents(), vtype)
    held = set()
    for t in r.tensors:
        held.add(t.tensor_type.name)
        shape = [int(d) for d in reversed(t.shape)]  # ggml's ne reversed: numpy's order
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        w.add_tensor(t.name, values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(held)


def main() -> None:
    out = sys.argv[1]
    types = sys.argv[2:] or TYPES
    os.makedirs(out, exist_ok=True)
    quantize = os.path.join(CACHE, "build", "bin", "llama-quantize")
    f32 = os.path.join(out, "f32.gguf")
    write_f32(f32)
    write_f32(os.path.join(out, "other.gguf"), other=True)
    for t in types:
        q = os.path.join(out, t.lower() + ".gguf")
        subprocess.run([quantize, f32, q, t], check=True, capture_output=True)
        held = dequantized_twin(q, os.path.join(out, t.lower() + "-f32.gguf"))
        with open(os.path.join(out, t.lower() + ".types"), "w") as f:
            f.write("".join(h + "\n" for h in held))
        print(t, " ".join(held))


if __name__ == "__main__":
    main()
