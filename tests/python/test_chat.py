"""Model.chat(messages): the assistant's reply as Hugging Face's text-generation pipeline gives
it for a conversation (the conversation rendered by python3-jinja2 in transformers' environment,
encoded with no special tokens added, continued by generate until an end-of-turn id, the reply
the text decode(all, skip_special_tokens=True) has past decode(prompt, ...)), over several turns
with the cache kept; the tokenizer's named chat templates (Tokenizer.chat_templates,
chat_template=NAME) on a GGUF Instruct test model written by tests/golden/chat_model.py (llama.cpp's
gguf-py: skipped when its sources are absent)."""
import os
import pathlib
import sys

import pytest

import attn

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
STORIES = str(SOURCE / "weights" / "stories260K.gguf")
TURNS = (SOURCE / "tests" / "golden" / "chat_templates" / "turns.jinja").read_text()
GOLDEN = SOURCE / "tests" / "golden"


def jinja():
    pytest.importorskip("jinja2")
    sys.path.insert(0, str(GOLDEN))
    import check_chat_templates
    return check_chat_templates.environment()


def render(template, messages, bos="<s>", eos="</s>"):
    return jinja().from_string(template).render(
        messages=messages, tools=None, documents=None, add_generation_prompt=True,
        bos_token=bos, eos_token=eos)


def pipeline_reply(model, text, stop, max_new_tokens):
    """What a pipeline returns: generate from a fresh cache, the reply's text past the prompt's."""
    tok = model.tokenizer
    ids = tok.encode(text, add_special_tokens=False)
    model.reset()
    out = model.generate(ids, max_new_tokens=max_new_tokens, stop=stop)
    if out and out[-1] in stop:
        out = out[:-1]
    prompt = tok.decode(ids, skip_special_tokens=True)
    whole = tok.decode(ids + out, skip_special_tokens=True)
    assert whole.startswith(prompt)
    return whole[len(prompt):]


@pytest.fixture(scope="module")
def stories():
    return attn.Model.from_pretrained(STORIES, threads=1)


@pytest.fixture(scope="module")
def instruct(tmp_path_factory):
    sys.path.insert(0, str(GOLDEN))
    import chat_model
    if not (chat_model.SRC / "gguf-py").is_dir() or not chat_model.TEMPLATES.is_dir():
        pytest.skip(f"llama.cpp's sources are not in {chat_model.SRC} (bench/llama_cpp.sh --src)")
    path = tmp_path_factory.mktemp("instruct") / "instruct.gguf"
    chat_model.write(path)
    return attn.Model.from_pretrained(str(path), threads=1)


def test_chat_is_the_pipeline_reply_over_five_turns_with_the_cache_kept(stories):
    fresh = attn.Model.from_pretrained(STORIES, threads=1)
    stop = [2]  # </s>, the tokenizer's EOS (stories260K's eos id is <s>: chat_stop_ids adds it)
    messages = [{"role": "system", "content": "Be brief."}]
    for line in ["Once upon a time", "The cat sat", "Lily said hi", "They went home", "The end"]:
        messages.append({"role": "user", "content": line})
        reply = stories.chat(messages, chat_template=TURNS, max_new_tokens=8)
        want = pipeline_reply(fresh, render(TURNS, messages), stop + [1], 8)
        assert reply == want
        messages.append({"role": "assistant", "content": reply})
    # An earlier turn edited: the cache is kept only up to the first differing id.
    messages[1]["content"] = "Once upon a day"
    messages.append({"role": "user", "content": "Again"})
    assert stories.chat(messages, chat_template=TURNS, max_new_tokens=8) == \
        pipeline_reply(fresh, render(TURNS, messages), stop + [1], 8)


def test_chat_samples_as_generate_does(stories):
    messages = [{"role": "user", "content": "Once upon a time"}]
    stories.reset()
    one = stories.chat(messages, chat_template=TURNS, max_new_tokens=12, temperature=1.0, seed=7)
    stories.reset()
    assert one == stories.chat(messages, chat_template=TURNS, max_new_tokens=12,
                               temperature=1.0, seed=7)
    assert stories.chat(messages, chat_template=TURNS, max_new_tokens=0) == ""


def test_chat_refusals_name_the_argument(stories, tmp_path):
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match="has no chat template"):
        stories.chat(messages)
    with pytest.raises(TypeError, match="messages"):
        stories.chat("hi", chat_template=TURNS)
    with pytest.raises(TypeError, match="messages"):
        stories.chat([{"role": object()}], chat_template=TURNS)
    with pytest.raises(TypeError, match="chat_template"):
        stories.chat(messages, chat_template=3)
    with pytest.raises(TypeError, match="max_new_tokens"):
        stories.chat(messages, chat_template=TURNS, max_new_tokens=1.5)
    stories.chat(messages, chat_template=TURNS, max_new_tokens=4)
    with pytest.raises(ValueError, match="temperature"):
        stories.chat(messages, chat_template=TURNS, temperature=-1.0)
    # A refused turn leaves no conversation to continue: generate starts from position 0.
    fresh = attn.Model.from_pretrained(STORIES, threads=1)
    assert stories.generate([1, 403], max_new_tokens=6) == fresh.generate([1, 403], max_new_tokens=6)
    small = attn.Model.from_pretrained(STORIES, threads=1, max_seq_len=16)
    with pytest.raises(ValueError, match="max_seq_len"):
        small.chat([{"role": "user", "content": "Once upon a time " * 8}], chat_template=TURNS)
    drawn = attn.Model(attn.ModelArgs())
    with pytest.raises(ValueError, match="chat"):
        drawn.chat(messages, chat_template=TURNS)


