#!/usr/bin/python3
"""Golden fixtures for activation patching: a forward whose activation at one hook point is
replaced, as TransformerLens's hooks replace it, in the float64 PyTorch reference.

Run:  /usr/bin/python3 tests/golden/make_patch.py
      (Debian's python with torch; deterministic: a rerun rewrites byte-identical files)

For make_observer.py's two cases (make_model.py's meta_f32 and hf_untied_f32, read back from
their files), the float64 LlamaLM of make_model.py gets TransformerLens's hook points: an
identity module at every activation (blocks.{l}.hook_resid_pre, attn.hook_q/hook_k before RoPE,
attn.hook_rot_q/hook_rot_k after, attn.hook_v, attn.hook_pattern, hook_attn_out,
hook_resid_mid, hook_mlp_out, hook_resid_post, ln_final.hook_normalized), with the blocks'
and attention's forward written out as make_golden.py's with those modules in the places
TransformerLens puts them. A patch is a torch forward hook on one of them that returns the
replacement: the rest of the pass (and the KV cache, for hook_k/hook_rot_k/hook_v) uses it.

Each run is a prefill of the T = 7 prompt tokens at start_pos 0 then 2 decode steps feeding
greedy[0], greedy[1] (make_model's), with one patch at one call ("prefill" or "decode.1").
The replacement values come from a corrupted run (the prompt reversed, each decode token
+ 1 mod vocab), the classic clean/corrupted activation patching, except:
  resid_pre_pos  the clean activation with position 3 taken from the corrupted run
  pattern_head   hook_pattern with head 1 (prefill) or 2 (decode) zeroed: that head's output 0
  scale          the clean activation times 0.5

tests/golden/patch/<case>.safetensors, F32:
  {i}.value                  the replacement of patch i, the hook point's shape
  {i}.{call}.logits          every call's logits under patch i, [B, seqlen, V] (prefill: every
                             position)
  {i}.{l}.resid_post         the patched call's blocks.{l}.hook_resid_post (downstream sites;
                             the patched value where it is the patched point)
  {i}.final_norm             the patched call's ln_final.hook_normalized (likewise)
and tests/golden/patch/cases.json: the patches (i, call, name, kind) and tolerances (logits
as make_model's: rtol 1e-4, atol 1e-4; sites as make_observer's: rtol 1e-4, atol 1e-5).

Self-checks (assertions):
  * unpatched, the hooked model's logits equal make_model's expected.safetensors, and its
    activations equal make_observer.py's fixture, to 1e-6 (float32 of the same float64 run);
  * a hook returning its input unchanged changes no logit (bit for bit);
  * every patch changes the logits of the patched call by more than 100x the tolerance;
  * a patch at the prefill of k, rot_k or v changes the decode steps' logits (the cache holds
    the patched keys and values); a patch of resid_post or later at decode.1 does not change
    decode.2's logits (only the cache carries a call's effects forward);
  * the same runs in float32 stay inside 0.1 of the tolerance;
  * the file is read back by make_golden's strict safetensors reader.
"""

import json
import math
import os
import sys
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixtures import as_f32, make_cases, tol_use, write_checked  # noqa: E402
from make_golden import (ATOL, DT, RTOL, apply_rotary_emb_half,  # noqa: E402
                         apply_rotary_emb_interleaved, read_safetensors, repeat_kv)
from make_model import LOGITS_ATOL, LOGITS_RTOL, LlamaLM  # noqa: E402
from make_observer import NAMES, load_case  # noqa: E402

