#!/usr/bin/python3
"""stories260K as llama.cpp quantizes it to Q8_0, and that file's F32 twin dequantized by gguf-py.

  /usr/bin/python3 tests/golden/make_stories_q8.py

Runs llama.cpp's own `llama-quantize weights/stories260K.gguf ... Q8_0` (built by
bench/llama_cpp.sh from node-llama-cpp's sources) into tests/golden/stories260K-q8_0.gguf, then
writes tests/golden/stories260K-q8_0-f32.gguf: the same metadata, every tensor dequantized to F32
by llama.cpp's gguf-py in numpy (gguf.quants.dequantize), an implementation independent of
attn-cli's. tests/engine/test_stories.cpp runs both and asks for the same bits (issue 36: a quantized
model gives the bits of the F32 run on its dequantized weights). llama-quantize keeps the norms in
F32 and falls back to F16 for ffn_down (172 columns are not whole 32-weight blocks).
"""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def llama_cpp(flag=None):
    cmd = ["bash", os.path.join(ROOT, "bench/llama_cpp.sh")] + ([flag] if flag else [])
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def main():
    src, bin_dir = llama_cpp("--src"), llama_cpp()
    sys.path.insert(0, os.path.join(src, "gguf-py"))
    import gguf  # noqa: E402 (llama.cpp's own)

    q8 = os.path.join(ROOT, "tests/golden/stories260K-q8_0.gguf")
    f32 = os.path.join(ROOT, "tests/golden/stories260K-q8_0-f32.gguf")
    subprocess.run([os.path.join(bin_dir, "llama-quantize"),
                    os.path.join(ROOT, "weights/stories260K.gguf"), q8, "Q8_0"],
                   check=True, capture_output=True)
    r = gguf.GGUFReader(q8)
    w = gguf.GGUFWriter(f32 + ".tmp", arch=None)
    for field in r.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.file_type":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for t in r.tensors:
        rows = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, rows.reshape([int(d) for d in reversed(t.shape)]),
                     raw_dtype=gguf.GGMLQuantizationType.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(f32 + ".tmp", f32)
    kinds = sorted({t.tensor_type.name for t in r.tensors})
    print(f"{q8}: {len(r.tensors)} tensors ({', '.join(kinds)}); {f32}: F32")


if __name__ == "__main__":
    main()
