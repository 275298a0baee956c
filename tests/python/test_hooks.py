"""run_with_cache and forward(patch=...) (issue 38): every hook name against make_observer.py's
float64 reference in prefill and decode, patched runs against make_patch.py's (torch forward
hooks replacing an activation), identity patches bit for bit, and the arguments' errors."""
import json
import os
import pathlib

import numpy as np
import pytest

import attn
import safetensors_np

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
GOLDEN = SOURCE / "tests" / "golden"
STORIES = SOURCE / "weights" / "stories260K.gguf"

# TransformerLens's hook names (a block's suffix) -> make_observer.py's site names.
SITES = {"hook_resid_pre": "resid_pre", "attn.hook_q": "q_in", "attn.hook_k": "k_in",
         "attn.hook_rot_q": "q", "attn.hook_rot_k": "k", "attn.hook_v": "v",
         "attn.hook_pattern": "attn_probs", "hook_attn_out": "attn_out",
         "hook_resid_mid": "resid_mid", "hook_mlp_out": "mlp_out",
         "hook_resid_post": "resid_post"}


def cases(folder):
    return json.loads((folder / "cases.json").read_text())


def token_model(name, threads=2):
    """make_model.py's case `name` as attn.Model, and its expected.safetensors."""
    case = next(c for c in cases(GOLDEN / "model") if c["name"] == name)
    d = GOLDEN / "model" / name
    m = attn.Model(attn.ModelArgs.from_file(str(d / case["config"])),
                   weights=str(d / case["weights"]), threads=threads)
    return m, safetensors_np.load(d / "expected.safetensors")


def reference_name(call, hook):
    if hook == "ln_final.hook_normalized":
        return f"{call}.final_norm"
    _, l, suffix = hook.split(".", 2)
    return f"{call}.{l}.{SITES[suffix]}"


def calls(e, steps):
    """(call, tokens, start_pos): the prompt, then the greedy ids one at a time."""
    T = e["tokens"].shape[1]
    return [("prefill", e["tokens"], 0)] + [
        (f"decode.{i}", np.ascontiguousarray(e["greedy"][:, i - 1:i]), T + i - 1)
        for i in range(1, steps + 1)]


@pytest.mark.parametrize("case", cases(GOLDEN / "observer"), ids=lambda c: c["name"])
def test_every_hook_name_matches_the_reference_in_prefill_and_decode(case):
    m, e = token_model(case["name"])
    ref = safetensors_np.load(GOLDEN / "observer" / (case["name"] + ".safetensors"))
    tol = case["tolerance"]
    n_layers = m.args.n_layers
    for call, tokens, pos in calls(e, case["steps"]):
        logits, cache = m.run_with_cache(tokens, start_pos=pos)
        assert list(cache) == m.hook_names  # issue 51's points: test_hook_points.py
        assert len(cache) == 18 * n_layers + 3
        assert logits.shape == (tokens.shape[0], tokens.shape[1], m.args.vocab_size)
        for name, value in cache.items():
            if name != "ln_final.hook_normalized" and name.split(".", 2)[-1] not in SITES:
                continue
            want = ref[reference_name(call, name)]
            assert value.shape == want.shape, name
            np.testing.assert_allclose(value, want, rtol=tol["rtol"], atol=tol["atol"],
                                       err_msg=f"{call} {name}")
        if call == "prefill":  # make_model's logits, every position (TransformerLens's)
            np.testing.assert_allclose(logits, e["logits"], rtol=1e-4, atol=1e-4)
    assert m.filled == e["tokens"].shape[1] + case["steps"]


