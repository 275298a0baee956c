"""Steering a generation with a hook, and direct logit attribution, on stories260K, as
TransformerLens's users do it: a vector (the difference of two prompts' residual streams at
one block) added to that block's output at every step of generate, inside model.hooks(); then
the heads and MLPs whose direct contributions make the clean prompt's next-token logit.

    PYTHONPATH=build/python /usr/bin/python3 examples/steering_hooks.py
"""
import os
import sys

import numpy as np

import attn

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "weights", "stories260K.gguf")

m = attn.Model.from_pretrained(sys.argv[1] if len(sys.argv) > 1 else MODEL, max_seq_len=128)
tok = m.tokenizer
LAYER, SCALE = 2, 0.6
site = f"blocks.{LAYER}.hook_resid_post"


def last_resid(text):
    m.reset()
    _, cache = m.run_with_cache(tok.encode(text), names=site)
    return cache[site][0, -1]


vector = SCALE * (last_resid("The dog was very sad") - last_resid("The dog was very happy"))
prompt = "Once upon a time, there was a little dog"
m.reset()
print("plain:  ", tok.decode(m.generate(prompt, steps=24)))
m.reset()
with m.hooks(fwd_hooks=[(site, lambda resid, hook: resid + vector)]):
    print("steered:", tok.decode(m.generate(prompt, steps=24)))

# Direct logit attribution of the next token after the prompt: the embedding, each head and each
# MLP, as the final norm (its scale held) and W_U read them; they sum to the logit.
m.reset()
ids = tok.encode(prompt)
logits, cache = m.run_with_cache(ids)
a = m.args
parts, labels = [cache["hook_embed"][None]], ["embed"]
for l in range(a.n_layers):
    heads, names = cache.stack_head_results(layer=l + 1, return_labels=True)
    parts.append(heads[l * a.n_heads:])
    labels += names[l * a.n_heads:]
    parts.append(cache["mlp_out", l][None])
    labels.append(f"L{l}MLP")
next_id = int(logits[0, -1].argmax())
attrs = cache.logit_attrs(np.concatenate(parts)[:, :, -1], np.array([next_id]), pos_slice=-1)[:, 0]
print(f"next token {tok.decode([next_id])!r}: logit {logits[0, -1, next_id]:.4f}, "
      f"sum of attributions {attrs.sum():.4f}")
for i in np.argsort(-np.abs(attrs))[:5]:
    print(f"  {labels[i]:>6} {attrs[i]:+.3f}")
