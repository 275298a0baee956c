#!/usr/bin/python3
"""Writes tests/golden/llama_pre_tokens.json: llama.cpp's token ids and texts for every
tokenizer.ggml.pre value attn-cli accepts, on the hard corpus of make_llama_tokens.py, for
tests/text/test_tokenizer_llama.cpp to compare attn-cli with.

  /usr/bin/python3 tests/golden/make_pre_tokens.py [--cli]

Most pre-tokenizers have no vocabulary among llama.cpp's models/ggml-vocab-*.gguf: each value is
written into a copy of ggml-vocab-gpt-2.gguf (only the key tokenizer.ggml.pre changes), which
llama.cpp's own tokenizer (llama_tokens/reference.cpp built against the build bench/llama_cpp.sh
makes) then reads: its expressions and flags for that value on GPT-2's pieces and merges.
--cli: also checks that llama-tokenize gives the same ids on every item (slow: a process per item,
once per distinct result). Values with the same results share an entry. Also Gemma's
SentencePiece setting (tokenizer.ggml.add_space_prefix false) in Llama 2's vocabulary file
(spm_no_space_prefix), and the vocabulary files without .inp/.out that attn-cli reads (files:
aquila, gpt-neox and baichuan). Deterministic.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from make_llama_tokens import corpus, run, write_corpus  # noqa: E402

BASE = "gpt-2"
FILES = ["aquila", "gpt-neox", "baichuan"]
# tokenizer.ggml.pre values with a row in lib/attn/text/llama_vocab.cpp's pre_tokenizers().
PRES = [
    "default", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
    "lfm2", "jina-v5-nano", "dbrx", "smaug-bpe", "glm4", "chatglm-bpe", "jais-2", "minicpm5",
    "deepseek-llm", "deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4", "spark2_5", "youtu",
    "deepseek-coder", "falcon", "starcoder", "refact", "codeshell", "exaone", "minerva-7b",
    "mellum2", "command-r", "smollm", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat",
    "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais",
    "exaone4", "trillion", "granite-docling", "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2",
    "hunyuan", "solar-open", "stablelm2", "megrez", "grok-2", "qwen35", "poro-chat", "bloom",
    "gpt3-finnish", "viking", "tekken", "chameleon", "gpt-4o", "llama4", "kanana2", "talkie",
    "minimax-m2", "granite-embed-multi-97m", "bailingmoe", "bailingmoe2", "llada-moe",
    "seed-coder", "ufakzeka", "laguna", "exaone-moe",
]


def field_at(base_path, key):
    """Where `key` lies in the vocabulary file base_path: (offset, size) of the key-value."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(base_path)), "gguf-py"))
    import gguf
    reader = gguf.GGUFReader(base_path)
    assert len(reader.tensors) == 0
    field = reader.fields[key]
    return field.offset, sum(p.nbytes for p in field.parts)


def replaced(data, where, key, gguf_type, value, out_path):
    """The vocabulary file's bytes with the key-value at `where` replaced by key = value (a
    vocabulary file holds no tensors, so nothing after the metadata moves)."""
    offset, size = where
    key = key.encode()
    new = struct.pack("<Q", len(key)) + key + struct.pack("<I", gguf_type) + value
    with open(out_path, "wb") as f:
        f.write(data[:offset] + new + data[offset + size:])


def gguf_string(s):
    return struct.pack("<Q", len(s.encode())) + s.encode()


def main():
    check_cli = "--cli" in sys.argv[1:]
    bin_dir = run(["bash", os.path.join(ROOT, "bench/llama_cpp.sh")]).decode().strip()
    src = run(["bash", os.path.join(ROOT, "bench/llama_cpp.sh"), "--src"]).decode().strip()
    items = corpus()
    base = os.path.join(src, "models", f"ggml-vocab-{BASE}.gguf")
    out = {"base": os.path.basename(base),
           "corpus": [{"name": n, "hex": b.hex()} for n, b in items], "pre": {}, "results": []}
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "reference")
        run(["g++", "-O1", "-std=c++17", os.path.join(HERE, "llama_tokens/reference.cpp"),
             "-I", os.path.join(src, "include"), "-I", os.path.join(src, "ggml/include"),
             "-L", bin_dir, "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + bin_dir,
             "-o", ref])
        corpus_path = os.path.join(tmp, "corpus")
        write_corpus(items, corpus_path)
        seen = {}
        where = field_at(base, "tokenizer.ggml.pre")
        with open(base, "rb") as f:
            data = f.read()
        for pre in PRES:
            path = os.path.join(tmp, f"vocab-{pre}.gguf")
            replaced(data, where, "tokenizer.ggml.pre", 8, gguf_string(pre), path)
            lines = run([ref, path, corpus_path]).decode().splitlines()
            results = [json.loads(line) for line in lines[:-1]]
            assert len(results) == len(items), pre
            key = json.dumps(results)
            if key not in seen:
                seen[key] = len(out["results"])
                out["results"].append(results)
                for (item, text), r in zip(items, results) if check_cli else []:
                    with open(os.path.join(tmp, "item"), "wb") as f:
                        f.write(text)
                    got = run([os.path.join(bin_dir, "llama-tokenize"), "-m", path, "-f",
                               os.path.join(tmp, "item"), "--ids", "--no-escape",
                               "--log-disable"], stderr=subprocess.DEVNULL).decode()
                    got = json.loads(got.strip().splitlines()[-1])
                    assert got == r["ids_special"], (pre, item, got, r["ids_special"])
            out["pre"][pre] = seen[key]
            print(pre, seen[key], file=sys.stderr)
        # Gemma's SentencePiece files: add_space_prefix false (conversion/gemma.py), here in
        # Llama 2's vocabulary in place of its add_eos_token false (llama.cpp's default).
        spm = os.path.join(src, "models", "ggml-vocab-llama-spm.gguf")
        with open(spm, "rb") as f:
            spm_data = f.read()
        path = os.path.join(tmp, "spm-no-prefix.gguf")
        replaced(spm_data, field_at(spm, "tokenizer.ggml.add_eos_token"),
                 "tokenizer.ggml.add_space_prefix", 7, b"\0", path)
        lines = run([ref, path, corpus_path]).decode().splitlines()
        out["spm_no_space_prefix"] = {"base": os.path.basename(spm),
                                      "items": [json.loads(line) for line in lines[:-1]]}
        assert len(out["spm_no_space_prefix"]["items"]) == len(items)
        # llama.cpp's vocabulary files without .inp/.out that attn-cli reads (no
        # tokenizer.ggml.pre: llama.cpp's "default"), as they are.
        out["files"] = {}
        for name in FILES:
            path = os.path.join(src, "models", f"ggml-vocab-{name}.gguf")
            lines = run([ref, path, corpus_path]).decode().splitlines()
            out["files"][name] = [json.loads(line) for line in lines[:-1]]
            assert len(out["files"][name]) == len(items)
    with open(os.path.join(HERE, "llama_pre_tokens.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