def test_only_the_names_asked_are_kept():
    m, e = token_model("meta_f32")
    _, one = m.run_with_cache(e["tokens"], names="blocks.1.attn.hook_pattern")
    assert list(one) == ["blocks.1.attn.hook_pattern"]
    m.reset()
    _, two = m.run_with_cache(e["tokens"], names=["blocks.0.attn.hook_v", "ln_final.hook_normalized",
                                                  "blocks.0.attn.hook_v"])
    assert list(two) == ["blocks.0.attn.hook_v", "ln_final.hook_normalized"]
    assert two["blocks.0.attn.hook_v"].shape == (1, 7, m.args.n_kv_heads, m.args.head_dim)
    m.reset()
    logits, patterns = m.run_with_cache(e["tokens"], names=lambda n: n.endswith("hook_pattern"))
    assert list(patterns) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    np.testing.assert_array_equal(patterns["blocks.1.attn.hook_pattern"],
                                  one["blocks.1.attn.hook_pattern"])
    m.reset()
    last, nothing = m.run_with_cache(e["tokens"], names=[], all_positions=False)
    assert nothing == {}
    m.reset()
    assert np.array_equal(last, m.forward(e["tokens"]))  # our forward's logits


def patch_cases():
    out = []
    for case in cases(GOLDEN / "patch"):
        for p in case["patches"]:
            out.append(pytest.param(case, p, id=f"{case['name']}-{p['i']}-{p['call']}-{p['name']}"))
    return out


@pytest.mark.parametrize("form", ["array", "returned", "in_place"])
@pytest.mark.parametrize("case,patch", patch_cases())
def test_patching_matches_the_torch_hooks_reference(case, patch, form):
    """make_patch.py: one activation replaced in the float64 reference by a torch forward hook;
    here by an array, a function returning it, or a function editing its argument in place."""
    m, e = token_model(case["name"])
    ref = safetensors_np.load(GOLDEN / "patch" / (case["name"] + ".safetensors"))
    i, name = patch["i"], patch["name"]
    value = ref[f"{i}.value"]
    seen = []

    def returned(activation, hook):
        seen.append((hook, activation.shape))
        return value

    def in_place(activation, hook):
        seen.append((hook, activation.shape))
        activation[...] = value

    edit = {"array": value, "returned": returned, "in_place": in_place}[form]
    lt, st = case["logits_tolerance"], case["tolerance"]
    downstream = [f"blocks.{l}.hook_resid_post" for l in range(m.args.n_layers)]
    downstream.append("ln_final.hook_normalized")
    for call, tokens, pos in calls(e, case["steps"]):
        if call == patch["call"]:
            logits, cache = m.run_with_cache(tokens, names=downstream, start_pos=pos,
                                             patch={name: edit})
            for l in range(m.args.n_layers):
                np.testing.assert_allclose(cache[f"blocks.{l}.hook_resid_post"],
                                           ref[f"{i}.{l}.resid_post"], rtol=st["rtol"],
                                           atol=st["atol"], err_msg=f"{call} resid_post {l}")
            np.testing.assert_allclose(cache["ln_final.hook_normalized"], ref[f"{i}.final_norm"],
                                       rtol=st["rtol"], atol=st["atol"])
        else:
            logits = m.forward(tokens, start_pos=pos, all_positions=True)
        np.testing.assert_allclose(logits, ref[f"{i}.{call}.logits"], rtol=lt["rtol"],
                                   atol=lt["atol"], err_msg=call)
    if form != "array":
        assert seen == [(name, value.shape)]


def test_identity_patches_give_the_unpatched_bits():
    """Every hook point patched with its own value: the sites edited where they are held give
    the same bits; attn_out and mlp_out, then added to the residual apart from the product
    (and hook_pattern, whose heads are mixed anew), to rounding."""
    m, e = token_model("hf_untied_f32")
    plain = []
    for _, tokens, pos in calls(e, 2):
        plain.append(m.forward(tokens, start_pos=pos, all_positions=True))
    m.reset()
    _, cache = m.run_with_cache(e["tokens"])
    read_only = ("hook_scale", "hook_attn_scores", "hook_result", "mlp.hook_pre", "mlp.hook_post")
    for name in cache:
        if name.endswith(read_only):  # test_hook_points.py: read, not patched
            continue
        m.reset()
        for (call, tokens, pos), want in zip(calls(e, 2), plain):
            patch = {name: cache[name]} if call == "prefill" else {name: lambda a, n: None}
            got = m.forward(tokens, start_pos=pos, all_positions=True, patch=patch)
            if name.endswith(("hook_attn_out", "hook_mlp_out", "hook_pattern")):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
            else:
                assert np.array_equal(got, want), (name, call)


