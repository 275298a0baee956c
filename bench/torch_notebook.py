#!/usr/bin/python3
"""The seed notebook's workload as one process, to time against `attn-cli run` from outside.

The GQA notebook's ModelArgs (dim 18, 6 heads, 2 KV heads, head_dim 3, max_batch 2,
max_seq_len 17) and TransformerBlock (x + wo(attention(x)), no RoPE), with the KV cache:
prefill 7 positions (causal mask, as attn-cli and Meta's model.py), then 3 decode steps,
printing the cache shapes as [batch, n_kv_heads, filled positions, head_dim] (attn-cli's trace).

  /usr/bin/python3 bench/torch_notebook.py
"""
import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelArgs:
    dim: int = 18
    n_layers: int = 1
    n_heads: int = 6
    n_kv_heads: int = 2
    vocab_size: int = -1
    multiple_of: int = 10
    norm_eps: float = 1e-5
    rope_theta: float = 500000
    max_batch_size: int = 2
    max_seq_len: int = 17
    model_parallel_size = 1


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_kv_heads = args.n_kv_heads
        self.n_local_heads = args.n_heads // args.model_parallel_size
        self.n_local_kv_heads = self.n_kv_heads // args.model_parallel_size
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        shape = (args.max_batch_size, args.max_seq_len, self.n_local_kv_heads, self.head_dim)
        self.cache_k = torch.zeros(shape)
        self.cache_v = torch.zeros(shape)

    def forward(self, x, start_pos: int, freqs_cis, mask: Optional[torch.Tensor]):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)

        self.cache_k[:bsz, start_pos:start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos:start_pos + seqlen] = xv
        keys = repeat_kv(self.cache_k[:bsz, :start_pos + seqlen], self.n_rep)
        values = repeat_kv(self.cache_v[:bsz, :start_pos + seqlen], self.n_rep)

        xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


class TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.attention = Attention(args)

    def forward(self, x, start_pos: int, freqs_cis, mask):
        return x + self.attention(x, start_pos, freqs_cis, mask)


def causal_mask(seqlen: int, start_pos: int) -> Optional[torch.Tensor]:
    if seqlen == 1:
        return None
    mask = torch.triu(torch.full((seqlen, seqlen), float("-inf")), diagonal=1)
    return torch.hstack([torch.zeros((seqlen, start_pos)), mask])


def cache_shapes(block: TransformerBlock, bsz: int, filled: int) -> str:
    k = block.attention.cache_k[:bsz, :filled].transpose(1, 2)
    v = block.attention.cache_v[:bsz, :filled].transpose(1, 2)
    return f"kv cache shape: key: {list(k.shape)}, value: {list(v.shape)}"


def main() -> None:
    torch.manual_seed(42)
    config = ModelArgs()
    block = TransformerBlock(1, config)
    P, N = 7, 3
    x = torch.randn(1, P + N, config.dim)
    with torch.inference_mode():
        y = block(x[:, :P], 0, None, causal_mask(P, 0))
        print(f"prefill: start_pos 0, input {list(x[:, :P].shape)} -> output {list(y.shape)}, "
              + cache_shapes(block, 1, P))
        for i in range(N):
            y = block(x[:, P + i:P + i + 1], P + i, None, None)
            print(f"decode step {i + 1}: start_pos {P + i}, output {list(y.shape)}, "
                  + cache_shapes(block, 1, P + i + 1))


if __name__ == "__main__":
    main()
