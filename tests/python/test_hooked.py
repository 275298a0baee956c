"""Issue 51 from Python as TransformerLens has it: hooks() / run_with_hooks / add_hook /
reset_hooks on forward, run_with_cache and generate (every step: a steered generation against a
float64 NumPy forward of the same file), the ActivationCache's methods and direct logit
attribution against make_observer.py's float64 activations and make_model.py's logits,
model.logit_lens against a float64 lens and attn-cli's --logit-lens, and the weights (W_Q...)
against the files' tensors."""
import json
import os
import subprocess

import numpy as np
import pytest

import attn
import safetensors_np
from test_hooks import GOLDEN, STORIES, calls, cases, patch_cases, token_model


def meta_weights(name="meta_f32"):
    d = GOLDEN / "model" / name
    return {k: v.astype(np.float64) for k, v in safetensors_np.load(d / "weights.safetensors").items()}


def rmsnorm(x, w, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w


def numpy_forward(w, a, ids, steer=None):
    """make_model.py's Meta Transformer in float64 NumPy over ids [T] from position 0 (interleaved
    RoPE, GQA, SwiGLU): logits [T, vocab]; steer (layer, vector) adds the vector to that
    block's output at every position."""
    H, KV, D, eps = a.n_heads, a.n_kv_heads, a.head_dim, a.norm_eps
    T = len(ids)
    h = w["tok_embeddings.weight"][ids]
    freqs = 1.0 / a.rope_theta ** (np.arange(0, D, 2) / D)
    angles = np.outer(np.arange(T), freqs)  # [T, D/2]
    cos, sin = np.cos(angles)[:, None], np.sin(angles)[:, None]

    def rope(x):  # [T, heads, D], pairs (2i, 2i+1)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(a.n_layers):
        p = f"layers.{l}."
        x = rmsnorm(h, w[p + "attention_norm.weight"], eps)
        q = rope((x @ w[p + "attention.wq.weight"].T).reshape(T, H, D))
        k = rope((x @ w[p + "attention.wk.weight"].T).reshape(T, KV, D))
        v = (x @ w[p + "attention.wv.weight"].T).reshape(T, KV, D)
        k, v = np.repeat(k, H // KV, 1), np.repeat(v, H // KV, 1)
        s = np.einsum("ihd,jhd->hij", q, k) / np.sqrt(D) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        z = np.einsum("hij,jhd->ihd", s, v).reshape(T, H * D)
        h = h + z @ w[p + "attention.wo.weight"].T
        x = rmsnorm(h, w[p + "ffn_norm.weight"], eps)
        g = x @ w[p + "feed_forward.w1.weight"].T
        h = h + (g / (1 + np.exp(-g)) * (x @ w[p + "feed_forward.w3.weight"].T)) @ \
            w[p + "feed_forward.w2.weight"].T
        if steer and steer[0] == l:
            h = h + steer[1]
    return rmsnorm(h, w["norm.weight"], eps) @ w["output.weight"].T


def test_the_numpy_reference_is_make_models():
    m, e = token_model("meta_f32")
    got = numpy_forward(meta_weights(), m.args, e["tokens"][0])
    np.testing.assert_allclose(got, e["logits"][0], rtol=1e-5, atol=1e-5)


def test_hooks_steer_every_generation_step():
    """A vector added to blocks.0.hook_resid_post inside hooks(): generate's greedy ids are the
    float64 reference's steered greedy ids, and the hook sees the prompt's call then each step's."""
    m, e = token_model("meta_f32")
    w = meta_weights()
    vector = 2.0 * w["tok_embeddings.weight"][5]
    prompt = [int(t) for t in e["tokens"][0]]
    steps = 6
    ids = list(prompt)
    for _ in range(steps):
        ids.append(int(numpy_forward(w, m.args, ids, (0, vector))[-1].argmax()))
    plain = m.generate(prompt, steps=steps)
    seen = []

    def steer(resid, hook):
        seen.append((hook.name, hook.layer(), resid.shape))
        return resid + vector.astype(np.float32)

    m.reset()
    with m.hooks(fwd_hooks=[("blocks.0.hook_resid_post", steer)]):
        steered = m.generate(prompt, steps=steps)
    assert steered == ids[len(prompt):]
    assert steered != plain  # the vector does steer
    T = len(prompt)
    # The prompt's call, then every chosen id fed (the last too: feed_last).
    assert seen == [("blocks.0.hook_resid_post", 0, (1, T, m.args.dim))] + \
        [("blocks.0.hook_resid_post", 0, (1, 1, m.args.dim))] * steps
    m.reset()
    assert m.generate(prompt, steps=steps) == plain  # gone on leaving the block


@pytest.mark.parametrize("case,patch", [p for p in patch_cases()
                                        if p.values[1]["call"] == "prefill"][:4])
def test_run_with_hooks_matches_the_torch_hooks_reference(case, patch):
    """make_patch.py's activations replaced by a torch forward hook: the same replacement as a
    TransformerLens hook returning it, through run_with_hooks and through add_hook."""
    m, e = token_model(case["name"])
    ref = safetensors_np.load(GOLDEN / "patch" / (case["name"] + ".safetensors"))
    i, name = patch["i"], patch["name"]
    lt = case["logits_tolerance"]
    got = m.run_with_hooks(e["tokens"], all_positions=True,
                           fwd_hooks=[(name, lambda act, hook: ref[f"{i}.value"])])
    np.testing.assert_allclose(got, ref[f"{i}.prefill.logits"], rtol=lt["rtol"], atol=lt["atol"])
    m.reset()
    m.add_hook(lambda n: n == name, lambda act, hook: ref[f"{i}.value"])
    again = m.forward(e["tokens"], all_positions=True)
    assert np.array_equal(got, again)
    m.reset_hooks()
    m.reset()
    assert not np.array_equal(m.forward(e["tokens"], all_positions=True), got)


def test_hook_objects_filters_and_reset():
    m, e = token_model("meta_f32")
    seen = []

    def record(act, hook):
        seen.append((hook.name, hook.layer()))
        act[...] = act  # in place, same values

    plain = m.forward(e["tokens"], all_positions=True)
    m.reset()
    with m.hooks(fwd_hooks=[(lambda n: n.endswith("hook_pattern"), record),
                            ("hook_embed", record)]):
        got = m.forward(e["tokens"], all_positions=True)
    assert seen == [("hook_embed", None), ("blocks.0.attn.hook_pattern", 0),
                    ("blocks.1.attn.hook_pattern", 1)]
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)  # patterns mixed anew
    m.add_hook("blocks.1.hook_resid_post", record, is_permanent=True)
    m.add_hook("blocks.0.hook_resid_post", record)
    m.reset_hooks()
    seen.clear()
    m.reset()
    _, cache = m.run_with_cache(e["tokens"], names_filter="ln_final.hook_normalized")
    assert seen == [("blocks.1.hook_resid_post", 1)] and list(cache) == ["ln_final.hook_normalized"]
    m.reset_hooks(including_permanent=True)
    seen.clear()
    m.reset()
    m.forward(e["tokens"])
    assert seen == []
    with pytest.raises(ValueError, match="fwd_hooks: 'blocks.9.hook_z' is not a hook point"):
        with m.hooks(fwd_hooks=[("blocks.9.hook_z", record)]):
            pass
    with pytest.raises(ValueError, match="bwd_hooks"):
        with m.hooks(bwd_hooks=[("hook_embed", record)]):
            pass
    with pytest.raises(TypeError, match="fwd_hooks: expected"):
        with m.hooks(fwd_hooks=["hook_embed"]):
            pass
    assert attn.HookPoint("blocks.12.attn.hook_z").layer() == 12


def reference_resid(ref, call, l, site):
    return ref[f"{call}.{l}.{site}"].astype(np.float64)


def test_activation_cache_methods_against_the_reference():
    m, e = token_model("meta_f32")
    a = m.args
    ref = safetensors_np.load(GOLDEN / "observer" / "meta_f32.safetensors")
    logits, cache = m.run_with_cache(e["tokens"])
    assert isinstance(cache, attn.ActivationCache) and isinstance(cache, dict)
    assert cache["pattern", 1] is cache["blocks.1.attn.hook_pattern"]
    assert cache["scale", 0, "ln2"] is cache["blocks.0.ln2.hook_scale"]
    assert cache["embed"] is cache["hook_embed"]
    final = reference_resid(ref, "prefill", a.n_layers - 1, "resid_post")
    acc, labels = cache.accumulated_resid(return_labels=True)
    assert labels == ["0_pre", "1_pre", "final_post"]
    np.testing.assert_allclose(acc[1], reference_resid(ref, "prefill", 1, "resid_pre"),
                               rtol=1e-4, atol=1e-5)
    assert cache.accumulated_resid(layer=1, incl_mid=True).shape[0] == 3  # 0_pre 0_mid 1_pre
    # The last component through ln_final with the cached scale, times its weight: the
    # reference's normed output.
    normed = cache.accumulated_resid(apply_ln=True)[-1] * m.ln_final_w
    np.testing.assert_allclose(normed, ref["prefill.final_norm"], rtol=1e-4, atol=1e-5)
    parts, labels = cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "0_attn_out", "0_mlp_out", "1_attn_out", "1_mlp_out"]
    np.testing.assert_allclose(parts.sum(0), final, rtol=1e-4, atol=1e-5)
    heads, labels = cache.stack_head_results(return_labels=True)
    assert heads.shape == (a.n_layers * a.n_heads, 1, 7, a.dim) and labels[5] == "L1H1"
    np.testing.assert_allclose(heads[:a.n_heads].sum(0),
                               reference_resid(ref, "prefill", 0, "attn_out"), rtol=1e-4,
                               atol=1e-5)
    with_rest = cache.stack_head_results(layer=1, incl_remainder=True)
    np.testing.assert_allclose(with_rest.sum(0), reference_resid(ref, "prefill", 1, "resid_pre"),
                               rtol=1e-4, atol=1e-5)