def test_zero_ablating_a_head_through_its_pattern():
    """Head 1 of layer 0 zeroed in place: make_patch.py's pattern_head patch."""
    case = next(c for c in cases(GOLDEN / "patch") if c["name"] == "meta_f32")
    p = next(p for p in case["patches"]
             if p["kind"] == "pattern_head" and p["call"] == "prefill")
    ref = safetensors_np.load(GOLDEN / "patch" / "meta_f32.safetensors")
    m, e = token_model("meta_f32")

    def ablate(pattern, name):
        pattern[:, 1] = 0

    logits = m.forward(e["tokens"], all_positions=True, patch={p["name"]: ablate})
    np.testing.assert_allclose(logits, ref[f"{p['i']}.prefill.logits"], rtol=1e-4, atol=1e-4)


def test_arguments_are_checked_before_the_run():
    m, e = token_model("meta_f32")
    t = e["tokens"]
    with pytest.raises(ValueError, match=r"names: hook name 'blocks\.2\.hook_v'"):
        m.run_with_cache(t, names=["blocks.2.hook_v"])
    with pytest.raises(ValueError, match="names: hook name 'blocks.0.hook_z'.*hook_pattern"):
        m.run_with_cache(t, names="blocks.0.hook_z")
    with pytest.raises(TypeError, match="names: expected hook names"):
        m.run_with_cache(t, names=[3])
    with pytest.raises(TypeError, match="names: expected None"):
        m.run_with_cache(t, names=3)
    with pytest.raises(ValueError, match=r"patch: hook name 'blocks\.0\.attn\.hook_w'"):
        m.forward(t, patch={"blocks.0.attn.hook_w": np.zeros(1, np.float32)})
    with pytest.raises(TypeError, match="patch: expected a dict"):
        m.forward(t, patch=[("blocks.0.hook_resid_pre", None)])
    with pytest.raises(TypeError, match="patch: expected hook names"):
        m.forward(t, patch={0: None})
    with pytest.raises(ValueError, match=r"patch\['blocks\.0\.attn\.hook_v'\]: expected shape "
                                         r"\[1, 7, 2, 8\], got \[1, 7, 4, 8\]"):
        m.forward(t, patch={"blocks.0.attn.hook_v": np.zeros((1, 7, 4, 8), np.float32)})
    with pytest.raises(TypeError, match=r"patch\['blocks\.0\.hook_resid_pre'\]: expected a float"):
        m.forward(t, patch={"blocks.0.hook_resid_pre": "zeros"})
    with pytest.raises(TypeError, match="expected a float array, got ndarray of dtype int64"):
        m.forward(t, patch={"blocks.0.hook_resid_pre": np.zeros((1, 7, 32), np.int64)})
    # The bytes of every name of a prefill of 7: refused before the run, naming names.
    with pytest.raises(MemoryError, match=r"names: the activations asked for need [0-9.]+ KiB "
                                          r"in this call, past the 100 bytes of max_bytes"):
        m.run_with_cache(t, max_bytes=100)
    with pytest.raises(TypeError, match="max_bytes: expected an int"):
        m.run_with_cache(t, max_bytes=1.5)
    assert m.filled == 0  # nothing ran
    logits, _ = m.run_with_cache(t, names="blocks.0.hook_resid_pre", max_bytes=7 * 32 * 4)
    assert logits.shape == (1, 7, m.args.vocab_size)


def test_a_patch_function_s_errors_propagate_and_the_model_goes_on():
    m, e = token_model("meta_f32")
    t = e["tokens"]
    plain = m.forward(t)

    def fails(activation, name):
        raise ZeroDivisionError("in the hook")

    for patch in ({"blocks.1.hook_resid_post": fails},
                  {"blocks.0.hook_mlp_out": lambda a, n: a[:, :3]},
                  {"blocks.0.hook_mlp_out": lambda a, n: "x"},
                  {"blocks.0.attn.hook_pattern": lambda a, n: m.forward(t)}):
        m.reset()
        with pytest.raises((ZeroDivisionError, ValueError, TypeError, RuntimeError)) as err:
            m.forward(t, patch=patch)
        name = next(iter(patch))
        if err.type is ValueError:
            assert f"patch['{name}']: expected shape [1, 7, 32], got [1, 3, 32]" in str(err.value)
        if err.type is RuntimeError:
            assert "cannot call its Model" in str(err.value)
        assert m.filled == 0
        assert np.array_equal(m.forward(t), plain)  # the next call runs as on a fresh model


