#!/usr/bin/python3
"""Writes attn-cli weights (safetensors, CONTRACT section 2 names, nn.Linear layout).

Uses:
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

  # model parallel: per-rank files (Meta's per-rank shapes) for attn-cli --weights 'w.{rank}...'
  # - split a whole model (a checkpoint, a safetensors file or drawn weights) for K ranks:
  /usr/bin/python3 tools/export_weights.py --config C --weights whole.safetensors --ranks 2 \
      --out 'w.rank{rank}.safetensors'
  # - Meta's sharded checkpoint, one per-rank file per consolidated.0{r}.pth (K = their number):
  /usr/bin/python3 tools/export_weights.py --config params.json \
      --checkpoint 'llama-2-13b/consolidated.*.pth' --out 'w.rank{rank}.safetensors'
  # - and back: per-rank files joined into one whole file
  /usr/bin/python3 tools/export_weights.py --config C --weights 'w.rank{rank}.safetensors' \
      --ranks 2 --join --out whole.safetensors

Rank r holds rows r*n/K .. of wq, wk, wv, w1, w3 (and the biases of wq, wk, wv), columns
r*n/K .. of wo and w2, and whole norms and wo bias: fairscale's ColumnParallelLinear and
RowParallelLinear, as Meta's checkpoints store them.

Hugging Face checkpoints name things differently (model.layers.{l}.self_attn.q_proj.weight) and
permute wq/wk rows for rotate_half: rename the keys and use "rope": "half" in the config.
"""
import argparse
import glob
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "golden"))
from make_golden import (ModelArgs, TORCH_DTYPE, draw_weights, read_safetensors,  # noqa: E402
                         weight_specs, write_safetensors)

ROW_SPLIT = ("wq.weight", "wk.weight", "wv.weight", "wq.bias", "wk.bias", "wv.bias",
             "w1.weight", "w3.weight")
COL_SPLIT = ("wo.weight", "w2.weight")


def load_args(path: str) -> ModelArgs:
    with open(path) as f:
        raw = json.load(f)
    fields = ModelArgs.__dataclass_fields__
    return ModelArgs(**{k: v for k, v in raw.items() if k in fields})


def split_dim(name: str):
    """The dimension a tensor is split along across ranks, or None if every rank holds it whole."""
    if name.endswith(ROW_SPLIT):
        return 0
    if name.endswith(COL_SPLIT):
        return 1
    return None


def rank_shape(name: str, shape: list, ranks: int) -> list:
    d = split_dim(name)
    if d is None or ranks == 1:
        return list(shape)
    if shape[d] % ranks:
        sys.exit(f"tensor '{name}': dimension {d} ({shape[d]}) is not divisible by {ranks} ranks")
    out = list(shape)
    out[d] //= ranks
    return out


def pick(state: dict, path: str, specs, dtype: str) -> dict:
    out = {}
    for name, shape in specs:
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


def read_any(path: str) -> dict:
    return read_safetensors(path) if path.endswith(".safetensors") else torch.load(path, map_location="cpu")


def split(weights: dict, ranks: int) -> list:
    """The whole model's tensors -> one dict per rank (Meta's per-rank shapes)."""
    out = [{} for _ in range(ranks)]
    for name, t in weights.items():
        d = split_dim(name)
        parts = [t] * ranks if d is None else torch.chunk(t, ranks, dim=d)
        for r in range(ranks):
            out[r][name] = parts[r].contiguous()
    return out


def join(per_rank: list) -> dict:
    """Per-rank tensors -> the whole model's; whole tensors must agree across ranks."""
    out = {}
    for name, t in per_rank[0].items():
        d = split_dim(name)
        if d is None:
            for r, other in enumerate(per_rank[1:], 1):
                if not torch.equal(other[name], t):
                    sys.exit(f"tensor '{name}': rank {r} differs from rank 0 (it should be whole on every rank)")
            out[name] = t
        else:
            out[name] = torch.cat([p[name] for p in per_rank], dim=d).contiguous()
    return out


def write(path: str, weights: dict) -> None:
    tmp = path + ".tmp"
    write_safetensors(tmp, weights)
    os.replace(tmp, path)
    print(f"{path}: {len(weights)} tensors, {os.path.getsize(path)} bytes")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True, help="output file; with {rank}: one file per rank")
    p.add_argument("--checkpoint", help="a .pth state_dict, or a glob of Meta's consolidated.*.pth shards")
    p.add_argument("--weights", help="a safetensors file (with {rank}: per-rank files)")
    p.add_argument("--ranks", type=int, default=1, help="split for (or, with --join, from) K ranks")
    p.add_argument("--join", action="store_true", help="join per-rank --weights into one whole file")
    p.add_argument("--encoder", help="a saved torch.nn.TransformerEncoderLayer/Encoder or state_dict")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="F32", choices=sorted(TORCH_DTYPE))
    a = p.parse_args()
    args = load_args(a.config)
    if a.encoder:
        weights = from_encoder(args, a.encoder, a.dtype)
    else:
        specs = [(n, s) for n, s, _ in weight_specs(args)]
        shards = sorted(glob.glob(a.checkpoint)) if a.checkpoint and any(c in a.checkpoint for c in "*?[") else None
        if shards:  # Meta's sharded checkpoint: shard r holds rank r's slice
            if "{rank}" not in a.out:
                sys.exit("--out must contain {rank} for a sharded checkpoint (one file per shard)")
            K = len(shards)
            for r, path in enumerate(shards):
                w = pick(torch.load(path, map_location="cpu"), path, [(n, rank_shape(n, s, K)) for n, s in specs], a.dtype)
                write(a.out.replace("{rank}", str(r)), w)
            return
        if a.join:
            if not a.weights or "{rank}" not in a.weights:
                sys.exit("--join needs per-rank --weights containing {rank}")
            parts = []
            for r in range(a.ranks):
                path = a.weights.replace("{rank}", str(r))
                parts.append(pick(read_any(path), path, [(n, rank_shape(n, s, a.ranks)) for n, s in specs], a.dtype))
            write(a.out, join(parts))
            return
        if a.checkpoint or a.weights:
            path = a.checkpoint or a.weights
            weights = pick(read_any(path), path, specs, a.dtype)
        else:
            torch.manual_seed(a.seed)
            weights = draw_weights(args, a.dtype)
    per_rank_out = "{rank}" in a.out
    if per_rank_out:
        for r, w in enumerate(split(weights, a.ranks)):
            write(a.out.replace("{rank}", str(r)), w)
    else:
        if a.ranks != 1:
            sys.exit("--ranks K needs an --out containing {rank}")
        write(a.out, weights)


if __name__ == "__main__":
    main()
