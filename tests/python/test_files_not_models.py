"""Files that are not models given to Model.from_pretrained (issue 47, cause 5): each raises
ValueError with the text `attn-cli run -m` prints (tests/cli/test_not_models.cpp), naming the
file and what it looks like. Each call runs in a child interpreter, so that a crash fails one
case instead of the whole session."""
import os
import pathlib
import struct
import subprocess
import sys

import pytest

SOURCE = pathlib.Path(os.environ.get("ATTN_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
WEIGHTS = SOURCE / "weights"
ACCEPTED = ("GGUF, safetensors (or its index), a llama2.c checkpoint or a Hugging Face folder "
            "are read")
LOOKS = "not a model file: it looks like "


def with_header(tmp, name, field, value):
    b = bytearray((WEIGHTS / "stories260K.bin").read_bytes())
    b[4 * field:4 * field + 4] = struct.pack("<i", value)
    (tmp / name).write_bytes(bytes(b))
    return tmp / name


def cut(tmp, name, source, n):
    (tmp / name).write_bytes(source.read_bytes()[:n])
    return tmp / name


def not_models(tmp):
    fifo = tmp / "a.fifo"
    os.mkfifo(fifo)
    return [
        (with_header(tmp, "dim.bin", 0, -5),
         LOOKS + "a llama2.c checkpoint whose header dim is -5; " + ACCEPTED),
        (with_header(tmp, "seq.bin", 6, 0),
         LOOKS + "a llama2.c checkpoint whose header seq_len is 0; " + ACCEPTED),
        (cut(tmp, "cut.bin", WEIGHTS / "stories260K.bin", 1000),
         LOOKS + "a llama2.c checkpoint whose header implies "
         f"{(WEIGHTS / 'stories260K.bin').stat().st_size} bytes, the file has 1000 (cut short); "
         + ACCEPTED),
        (cut(tmp, "cut.gguf", WEIGHTS / "stories260K.gguf", 5000),
         "a GGUF file cut short at byte 5000: key 'tokenizer.ggml.tokens'"),
        (SOURCE / "README.md", LOOKS + "text; " + ACCEPTED),
        (fifo, "the weights file is a FIFO, not a regular file"),
        (pathlib.Path("/dev/zero"), "the weights file is a character device, not a regular file"),
    ]


def test_from_pretrained_names_each_file_that_is_not_a_model(tmp_path):
    for path, says in not_models(tmp_path):
        code = ("import attn\n"
                "try:\n"
                f"    attn.Model.from_pretrained({str(path)!r})\n"
                "except ValueError as e:\n"
                "    print(e)\n"
                "else:\n"
                "    print('accepted')\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, (path, r.stderr)
        assert r.stdout.startswith(f"{path}: {says}"), (path, r.stdout)
