#!/usr/bin/python3
"""Writes fuzz/seeds/llama_tokenizer/*: fuzz_llama_tokenizer's input layout (a pick byte: even
GGUF, odd tokenizer.bin; the text's length as u16 little-endian; the text; the file) around a
small SentencePiece GGUF, a small byte-level BPE GGUF and tests/data/tok512.bin."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def gguf(kv):
    def s(x):
        b = x.encode() if isinstance(x, str) else x
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for key, (kind, value) in kv.items():
        out += s(key)
        if kind == "str":
            out += struct.pack("<I", 8) + s(value)
        elif kind == "u32":
            out += struct.pack("<II", 4, value)
        elif kind == "bool":
            out += struct.pack("<IB", 7, value)
        elif kind == "strs":
            out += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(s(v) for v in value)
        elif kind == "f32s":
            out += struct.pack("<IIQ", 9, 6, len(value)) + struct.pack(f"<{len(value)}f", *value)
        elif kind == "i32s":
            out += struct.pack("<IIQ", 9, 5, len(value)) + struct.pack(f"<{len(value)}i", *value)
    return out + b"\0" * (-len(out) % 32)


def seed(name, pick, text, data):
    t = text.encode()
    with open(os.path.join(HERE, "llama_tokenizer", name), "wb") as f:
        f.write(bytes([pick]) + struct.pack("<H", len(t)) + t + data)


def main():
    os.makedirs(os.path.join(HERE, "llama_tokenizer"), exist_ok=True)
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    extra = ["▁", "h", "e", "l", "o", "▁h", "ll", "▁he", "llo", "▁hello", "<|user|>"]
    types = [2, 3, 3] + [6] * 256 + [1] * (len(extra) - 1) + [4]
    scores = [0.0] * 259 + [-float(i) for i in range(len(extra))]
    spm = gguf({"general.name": ("str", "phi3"), "tokenizer.ggml.model": ("str", "llama"),
                "tokenizer.ggml.tokens": ("strs", pieces + extra),
                "tokenizer.ggml.scores": ("f32s", scores),
                "tokenizer.ggml.token_type": ("i32s", types),
                "tokenizer.ggml.bos_token_id": ("u32", 1),
                "tokenizer.ggml.add_eos_token": ("bool", 1)})
    seed("spm", 0, "hello <s>hello</s> <|user|> é 😀", spm)
    # GPT-2's printable characters for the 256 bytes, then merged pieces.
    chars = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    byte_chars, n = {}, 0
    for b in range(256):
        if b in chars:
            byte_chars[b] = chr(b)
        else:
            byte_chars[b] = chr(256 + n)
            n += 1
    pieces = [byte_chars[b] for b in range(256)] + ["Ġh", "el", "Ġhel", "lo", "Ġhello", "<|eot_id|>"]
    merges = ["Ġ h", "e l", "Ġh el", "l o", "Ġhel lo"]
    bpe = gguf({"tokenizer.ggml.model": ("str", "gpt2"), "tokenizer.ggml.pre": ("str", "llama-bpe"),
                "tokenizer.ggml.tokens": ("strs", pieces),
                "tokenizer.ggml.token_type": ("i32s", [1] * 261 + [3]),
                "tokenizer.ggml.merges": ("strs", merges),
                "tokenizer.ggml.bos_token_id": ("u32", 261)})
    seed("bpe", 0, "hello world's 12345 <|eot_id|>\n\n  é", bpe)
    with open(os.path.join(ROOT, "tests/data/tok512.bin"), "rb") as f:
        seed("tokenizer_bin", 1, "Once upon a time, Lily 😀", f.read())


if __name__ == "__main__":
    main()