OUT = os.path.join(HERE, "patch")
OBSERVER = os.path.join(HERE, "observer")
STEPS = 2
# (call, hook name, kind); kinds as the docstring says ("corrupted" otherwise).
PATCHES = [
    ("prefill", "blocks.0.hook_resid_pre", "corrupted"),
    ("prefill", "blocks.1.hook_resid_pre", "resid_pre_pos"),
    ("prefill", "blocks.0.attn.hook_q", "corrupted"),
    ("prefill", "blocks.0.attn.hook_k", "corrupted"),
    ("prefill", "blocks.1.attn.hook_rot_q", "scale"),
    ("prefill", "blocks.1.attn.hook_rot_k", "corrupted"),
    ("prefill", "blocks.0.attn.hook_v", "corrupted"),
    ("prefill", "blocks.0.attn.hook_pattern", "pattern_head"),
    ("prefill", "blocks.1.hook_attn_out", "corrupted"),
    ("prefill", "blocks.0.hook_resid_mid", "corrupted"),
    ("prefill", "blocks.0.hook_mlp_out", "corrupted"),
    ("prefill", "blocks.0.hook_resid_post", "corrupted"),
    ("prefill", "ln_final.hook_normalized", "corrupted"),
    ("decode.1", "blocks.0.hook_resid_pre", "corrupted"),
    ("decode.1", "blocks.0.attn.hook_rot_k", "corrupted"),
    ("decode.1", "blocks.1.attn.hook_v", "scale"),
    ("decode.1", "blocks.1.attn.hook_pattern", "pattern_head"),
    ("decode.1", "blocks.0.hook_attn_out", "corrupted"),
    ("decode.1", "blocks.1.hook_mlp_out", "corrupted"),
    ("decode.1", "blocks.1.hook_resid_post", "corrupted"),
]
BLOCK_HOOKS = ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out",
               "hook_resid_post")
ATTN_HOOKS = ("hook_q", "hook_k", "hook_rot_q", "hook_rot_k", "hook_v", "hook_pattern")
# make_observer.py's site names of the hook names (hook_names.hpp's table, read the other way).
OBSERVER_SITE = {"hook_resid_pre": "resid_pre", "attn.hook_q": "q_in", "attn.hook_k": "k_in",
                 "attn.hook_rot_q": "q", "attn.hook_rot_k": "k", "attn.hook_v": "v",
                 "attn.hook_pattern": "attn_probs", "hook_attn_out": "attn_out",
                 "hook_resid_mid": "resid_mid", "hook_mlp_out": "mlp_out",
                 "hook_resid_post": "resid_post"}


class HookPoint(nn.Module):
    """TransformerLens's HookPoint: the identity, where forward hooks read or replace."""

    def forward(self, x):
        return x