def test_direct_logit_attribution_sums_to_the_logit():
    """Each head's and each MLP's (and the embedding's) direct attribution to a token's logit at
    the last position sums, with ln_final's scale held, to make_model's logit within 1e-5."""
    m, e = token_model("meta_f32")
    a = m.args
    _, cache = m.run_with_cache(e["tokens"])
    parts = [cache["hook_embed"][None]]
    for l in range(a.n_layers):
        parts.append(cache.stack_head_results(layer=l + 1)[l * a.n_heads:])
        parts.append(cache["mlp_out", l][None])
    stack = np.concatenate(parts)[:, :, -1]  # [components, batch, d_model]
    assert stack.shape[0] == 1 + a.n_layers * (a.n_heads + 1)
    want = e["logits"][0, -1]
    for token in (int(want.argmax()), 3, 77):
        attrs = cache.logit_attrs(stack, np.array([token]), pos_slice=-1)
        assert attrs.shape == (stack.shape[0], 1)
        assert abs(attrs.sum() - want[token]) < 1e-5, token
    diff = cache.logit_attrs(stack, np.array([3]), incorrect_tokens=np.array([77]), pos_slice=-1)
    assert abs(diff.sum() - (want[3] - want[77])) < 1e-5


def test_logit_lens_against_the_float64_lens():
    m, e = token_model("meta_f32")
    w = meta_weights()
    ref = safetensors_np.load(GOLDEN / "observer" / "meta_f32.safetensors")
    lens = m.logit_lens(e["tokens"])
    assert lens.shape == (m.args.n_layers, 1, 7, m.args.vocab_size)
    for l in range(m.args.n_layers):
        h = reference_resid(ref, "prefill", l, "resid_post")
        want = rmsnorm(h, w["norm.weight"], m.args.norm_eps) @ w["output.weight"].T
        np.testing.assert_allclose(lens[l], want, rtol=1e-4, atol=1e-4)
    m.reset()
    assert np.array_equal(lens[-1], m.forward(e["tokens"], all_positions=True))


