#!/usr/bin/python3
"""A small Instruct test model: stories260K's weights with a real chat template, written with
llama.cpp's own gguf-py as its converter writes an Instruct model's tokenizer.

  chat_model.py OUT.gguf

The vocabulary gains ChatML's special tokens <|im_start|> and <|im_end|> (control tokens, as
Qwen2.5's tokenizer has them), <|im_end|> is the end-of-turn token (tokenizer.ggml.eot_token_id),
and the templates are the converter's: tokenizer.chat_template is Qwen2.5-7B-Instruct's (from
llama.cpp's models/templates/), and the named ones (tokenizer.chat_template.NAME with the list
tokenizer.chat_templates, as add_chat_template writes a tokenizer_config.json's list) are
`tool_use` (Hermes-2-Pro's, which needs tools: rendered without them it raises, as in
transformers) and `chatml` (ChatML without a default system message). The two new rows of the
embedding and output matrices are copies: <|im_start|> embeds as <s>, and <|im_end|>'s output row
is 1.25 times the row of "." so a greedy reply ends its turn where the story would end a
sentence. Needs /usr/bin/python3 (numpy) and llama.cpp's sources (LLAMA_CPP_SRC, or the cache
bench/llama_cpp.sh fills): exit 77 when they are absent.
"""
import os
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = pathlib.Path(os.environ.get(
    "LLAMA_CPP_SRC", pathlib.Path.home() / ".cache/attn-cli/llama.cpp/3.22.1/src"))
STORIES = ROOT / "weights" / "stories260K.gguf"
TEMPLATES = SRC / "models" / "templates"
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
NEW_TOKENS = ["<|im_start|>", "<|im_end|>"]


def templates():
    default = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
    tool_use = (TEMPLATES / "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja").read_text()
    return [{"name": "default", "template": default}, {"name": "tool_use", "template": tool_use},
            {"name": "chatml", "template": CHATML}]


def write(out):
    sys.path.insert(0, str(SRC / "gguf-py"))
    import gguf
    r = gguf.GGUFReader(STORIES)
    w = gguf.GGUFWriter(str(out), "llama")
    skip = {"general.architecture", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
            "tokenizer.ggml.token_type"}
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key in skip:
            continue
        w.add_key_value(key, field.contents(), field.types[0])
    tokens = r.fields["tokenizer.ggml.tokens"].contents() + NEW_TOKENS
    w.add_token_list(tokens)
    w.add_token_scores(r.fields["tokenizer.ggml.scores"].contents() + [0.0] * len(NEW_TOKENS))
    w.add_token_types(r.fields["tokenizer.ggml.token_type"].contents() +
                      [gguf.TokenType.CONTROL] * len(NEW_TOKENS))
    im_start, im_end = (tokens.index(t) for t in NEW_TOKENS)
    w.add_eot_token_id(im_end)
    w.add_chat_template(templates())
    bos, period = 1, tokens.index(".")
    for t in r.tensors:
        data = np.array(t.data)
        if t.name == "token_embd.weight":
            data = np.concatenate([data, data[[bos, bos]]])
        elif t.name == "output.weight":
            data = np.concatenate([data, data[[bos]], 1.25 * data[[period]]])
        w.add_tensor(t.name, np.ascontiguousarray(data, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return im_start, im_end


def main():
    if not (SRC / "gguf-py").is_dir() or not TEMPLATES.is_dir():
        print(f"SKIP: llama.cpp's sources are not in {SRC} (bench/llama_cpp.sh --src)")
        sys.exit(77)
    write(pathlib.Path(sys.argv[1]))


if __name__ == "__main__":
    main()
