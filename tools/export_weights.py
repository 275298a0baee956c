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

  # from torch.nn.TransformerEncoderLayer (a saved module or its state_dict; also a
  # TransformerEncoder, one set of layers.{l}. per layer): config "block": "encoder"
  /usr/bin/python3 tools/export_weights.py --config encoder.json --encoder layer.pt --out enc.safetensors

  in_proj_weight/in_proj_bias are split into wq/wk/wv, out_proj becomes wo, linear1/linear2 become
  w1/w2, norm1/norm2 become attention_norm/ffn_norm. batch_first only changes the input's layout:
  attn-cli takes x as [B, T, dim], so a seq-first src [T, B, dim] goes in as src.transpose(0, 1)
  (encoder_input below does it), and attention_mask = ~src_key_padding_mask.

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


def encoder_layer_weights(layer, prefix: str = "layers.0.") -> dict:
    """A torch.nn.TransformerEncoderLayer's parameters under the contract's names (section 2)."""
    sd = layer.state_dict() if isinstance(layer, torch.nn.Module) else layer
    return encoder_state_weights(sd, "", prefix)


def encoder_state_weights(sd: dict, src: str, dst: str) -> dict:
    w, b = sd[src + "self_attn.in_proj_weight"], sd[src + "self_attn.in_proj_bias"]
    d = w.shape[1]
    out = {}
    for i, n in enumerate("qkv"):
        out[f"{dst}attention.w{n}.weight"] = w[i * d:(i + 1) * d]
        out[f"{dst}attention.w{n}.bias"] = b[i * d:(i + 1) * d]
    pairs = {"self_attn.out_proj": "attention.wo", "norm1": "attention_norm", "norm2": "ffn_norm",
             "linear1": "feed_forward.w1", "linear2": "feed_forward.w2"}
    for theirs, ours in pairs.items():
        for kind in ("weight", "bias"):
            out[f"{dst}{ours}.{kind}"] = sd[f"{src}{theirs}.{kind}"]
    return {k: v.detach().contiguous() for k, v in out.items()}


def encoder_input(src: torch.Tensor, src_key_padding_mask, batch_first: bool) -> dict:
    """attn-cli's --input for an encoder call: x [B, T, dim] and attention_mask [B, T] (1 = real).
    torch's src_key_padding_mask is the inverse (True = padding) and is [B, T] either way."""
    x = src if batch_first else src.transpose(0, 1)
    out = {"x": x.contiguous()}
    if src_key_padding_mask is not None:
        out["attention_mask"] = (~src_key_padding_mask.bool()).contiguous()
    return out


def from_encoder(args: ModelArgs, path: str, dtype: str) -> dict:
    obj = torch.load(path, map_location="cpu")
    sd = obj.state_dict() if isinstance(obj, torch.nn.Module) else obj
    layered = any(k.startswith("layers.") for k in sd)
    out = {}
    for l in range(args.n_layers):
        out.update(encoder_state_weights(sd, f"layers.{l}." if layered else "", f"layers.{l}."))
    return {k: v.to(TORCH_DTYPE[dtype]).contiguous() for k, v in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--checkpoint")
    p.add_argument("--encoder", help="a saved torch.nn.TransformerEncoderLayer/Encoder or state_dict")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="F32", choices=sorted(TORCH_DTYPE))
    a = p.parse_args()
    args = load_args(a.config)
    if a.encoder:
        weights = from_encoder(args, a.encoder, a.dtype)
    elif a.checkpoint:
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
