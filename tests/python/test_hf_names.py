"""Hugging Face's and TransformerLens's names where they mean what ours do (issue 49): generate's
max_new_tokens, temperature, do_sample and repetition_penalty, a callable tokenizer,
convert_ids_to_tokens, decode(skip_special_tokens=True) as transformers decodes a SentencePiece
vocabulary, and Model.to_tokens / to_string / to_str_tokens. The vocabulary's pieces come from
gguf-py (llama.cpp's sources in the cache folder; skipped when absent), SentencePiece's decoding
rule is written out below, greedy decoding is numpy's argmax over forward's logits."""
import os
import pathlib
import sys

import numpy as np
import pytest

import attn

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
GGUF = str(SOURCE / "weights" / "stories260K.gguf")
GGUF_PY = pathlib.Path("~/.cache/attn-cli/llama.cpp/3.22.1/src/gguf-py").expanduser()
TEXTS = ["Hello world", "Once upon a time, there was a little girl.", "Lily saw a\nbig dog"]
CONTROL = 3  # llama.cpp's token type of <s> and </s>


@pytest.fixture(scope="module")
def model():
    return attn.Model.from_pretrained(GGUF, threads=1)


@pytest.fixture(scope="module")
def vocab():
    """(pieces, token types) of stories260K.gguf as gguf-py reads them."""
    if not (GGUF_PY / "gguf").is_dir():
        pytest.skip(f"gguf-py not found at {GGUF_PY} (bash bench/llama_cpp.sh --src fetches it)")
    sys.path.insert(0, str(GGUF_PY))
    from gguf import GGUFReader
    r = GGUFReader(GGUF)
    tokens, types = r.fields["tokenizer.ggml.tokens"], r.fields["tokenizer.ggml.token_type"]
    pieces = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    return pieces, [int(types.parts[i][0]) for i in types.data]


def sentencepiece_decode(pieces):
    """SentencePiece's DecodePieces (what transformers' Llama tokenizers give): byte pieces as
    their bytes, U+2581 as a space, the first piece's leading space (the dummy prefix) dropped."""
    out = b""
    for p in pieces:
        out += bytes([int(p[3:5], 16)]) if p.startswith("<0x") else p.replace("\u2581", " ").encode()
    text = out.decode("utf-8", "replace")
    return text[1:] if text.startswith(" ") else text


def test_the_tokenizer_called_gives_what_encode_gives(model):
    tok = model.tokenizer
    assert tok(TEXTS[0]) == tok.encode(TEXTS[0])
    assert tok(TEXTS[0], add_special_tokens=False) == tok.encode(TEXTS[0], add_special_tokens=False)
    assert tok(TEXTS) == [tok.encode(t) for t in TEXTS]


def test_convert_ids_to_tokens_gives_the_vocabulary_pieces(model, vocab):
    pieces, _ = vocab
    ids = model.tokenizer.encode(TEXTS[2])
    assert model.tokenizer.convert_ids_to_tokens(ids) == [pieces[i] for i in ids]
    assert model.tokenizer.convert_ids_to_tokens(ids[1]) == pieces[ids[1]]


@pytest.mark.parametrize("text", TEXTS)
def test_decode_skipping_special_tokens_drops_the_prefix_space_as_transformers(model, vocab, text):
    pieces, types = vocab
    tok = model.tokenizer
    ids = tok.encode(text) + tok.eos_ids[:1]
    assert ids[0] == tok.bos_id
    expected = sentencepiece_decode([pieces[i] for i in ids if types[i] != CONTROL])
    assert tok.decode(ids, skip_special_tokens=True) == expected == text


def test_to_tokens_puts_bos_first_unless_asked_not_to(model):
    tok = model.tokenizer
    ids = model.to_tokens(TEXTS[1])
    assert ids.shape == (1, len(tok.encode(TEXTS[1], add_special_tokens=False)) + 1)
    assert ids.dtype == np.int64
    assert ids[0].tolist() == [tok.bos_id] + tok.encode(TEXTS[1], add_special_tokens=False)
    assert model.to_tokens(TEXTS[1], prepend_bos=False)[0].tolist() == ids[0, 1:].tolist()
    assert model.to_tokens([TEXTS[0], TEXTS[0]]).shape == (2, len(tok.encode(TEXTS[0])))


def test_to_string_and_to_str_tokens_decode_as_transformer_lens(model, vocab):
    pieces, types = vocab
    ids = model.to_tokens(TEXTS[2])
    assert model.to_string(ids[0]) == "<s> " + TEXTS[2]  # special tokens shown, as decode
    assert model.to_string(ids) == ["<s> " + TEXTS[2]]
    # Each token alone: a control token as its piece, any other as SentencePiece decodes it.
    expected = [pieces[i] if types[i] == CONTROL else sentencepiece_decode([pieces[i]])
                for i in ids[0]]
    assert model.to_str_tokens(TEXTS[2]) == expected
    assert model.to_str_tokens(ids) == expected
    assert model.to_str_tokens(ids[0].tolist()) == expected


def greedy(model, prompt, steps):
    ids = list(prompt)
    for _ in range(steps):
        model.reset()
        ids.append(int(np.argmax(model.forward([ids])[0, -1])))
    model.reset()
    return ids[len(prompt):]


def test_generate_takes_transformers_names(model):
    prompt = model.tokenizer.encode(TEXTS[1])
    expected = greedy(model, prompt, 6)
    assert model.generate(prompt, max_new_tokens=6, stop=[]) == expected
    # do_sample=False is greedy whatever the temperature, as transformers.
    assert model.generate(prompt, max_new_tokens=6, do_sample=False, temperature=0.9,
                          stop=[]) == expected
    # do_sample=True samples at transformers' default temperature, 1.0, unless told.
    sampled = model.generate(prompt, max_new_tokens=6, do_sample=True, seed=7, stop=[])
    assert sampled == model.generate(prompt, steps=6, temp=1.0, seed=7, stop=[])
    assert model.generate(prompt, max_new_tokens=6, do_sample=True, temperature=0.5, top_k=5,
                          top_p=0.9, seed=7, stop=[]) == model.generate(
                              prompt, steps=6, temp=0.5, top_k=5, top_p=0.9, seed=7, stop=[])


def test_penalties_take_llama_cpp_and_transformers_names(model):
    prompt = model.tokenizer.encode(TEXTS[0])
    off = model.generate(prompt, steps=8, stop=[])
    assert model.generate(prompt, steps=8, repeat_penalty=1.0, repeat_last_n=64,
                          presence_penalty=0.0, frequency_penalty=0.0, stop=[]) == off
    assert (model.generate(prompt, steps=8, repetition_penalty=1.3, stop=[]) ==
            model.generate(prompt, steps=8, repeat_penalty=1.3, stop=[]))
    with pytest.raises(ValueError, match="repetition_penalty"):
        model.generate(prompt, repetition_penalty=0.0)