def test_chat_ends_the_turn_at_the_templates_end_token(instruct):
    tok = instruct.tokenizer
    im_end = tok.pieces.index("<|im_end|>")
    messages = [{"role": "user", "content": "Once upon a time"}]
    reply = instruct.chat(messages, max_new_tokens=200)
    text = render(tok.chat_templates["default"], messages)
    assert text.startswith("<|im_start|>system\nYou are Qwen")  # the file's default template
    ids = tok.encode(text, add_special_tokens=False)
    instruct.reset()
    out = instruct.generate(ids, max_new_tokens=200, stop=[im_end])
    assert out[-1] == im_end and len(out) < 200  # the reply ended its turn
    assert reply == pipeline_reply(instruct, text, [im_end], 200)
    assert "<|im_end|>" not in reply


def test_named_chat_templates_of_a_gguf(instruct):
    tok = instruct.tokenizer
    assert list(tok.chat_templates) == ["default", "tool_use", "chatml"]
    messages = [{"role": "user", "content": "Hi"}]
    chatml = tok.chat_templates["chatml"]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                   chat_template="chatml")
    assert text == render(chatml, messages) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.apply_chat_template(messages, add_generation_prompt=True, chat_template="chatml") \
        == tok.encode(text, add_special_tokens=False)
    assert instruct.chat(messages, chat_template="chatml", max_new_tokens=6) == \
        pipeline_reply(instruct, text, [tok.pieces.index("<|im_end|>")], 6)
    # tool_use (Hermes 2 Pro's) needs tools: rendered without them, jinja2 raises, and so do we.
    with pytest.raises(Exception):
        render(tok.chat_templates["tool_use"], messages)
    with pytest.raises(ValueError, match="chat template tool_use"):
        instruct.chat(messages, chat_template="tool_use")


def test_chat_prefills_only_the_ids_after_the_kept_prefix(stories):
    """A marker written into the cache (layer 0's K) survives at the positions a turn keeps and is
    overwritten from the first id the new rendering changes."""
    mark = 12345.0
    tok = stories.tokenizer
    messages = [{"role": "user", "content": "Once upon a time"}]
    stories.reset()
    reply = stories.chat(messages, chat_template=TURNS, max_new_tokens=8)
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "The end"}]
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, chat_template=TURNS)
    before = tok.apply_chat_template(messages[:1], add_generation_prompt=True, chat_template=TURNS)
    assert ids[:len(before)] == before
    stories.cache_k(0)[0, 0, len(before) - 1, 0] = mark
    stories.chat(messages, chat_template=TURNS, max_new_tokens=8)
    assert stories.cache_k(0)[0, 0, len(before) - 1, 0] == mark  # kept: not prefilled again
    # The first turn edited: positions from the first differing id are prefilled again.
    edited = [dict(messages[0], content="Once upon a day")] + messages[1:]
    again = tok.apply_chat_template(edited, add_generation_prompt=True, chat_template=TURNS)
    common = next(k for k, (a, b) in enumerate(zip(ids, again)) if a != b)
    cache = stories.cache_k(0)
    cache[0, 0, 0, 0] = cache[0, 0, common, 0] = mark
    stories.chat(edited, chat_template=TURNS, max_new_tokens=8)
    assert stories.cache_k(0)[0, 0, 0, 0] == mark
    assert stories.cache_k(0)[0, 0, common, 0] != mark


def test_chat_stream_yields_the_reply_in_pieces(stories):
    messages = [{"role": "user", "content": "Once upon a time"}]
    for sampling in [{}, {"temperature": 1.0, "seed": 3}]:
        stories.reset()
        whole = stories.chat(messages, chat_template=TURNS, max_new_tokens=16, **sampling)
        stories.reset()
        stream = stories.chat(messages, chat_template=TURNS, max_new_tokens=16, stream=True,
                              **sampling)
        assert not isinstance(stream, str)
        pieces = list(stream)
        assert len(pieces) > 1 and "".join(pieces) == whole
    # The stream's turn is the conversation's: the next call keeps it, as after chat.
    messages += [{"role": "assistant", "content": whole}, {"role": "user", "content": "The end"}]
    fresh = attn.Model.from_pretrained(STORIES, threads=1)
    assert "".join(stories.chat(messages, chat_template=TURNS, max_new_tokens=8, stream=True)) \
        == fresh.chat(messages, chat_template=TURNS, max_new_tokens=8)
    # Another call between two pieces: the stream stops, saying so.
    stream = stories.chat(messages, chat_template=TURNS, max_new_tokens=8, stream=True)
    next(stream)
    stories.generate([1, 403], max_new_tokens=2)
    with pytest.raises(ValueError, match="another call"):
        next(stream)
    with pytest.raises(StopIteration):
        next(stream)
    with pytest.raises(TypeError, match="stream"):
        stories.chat(messages, chat_template=TURNS, stream="yes")
