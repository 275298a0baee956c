#!/usr/bin/python3
"""Writes attn-cli weights (safetensors, CONTRACT section 2 names, nn.Linear layout).

Two uses:
  # from a PyTorch checkpoint whose keys follow Meta's names (consolidated.00.pth, or any
  # state_dict with layers.{l}.attention.wq.weight ...): keep the layers the config needs
  /usr/bin/python3 tools/export_weights.py --config params.json --checkpoint consolidated.00.pth \
      --out layer.safetensors [--dtype F32|F16|BF16]

  # drawn weights for a config (how weights/ is made; deterministic for a seed)
  /usr/bin/python3 tools/export_weights.py --config configs/llama-tiny.json --seed 0 \
      --out weights/llama-tiny.safetensors

Hugging Face checkpoints name things differently (model.layers.{l}.self_attn.q_proj.weight) and
permute wq/wk rows for rotate_half: rename the keys and use "rope": "half" in the config.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "golden"))
from make_golden import ModelArgs, TORCH_DTYPE, draw_weights, weight_specs, write_safetensors  # noqa: E402


def load_args(path: str) -> ModelArgs:
    with open(path) as f:
        raw = json.load(f)
    fields = ModelArgs.__dataclass_fields__
    return ModelArgs(**{k: v for k, v in raw.items() if k in fields})


def from_checkpoint(args: ModelArgs, path: str, dtype: str) -> dict:
    state = torch.load(path, map_location="cpu")
    out = {}
    for name, shape, _ in weight_specs(args):
        if name not in state:
            sys.exit(f"{path}: tensor '{name}' is missing")
        t = state[name]
        if list(t.shape) != shape:
            sys.exit(f"{path}: tensor '{name}': expected {shape}, got {list(t.shape)}")
        out[name] = t.to(TORCH_DTYPE[dtype]).contiguous()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--checkpoint")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="F32", choices=sorted(TORCH_DTYPE))
    a = p.parse_args()
    args = load_args(a.config)
    if a.checkpoint:
        weights = from_checkpoint(args, a.checkpoint, a.dtype)
    else:
        torch.manual_seed(a.seed)
        weights = draw_weights(args, a.dtype)
    tmp = a.out + ".tmp"
    write_safetensors(tmp, weights)
    os.replace(tmp, a.out)
    print(f"{a.out}: {len(weights)} tensors, {os.path.getsize(a.out)} bytes")


if __name__ == "__main__":
    main()
