#!/usr/bin/python3
"""Fixtures for ggml's quantized blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K,
Q5_K, Q6_K, IQ4_XS), from llama.cpp's gguf-py.

Run:  /usr/bin/python3 tests/golden/make_quant.py   (deterministic; byte-identical reruns)
It needs llama.cpp's sources (bash bench/llama_cpp.sh --src prints the folder): gguf-py's
numpy dequantization (gguf.quants.dequantize) and quantization (gguf.quants.quantize, Q8_0 and
Q4_0), written to match ggml's dequantize_row_* and quantize_row_*_ref bit for bit. Where
llama.cpp's built libggml-base.so is there too, ggml's own C functions (its type traits' to_float
and from_float_ref) are called through ctypes and must agree with numpy to the bit.

Writes tests/golden/quant/, raw little-endian files:
  <type>.blocks  random blocks: every byte of the quants drawn, so every nibble and bit pattern
                 occurs, and an all-bytes block (0, 1, ..., 255); the F16 scales (d, and dmin
                 for the K-quants) drawn from every finite F16 range: normal values of every
                 exponent, both signs, zeros, subnormals (2^-24 upwards), the largest (65504);
                 the min (m, dmin) too where the type has one
  <type>.f32     those blocks dequantized: the engine's to_f32 (and every kernel set's
                 widening) must give these bits
  <type>.input   F32 rows to quantize (Q8_0, Q4_0): draws of many magnitudes, zero blocks,
                 halves that round (x.5 after scaling), a block whose largest value is negative
  <type>.stored  those rows quantized: the engine's from_f32 must give these bytes
"""

import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.expanduser("~/.cache/attn-cli/llama.cpp/3.22.1/src")
LIB = os.path.expanduser("~/.cache/attn-cli/llama.cpp/3.22.1/build/bin/libggml-base.so")
sys.path.insert(0, os.path.join(SRC, "gguf-py"))
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as Q  # noqa: E402
from gguf import quants  # noqa: E402

TYPES = {"q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_k": Q.Q4_K, "q5_k": Q.Q5_K, "q6_k": Q.Q6_K,
         "q4_1": Q.Q4_1, "q5_0": Q.Q5_0, "q5_1": Q.Q5_1, "q2_k": Q.Q2_K, "q3_k": Q.Q3_K,
         "iq4_nl": Q.IQ4_NL, "iq4_xs": Q.IQ4_XS}
QUANTIZED = ["q8_0", "q4_0"]  # the types gguf-py quantizes (and the engine draws weights in)
# Byte offsets of each block's F16 scales.
SCALES = {"q8_0": [0], "q4_0": [0], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208],
          "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q2_k": [80, 82], "q3_k": [108],
          "iq4_nl": [0], "iq4_xs": [0]}
BLOCKS = 600


def f16_scales(rng: np.random.Generator, n: int) -> np.ndarray:
    """n finite F16 bit patterns over every range."""
    exp = rng.integers(0, 31, n, dtype=np.uint16)  # 0: zero or subnormal; 31 (Inf/NaN) excluded
    mant = rng.integers(0, 1024, n, dtype=np.uint16)
    sign = rng.integers(0, 2, n, dtype=np.uint16) << 15
    bits = sign | (exp << 10) | mant
    edges = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00]
    bits[: len(edges)] = edges
    return bits


def random_blocks(name: str, rng: np.random.Generator) -> np.ndarray:
    block, size = GGML_QUANT_SIZES[TYPES[name]]
    b = rng.integers(0, 256, (BLOCKS, size), dtype=np.uint8)
    b[1, :] = np.arange(size) % 256  # every byte value in the quants
    for off in SCALES[name]:
        b[:, off:off + 2] = f16_scales(rng, BLOCKS).astype("<u2").view(np.uint8).reshape(-1, 2)
    # Typical scales in most blocks: 2^-12 .. 2^-4, as trained weights have them.
    typical = rng.random(BLOCKS) < 0.5
    for off in SCALES[name]:
        v = (rng.standard_normal(BLOCKS) * 2.0 ** rng.integers(-12, -4, BLOCKS)).astype(np.float16)
        b[typical, off:off + 2] = v[typical].view(np.uint8).reshape(-1, 2)
    return b


def quant_inputs(rng: np.random.Generator) -> np.ndarray:
    """Rows of 32 x 40 F32 values to quantize."""
    n = 32 * 400
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 10, n // 32).repeat(32)).astype(np.float32)
    x[0:32] = 0.0  # a zero block: d = 0
    x[32:64] = np.arange(-16, 16, dtype=np.float32)  # the largest magnitude negative (Q4_0's max)
    x[64:96] = np.arange(32, dtype=np.float32) * 0.5 - 8  # halves
    x[96:128] = np.linspace(-127, 127, 32, dtype=np.float32)  # Q8_0: scale 1, ties rounded away
    x[128:160] = x[128:160] * 0 + np.float32(3.0)  # a constant block
    x[160] = -1e30  # one huge value among tiny ones
    return x.reshape(-1, 32 * 8)


def ggml_c():
    """ggml's own type traits through ctypes, or None without the built library."""
    if not os.path.exists(LIB):
        return None
    lib = ctypes.CDLL(LIB)

    class Traits(ctypes.Structure):
        _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                    ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                    ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                    ("from_float_ref", ctypes.c_void_p)]

    lib.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

    def to_float(qtype, blocks: np.ndarray) -> np.ndarray:
        t = lib.ggml_get_type_traits(int(qtype)).contents
        blocks = np.ascontiguousarray(blocks)
        out = np.empty(blocks.shape[0] * t.blck_size, dtype=np.float32)
        fn(t.to_float)(blocks.ctypes.data, out.ctypes.data, out.size)
        return out

    def from_float(qtype, x: np.ndarray) -> np.ndarray:
        t = lib.ggml_get_type_traits(int(qtype)).contents
        x = np.ascontiguousarray(x, dtype=np.float32).ravel()
        out = np.zeros(x.size // t.blck_size * t.type_size, dtype=np.uint8)
        fn(t.from_float_ref)(x.ctypes.data, out.ctypes.data, x.size)
        return out

    return to_float, from_float


def main():
    out_dir = os.path.join(HERE, "quant")
    os.makedirs(out_dir, exist_ok=True)
    c = ggml_c()
    print("ggml's C library:", LIB if c else "absent (numpy only)")
    for i, (name, qtype) in enumerate(TYPES.items()):
        rng = np.random.default_rng(1000 + i)
        blocks = random_blocks(name, rng)
        values = quants.dequantize(blocks, qtype).astype(np.float32).ravel()
        assert np.all(np.isfinite(values))
        if c:
            assert np.array_equal(c[0](qtype, blocks).view(np.uint32), values.view(np.uint32)), name
        blocks.tofile(os.path.join(out_dir, name + ".blocks"))
        values.astype("<f4").tofile(os.path.join(out_dir, name + ".f32"))
        if name in QUANTIZED:
            x = quant_inputs(rng)
            with np.errstate(over="ignore"):  # -1e30's block: its scale is Inf in F16, as in C
                stored = quants.quantize(x, qtype).ravel()
            if c:
                assert np.array_equal(c[1](qtype, x), stored), name
            x.astype("<f4").tofile(os.path.join(out_dir, name + ".input"))
            stored.tofile(os.path.join(out_dir, name + ".stored"))
        print(name, blocks.shape[0], "blocks", "+ quantized" if name in QUANTIZED else "")


if __name__ == "__main__":
    main()
