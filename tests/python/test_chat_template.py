"""Tokenizer.apply_chat_template against python3-jinja2 in transformers' environment
(tests/golden/check_chat_templates.py's), as text and as ids."""
import os
import pathlib
import sys

import pytest

import attn

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
STORIES = SOURCE / "weights" / "stories260K.gguf"
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m.content | trim }}"
            "{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi é "}]


def reference(add_generation_prompt):
    jinja2 = pytest.importorskip("jinja2")
    sys.path.insert(0, str(SOURCE / "tests" / "golden"))
    import check_chat_templates
    del jinja2
    return check_chat_templates.environment().from_string(TEMPLATE).render(
        messages=MESSAGES, tools=None, documents=None, add_generation_prompt=add_generation_prompt,
        bos_token="<s>", eos_token="</s>")


@pytest.mark.parametrize("prompt", [False, True])
def test_apply_chat_template_text_and_ids(prompt):
    tok = attn.Tokenizer(str(STORIES))
    text = tok.apply_chat_template(MESSAGES, add_generation_prompt=prompt, tokenize=False,
                                   chat_template=TEMPLATE)
    assert text == reference(prompt)
    ids = tok.apply_chat_template(MESSAGES, add_generation_prompt=prompt, chat_template=TEMPLATE)
    assert ids == tok.encode(text, add_special_tokens=False)
    assert ids[0] == tok.bos_id  # the template's <s>, read as the token


def test_apply_chat_template_refusals():
    tok = attn.Tokenizer(str(STORIES))
    with pytest.raises(ValueError, match="has no chat template"):
        tok.apply_chat_template(MESSAGES)
    with pytest.raises(ValueError, match="'include' is not supported"):
        tok.apply_chat_template(MESSAGES, chat_template="{% include 'x' %}")
    with pytest.raises(TypeError, match="messages"):
        tok.apply_chat_template([{"role": object()}], chat_template=TEMPLATE)
