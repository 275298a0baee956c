"""model.steer (issue 51): llama.cpp's control vectors in Python. The logits against llama.cpp's
with the same file are tests/model/check_cvec.py's (ctest model.cvector); here, an array added
after block l is what a patch adding it to blocks.l.hook_resid_post gives, bit for bit, in
forward and in generate, and the arguments' errors."""
import os
import pathlib

import numpy as np
import pytest

import attn

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
STORIES = SOURCE / "weights" / "stories260K.gguf"
TOKENS = np.array([[1, 403, 407, 261, 378, 429, 259, 1139 % 512]])


@pytest.fixture(scope="module")
def model():
    return attn.Model.from_pretrained(str(STORIES), max_seq_len=64, threads=1)


def logits(m, **kw):
    m.reset()
    return m.forward(TOKENS, 0, all_positions=True, **kw)


def test_an_array_after_block_l_is_a_patch_of_its_resid_post(model):
    v = np.random.default_rng(3).normal(0, 1, model.args.dim).astype(np.float32)
    model.steer(None)
    patched = logits(model, patch={"blocks.2.hook_resid_post": lambda a, name: a + v})
    model.steer(v, layers=2)
    try:
        assert np.array_equal(logits(model), patched)
        # (2, 3) both inclusive: blocks 2 and 3
        both = logits(model, patch={"blocks.3.hook_resid_post": lambda a, name: a + v})
        model.steer(v, layers=(2, 3))
        assert np.array_equal(logits(model), both)
        model.steer(v, layers=range(2, 4))
        assert np.array_equal(logits(model), both)
        # a row per layer, times scale
        rows = np.zeros((model.args.n_layers, model.args.dim), np.float32)
        rows[2] = v
        model.steer(rows * 2, scale=0.5)
        assert np.array_equal(logits(model), patched)
    finally:
        model.steer(None)


def test_block_0_never_gets_one_and_none_clears(model):
    plain = logits(model)
    v = np.ones(model.args.dim, np.float32)
    model.steer(v, layers=0)
    assert np.array_equal(logits(model), plain)  # llama.cpp's layer 0 has no vector
    model.steer(v * 3)
    steered = logits(model)
    assert not np.allclose(steered, plain)
    model.steer(None)
    assert np.array_equal(logits(model), plain)


def test_generate_is_steered(model):
    model.steer(None)
    plain = model.generate([1, 403, 407], steps=12)
    model.steer(np.full(model.args.dim, 2.0, np.float32))
    try:
        assert model.generate([1, 403, 407], steps=12) != plain
    finally:
        model.steer(None)
    assert model.generate([1, 403, 407], steps=12) == plain


def test_steer_arguments(model, tmp_path):
    d = model.args.dim
    with pytest.raises(ValueError, match="nothing.gguf"):
        model.steer(str(tmp_path / "nothing.gguf"))
    with pytest.raises(ValueError, match="stories260K.gguf.*general.architecture"):
        model.steer(str(STORIES))  # a model, not a control vector
    with pytest.raises(ValueError, match="vector_or_file"):
        model.steer(np.zeros(d + 1, np.float32))
    with pytest.raises(ValueError, match="vector_or_file"):
        model.steer(np.zeros((2, 2, 2), np.float32))
    bad = np.zeros(d, np.float32)
    bad[5] = np.nan
    with pytest.raises(ValueError, match="element 5"):
        model.steer(bad)
    with pytest.raises(TypeError, match="scale"):
        model.steer(np.zeros(d, np.float32), scale="big")
    with pytest.raises(ValueError, match="scale"):
        model.steer(np.zeros(d, np.float32), scale=float("inf"))
    with pytest.raises(TypeError, match="layers"):
        model.steer(np.zeros(d, np.float32), layers="all")
    with pytest.raises(ValueError, match="layer range"):
        model.steer(np.zeros(d, np.float32), layers=(3, 1))
    with pytest.raises(ValueError, match="layers"):
        model.steer(np.zeros(d, np.float32), layers=range(0, 4, 2))
    model.steer(None)
