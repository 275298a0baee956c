#!/usr/bin/python3
"""Golden fixtures for the forward pass's observer: what happens inside a whole-model run.

Run:  /usr/bin/python3 tests/golden/make_observer.py
      (Debian's python with torch; deterministic: a rerun rewrites byte-identical files)

For two of make_model.py's committed cases, read back from their files (weights, prompts and
greedy tokens), it runs make_model's float64 reference (Meta's Transformer.forward(tokens,
start_pos)) over a prefill of the T = 7 prompt tokens at start_pos 0 and then N = 3 decode steps
feeding greedy[0..2] at start_pos 7, 8, 9, and records every site the engine's observer reports:

  meta_f32       GQA 4/2 head_dim 8, 2 llama layers, Meta's interleaved RoPE
  hf_untied_f32  GQA 4/2 head_dim 6, 2 llama layers, Hugging Face's rotate_half RoPE

Each case writes tests/golden/observer/<case>.safetensors, F32, with for every call
c in prefill, decode.1, decode.2, decode.3 (seqlen 7 or 1, S = start_pos + seqlen keys):

  {c}.{l}.resid_pre    [B, seqlen, dim]            layer l's input
  {c}.{l}.q_in         [B, seqlen, n_heads, D]     wq x before RoPE (x = attention_norm(h))
  {c}.{l}.k_in         [B, seqlen, n_kv_heads, D]  wk x before RoPE
  {c}.{l}.q            [B, seqlen, n_heads, D]     wq x after RoPE
  {c}.{l}.k            [B, seqlen, n_kv_heads, D]  wk x after RoPE
  {c}.{l}.v            [B, seqlen, n_kv_heads, D]  wv x
  {c}.{l}.attn_probs   [B, n_heads, seqlen, S]     softmax(q k^T / sqrt(D) + causal mask)
  {c}.{l}.attn_out     [B, seqlen, dim]            wo(probs v), before the residual add
  {c}.{l}.resid_mid    [B, seqlen, dim]            resid_pre + attn_out
  {c}.{l}.mlp_out      [B, seqlen, dim]            w2(silu(w1 x) * w3 x), x = ffn_norm(resid_mid)
  {c}.{l}.resid_post   [B, seqlen, dim]            resid_mid + mlp_out: the block's output
  {c}.final_norm       [B, seqlen, dim]            norm(h) of every position, before the head

The sites are taken from the reference as it runs (forward hooks on its modules: the blocks,
wq, wk, wv, wo, feed_forward, norm); q after RoPE is the hooked wq output rotated by make_golden's
RoPE functions, k after RoPE is read from the reference's KV cache, and the probabilities are
computed from those. Tolerance: rtol 1e-4, atol 1e-5 (tests/golden/cases.json's).

Self-checks (assertions):
  * the logits of the hooked run equal make_model's expected.safetensors (prefill: every
    position; decode: greedy_logits[1..3]) to 1e-6 (those are float32 of the same float64 run);
  * probs v through wo equals the hooked attn_out, resid_pre + attn_out + mlp_out equals the
    block output, q k^T recomputed from the cache equals the hooked scores' softmax, to 1e-12;
  * every probability row sums to 1 and is 0 past the causal mask;
  * the same model run in float32 stays inside 0.1 of the tolerance at every site;
  * the file is read back by make_golden's strict safetensors reader.
"""

import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixtures import CHECKED_HEADER, as_f32, checked_row, make_cases, tol_use, write_checked  # noqa: E402
from make_golden import (ATOL, DT, RTOL, apply_rotary_emb_half,  # noqa: E402
                         apply_rotary_emb_interleaved, read_safetensors, repeat_kv,
                         weight_specs)
from make_hf import hf_name  # noqa: E402
from make_model import HF_HEAD_NAMES, LlamaLM  # noqa: E402

OUT = os.path.join(HERE, "observer")
MODEL_DIR = os.path.join(HERE, "model")
STEPS = 3
NAMES = ("meta_f32", "hf_untied_f32")
SITES = ("resid_pre", "q_in", "k_in", "q", "k", "v", "attn_probs", "attn_out", "resid_mid",
         "mlp_out", "resid_post")


def load_case(c):
    """The committed files: Meta-named weights (HF names mapped back), prompts, greedy ids."""
    d = os.path.join(MODEL_DIR, c.name)
    if c.layout == "meta":
        weights = read_safetensors(os.path.join(d, "weights.safetensors"))
    else:
        stored = read_safetensors(os.path.join(d, "model.safetensors"))
        names = {hf_name(n): n for n, _, _ in weight_specs(c.args)}
        names |= {v: k for k, v in HF_HEAD_NAMES.items()}
        weights = {names[k]: v for k, v in stored.items()}
    expected = read_safetensors(os.path.join(d, "expected.safetensors"))
    return weights, expected