@pytest.mark.skipif(not STORIES.exists(), reason="weights/stories260K.gguf absent")
def test_logit_lens_is_the_clis():
    """model.logit_lens's top tokens and logits are attn-cli generate --logit-lens --json's."""
    out = subprocess.run([os.environ["ATTN_CLI"], "generate", "-m", str(STORIES), "-p",
                          "Once upon a time", "--logit-lens", "3", "-n", "1", "--json"],
                         capture_output=True, text=True, check=True).stdout
    events = [json.loads(line) for line in out.splitlines()]
    ids = next(ev["ids"] for ev in events if ev["event"] == "prefill")
    m = attn.Model.from_pretrained(str(STORIES), threads=2)
    lens = m.logit_lens([ids])
    for ev in events:
        if ev["event"] != "lens" or ev["of"] != "prefill":
            continue
        row = lens[ev["layer"], 0]
        for t, top in enumerate(ev["top"][0]):
            order = sorted(range(row.shape[1]), key=lambda i: (-row[t, i], i))[:3]
            assert [x["id"] for x in top] == order, (ev["layer"], t)
            assert [np.float32(x["logit"]) for x in top] == [row[t, i] for i in order]


def test_weights_in_transformer_lens_shapes():
    m, _ = token_model("meta_f32")
    w = {k: v for k, v in safetensors_np.load(
        GOLDEN / "model" / "meta_f32" / "weights.safetensors").items()}
    a = m.args
    H, KV, D = a.n_heads, a.n_kv_heads, a.head_dim
    wq, wk = w["layers.1.attention.wq.weight"], w["layers.1.attention.wk.weight"]
    wo = w["layers.1.attention.wo.weight"]
    assert m.W_Q[1].shape == (H, a.dim, D) and m.W_K[1].shape == (KV, a.dim, D)
    assert m.W_O[1].shape == (H, D, a.dim)
    for h in range(H):
        assert np.array_equal(m.W_Q[1][h], wq[h * D:(h + 1) * D].T)
        assert np.array_equal(m.W_O[1][h], wo[:, h * D:(h + 1) * D].T)
    assert np.array_equal(m.W_K[-1][1], wk[D:2 * D].T)
    assert np.array_equal(m.W_V[0][0], w["layers.0.attention.wv.weight"][:D].T)
    assert np.array_equal(m.W_E, w["tok_embeddings.weight"])
    assert np.array_equal(m.W_U, w["output.weight"].T)
    assert np.array_equal(m.W_gate[0], w["layers.0.feed_forward.w1.weight"].T)
    assert np.array_equal(m.W_in[0], w["layers.0.feed_forward.w3.weight"].T)
    assert np.array_equal(m.W_out[0], w["layers.0.feed_forward.w2.weight"].T)
    assert np.array_equal(m.ln1_w[1], w["layers.1.attention_norm.weight"])
    assert np.array_equal(m.ln_final_w, w["norm.weight"])
    # Zero-copy and read-only: the same memory every time, not writable.
    first, again = m.weight("wq", 1), m.weight("wq", 1)
    assert np.shares_memory(first, again) and not first.flags.writeable
    with pytest.raises(ValueError):
        m.W_E[0, 0] = 1
    assert m.cfg["d_model"] == a.dim and m.cfg["d_head"] == D and m.cfg["n_layers"] == 2
    with pytest.raises(IndexError, match="layer: 2 out of range"):
        m.W_Q[2]
    with pytest.raises(ValueError, match="kind: expected tok_embeddings"):
        m.weight("wx")


