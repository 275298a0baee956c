#!/usr/bin/python3
"""Fixtures for --compute q8 (lib/attn/kernels/detail/q8_dot.hpp): llama.cpp's reference
quantizers for the activations and its reference dot products, in numpy.

Run:  /usr/bin/python3 tests/golden/make_q8_dot.py   (deterministic; byte-identical reruns)
Written from ggml/src/ggml-quants.c (llama.cpp 3.22.1): quantize_row_q8_0_ref (d = amax / 127
in F32, kept as an F16; q = roundf(x * (1 / d)), half away from zero), quantize_row_q8_K_ref
(the first value of largest magnitude max, iscale = -127 / max in F32, q = min(127,
nearest_int(iscale * x)) rounding half to even, d = 1 / iscale, 16-sums), and the dot products of
ggml_vec_dot_q8_0_q8_0, ggml_vec_dot_q4_K_q8_K and ggml_vec_dot_q6_K_q8_K's generic C: each
block's integer sums exact, times the F32 product of the two scales (as the C rounds it), summed
in float64 here.

Writes tests/golden/q8_dot/, raw little-endian files, M = 36 rows of x for each K:
  x_<K>.f32            x [M, K]: draws of many magnitudes, a zero block, a block of ties (127
                       and halves: roundf and nearest-even part ways), a block whose value of
                       largest magnitude is negative
  q8_0_<K>.qs/.d       x quantized as Q8_0: int8 [M, K], the F16 scale's value as F32 [M, K/32]
  q8_k_<K>.qs/.d/.sums x quantized as Q8_K (K a multiple of 256): int8, F32 d, int16 16-sums
  <type>_<K>.blocks    N = 13 rows of weight blocks (type q8_0, q4_k, q6_k): every quant byte
                       drawn (Q8_0's include -128), small F16 scales
  <type>_<K>.y         float64 [M, N]: y[m, n] = w[n] . x[m] by the reference dot product
  <type>_<K>.bound     float64 [M, N]: the sum of the magnitudes of the terms the kernels add
                       (each weight's |scale * q| and its min's or offset's share, times |x|'s
                       quantized value): the F32 accumulation's error is a small multiple of
                       2^-24 of it
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "q8_dot")
M, N = 36, 13
KS = [32, 96, 256, 768]
F32 = np.float32


def f16_bits(v):
    return np.asarray(v, dtype=np.float16).view(np.uint16)


def draw_x(rng, K):
    x = (rng.standard_normal((M, K)) * np.exp(rng.uniform(-6, 6, (M, 1)))).astype(F32)
    x[1, :32] = 0.0  # a zero Q8_0 block
    if K >= 256:
        x[2, :256] = 0.0  # a zero Q8_K block
    ties = np.array([127.0] + [k + 0.5 for k in range(-31, 30)], dtype=F32)
    x[3, : min(K, 32)] = ties[: min(K, 32)]  # Q8_0: d = 1, id = 1: the halves are ties
    x[4, : min(K, 32)] = -ties[: min(K, 32)][::-1]
    x[5, 7] = -2 * np.abs(x[5]).max()  # the largest magnitude negative
    if K >= 256:
        x[6, :64] = ties[np.arange(64) % len(ties)]  # Q8_K: max 127, iscale -1: ties again
        x[6, 64:256] = np.clip(x[6, 64:256], -1, 1)
    return x


def quantize_q8_0(x):
    b = x.reshape(M, -1, 32)
    amax = np.abs(b).max(axis=2)
    d = (amax / F32(127)).astype(F32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, F32(1) / d, F32(0)).astype(F32)
    x0 = (b * inv[..., None]).astype(F32).astype(np.float64)
    q = np.trunc(x0 + np.copysign(0.5, x0)).astype(np.int8)  # roundf
    dh = d.astype(np.float16).astype(F32)
    return q.reshape(M, -1), dh


def quantize_q8_k(x):
    b = x.reshape(M, -1, 256)
    q = np.zeros(b.shape, dtype=np.int8)
    d = np.zeros(b.shape[:2], dtype=F32)
    for m in range(b.shape[0]):
        for i in range(b.shape[1]):
            v = b[m, i]
            ax = np.abs(v)
            if ax.max() == 0:
                continue
            mx = v[int(np.argmax(ax))]  # the first of largest magnitude
            iscale = F32(-127) / mx
            r = np.rint((iscale * v).astype(F32))  # nearest_int: half to even
            q[m, i] = np.minimum(127, r).astype(np.int8)
            d[m, i] = F32(1) / iscale
    sums = q.reshape(M, -1, 16).astype(np.int64).sum(axis=2).astype(np.int16)
    return q.reshape(M, -1), d, sums


def f16_scales(rng, n):
    """Small finite F16 scales of both signs (the products stay far from overflow)."""
    return f16_bits((rng.uniform(0.5, 2.0, n) * 2.0 ** rng.integers(-14, -4, n) *
                     rng.choice([-1, 1], n)).astype(np.float16))


def draw_blocks(rng, typ, K):
    size = {"q8_0": 34, "q4_k": 144, "q6_k": 210}[typ]
    blk = {"q8_0": 32, "q4_k": 256, "q6_k": 256}[typ]
    nb = K // blk
    w = rng.integers(0, 256, (N, nb, size), dtype=np.uint8)
    at = {"q8_0": [0], "q4_k": [0, 2], "q6_k": [208]}[typ]
    for a in at:
        s = f16_scales(rng, N * nb).reshape(N, nb)
        w[:, :, a] = s & 0xFF
        w[:, :, a + 1] = s >> 8
    if typ == "q8_0":
        w[0, 0, 2:34] = np.arange(-128, -96).astype(np.int8).view(np.uint8)  # -128 included
    return w


def f16(lo, hi):
    return (lo.astype(np.uint16) | (hi.astype(np.uint16) << 8)).view(np.float16).astype(F32)


def scale_min_k4(sc):
    """get_scale_min_k4 for j = 0..7 over scales [..., 12] -> (sc [..., 8], m [..., 8])."""
    s = sc.astype(np.int64)
    scales = np.zeros(sc.shape[:-1] + (8,), np.int64)
    mins = np.zeros_like(scales)
    for j in range(8):
        if j < 4:
            scales[..., j] = s[..., j] & 63
            mins[..., j] = s[..., j + 4] & 63
        else:
            scales[..., j] = (s[..., j + 4] & 0xF) | ((s[..., j - 4] >> 6) << 4)
            mins[..., j] = (s[..., j + 4] >> 4) | ((s[..., j] >> 6) << 4)
    return scales, mins


def dot_q8_0(w, qx, dx):
    wq = w[:, :, 2:].view(np.int8).astype(np.int64)  # [N, nb, 32]
    dw = f16(w[:, :, 0], w[:, :, 1])  # [N, nb]
    xq = qx.reshape(M, -1, 32).astype(np.int64)  # [M, nb, 32]
    sumi = np.einsum("nbk,mbk->mnb", wq, xq)
    scale = (dw[None, :, :] * dx[:, None, :]).astype(F32).astype(np.float64)
    y = (sumi * scale).sum(axis=2)
    bound = (np.einsum("nbk,mbk->mnb", np.abs(wq), np.abs(xq)) * np.abs(scale)).sum(axis=2)
    return y, bound


def dot_q4_k(w, qx, dx, sums):
    d = f16(w[:, :, 0], w[:, :, 1])
    dmin = f16(w[:, :, 2], w[:, :, 3])
    sc, mn = scale_min_k4(w[:, :, 4:16])  # [N, nb, 8]
    qs = w[:, :, 16:144].reshape(N, -1, 4, 32).astype(np.int64)
    # weights 64j..64j+31: low nibbles of qs[32j..], 64j+32..64j+63: the high ones
    q = np.concatenate([qs & 0xF, qs >> 4], axis=3).reshape(N, -1, 8, 32)
    xq = qx.reshape(M, -1, 8, 32).astype(np.int64)
    dots = np.einsum("nbjk,mbjk->mnbj", q, xq)
    isum = (dots * sc[None]).sum(axis=3)
    s32 = sums.reshape(M, -1, 8, 2).astype(np.int64).sum(axis=3)  # [M, nb, 8]
    msum = np.einsum("nbj,mbj->mnb", mn, s32)
    dd = (d[None] * dx[:, None, :]).astype(F32).astype(np.float64)
    dm = (dmin[None] * dx[:, None, :]).astype(F32).astype(np.float64)
    y = (dd * isum - dm * msum).sum(axis=2)
    ax = np.abs(xq)
    mag = np.einsum("nbjk,mbjk->mnbj", q, ax)
    bound = (dd.__abs__() * (mag * sc[None]).sum(axis=3) +
             dm.__abs__() * np.einsum("nbj,mbj->mnb", mn, ax.sum(axis=3))).sum(axis=2)
    return y, bound


def dot_q6_k(w, qx, dx):
    ql = w[:, :, 0:128].astype(np.int64)
    qh = w[:, :, 128:192].astype(np.int64)
    sc = w[:, :, 192:208].view(np.int8).astype(np.int64)  # [N, nb, 16]
    d = f16(w[:, :, 208], w[:, :, 209])
    nb = w.shape[1]
    q = np.zeros((N, nb, 256), np.int64)
    for n in range(2):
        l = ql[:, :, 64 * n: 64 * n + 64]
        h = qh[:, :, 32 * n: 32 * n + 32]
        base = 128 * n
        q[:, :, base + 0: base + 32] = (l[:, :, :32] & 0xF) | (((h >> 0) & 3) << 4)
        q[:, :, base + 32: base + 64] = (l[:, :, 32:] & 0xF) | (((h >> 2) & 3) << 4)
        q[:, :, base + 64: base + 96] = (l[:, :, :32] >> 4) | (((h >> 4) & 3) << 4)
        q[:, :, base + 96: base + 128] = (l[:, :, 32:] >> 4) | (((h >> 6) & 3) << 4)
    q = (q - 32).reshape(N, nb, 16, 16)
    xq = qx.reshape(M, nb, 16, 16).astype(np.int64)
    isum = (np.einsum("nbgk,mbgk->mnbg", q, xq) * sc[None]).sum(axis=3)
    dd = (d[None] * dx[:, None, :]).astype(F32).astype(np.float64)
    y = (dd * isum).sum(axis=2)
    mag = (np.einsum("nbgk,mbgk->mnbg", q + 64, np.abs(xq)) * np.abs(sc)[None]).sum(axis=3)
    bound = (np.abs(dd) * mag).sum(axis=2)  # |q - 32| <= q + 32 = (q - 32) + 64
    return y, bound


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(8)

    def put(name, a):
        np.ascontiguousarray(a).tofile(os.path.join(OUT, name))

    for K in KS:
        x = draw_x(rng, K)
        put(f"x_{K}.f32", x)
        q0, d0 = quantize_q8_0(x)
        put(f"q8_0_{K}.qs", q0)
        put(f"q8_0_{K}.d", d0)
        w = draw_blocks(rng, "q8_0", K)
        y, bound = dot_q8_0(w, q0, d0)
        put(f"q8_0_{K}.blocks", w)
        put(f"q8_0_{K}.y", y)
        put(f"q8_0_{K}.bound", bound)
        if K % 256:
            continue
        qk, dk, sk = quantize_q8_k(x)
        put(f"q8_k_{K}.qs", qk)
        put(f"q8_k_{K}.d", dk)
        put(f"q8_k_{K}.sums", sk)
        for typ in ["q4_k", "q6_k"]:
            w = draw_blocks(rng, typ, K)
            y, bound = dot_q4_k(w, qk, dk, sk) if typ == "q4_k" else dot_q6_k(w, qk, dk)
            put(f"{typ}_{K}.blocks", w)
            put(f"{typ}_{K}.y", y)
            put(f"{typ}_{K}.bound", bound)


if __name__ == "__main__":
    main()
