"""Issue 51's hook points (hook_embed, attn.hook_attn_scores, attn.hook_z, attn.hook_result,
mlp.hook_pre/hook_post, ln1/ln2/ln_final.hook_scale) in prefill and decode, in TransformerLens's
shapes, against a float64 NumPy reference: make_observer.py's float64 activations (the torch
reference's resid_pre, q, k, v, probs, resid_mid, resid_post) carried through the files' own
weights. (make_observer.py itself needs torch, which this machine lacks: the new points are
derived here from its committed output, in float64, never from ours.)"""
import numpy as np
import pytest

import safetensors_np
from test_hooks import GOLDEN, calls, cases, token_model

# The weights the reference needs, by the file's names.
NAMES = {
    "meta_f32": {"embed": "tok_embeddings.weight", "wo": "layers.{l}.attention.wo.weight",
                 "w1": "layers.{l}.feed_forward.w1.weight",
                 "w3": "layers.{l}.feed_forward.w3.weight", "ffn_norm": "layers.{l}.ffn_norm.weight"},
    "hf_untied_f32": {"embed": "model.embed_tokens.weight",
                      "wo": "model.layers.{l}.self_attn.o_proj.weight",
                      "w1": "model.layers.{l}.mlp.gate_proj.weight",
                      "w3": "model.layers.{l}.mlp.up_proj.weight",
                      "ffn_norm": "model.layers.{l}.post_attention_layernorm.weight"},
}


def weights(name):
    case = next(c for c in cases(GOLDEN / "model") if c["name"] == name)
    stored = safetensors_np.load(GOLDEN / "model" / name / case["weights"])
    return lambda key, l=0: stored[NAMES[name][key].format(l=l)].astype(np.float64)


def rms(x, eps):
    return np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps)


def reference(ref, call, l, key):
    return ref[f"{call}.{l}.{key}"].astype(np.float64)


