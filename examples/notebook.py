"""Notebook 002's TransformerBlock in PyTorch beside attn.Model on the same weights.

    PYTHONPATH=build/python /usr/bin/python3 examples/notebook.py

Needs Debian's python3-torch and python3-numpy. Takes the notebook's ModelArgs and
TransformerBlock as bench/torch_notebook.py rebuilds them in PyTorch, draws the block's weights,
writes them in attn-cli's names, loads them into attn.Model, runs the prefill of 7 positions
and three decode steps in both, prints the cache shapes the notebook prints and the largest
difference, and times both.
"""
import json
import os
import struct
import sys
import tempfile
import time

import numpy as np
import torch

import attn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from torch_notebook import ModelArgs, TransformerBlock  # noqa: E402  notebook 002's classes


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def shape(t):
    return "[" + ", ".join(str(d) for d in t.shape) + "]"


def run_torch(block, x, P, N):
    outs = [block(x[:, :P], start_pos=0, freqs_cis=None, mask=None)]
    for i in range(N):
        outs.append(block(x[:, P + i:P + i + 1], start_pos=P + i, freqs_cis=None, mask=None))
    return outs


def run_attn(model, x, P, N):
    outs = [model.prefill(x[:, :P])]
    for i in range(N):
        outs.append(model.decode(np.ascontiguousarray(x[:, P + i:P + i + 1])))
    return outs


def best_seconds(f, repeats=200):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    args = ModelArgs()
    block = TransformerBlock(0, args)
    P, N = 7, 3
    x = torch.randn(1, P + N, args.dim)
    with tempfile.TemporaryDirectory() as d:
        weights = f"{d}/block.safetensors"
        write_safetensors(weights, {f"layers.0.attention.{n}.weight": getattr(block.attention, n).weight
                                    for n in ("wq", "wk", "wv", "wo")})
        # The notebook's block: attention only, no RoPE (freqs_cis=None), no mask (mask=None).
        model = attn.Model(attn.ModelArgs(block="attention", rope="none", mask="none"),
                           weights=weights, threads=1)
        xn = x.numpy()
        with torch.no_grad():
            expected = run_torch(block, x, P, N)
        got = [model.prefill(xn[:, :P])]
        print("x_src:", shape(x[:, :P]), "-> output", shape(got[0]))
        print(f"prefill {P}: kv cache shape: key: {shape(model.cache_k(0))}, "
              f"value: {shape(model.cache_v(0))}")
        for i in range(N):
            got.append(model.decode(np.ascontiguousarray(xn[:, P + i:P + i + 1])))
            print(f"decode step {i + 1}: kv cache shape: key: {shape(model.cache_k(0))}, "
                  f"value: {shape(model.cache_v(0))}")
        ck = block.attention.cache_k[:1, :P + N].transpose(1, 2)
        print(f"torch cache_k[:1, :{P + N}].transpose(1, 2):", shape(ck))
        worst = max(float(np.abs(g - e.numpy()).max()) for g, e in zip(got, expected))
        worst = max(worst, float(np.abs(model.cache_k(0) - ck.numpy()).max()))
        print(f"largest difference from PyTorch (outputs and cache_k): {worst:.3g}")
        with torch.no_grad():
            t_torch = best_seconds(lambda: run_torch(block, x, P, N))

        def attn_run():
            model.reset()
            run_attn(model, xn, P, N)

        t_attn = best_seconds(attn_run)
        print(f"prefill {P} + {N} decode steps, best of 200: PyTorch {t_torch * 1e6:.1f} us, "
              f"attn {t_attn * 1e6:.1f} us")


if __name__ == "__main__":
    main()
