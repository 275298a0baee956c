#!/usr/bin/python3
"""Writes tests/golden/llama_tokens.json: the token ids and texts llama.cpp's and llama2.c's own
tokenizers give on a hard corpus, for tests/text/test_tokenizer_llama.cpp to compare attn-cli with.

  /usr/bin/python3 tests/golden/make_llama_tokens.py RUN_C

- llama.cpp: llama_tokenize / llama_detokenize / llama_token_to_piece of the llama.cpp that
  bench/llama_cpp.sh builds (the same library its llama-tokenize calls; the script checks
  llama-tokenize agrees on every item), through llama_tokens/reference.cpp compiled here against
  that build, on the ggml-vocab-*.gguf vocabularies its sources ship and on stories260K.gguf.
- llama2.c: run.c's encode and decode (RUN_C: run.c of karpathy/llama2.c, e.g.
  `git -C <mirror> show 350e04f:run.c > run.c`), compiled with llama_tokens/run_c.c, on
  weights/tok512.bin.
Deterministic: the corpus is fixed below, the outputs are sorted as the corpus is.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VOCABS = ["llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3", "deepseek-llm", "deepseek-coder",
          "falcon", "starcoder", "refact", "command-r", "mpt"]
STORIES = os.path.join(ROOT, "weights/stories260K.gguf")


def corpus():
    items = []

    def add(name, text):
        items.append((name, text.encode() if isinstance(text, str) else text))

    add("empty", "")
    add("space", " ")
    add("spaces_3", "   ")
    add("hello", "Hello world")
    add("hello_lead_space", " Hello world")
    add("hello_lead_2", "  Hello  world  ")
    add("story", "Once upon a time, there was a little girl named Lily. She loved to play "
        "outside in the park. One day, she saw a big, red ball.")
    add("newlines", "line one\nline two\n\nline four\n\n\n")
    add("crlf_tabs", "a\r\nb\r\n\tc\t\td \t \n")
    add("space_runs", "a" + "".join(" " * n + "b" for n in range(1, 12)))
    add("whitespace_unicode", "nbsp\u00a0here ideo\u3000graphic line\u2028sep nel\u0085 "
        "thin\u2009space ogham\u1680 narrow\u202f")
    add("numbers", "1 12 123 1234 12345 123456 3.14159 1,000,000 12e-3 0x1F 00000000 ٣٤ ½")
    add("contractions", "I'm you're he'll they'd I'VE it's 'S' don't DON'T ’s o'clock")
    add("punctuation", "Wait... what?! (yes) [no] {maybe} \"quoted\" 'single' a--b a - b ; : ,")
    add("code_python", "def f(x):\n    return x ** 2  # square\n\nif __name__ == '__main__':\n"
        "    print(f(3))\n")
    add("code_c", "int main(void) { for (int i = 0; i < 10; ++i) a[i] = i << 2; return 0; }")
    add("code_ops", "a ?? b || !f ? g : h && x != y >= z <= w => v -> u :: t $ + < = > ^ ~ | `")
    add("json", '{"key": [1, 2.5, null, true], "nested": {"a": "b\\n"}}')
    add("url", "https://example.com/path?q=1&r=two#frag user@mail.org")
    add("greek", "Ελληνικά: Η γρήγορη καφέ αλεπού πηδάει")
    add("cyrillic", "Съешь же ещё этих мягких французских булок")
    add("cjk", "中文字符测试，日本語のテキスト、한국어 문장입니다。")
    add("arabic_hebrew", "العربية لغة جميلة עברית שפה")
    add("indic", "हिन्दी भाषा বাংলা தமிழ் ไทยภาษา")
    add("combining", "e\u0301 a\u0300\u0301\u0302 Z\u0351\u0352\u0353\u0354 \u0301start")
    add("emoji", "😀 👍🏽 👨‍👩‍👧‍👦 🇺🇸 🏳️‍🌈 1️⃣ ❤️")
    add("emoji_run", "🙂" * 40)
    add("symbols", "€ £ ¥ © ® ™ ° ± × ÷ → ⇒ ∀ ∃ ∑ ∞ ≠ ≤ ≥ ♠ ♥ ★ ✓")
    add("fullwidth", "ＡＢＣ１２３！？")
    add("controls", "\x01\x02\x1b[31mred\x1b[0m\x7f bell\x07 ff\x0c vt\x0b")
    add("nul", "a\x00b")
    add("bom_zw", "\ufeffBOM zw\u200bsp zw\u200dj zw\u200cnj soft\u00adhyphen \ufffd")
    add("private_use", "\ue000\U000f0000 tag\U000e0041")
    add("metaspace_text", "▁Hello▁world ▁ ▁▁")
    add("gpt2_text", "Ġhello Ċ ĠĠ")
    add("byte_token_text", "<0x41> <0x0A> <0x>")
    add("special_llama2", "<s>Hello</s> <unk> <s> spaced </s> <<s>>")
    add("special_llama3", "<|begin_of_text|>x<|eot_id|>  <|start_header_id|>user<|end_header_id|>")
    add("special_qwen", "<|im_start|>user\nhi<|im_end|>\n<|endoftext|> after <|fim_prefix|>")
    add("special_phi3", " <|user|> hello <|end|> \n<|assistant|>  answer<|endoftext|> ")
    add("special_gpt2", "a<|endoftext|>b <|endoftext|> c")
    add("special_partial", "<|im_start <|eot_id <s </s <|user")
    add("long_word", "a" * 500)
    add("long_repeat", "supercalifragilistic" * 25)
    add("long_spaces", " " * 300)
    add("long_newlines", "\n" * 100)
    add("long_mixed", ("The quick brown fox jumps over the lazy dog. " * 20).strip())
    add("invalid_continuation", b"abc\x80def")
    add("invalid_truncated", b"x\xe2\x82 y")
    add("invalid_ff", b"\xff\xfe z")
    add("invalid_end", b"end\xc3")
    return items


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, **kw).stdout


def write_corpus(items, path, skip_nul=False):
    with open(path, "wb") as f:
        for _, b in items:
            if skip_nul and b"\x00" in b:
                continue
            f.write(b"%d\n" % len(b) + b)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run_c = os.path.abspath(sys.argv[1])
    bin_dir = run(["bash", os.path.join(ROOT, "bench/llama_cpp.sh")]).decode().strip()
    src = run(["bash", os.path.join(ROOT, "bench/llama_cpp.sh"), "--src"]).decode().strip()
    items = corpus()
    out = {"corpus": [{"name": n, "hex": b.hex()} for n, b in items], "vocabs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "reference")
        run(["g++", "-O1", "-std=c++17", os.path.join(HERE, "llama_tokens/reference.cpp"),
             "-I", os.path.join(src, "include"), "-I", os.path.join(src, "ggml/include"),
             "-L", bin_dir, "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + bin_dir,
             "-o", ref])
        corpus_path = os.path.join(tmp, "corpus")
        write_corpus(items, corpus_path)
        vocabs = [(v, os.path.join(src, "models", f"ggml-vocab-{v}.gguf")) for v in VOCABS]
        vocabs.append(("stories260K", STORIES))
        for name, path in vocabs:
            lines = run([ref, path, corpus_path]).decode().splitlines()
            results = [json.loads(line) for line in lines[:-1]]
            assert len(results) == len(items)
            summary = json.loads(lines[-1])
            # llama-tokenize (the CLI) on each item must give the same ids.
            for (item, data), r in zip(items, results):
                with open(os.path.join(tmp, "item"), "wb") as f:
                    f.write(data)
                got = run([os.path.join(bin_dir, "llama-tokenize"), "-m", path, "-f",
                           os.path.join(tmp, "item"), "--ids", "--no-escape",
                           "--log-disable"], stderr=subprocess.DEVNULL).decode()
                got = json.loads(got.strip().splitlines()[-1])
                assert got == r["ids_special"], (name, item, got, r["ids_special"])
            out["vocabs"][name] = {"file": os.path.basename(path), "items": results, **summary}
            print(name, "ok", file=sys.stderr)
        runc = os.path.join(tmp, "runc")
        run(["gcc", "-O1", "-DTESTING", f'-DRUN_C="{run_c}"',
             os.path.join(HERE, "llama_tokens/run_c.c"), "-lm", "-o", runc])
        write_corpus(items, corpus_path, skip_nul=True)
        tok = os.path.join(ROOT, "weights/tok512.bin")
        lines = run([runc, tok, "512", corpus_path]).decode().splitlines()
        names = [n for n, b in items if b"\x00" not in b]
        out["llama2c"] = {"file": "tok512.bin", "vocab_size": 512,
                          "items": [dict(name=n, **json.loads(l)) for n, l in zip(names, lines)]}
    with open(os.path.join(HERE, "llama_tokens.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
