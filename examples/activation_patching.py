"""Activation patching on stories260K, as TransformerLens's tutorials do it: a clean and a
corrupted prompt that differ in a few tokens, and for every layer and position, the clean run's
blocks.{l}.hook_resid_pre put into the corrupted run there. The table is how much of the clean
logit difference (" She" minus " He") each patch brings back: 0 = the corrupted run's, 1 = the
clean run's.

    PYTHONPATH=build/python /usr/bin/python3 examples/activation_patching.py
"""
import os
import sys

import attn

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "weights", "stories260K.gguf")

m = attn.Model.from_pretrained(sys.argv[1] if len(sys.argv) > 1 else MODEL, max_seq_len=64)
tok = m.tokenizer
clean = tok.encode("Once upon a time, there was a little girl named Lily.")
corrupt = tok.encode("Once upon a time, there was a little boy named Tim.")
assert len(clean) == len(corrupt)
she, he = tok.encode(" She", bos=False)[-1], tok.encode(" He", bos=False)[-1]


def logit_diff(logits):  # [1, 1, vocab]: the last position's
    return float(logits[0, -1, she] - logits[0, -1, he])


names = [f"blocks.{l}.hook_resid_pre" for l in range(m.args.n_layers)]
clean_logits, cache = m.run_with_cache(clean, names=names, all_positions=False)
m.reset()
corrupt_diff, clean_diff = logit_diff(m.forward(corrupt)), logit_diff(clean_logits)
print(f"logit difference She - He: clean {clean_diff:.3f}, corrupted {corrupt_diff:.3f}")

positions = [p for p in range(len(clean)) if clean[p] != corrupt[p]] + [len(clean) - 1]
print("layer " + " ".join(f"{tok.decode([corrupt[p]])!r:>9}" for p in positions))
for name in names:
    row = []
    for p in positions:

        def put_clean(resid_pre, hook, p=p):  # edits the corrupted run's activation in place
            resid_pre[:, p] = cache[hook][:, p]

        m.reset()
        patched = logit_diff(m.forward(corrupt, patch={name: put_clean}))
        row.append((patched - corrupt_diff) / (clean_diff - corrupt_diff))
    print(f"{name.split('.')[1]:>5} " + " ".join(f"{r:9.2f}" for r in row))
