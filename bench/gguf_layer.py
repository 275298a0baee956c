#!/usr/bin/python3
"""The layer `attn-cli bench` draws (one Llama-3-8B layer) as a one-layer llama GGUF for llama.cpp.

  /usr/bin/python3 bench/gguf_layer.py --llama-src DIR --out DIR [--types f32,bf16,f16]
                                       [--seed 42] [--quantize BIN/llama-quantize]

bench/gguf_model.py --shape layer, which succeeds this script (its docstring says what is
written); the files and their names are the same (layer-<type>-s<seed>-v1.gguf).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_model  # noqa: E402

if __name__ == "__main__":
    gguf_model.main(prog="gguf_layer.py", default_shape="layer")
