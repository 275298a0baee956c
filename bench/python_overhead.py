"""What Python costs around the engine: per-call overhead of Model.decode on the notebook's
config, and the 8B layer through Python against the CLI in the same run.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [build/apps/attn-cli]
"""
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import attn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "apps", "attn-cli")


def decode_overhead(rounds=2000):
    """Median of (call time seen by Python - the engine's own time) over decode calls."""
    m = attn.Model(attn.ModelArgs(), threads=1)  # configs/gqa.json
    rng = np.random.default_rng(0)
    steps = [rng.standard_normal((1, 1, 18)).astype(np.float32) for _ in range(16)]
    first = rng.standard_normal((1, 1, 18)).astype(np.float32)
    total, engine = [], []
    while len(total) < rounds:
        m.reset()
        m.prefill(first)
        for s in steps:
            t0 = time.perf_counter()
            m.decode(s)
            total.append(time.perf_counter() - t0)
            engine.append(m.last_seconds)
    over = [t - e for t, e in zip(total, engine)]
    return statistics.median(total) * 1e6, statistics.median(engine) * 1e6, statistics.median(over) * 1e6


def layer_python(prefill, steps, threads):
    args = attn.ModelArgs.from_file(os.path.join(ROOT, "configs", "llama3-8b-layer.json"))
    m = attn.Model(args, threads=threads)
    x = np.random.default_rng(1).standard_normal((1, prefill + steps, args.dim)).astype(np.float32)
    t0 = time.perf_counter()
    m.prefill(x[:, :prefill])
    pf = time.perf_counter() - t0
    ds = []
    for i in range(steps):
        step = np.ascontiguousarray(x[:, prefill + i:prefill + i + 1])
        t0 = time.perf_counter()
        m.decode(step)
        ds.append(time.perf_counter() - t0)
    return prefill / pf, 1 / statistics.median(ds)


def layer_cli(prefill, steps, threads):
    out = subprocess.run([CLI, "run", "--config", os.path.join(ROOT, "configs", "llama3-8b-layer.json"),
                          "--prefill", str(prefill), "--steps", str(steps), "-t", str(threads), "--json"],
                         check=True, capture_output=True, text=True).stdout
    events = [json.loads(l) for l in out.splitlines()]
    pf = next(e for e in events if e["event"] == "prefill")["ms"] / 1e3
    ds = [e["ms"] / 1e3 for e in events if e["event"] == "decode"]
    return prefill / pf, 1 / statistics.median(ds)


def main():
    total, engine, over = decode_overhead()
    print(f"decode on configs/gqa.json, 1 thread: {total:.1f} us per call from Python, "
          f"engine {engine:.1f} us, overhead {over:.1f} us (medians of 2000)")
    rows = {"python": [], "cli": []}
    for _ in range(3):  # alternating, the machine is shared
        rows["python"].append(layer_python(512, 32, 2))
        rows["cli"].append(layer_cli(512, 32, 2))
    for k, v in rows.items():
        pf = statistics.median(r[0] for r in v)
        dc = statistics.median(r[1] for r in v)
        print(f"8B layer, F32, 2 threads, {k:6s}: prefill 512 {pf:7.1f} positions/s, "
              f"decode {dc:6.2f} steps/s (median of 3)")
    p = [statistics.median(r[i] for r in rows["python"]) for i in (0, 1)]
    c = [statistics.median(r[i] for r in rows["cli"]) for i in (0, 1)]
    print(f"python / cli: prefill {p[0] / c[0]:.3f}, decode {p[1] / c[1]:.3f}")


if __name__ == "__main__":
    main()
