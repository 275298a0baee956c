#!/usr/bin/python3
"""Writes small GGUF fixtures with llama.cpp's own gguf-py (its GGUFWriter), then records what
gguf-py's GGUFReader reads back from them into gguf/expected.json: the reference that
tests/io/test_gguf.cpp compares attn's reader against (keys, types, values, tensor names, shapes,
types, offsets, sizes and bytes as hex).

    /usr/bin/python3 tests/golden/make_gguf.py

gguf-py comes from llama.cpp's sources in the cache folder (`bash bench/llama_cpp.sh --src`
prints it; override with LLAMA_CPP_SRC). Deterministic: rerunning rewrites identical files.

Fixtures (each a few KB):
- v3_align32.gguf: GGUF v3, default alignment 32, every value type, arrays of every element
  type (strings included, with non-ASCII and NUL bytes), tensors F32 1-D to 4-D, F16, Q8_0
  (gguf-py's quantizer), Q4_K and I32 (types no weight type reads, bytes as given);
- vocab.json: what GGUFReader reads from each of llama.cpp's own test vocabularies
  (models/ggml-vocab-*.gguf in its sources, real files made by its converters; not committed,
  read from the cache folder): every key's type, element type and count, an FNV-1a hash of
  each array of strings (each string's bytes then 0xFF), every tensor's name, type, shape,
  offset and size; with each file's size, so that the test reads only the same files;
- v2_align64.gguf: the same layout as GGUF v2 (v2 and v3 differ only in the version number for
  little-endian files: the writer's v3 bytes with the version field set to 2), general.alignment
  64 (a u32), F32, F16 and Q8_0 tensors.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "gguf"


def llama_cpp_src() -> Path:
    if os.environ.get("LLAMA_CPP_SRC"):
        return Path(os.environ["LLAMA_CPP_SRC"])
    out = subprocess.run(["bash", str(HERE.parent.parent / "bench" / "llama_cpp.sh"), "--src"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return Path(out.splitlines()[-1])


sys.path.insert(0, str(llama_cpp_src() / "gguf-py"))
import gguf  # noqa: E402
from gguf import GGUFValueType as VT  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402


def add_values(w: "gguf.GGUFWriter") -> None:
    """Every scalar type at its edges, and arrays of each element type."""
    w.add_key_value("test.u8", 255, VT.UINT8)
    w.add_key_value("test.i8", -128, VT.INT8)
    w.add_key_value("test.u16", 65535, VT.UINT16)
    w.add_key_value("test.i16", -32768, VT.INT16)
    w.add_key_value("test.u32", 4294967295, VT.UINT32)
    w.add_key_value("test.i32", -2147483648, VT.INT32)
    w.add_key_value("test.f32", 0.1, VT.FLOAT32)
    w.add_key_value("test.bool_true", True, VT.BOOL)
    w.add_key_value("test.bool_false", False, VT.BOOL)
    w.add_key_value("test.string", "h\u00e9llo \u4e16\u754c", VT.STRING)
    w.add_key_value("test.string_empty", "", VT.STRING)
    w.add_key_value("test.u64", 9223372036854775807, VT.UINT64)
    w.add_key_value("test.u64_big", 18446744073709551615, VT.UINT64)
    w.add_key_value("test.i64", -9223372036854775808, VT.INT64)
    w.add_key_value("test.f64", -1.0e300, VT.FLOAT64)
    w.add_key_value("test.arr_u8", [0, 1, 255], VT.ARRAY, VT.UINT8)
    w.add_key_value("test.arr_i8", [-128, 0, 127], VT.ARRAY, VT.INT8)
    w.add_key_value("test.arr_u16", [0, 65535], VT.ARRAY, VT.UINT16)
    w.add_key_value("test.arr_i16", [-32768, 32767], VT.ARRAY, VT.INT16)
    w.add_key_value("test.arr_u32", [1, 4294967295], VT.ARRAY, VT.UINT32)
    w.add_key_value("test.arr_i32", [-1, 2, -3], VT.ARRAY, VT.INT32)
    w.add_key_value("test.arr_f32", [0.5, -2.25, 1e-30, 3.4e38], VT.ARRAY, VT.FLOAT32)
    w.add_key_value("test.arr_bool", [True, False, True], VT.ARRAY, VT.BOOL)
    w.add_key_value("test.arr_string", ["a", "", "caf\u00e9", "nul\u0000byte", "<0x0A>"],
                    VT.ARRAY, VT.STRING)
    w.add_key_value("test.arr_u64", [0, 9223372036854775807], VT.ARRAY, VT.UINT64)
    w.add_key_value("test.arr_i64", [-9223372036854775808, 5], VT.ARRAY, VT.INT64)
    w.add_key_value("test.arr_f64", [1.5, -0.0], VT.ARRAY, VT.FLOAT64)


def add_tensors(w: "gguf.GGUFWriter", rng: np.random.Generator, full: bool) -> None:
    """gguf-py takes numpy's shape (outermost first) and writes ggml's ne reversed."""
    w.add_tensor("t.f32_2d", rng.standard_normal((3, 4)).astype(np.float32))
    w.add_tensor("t.f16", rng.standard_normal((2, 8)).astype(np.float16))
    q8 = gguf.quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), QT.Q8_0)
    w.add_tensor("t.q8_0", q8, raw_dtype=QT.Q8_0)
    if not full:
        return
    w.add_tensor("t.f32_1d", rng.standard_normal(5).astype(np.float32))
    w.add_tensor("t.f32_3d", rng.standard_normal((2, 3, 4)).astype(np.float32))
    w.add_tensor("t.f32_4d", rng.standard_normal((2, 1, 3, 2)).astype(np.float32))
    q4k = rng.integers(0, 256, size=(2, 144), dtype=np.uint8)  # 2 rows of one Q4_K block
    w.add_tensor("t.q4_k", q4k, raw_dtype=QT.Q4_K)
    w.add_tensor("t.i32", np.arange(-3, 3, dtype=np.int32))


def write(path: Path, version: int, alignment: int | None, full: bool, seed: int) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_name("attn fixture " + path.stem)
    if full:
        add_values(w)
    else:
        w.add_key_value("test.arr_string", ["x", "yz"], VT.ARRAY, VT.STRING)
        w.add_key_value("test.u32", 7, VT.UINT32)
    add_tensors(w, np.random.default_rng(seed), full)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if version != 3:
        data = bytearray(path.read_bytes())
        assert data[4:8] == (3).to_bytes(4, "little")
        data[4:8] = version.to_bytes(4, "little")
        path.write_bytes(bytes(data))


def value_json(field) -> dict:
    types = [VT(t) for t in field.types]
    out = {"type": types[0].name.lower()}
    if types[0] == VT.ARRAY:
        out["element"] = types[-1].name.lower()
        values = field.contents()
        out["count"] = len(values)
    else:
        values = field.contents()
    if types[-1] == VT.STRING:
        # As bytes: JSON strings cannot carry every byte string, hex can.
        raw = [bytes(field.parts[i]) for i in field.data]
        out["hex"] = [r.hex() for r in raw]
    out["value"] = values
    return out


def read_back(path: Path) -> dict:
    r = gguf.GGUFReader(str(path))
    kv = []
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        kv.append({"key": key, **value_json(field)})
    tensors = []
    for t in r.tensors:
        raw = bytes(np.asarray(t.data).view(np.uint8).reshape(-1))
        tensors.append({
            "name": t.name,
            "ggml_type": int(t.tensor_type),
            "type_name": QT(t.tensor_type).name,
            "shape": [int(d) for d in reversed(list(t.shape))],
            "offset": int(t.data_offset),
            "size": int(t.n_bytes),
            "hex": raw.hex(),
        })
    align = r.fields.get("general.alignment")
    return {
        "version": int(r.fields["GGUF.version"].contents()),
        "alignment": int(align.contents()) if align else 32,
        "file_size": path.stat().st_size,
        "kv": kv,
        "tensors": tensors,
    }


def fnv(strings: list[bytes]) -> str:
    h = 1469598103934665603
    for s in strings:
        for c in s + b"\xff":
            h = ((h ^ c) * 1099511628211) % (1 << 64)
    return str(h)  # as a string: JSON readers may not hold 64-bit integers exactly


def vocab_summary(path: Path) -> dict:
    r = gguf.GGUFReader(str(path))
    kv = []
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        types = [VT(t) for t in field.types]
        e = {"key": key, "type": types[0].name.lower()}
        if types[0] == VT.ARRAY:
            e["element"] = types[-1].name.lower()
            e["count"] = len(field.data)
            if types[-1] == VT.STRING:
                e["fnv"] = fnv([bytes(field.parts[i]) for i in field.data])
        kv.append(e)
    tensors = [{"name": t.name, "ggml_type": int(t.tensor_type),
                "shape": [int(d) for d in reversed(list(t.shape))],
                "offset": int(t.data_offset), "size": int(t.n_bytes)} for t in r.tensors]
    return {"version": int(r.fields["GGUF.version"].contents()), "file_size": path.stat().st_size,
            "kv": kv, "tensors": tensors}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    files = {
        "v3_align32.gguf": dict(version=3, alignment=None, full=True, seed=1),
        "v2_align64.gguf": dict(version=2, alignment=64, full=False, seed=2),
    }
    expected = {}
    for name, args in files.items():
        write(OUT / name, **args)
        expected[name] = read_back(OUT / name)
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=True) + "\n")
    vocab = {p.name: vocab_summary(p)
             for p in sorted((llama_cpp_src() / "models").glob("ggml-vocab-*.gguf"))}
    (OUT / "vocab.json").write_text(json.dumps(vocab, indent=0, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
