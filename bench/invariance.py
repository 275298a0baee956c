#!/usr/bin/env python3
"""The issue-50 table on any GGUF: every position's logits of a 20-token prompt computed as one
prefill, in two chunks, token by token, on 1-3 threads, and as row 0 and row 3 of a batch of 4
with other prompts; each compared bit for bit with the one prefill (and its max abs difference).

  PYTHONPATH=build/python /usr/bin/python3 bench/invariance.py MODEL.gguf [...]

Not a test (the files are large; tests/python/test_invariance.py is the CI matrix): the check of
the drawn whole models bench/gguf_model.py writes, in each weight type."""
import sys

import numpy as np

import attn

T = 20


def table(path):
    m = attn.Model.from_pretrained(path, threads=2, max_batch_size=4)
    rng = np.random.default_rng(50)
    toks = rng.integers(3, m.args.vocab_size, size=T).tolist()
    ref = m.forward([toks], all_positions=True)[0]
    rows = []

    def row(name, got):
        rows.append((name, bool(np.array_equal(got, ref)), float(np.max(np.abs(got - ref)))))

    for threads in (1, 3):
        t = attn.Model.from_pretrained(path, threads=threads)
        row(f"{threads} thread(s)", t.forward([toks], all_positions=True)[0])
    m.reset()
    row("two chunks (start_pos 7)",
        np.concatenate([m.forward([toks[:7]], all_positions=True)[0],
                        m.forward([toks[7:]], start_pos=7, all_positions=True)[0]]))
    m.reset()
    row("token by token (20 decode calls)",
        np.concatenate([m.forward([[x]], start_pos=i, all_positions=True)[0]
                        for i, x in enumerate(toks)]))
    others = [rng.integers(3, m.args.vocab_size, size=T).tolist() for _ in range(3)]
    for at in (0, 3):
        batch = others[:at] + [toks] + others[at:]
        m.reset()
        row(f"row {at} of a batch of 4", m.forward(batch, all_positions=True)[at])
    return rows


def main():
    for path in sys.argv[1:]:
        print(f"\n{path}\n| computed as | bit-identical to one prefill | max abs difference |")
        print("|---|---|---|")
        for name, same, diff in table(path):
            print(f"| {name} | {'yes' if same else 'no'} | {diff:.3g} |")


if __name__ == "__main__":
    main()
