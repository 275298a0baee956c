"""The same bits whatever the batch (issue 50; docs/contract.md, "The same bits whatever the
batch"): a sequence's logits alone equal its logits in batches of 1..16 with drawn neighbours, in
any chunking down to all-decode, on 1..4 threads, after a session saved and loaded mid-way, with
a recorder attached, and greedy text equal for every max_batch_size and thread count. Compared
with np.array_equal (bits), never a tolerance. The Q8_0 model runs under compute="q8" too (its
products on activations quantized to 8 bits: inexact, but as batch-invariant; issue 52). Run by
ctest (python.pytest)."""
import os
import pathlib

import numpy as np
import pytest

import attn

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
MODELS = [SOURCE / "weights" / "stories260K.gguf",  # F32
          SOURCE / "tests" / "golden" / "stories260K-q8_0.gguf"]  # Q8_0 matrices
# (weights, compute): each model exact, and the Q8_0 one under compute q8
CASES = [(MODELS[0], "f32"), (MODELS[1], "f32"), (MODELS[1], "q8")]
T = 20


def open_model(case, threads=1, batch=1):
    path, compute = case
    return attn.Model.from_pretrained(str(path), threads=threads, max_batch_size=batch,
                                      compute=compute)


def prompt(rng, vocab, n=T):
    return rng.integers(3, vocab, size=n).tolist()


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0].name}-{c[1]}")
def alone(request):
    """((path, compute), tokens, every position's logits of one prefill on one thread)."""
    try:
        m = open_model(request.param)
    except ValueError as e:  # compute q8 on a CPU without AVX512-VNNI
        assert "compute" in str(e)
        pytest.skip(str(e))
    toks = prompt(np.random.default_rng(5), m.args.vocab_size)
    return request.param, toks, m.forward([toks], all_positions=True)[0]


def test_threads_give_the_bits_alone(alone):
    path, toks, ref = alone
    for threads in (2, 3, 4):
        assert np.array_equal(open_model(path, threads).forward([toks], all_positions=True)[0], ref)


@pytest.mark.parametrize("cuts", [[7], [1, 2, 3], list(range(1, T))], ids=["2", "4", "decode"])
def test_chunks_and_decode_steps_give_the_bits_of_one_prefill(alone, cuts):
    path, toks, ref = alone
    m = open_model(path, threads=2)
    bounds = [0, *cuts, T]
    got = [m.forward([toks[a:b]], start_pos=a, all_positions=True)[0]
           for a, b in zip(bounds, bounds[1:])]
    assert np.array_equal(np.concatenate(got), ref)


@pytest.mark.parametrize("B", [2, 3, 5, 8, 12, 16])
def test_a_row_in_any_batch_has_its_bits_alone(alone, B):
    """Drawn neighbours; the row first, last and in the middle; 1 and 2 threads."""
    path, toks, ref = alone
    rng = np.random.default_rng(B)
    m = open_model(path, threads=1 + B % 2, batch=B)
    rows = [prompt(rng, m.args.vocab_size) for _ in range(B)]
    for at in sorted({0, B // 2, B - 1}):
        batch = [r for r in rows]
        batch[at] = toks
        assert np.array_equal(m.forward(batch, all_positions=True)[at], ref), at
        m.reset()


def test_a_batch_stepped_token_by_token_has_the_bits_alone(alone):
    path, toks, ref = alone
    rng = np.random.default_rng(9)
    m = open_model(path, threads=2, batch=4)
    batch = [prompt(rng, m.args.vocab_size) for _ in range(4)]
    batch[2] = toks
    got = [m.forward([r[i:i + 1] for r in batch], start_pos=i, all_positions=True)[2]
           for i in range(T)]
    assert np.array_equal(np.concatenate(got), ref)


def test_a_recorder_changes_no_bit(alone):
    path, toks, ref = alone
    logits, cache = open_model(path, threads=2).run_with_cache([toks])
    assert cache and np.array_equal(logits[0], ref)


@pytest.mark.parametrize("threads,batch", [(1, 1), (2, 4), (3, 16), (4, 2)])
def test_greedy_text_and_sessions_do_not_depend_on_threads_or_batch(alone, threads, batch,
                                                                     tmp_path):
    path, toks, _ = alone
    whole = open_model(path).generate(toks[:5], steps=24, temp=0, stop=[])
    m = open_model(path, threads, batch)
    assert m.generate(toks[:5], steps=24, temp=0, stop=[]) == whole
    n = open_model(path, threads, batch)  # a session saved after 7 steps, continued elsewhere
    head = n.generate(toks[:5], steps=7, temp=0, stop=[])
    n.save_session(str(tmp_path / "s7"))
    later = open_model(path, 5 - threads, batch)
    later.load_session(str(tmp_path / "s7"))
    assert head + later.generate([], steps=17, temp=0, stop=[]) == whole


def test_padded_rows_of_a_drawn_model_have_the_bits_alone():
    """Hidden-state input with a padding mask: each row's real positions as it has them alone."""
    args = attn.ModelArgs(dim=64, n_heads=8, n_kv_heads=2, n_layers=2, block="llama",
                          rope="interleaved", max_seq_len=64, max_batch_size=6)
    m = attn.Model(args, seed=3, threads=2)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 12, args.dim)).astype(np.float32)
    keep = np.ones((6, 12), np.float32)
    for b in range(6):
        keep[b, 12 - 2 * b:] = 0  # row b padded at its last 2b positions
    out = m.prefill(x, attention_mask=keep)
    for b in range(6):
        m.reset()
        n = 12 - 2 * b
        one = m.prefill(np.ascontiguousarray(x[b:b + 1, :n]))
        assert np.array_equal(out[b, :n], one[0]), b


def each_sequence_alone_has_its_bits(dim, heads, kv_heads, seqlen, seed):
    """A prefill of 2 sequences against each alone, on a drawn one-layer model."""
    args = attn.ModelArgs(dim=dim, n_heads=heads, n_kv_heads=kv_heads, n_layers=1, block="llama",
                          rope="interleaved", max_seq_len=seqlen + 10, max_batch_size=2)
    m = attn.Model(args, seed=3, threads=2)
    x = np.random.default_rng(seed).standard_normal((2, seqlen, dim)).astype(np.float32)
    out = m.prefill(x)
    for b in range(2):
        m.reset()
        assert np.array_equal(out[b], m.prefill(np.ascontiguousarray(x[b:b + 1]))[0]), b


# The FFN once summed w2 over blocks of hidden units sized by the rows of the call: past 32 rows
# at dim 1280 a row differed from itself alone by ~2e-7 (issue 50).
def test_a_row_of_a_prefill_past_32_rows_at_dim_1280_has_its_bits_alone():
    each_sequence_alone_has_its_bits(1280, 20, 5, 17, seed=1)


def test_a_row_of_a_prefill_past_the_ffn_pass_of_256_rows_has_its_bits_alone():
    # 2 x 150 rows go through the FFN in passes of 256 and 44 rows (model/buffers.hpp kFfnRows);
    # each sequence alone in one pass of 150.
    each_sequence_alone_has_its_bits(64, 4, 2, 150, seed=2)