@pytest.mark.skipif(not STORIES.exists(), reason="weights/stories260K.gguf is not there")
def test_activation_patching_on_stories260k():
    """examples/activation_patching.py's prompts: the clean run's blocks.0.hook_resid_pre (the
    embeddings) patched into the corrupted run where the prompts differ is the clean run, bit
    for bit; one position at a time, each layer gives a logit difference between the two."""
    m = attn.Model.from_pretrained(str(STORIES), max_seq_len=64, threads=2)
    tok = m.tokenizer
    clean = tok.encode("Once upon a time, there was a little girl named Lily.")
    corrupt = tok.encode("Once upon a time, there was a little boy named Tim.")
    differ = [p for p in range(len(clean)) if clean[p] != corrupt[p]]
    assert len(clean) == len(corrupt) and len(differ) == 4
    names = [f"blocks.{l}.hook_resid_pre" for l in range(m.args.n_layers)]
    clean_logits, cache = m.run_with_cache(clean, names=names, all_positions=False)
    m.reset()
    corrupt_logits = m.forward(corrupt)

    def at(positions):
        def put_clean(resid, hook):
            resid[:, positions] = cache[hook][:, positions]
        return put_clean

    m.reset()
    assert np.array_equal(m.forward(corrupt, patch={names[0]: at(differ)}), clean_logits)
    for name in names:
        m.reset()
        patched = m.forward(corrupt, patch={name: at([differ[-1]])})
        assert not np.array_equal(patched, corrupt_logits), name
        assert not np.array_equal(patched, clean_logits), name


def test_a_batch_and_decode_steps_keep_their_shapes():
    """Two sequences, then a decode step: every kept array has the shape the contract states,
    and each row is its own sequence's (as a batch of one, to rounding)."""
    case = next(c for c in cases(GOLDEN / "model") if c["name"] == "meta_f32")
    d = GOLDEN / "model" / "meta_f32"
    args = attn.ModelArgs.from_file(str(d / case["config"]), max_batch_size=2)
    m = attn.Model(args, weights=str(d / case["weights"]), threads=2)
    one, e = token_model("meta_f32")
    t = np.concatenate([e["tokens"], e["tokens"][:, ::-1]])
    H, KV, D, dim = args.n_heads, args.n_kv_heads, args.head_dim, args.dim
    steps = [(t, 0), (np.array([[5], [9]]), 7)]
    batch = [m.run_with_cache(tokens, start_pos=pos) for tokens, pos in steps]
    assert m.filled == 8
    for (tokens, pos), (logits, cache) in zip(steps, batch):
        B, T = tokens.shape
        assert logits.shape == (B, T, args.vocab_size)
        assert cache["blocks.1.attn.hook_q"].shape == (B, T, H, D)
        assert cache["blocks.1.attn.hook_rot_k"].shape == (B, T, KV, D)
        assert cache["blocks.0.attn.hook_v"].shape == (B, T, KV, D)
        assert cache["blocks.0.attn.hook_pattern"].shape == (B, H, T, pos + T)
        assert cache["ln_final.hook_normalized"].shape == (B, T, dim)
    for b in range(2):
        one.reset()
        for (tokens, pos), (_, cache) in zip(steps, batch):
            _, alone = one.run_with_cache(np.ascontiguousarray(tokens[b:b + 1]), start_pos=pos)
            for name, value in alone.items():
                np.testing.assert_allclose(cache[name][b:b + 1], value, rtol=1e-5, atol=1e-6,
                                           err_msg=f"row {b} {name} at {pos}")
