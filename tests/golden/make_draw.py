"""The seeded draw of one tensor over 4 M values (the size drawn on several threads), from the
generator's definition (lib/attn/model/rng.hpp, docs/contract.md "seeded weights") in numpy:
value i of stream s under seed is bound * ((splitmix64(key + i) >> 40) * 2^-23 - 1), key =
splitmix64(seed ^ splitmix64(s)), bound = 1 / sqrt(in_features) in float32.

Writes draw/embeddings.json: the tensor's float32 bytes' CRC-32 and its values' bits at sampled
indices (every 2^16-value run's edges among them). tests/model/test_draw.cpp draws it at 1, 2
and 3 threads. Deterministic: rerunning rewrites the same file.
Usage: /usr/bin/python3 tests/golden/make_draw.py
"""
import json
import zlib
from pathlib import Path

import numpy as np


def splitmix64(x):
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def draw(seed, stream, n, fan_in):
    key = splitmix64(np.uint64(seed) ^ splitmix64(np.uint64(stream)))
    with np.errstate(over="ignore"):
        bits = splitmix64(key + np.arange(n, dtype=np.uint64))
    k = (bits >> np.uint64(40)).astype(np.float64)
    u = (k * 2.0 ** -23 - 1.0).astype(np.float32)  # exact: 24 bits
    bound = np.float32(1) / np.sqrt(np.float32(fan_in))
    return (bound * u).astype(np.float32)


def main():
    # Block "attention" (wq, wk, wv, wo), then tok_embeddings: stream 5, [vocab, dim].
    dim, vocab, seed, stream = 64, 65600, 7, 5
    values = draw(seed, stream, vocab * dim, dim)
    n = values.size
    run = 1 << 16
    idx = sorted({0, 1, 2, n - 2, n - 1} | {r * run + d for r in range(1, n // run + 1)
                                            for d in (-1, 0) if 0 <= r * run + d < n}
                 | set(range(0, n, 99991)))
    bits = values.view(np.uint32)
    out = {
        "description": __doc__.splitlines()[0] + " (tests/golden/make_draw.py)",
        "config": {"dim": dim, "vocab_size": vocab, "n_layers": 1, "n_heads": 4, "n_kv_heads": 4,
                   "block": "attention", "seed": seed},
        "tensor": "tok_embeddings.weight", "stream": stream, "numel": int(n),
        "crc32": zlib.crc32(values.tobytes()),
        "samples": [[int(i), int(bits[i])] for i in idx],
    }
    path = Path(__file__).parent / "draw" / "embeddings.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}: {len(idx)} samples, crc32 {out['crc32']:08x}")


if __name__ == "__main__":
    main()