class Recorder:
    """Forward hooks on one LlamaLM: the sites of each call, by name."""

    def __init__(self, model: LlamaLM, args):
        self.model, self.args, self.sites, self.ctx = model, args, {}, {}
        for l, block in enumerate(model.layers.layers):
            block.register_forward_pre_hook(self.block_in(l))
            block.register_forward_hook(self.block_out(l))
            at = block.attention
            for name in ("wq", "wk", "wv", "wo"):
                getattr(at, name).register_forward_hook(self.linear(l, name))
            block.feed_forward.register_forward_hook(self.put(l, "mlp_out"))
        model.norm.register_forward_hook(lambda m, i, o: self.sites.__setitem__("final_norm", o))

    def put(self, l, site):
        return lambda m, i, o: self.sites.__setitem__(f"{l}.{site}", o)

    def block_in(self, l):
        def hook(m, inputs):
            x, start_pos, freqs_cis, mask = inputs
            self.ctx[l] = (start_pos, freqs_cis, mask)
            self.sites[f"{l}.resid_pre"] = x
        return hook

    def block_out(self, l):
        def hook(m, inputs, out):
            self.sites[f"{l}.resid_post"] = out
        return hook

    def linear(self, l, name):
        def hook(m, inputs, out):
            self.sites[f"{l}.{name}"] = out
        return hook

    def call(self, tokens, start_pos):
        """One forward: logits [B, T, V] and the sites, derived ones completed."""
        self.sites = {}
        logits = self.model(tokens, start_pos=start_pos)
        a, s = self.args, self.sites
        B, T = tokens.shape
        H, Hkv, D = a.n_heads, a.kv_heads, a.head_dim
        tight = 1e-12 if self.model.output.weight.dtype == DT else 1e-5  # the float32 run: 1e-5
        out = {}
        for l, block in enumerate(self.model.layers.layers):
            pos, freqs_cis, mask = self.ctx[l]
            at = block.attention
            q = s[f"{l}.wq"].view(B, T, H, D)
            k = s[f"{l}.wk"].view(B, T, Hkv, D)
            q_in, k_in = q, k
            if a.rope == "interleaved":
                q, k_rot = apply_rotary_emb_interleaved(q, k, freqs_cis)
            else:
                q, k_rot = apply_rotary_emb_half(q, k, freqs_cis)
            k_cache = at.cache_k[:B, pos: pos + T]
            assert (k_cache - k_rot).abs().max().item() < tight
            keys = repeat_kv(at.cache_k[:B, : pos + T], at.n_rep).transpose(1, 2)     # [B,H,S,D]
            values = repeat_kv(at.cache_v[:B, : pos + T], at.n_rep).transpose(1, 2)   # [B,H,S,D]
            scores = q.transpose(1, 2) @ keys.transpose(2, 3) / math.sqrt(D)          # [B,H,T,S]
            if mask is not None:
                scores = scores + mask
            probs = F.softmax(scores, dim=-1)
            mix = (probs @ values).transpose(1, 2).reshape(B, T, H * D)
            attn_out = s[f"{l}.wo"]
            assert (at.wo(mix) - attn_out).abs().max().item() < tight * max(1, attn_out.abs().max().item())
            resid_mid = s[f"{l}.resid_pre"] + attn_out
            post = s[f"{l}.resid_post"]
            assert (resid_mid + s[f"{l}.mlp_out"] - post).abs().max().item() == 0
            sums = probs.sum(-1)
            assert (sums - 1).abs().max().item() < tight
            for i in range(T - 1):  # causal: query i at pos+i sees keys 0..pos+i
                assert probs[:, :, i, pos + i + 1:].abs().max().item() == 0
            out |= {f"{l}.resid_pre": s[f"{l}.resid_pre"], f"{l}.q_in": q_in, f"{l}.k_in": k_in,
                    f"{l}.q": q, f"{l}.k": k_cache,
                    f"{l}.v": s[f"{l}.wv"].view(B, T, Hkv, D), f"{l}.attn_probs": probs,
                    f"{l}.attn_out": attn_out, f"{l}.resid_mid": resid_mid,
                    f"{l}.mlp_out": s[f"{l}.mlp_out"], f"{l}.resid_post": post}
        out["final_norm"] = s["final_norm"]
        return logits, out


def run(c, weights, expected, dtype=DT):
    """Prefill of the prompts, then STEPS decodes of the greedy ids: {name: tensor}."""
    model = LlamaLM(c.args, weights, dtype)
    rec = Recorder(model, c.args)
    tokens = expected["tokens"].to(torch.int64)
    greedy = expected["greedy"].to(torch.int64)
    T = tokens.shape[1]
    tensors, logits = {}, []
    calls = [("prefill", tokens, 0)] + [
        (f"decode.{i}", greedy[:, i - 1: i], T + i - 1) for i in range(1, STEPS + 1)]
    for name, ids, pos in calls:
        lg, sites = rec.call(ids, pos)
        logits.append(lg)
        for l in range(c.args.n_layers):
            for site in SITES:
                tensors[f"{name}.{l}.{site}"] = sites[f"{l}.{site}"]
        tensors[f"{name}.final_norm"] = sites["final_norm"]
    return tensors, logits


def make_case(c) -> dict:
    weights, expected = load_case(c)
    tensors, logits = run(c, weights, expected)
    # The hooked run is make_model's run: its logits are the committed ones.
    err = (logits[0] - expected["logits"].to(DT)).abs().max().item()
    for i in range(1, STEPS + 1):
        err = max(err, (logits[i][:, -1] - expected["greedy_logits"][:, i].to(DT)).abs().max().item())
    assert err < 1e-6, f"{c.name}: logits differ from make_model's by {err}"
    t32, _ = run(c, weights, expected, torch.float32)
    use = max(tol_use(t32[k], v, RTOL, ATOL) for k, v in tensors.items())
    assert use < 0.1, f"{c.name}: a float32 run uses {use:.3f} of the tolerance"
    f32 = as_f32(tensors)
    return dict(size=write_checked(OUT, c.name, f32), tensors=len(f32), logits_err=err,
                tol_use=use)


def main():
    make_cases(OUT, NAMES, make_case,
               lambda c, r: {"name": c.name, "model": f"model/{c.name}", "steps": STEPS,
                             "tolerance": {"rtol": RTOL, "atol": ATOL}},
               checked_row, CHECKED_HEADER,
               ["logits: max |hooked run - make_model's expected logits| (asserted < 1e-6)",
                "f32/tol: worst |f32 run - f64| / (atol + rtol*|exp|) over every site (asserted < 0.1)"])


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