def attention_forward(self, x, start_pos, freqs_cis, mask):
    """make_golden.Attention.forward with TransformerLens's hook points."""
    bsz, seqlen, _ = x.shape
    xq = self.hook_q(self.wq(x).view(bsz, seqlen, self.n_local_heads, self.head_dim))
    xk = self.hook_k(self.wk(x).view(bsz, seqlen, self.n_local_kv_heads, self.head_dim))
    xv = self.hook_v(self.wv(x).view(bsz, seqlen, self.n_local_kv_heads, self.head_dim))
    if self.rope == "interleaved":
        xq, xk = apply_rotary_emb_interleaved(xq, xk, freqs_cis)
    elif self.rope == "half":
        xq, xk = apply_rotary_emb_half(xq, xk, freqs_cis)
    xq, xk = self.hook_rot_q(xq), self.hook_rot_k(xk)
    self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
    self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv
    keys = repeat_kv(self.cache_k[:bsz, : start_pos + seqlen], self.n_rep).transpose(1, 2)
    values = repeat_kv(self.cache_v[:bsz, : start_pos + seqlen], self.n_rep).transpose(1, 2)
    scores = torch.matmul(xq.transpose(1, 2), keys.transpose(2, 3)) / math.sqrt(self.head_dim)
    if mask is not None:
        scores = scores + mask
    probs = self.hook_pattern(F.softmax(scores, dim=-1))  # [B, H, T, S]
    output = torch.matmul(probs, values)                  # [B, H, T, D]
    return self.wo(output.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


def block_forward(self, x, start_pos, freqs_cis, mask):
    """make_golden.TransformerBlock.forward (llama) with TransformerLens's hook points."""
    x = self.hook_resid_pre(x)
    h = self.hook_resid_mid(
        x + self.hook_attn_out(self.attention(self.attention_norm(x), start_pos, freqs_cis, mask)))
    return self.hook_resid_post(h + self.hook_mlp_out(self.feed_forward(self.ffn_norm(h))))


def lm_forward(self, tokens, start_pos):
    """make_model.LlamaLM.forward with ln_final.hook_normalized."""
    h = self.layers(self.tok_embeddings(tokens), start_pos)
    return self.output(self.hook_normalized(self.norm(h)))


def hooked_model(c, weights, dtype=DT):
    """make_model's LlamaLM with the hook points: (model, {hook name: HookPoint})."""
    model = LlamaLM(c.args, weights, dtype)
    points = {}
    for l, block in enumerate(model.layers.layers):
        for name in BLOCK_HOOKS:
            block.add_module(name, HookPoint())
            points[f"blocks.{l}.{name}"] = getattr(block, name)
        for name in ATTN_HOOKS:
            block.attention.add_module(name, HookPoint())
            points[f"blocks.{l}.attn.{name}"] = getattr(block.attention, name)
        block.forward = types.MethodType(block_forward, block)
        block.attention.forward = types.MethodType(attention_forward, block.attention)
    model.add_module("hook_normalized", HookPoint())
    points["ln_final.hook_normalized"] = model.hook_normalized
    model.forward = types.MethodType(lm_forward, model)
    return model, points


def calls(expected, corrupted=False):
    """[(call, tokens [B, seqlen], start_pos)]: the prefill and STEPS decode steps."""
    tokens = expected["tokens"].to(torch.int64)
    greedy = expected["greedy"].to(torch.int64)
    V = expected["logits"].shape[-1]
    T = tokens.shape[1]
    if corrupted:
        tokens, greedy = tokens.flip(1), (greedy + 1) % V
    return [("prefill", tokens, 0)] + [
        (f"decode.{i}", greedy[:, i - 1: i], T + i - 1) for i in range(1, STEPS + 1)]


def run(c, weights, expected, dtype=DT, patch=None, capture=(), corrupted=False):
    """The calls on a fresh hooked model; patch (call, name, value) replaces one activation.
    Returns ({call: logits}, {call: {name: activation}}) for the names in capture."""
    model, points = hooked_model(c, weights, dtype)
    seen, logits = {}, {}
    for call, ids, pos in calls(expected, corrupted):
        got = seen.setdefault(call, {})
        handles = []
        if patch is not None and patch[0] == call:  # first: the hooks after it see its value
            value = patch[2].to(dtype)
            handles.append(points[patch[1]].register_forward_hook(lambda m, i, o: value.clone()))
        handles += [points[n].register_forward_hook(
            lambda m, i, o, n=n, got=got: got.__setitem__(n, o.clone())) for n in capture]
        with torch.inference_mode():
            logits[call] = model(ids, pos)
        for h in handles:
            h.remove()
    return logits, seen


def replacement(kind, clean, corrupted, call):
    if kind == "corrupted":
        return corrupted
    if kind == "scale":
        return clean * 0.5
    if kind == "resid_pre_pos":
        v = clean.clone()
        v[:, 3] = corrupted[:, 3]
        return v
    assert kind == "pattern_head"
    v = clean.clone()
    v[:, 1 if call == "prefill" else 2] = 0
    return v


def max_err(a, b):
    return (a.to(DT) - b.to(DT)).abs().max().item()


def make_case(c) -> dict:
    weights, expected = load_case(c)
    names = [n for n in hooked_model(c, weights)[1]]
    clean_logits, clean = run(c, weights, expected, capture=names)
    _, corrupt = run(c, weights, expected, capture=names, corrupted=True)

    # The hooked model is make_model's and make_observer's reference.
    err = max_err(clean_logits["prefill"], expected["logits"])
    for i in range(1, STEPS + 1):
        err = max(err, max_err(clean_logits[f"decode.{i}"][:, -1],
                               expected["greedy_logits"][:, i]))
    observed = read_safetensors(os.path.join(OBSERVER, c.name + ".safetensors"))
    for call, acts in clean.items():
        for name, v in acts.items():
            key = (f"{call}.final_norm" if name.startswith("ln_final") else
                   f"{call}.{name.split('.')[1]}.{OBSERVER_SITE[name.split('.', 2)[2]]}")
            err = max(err, max_err(v, observed[key]))
    assert err < 1e-6, f"{c.name}: the hooked model differs from the references by {err}"
    for call in clean_logits:  # the identity hook
        p = next(n for n in names if n.endswith("hook_v"))
        same, _ = run(c, weights, expected, patch=(call, p, clean[call][p]))
        assert all(torch.equal(same[k], clean_logits[k]) for k in same)

    tensors, manifest, use = {}, [], 0.0
    for i, (call, name, kind) in enumerate(PATCHES):
        value = replacement(kind, clean[call][name], corrupt[call][name], call)
        after = [f"blocks.{l}.hook_resid_post" for l in range(c.args.n_layers)]
        after.append("ln_final.hook_normalized")
        logits, seen = run(c, weights, expected, patch=(call, name, value), capture=after)
        moved = max_err(logits[call], clean_logits[call]) / (LOGITS_ATOL + LOGITS_RTOL)
        assert moved > 100, f"{c.name} patch {i}: the logits move {moved:.1f} tolerances"
        if call == "prefill" and ("hook_k" in name or "rot_k" in name or "hook_v" in name):
            assert max_err(logits["decode.1"], clean_logits["decode.1"]) > 1e-3, (c.name, i)
        if call == "decode.1" and ("resid_post" in name or "mlp_out" in name):
            assert torch.equal(logits["decode.2"], clean_logits["decode.2"]), (c.name, i)
        l32, s32 = run(c, weights, expected, torch.float32, (call, name, value), capture=after)
        for k in logits:
            use = max(use, tol_use(l32[k], logits[k], LOGITS_RTOL, LOGITS_ATOL))
        for k in seen[call]:
            use = max(use, tol_use(s32[call][k], seen[call][k], RTOL, ATOL))
        tensors[f"{i}.value"] = value
        for k, v in logits.items():
            tensors[f"{i}.{k}.logits"] = v
        for l in range(c.args.n_layers):
            tensors[f"{i}.{l}.resid_post"] = seen[call][f"blocks.{l}.hook_resid_post"]
        tensors[f"{i}.final_norm"] = seen[call]["ln_final.hook_normalized"]
        manifest.append({"i": i, "call": call, "name": name, "kind": kind})
    assert use < 0.1, f"{c.name}: a float32 run uses {use:.3f} of the tolerance"

    size = write_checked(OUT, c.name, as_f32(tensors))
    return dict(patches=manifest, size=size, err=err, use=use)


def main():
    make_cases(OUT, NAMES, make_case,
               lambda c, r: {"name": c.name, "model": f"model/{c.name}", "steps": STEPS,
                             "logits_tolerance": {"rtol": LOGITS_RTOL, "atol": LOGITS_ATOL},
                             "tolerance": {"rtol": RTOL, "atol": ATOL}, "patches": r["patches"]},
               lambda c, r: (c.name, len(r["patches"]), r["size"], f"{r['err']:.1e}",
                             f"{r['use']:.4f}"),
               ("case", "patches", "bytes", "ref err", "f32/tol"),
               ["ref err: max |hooked reference - make_model/make_observer fixtures| (asserted < 1e-6)",
                "f32/tol: worst |f32 run - f64| / (atol + rtol*|exp|) (asserted < 0.1)"])


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
