#!/usr/bin/python3
"""Fixtures for BF16 and F16 weights kept at half the bytes (issue 10), from PyTorch.

Run:  /usr/bin/python3 tests/golden/make_halves.py   (deterministic; byte-identical reruns)

Writes
  tests/golden/halves/widening.safetensors
      f16_bits [65536] F16: every 16-bit pattern; f16_as_f32 [65536] F32: torch's .float()
      bf16_bits [65536] BF16: every pattern;      bf16_as_f32 [65536] F32: torch's .float()
    the engine's widening (every kernel set) must give these bits;
      f32_samples [N] F32: draws over every F16 and BF16 range, ties, the edges of the
      subnormals and of the largest F16; f32_to_f16 [N] F16, f32_to_bf16 [N] BF16: torch's
      .half() and .bfloat16() of them (round to nearest even), for the engine's narrowing.
  tests/golden/<case>/weights_f32.safetensors for the BF16 and F16 golden cases
      each tensor of the case's weights.safetensors widened by torch's .float(): the engine
      run on it must give the bits it gives on the BF16/F16 file.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import read_safetensors, write_safetensors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["bf16_llama_mqa_half", "f16_llama_gqa_interleaved"]


def widening() -> dict:
    bits = torch.arange(0, 65536, dtype=torch.int32).to(torch.int16)  # index = bit pattern
    f16, bf16 = bits.view(torch.float16), bits.view(torch.bfloat16)
    out = {"f16_bits": f16, "f16_as_f32": f16.float(), "bf16_bits": bf16,
           "bf16_as_f32": bf16.float()}
    # Self-check against the definitions: bf16 is an f32's top half; f16 per IEEE 754.
    top = (bits.to(torch.int64) & 0xFFFF) << 16
    assert torch.equal(out["bf16_as_f32"].view(torch.int32).to(torch.int64) & 0xFFFFFFFF, top)
    assert out["f16_as_f32"][0x3C00].item() == 1.0 and out["f16_as_f32"][1].item() == 2.0 ** -24
    assert torch.isinf(out["f16_as_f32"][0x7C00]) and torch.isnan(out["f16_as_f32"][0x7E00])
    out.update(narrowing())
    return out


def narrowing() -> dict:
    g = torch.Generator().manual_seed(10)
    draws = torch.randn(20000, generator=g, dtype=torch.float64)
    scales = 2.0 ** torch.randint(-30, 18, (20000,), generator=g).double()
    edges = [0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, -65520.0, 1e9, 2.0 ** -25,
             2.0 ** -25 * 1.0001, 2.0 ** -24, 1.5 * 2.0 ** -24, 2.5 * 2.0 ** -24, 2.0 ** -14,
             2.0 ** -14 * (1 - 2.0 ** -11), 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8,
             1 + 3 * 2.0 ** -8, 3.3895313892515355e38, float("inf"), float("-inf")]
    x = torch.cat([torch.tensor(edges, dtype=torch.float64), draws * scales]).float()
    return {"f32_samples": x, "f32_to_f16": x.half(), "f32_to_bf16": x.bfloat16()}


def main():
    os.makedirs(os.path.join(HERE, "halves"), exist_ok=True)
    path = os.path.join(HERE, "halves", "widening.safetensors")
    tensors = widening()
    write_safetensors(path, tensors)
    back = read_safetensors(path)
    assert all(torch.equal(back[k].view(torch.int16) if back[k].element_size() == 2
                           else back[k].view(torch.int32),
                           v.view(torch.int16) if v.element_size() == 2 else v.view(torch.int32))
               for k, v in tensors.items())
    for case in CASES:
        src = read_safetensors(os.path.join(HERE, case, "weights.safetensors"))
        assert any(t.dtype in (torch.float16, torch.bfloat16) for t in src.values()), case
        widened = {k: t.float() for k, t in src.items()}
        write_safetensors(os.path.join(HERE, case, "weights_f32.safetensors"), widened)
        print(f"{case}/weights_f32.safetensors: {len(widened)} tensors")
    print(f"{path}: {len(tensors)} tensors")


if __name__ == "__main__":
    main()