def test_other_types_are_widened_on_request():
    case = next(c for c in cases(GOLDEN / "model") if c["name"] == "meta_bf16")
    d = GOLDEN / "model" / "meta_bf16"
    m = attn.Model(attn.ModelArgs.from_file(str(d / case["config"])),
                   weights=str(d / case["weights"]), threads=2)
    w = safetensors_np.load(d / case["weights"])
    with pytest.raises(ValueError, match="wq: the weights are BF16: .*widen=True"):
        m.W_Q[0]
    wide = m.W_Q.widened(0)
    assert wide.dtype == np.float32 and wide.flags.writeable
    assert np.array_equal(wide[1], w["layers.0.attention.wq.weight"].astype(np.float32)[8:16].T)
    rows = m.weight("output", rows=[3, 5])  # some rows widened: never the whole matrix
    assert np.array_equal(rows, w["output.weight"].astype(np.float32)[[3, 5]])
    with pytest.raises(ValueError, match="rows: .*outside"):
        m.weight("output", rows=[m.args.vocab_size])


def test_generate_takes_patch_functions_only():
    m, e = token_model("meta_f32")
    prompt = [int(t) for t in e["tokens"][0]]
    with pytest.raises(TypeError, match=r"patch\['blocks.0.hook_resid_post'\]: generate's calls"):
        m.generate(prompt, steps=2, patch={"blocks.0.hook_resid_post": np.zeros((1, 7, 32))})
    calls_seen = []
    m.reset()
    m.generate(prompt, steps=2,
               patch={"blocks.1.attn.hook_pattern": lambda a, n: calls_seen.append(a.shape)})
    assert calls_seen == [(1, 4, 7, 7), (1, 4, 1, 8), (1, 4, 1, 9)]


@pytest.mark.skipif(not STORIES.exists(), reason="weights/stories260K.gguf absent")
def test_the_steering_example_runs():
    """examples/steering_hooks.py: the steered text differs, the attributions sum to the logit."""
    import sys
    from test_hooks import SOURCE
    r = subprocess.run([sys.executable, str(SOURCE / "examples" / "steering_hooks.py")],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("plain:") and lines[1].startswith("steered:")
    assert lines[0][len("plain:"):].strip() != lines[1][len("steered:"):].strip()
    logit, total = lines[2].split("logit ")[1].split(", sum of attributions ")
    assert abs(float(logit) - float(total)) < 1e-3