def reference_points(case, a, e):
    """(call, tokens, start_pos, {hook name: float64 reference}) of each call of the case."""
    w = weights(case["name"])
    ref = safetensors_np.load(GOLDEN / "observer" / (case["name"] + ".safetensors"))
    H, KV, D, eps = a.n_heads, a.n_kv_heads, a.head_dim, a.norm_eps
    keys = {l: [] for l in range(a.n_layers)}  # each layer's k and v after RoPE, call by call
    values = {l: [] for l in range(a.n_layers)}
    for call, tokens, pos in calls(e, case["steps"]):
        want = {"hook_embed": w("embed")[tokens]}
        last = reference(ref, call, a.n_layers - 1, "resid_post")
        want["ln_final.hook_scale"] = rms(last, eps)
        for l in range(a.n_layers):
            p = f"blocks.{l}."
            keys[l].append(reference(ref, call, l, "k"))
            values[l].append(reference(ref, call, l, "v"))
            k = np.repeat(np.concatenate(keys[l], 1), H // KV, axis=2)  # [B, S, H, D]
            v = np.repeat(np.concatenate(values[l], 1), H // KV, axis=2)
            q = reference(ref, call, l, "q")
            want[p + "attn.hook_attn_scores"] = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(D)
            z = np.einsum("bhij,bjhd->bihd", reference(ref, call, l, "attn_probs"), v)
            want[p + "attn.hook_z"] = z
            wo = w("wo", l).reshape(a.dim, H, D)
            want[p + "attn.hook_result"] = np.einsum("bihd,mhd->bihm", z, wo)
            want[p + "ln1.hook_scale"] = rms(reference(ref, call, l, "resid_pre"), eps)
            mid = reference(ref, call, l, "resid_mid")
            want[p + "ln2.hook_scale"] = rms(mid, eps)
            x = mid / rms(mid, eps) * w("ffn_norm", l)
            pre = x @ w("w1", l).T
            want[p + "mlp.hook_pre"] = pre
            want[p + "mlp.hook_post"] = pre / (1 + np.exp(-pre)) * (x @ w("w3", l).T)
        yield call, tokens, pos, want


@pytest.mark.parametrize("case", cases(GOLDEN / "observer"), ids=lambda c: c["name"])
def test_new_hook_points_match_the_float64_reference(case):
    m, e = token_model(case["name"])
    tol = case["tolerance"]
    a = m.args
    for call, tokens, pos, want in reference_points(case, a, e):
        _, cache = m.run_with_cache(tokens, start_pos=pos)
        B, T = tokens.shape
        for name, value in want.items():
            got = cache[name]
            assert got.shape == value.shape, (call, name)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, value, rtol=tol["rtol"], atol=tol["atol"],
                                       err_msg=f"{call} {name}")
        # TransformerLens's shapes, by name.
        assert cache["blocks.0.attn.hook_attn_scores"].shape == (B, a.n_heads, T, pos + T)
        assert cache["blocks.0.attn.hook_result"].shape == (B, T, a.n_heads, a.dim)
        assert cache["blocks.0.mlp.hook_pre"].shape == (B, T, a.ffn_hidden)
        assert cache["blocks.0.ln1.hook_scale"].shape == (B, T, 1)


def test_head_results_sum_to_attn_out():
    m, e = token_model("meta_f32")
    _, cache = m.run_with_cache(e["tokens"])
    for l in range(m.args.n_layers):
        np.testing.assert_allclose(cache["result", l].sum(2), cache["attn_out", l], rtol=1e-5,
                                   atol=1e-6)


def test_hook_z_patched_replaces_the_heads_output():
    """hook_z of head 0 zeroed: attn_out is then wo over the other heads only (float64)."""
    m, e = token_model("meta_f32")
    _, clean = m.run_with_cache(e["tokens"], names=["blocks.0.attn.hook_z"])
    m.reset()

    def ablate(z, name):
        z[:, :, 0] = 0

    _, cache = m.run_with_cache(e["tokens"], names=["blocks.0.hook_attn_out"],
                                patch={"blocks.0.attn.hook_z": ablate})
    z = clean["blocks.0.attn.hook_z"].astype(np.float64)
    z[:, :, 0] = 0
    wo = weights("meta_f32")("wo", 0)
    want = z.reshape(z.shape[0], z.shape[1], -1) @ wo.T
    np.testing.assert_allclose(cache["blocks.0.hook_attn_out"], want, rtol=1e-5, atol=1e-6)


def test_read_only_points_refuse_replacements():
    m, e = token_model("meta_f32")
    with pytest.raises(ValueError, match=r"patch\['blocks.0.attn.hook_result'\]: .*only to be read"):
        m.forward(e["tokens"], patch={"blocks.0.attn.hook_result": np.zeros((1, 7, 4, 32))})
    m.reset()
    with pytest.raises(ValueError, match=r"hook_attn_scores'\]: .*must return None"):
        m.forward(e["tokens"], patch={"blocks.0.attn.hook_attn_scores": lambda a, n: a * 0})
    m.reset()
    seen = []
    m.forward(e["tokens"], patch={"blocks.1.mlp.hook_post": lambda a, n: seen.append(a.shape)})
    assert seen == [(1, 7, m.args.ffn_hidden)]


def test_an_unhooked_run_keeps_its_bits():
    """The new points computed apart leave the logits as they were, bit for bit."""
    m, e = token_model("hf_untied_f32")
    plain = m.forward(e["tokens"], all_positions=True)
    m.reset()
    hooked, _ = m.run_with_cache(e["tokens"])
    assert np.array_equal(plain, hooked)


def test_the_clis_dump_keeps_them_by_name(tmp_path):
    """attn-cli run --dump-activations with the new points (a block's hook for every block, or
    one block's): the prefill's and each decode step's, against the float64 reference."""
    import os
    import subprocess
    case = next(c for c in cases(GOLDEN / "observer") if c["name"] == "meta_f32")
    m, e = token_model("meta_f32")
    model = next(c for c in cases(GOLDEN / "model") if c["name"] == "meta_f32")
    d = GOLDEN / "model" / "meta_f32"
    steps = case["steps"]
    ids = list(e["tokens"][0]) + list(e["greedy"][0, :steps])
    dump = tmp_path / "dump.safetensors"
    names = ("attn.hook_attn_scores,attn.hook_z,attn.hook_result,mlp.hook_pre,mlp.hook_post,"
             "ln1.hook_scale,blocks.1.ln2.hook_scale")
    r = subprocess.run([os.environ["ATTN_CLI"], "run", "-t", "1", "-m", str(d / model["weights"]),
                        "--config", str(d / model["config"]),
                        "--tokens", ",".join(str(int(i)) for i in ids), "-n", str(steps),
                        "--dump", str(dump), "--dump-activations", names],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = safetensors_np.load(dump)
    tol = case["tolerance"]
    checked = 0
    for call, _, _, want in reference_points(case, m.args, e):
        prefix = "" if call == "prefill" else call + "."
        for name, value in want.items():
            if name.startswith(("hook_embed", "ln_final", "blocks.0.ln2")):
                assert prefix + name not in got
                continue
            np.testing.assert_allclose(got[prefix + name], value, rtol=tol["rtol"],
                                       atol=tol["atol"], err_msg=prefix + name)
            checked += 1
    assert checked == (1 + steps) * 13
    # The seed notebook's model (block attention): no MLP, no pre-norms.
    bad = subprocess.run([os.environ["ATTN_CLI"], "run", "-t", "1", "--dump", str(dump),
                          "--dump-activations", "blocks.0.mlp.hook_pre"],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert "activation 'blocks.0.mlp.hook_pre': a block of type attention has no MLP" in bad.stderr
