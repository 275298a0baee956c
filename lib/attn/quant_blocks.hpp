#pragma once
// ggml's quantized blocks (ggml/src/ggml-common.h), read in place from GGUF files: Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL (32 weights a block), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (256).
// Widening is exactly ggml's dequantize_row_* (ggml/src/ggml-quants.c): the same operations in
// the same order on the same floats, so every weight has the bits llama.cpp's reference and
// gguf-py's numpy dequantization give it (tests/golden/make_quant.py). Storing is ggml's
// quantize_row_*_ref, for Q8_0 and Q4_0 (seeded weights); the others have none here.
//
// Where rounding happens: every product below is exact. A scale is an F16 (11 significant bits);
// Q8_0's qs * d has at most 11 + 7 bits, Q4_0's (q - 8) * d 11 + 4, Q4_1's and Q5_*'s q * d
// 11 + 5; the K-quants' d * sc and dmin * m at most 11 + 6, and (d * sc) * q at most 17 + 5
// (Q2_K 15 + 2, Q3_K 17 + 3); Q6_K's (d * sc) * q at most 11 + 7 + 5 = 23 bits (|sc| <= 128,
// |q| <= 32, the powers of two adding no bits); IQ4_NL's d * v 11 + 7 and IQ4_XS's
// (d * (ls - 32)) * v at most 11 + 5 + 7 = 23 (|v| <= 127): all under F32's 24, so the order of
// two products does not change a bit either (and no product of an F16, normal as an F32, falls
// under F32's normal range). The one rounding is a sum of exact terms: Q4_1's and Q5_1's q * d + m,
// Q2_K's, Q4_K's and Q5_K's d1 * q - m1: a fused multiply-add rounds it the same way, so no
// -ffp-contract setting changes a widened weight. Only the quantizers (storing) round
// products before adding, and keep the product apart (rounded()).
//
// Widening is written as plain loops over a block (ATTN_SIMD: OpenMP's simd where the file is
// compiled with -fopenmp-simd, ATTN_OMP_SIMD, or OpenMP) so that each kernel set's widening
// (define_kernels.hpp) vectorizes them for its instruction set, with the same bits as here.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attn/halves.hpp"

#if defined(_OPENMP) || defined(ATTN_OMP_SIMD)
#define ATTN_SIMD _Pragma("omp simd")
#else
#define ATTN_SIMD
#endif

namespace attn::quant {

inline std::uint16_t le16(const std::uint8_t* p) {
  return std::uint16_t(p[0] | (p[1] << 8));
}
inline void put_le16(std::uint8_t* p, std::uint16_t v) {
  p[0] = std::uint8_t(v);
  p[1] = std::uint8_t(v >> 8);
}
// An F16 field is NaN or Inf.
inline bool non_finite16(const std::uint8_t* p) {
  return (le16(p) & 0x7C00u) == 0x7C00u;
}
// Bytes 0..3 as ggml's memcpy of a uint32_t reads them on a little-endian machine.
inline std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
         std::uint32_t(p[3]) << 24;
}

// v rounded to F32 on its own: never fused into the addition that follows (the quantizers add
// 8.5 to a rounded product, as ggml's C and gguf-py's numpy do).
inline float rounded(float v) {
#if defined(__x86_64__) && defined(__GNUC__)
  asm("" : "+x"(v));
#else
  volatile float r = v;
  v = r;
#endif
  return v;
}

// ---- Q8_0: 32 weights, 34 bytes: f16 d, int8 qs[32]; weight j = qs[j] * d.
struct Q8_0 {
  static constexpr std::int64_t kBlock = 32, kBytes = 34;
  static constexpr int kScaleAt = 0, kMinAt = -1;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b));
    const auto* qs = reinterpret_cast<const std::int8_t*>(b + 2);
    ATTN_SIMD
    for (int j = 0; j < 32; ++j) y[j] = float(qs[j]) * d;
  }
  // quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (half away from zero).
  static void store(const float* x, std::uint8_t* b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_le16(b, f32_to_f16(d));
    for (int j = 0; j < 32; ++j) b[2 + j] = std::uint8_t(std::int8_t(std::roundf(x[j] * id)));
  }
};

// ---- Q4_0: 32 weights, 18 bytes: f16 d, uint8 qs[16]; the low nibbles are weights 0..15, the
// high ones 16..31; weight = (q - 8) * d.
struct Q4_0 {
  static constexpr std::int64_t kBlock = 32, kBytes = 18;
  static constexpr int kScaleAt = 0, kMinAt = -1;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b));
    const std::uint8_t* qs = b + 2;
    ATTN_SIMD
    for (int j = 0; j < 16; ++j) {
      y[j] = float((qs[j] & 0x0F) - 8) * d;
      y[j + 16] = float((qs[j] >> 4) - 8) * d;
    }
  }
  // quantize_row_q4_0_ref: d = max / -8 with max the first value of the largest magnitude,
  // q = min(15, trunc(x / d + 8.5)).
  static void store(const float* x, std::uint8_t* b) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_le16(b, f32_to_f16(d));
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, int(std::int8_t(rounded(x[j] * id) + 8.5f)));
      const int hi = std::min(15, int(std::int8_t(rounded(x[j + 16] * id) + 8.5f)));
      b[2 + j] = std::uint8_t(lo | (hi << 4));
    }
  }
};

// The K-quants' 8 six-bit scales and mins packed in 12 bytes (get_scale_min_k4): j < 4 in the
// low 6 bits of bytes j and j + 4; j >= 4 in the nibbles of byte j + 4 with the top 2 bits of
// bytes j - 4 and j.
inline void scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = std::uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = std::uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Sub-blocks is and is + 1 of a Q4_K or Q5_K block b (f16 d, f16 dmin, scales[12] first): their
// scales d * sc and mins dmin * m, as ggml's dequantize_row_q4_K and _q5_K compute them.
struct KPairScales {
  float d1, m1, d2, m2;
};
inline KPairScales k_pair_scales(const std::uint8_t* b, int is) {
  const float d = f16_to_f32(le16(b)), min = f16_to_f32(le16(b + 2));
  std::uint8_t sc, m;
  scale_min_k4(is, b + 4, sc, m);
  const float d1 = d * float(sc), m1 = min * float(m);
  scale_min_k4(is + 1, b + 4, sc, m);
  return {d1, m1, d * float(sc), min * float(m)};
}

// ---- Q4_K: 256 weights, 144 bytes: f16 d, f16 dmin, scales[12], qs[128]. 8 sub-blocks of 32,
// each with a 6-bit scale sc and min m: weight = (d * sc) * q - dmin * m, q a nibble; each 32
// bytes of qs hold two sub-blocks, the low nibbles the first.
struct Q4_K {
  static constexpr std::int64_t kBlock = 256, kBytes = 144;
  static constexpr int kScaleAt = 0, kMinAt = 2;
  static void widen(const std::uint8_t* b, float* y) {
    const std::uint8_t* q = b + 16;
    for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
      // Not a structured binding: clang 14 cannot capture one in an OpenMP region.
      const KPairScales k = k_pair_scales(b, is);
      ATTN_SIMD
      for (int l = 0; l < 32; ++l) {
        y[l] = k.d1 * float(q[l] & 0xF) - k.m1;
        y[l + 32] = k.d2 * float(q[l] >> 4) - k.m2;
      }
    }
  }
};

// ---- Q5_K: 256 weights, 176 bytes: f16 d, f16 dmin, scales[12], qh[32], qs[128]: Q4_K with a
// fifth bit per weight, sub-block s's in bit s of qh[l].
struct Q5_K {
  static constexpr std::int64_t kBlock = 256, kBytes = 176;
  static constexpr int kScaleAt = 0, kMinAt = 2;
  static void widen(const std::uint8_t* b, float* y) {
    const std::uint8_t* qh = b + 16;
    const std::uint8_t* ql = b + 48;
    for (int is = 0; is < 8; is += 2, ql += 32, y += 64) {
      // Not a structured binding: clang 14 cannot capture one in an OpenMP region.
      const KPairScales k = k_pair_scales(b, is);
      ATTN_SIMD
      for (int l = 0; l < 32; ++l) {
        y[l] = k.d1 * float((ql[l] & 0xF) + (((qh[l] >> is) & 1) << 4)) - k.m1;
        y[l + 32] = k.d2 * float((ql[l] >> 4) + (((qh[l] >> (is + 1)) & 1) << 4)) - k.m2;
      }
    }
  }
};

// ---- Q6_K: 256 weights, 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), int8
// scales[16] (one per 16 weights), f16 d; weight = (d * sc) * (q - 32). Each half of 128 weights
// takes 64 bytes of ql and 32 of qh: weights l, l + 32, l + 64, l + 96 from ql[l] and ql[l + 32]'s
// nibbles and qh[l]'s bit pairs.
struct Q6_K {
  static constexpr std::int64_t kBlock = 256, kBytes = 210;
  static constexpr int kScaleAt = 208, kMinAt = -1;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b + 208));
    const std::uint8_t* ql = b;
    const std::uint8_t* qh = b + 128;
    const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
    for (int n = 0; n < 2; ++n, ql += 64, qh += 32, sc += 8, y += 128)
      for (int h = 0; h < 2; ++h) {  // l in 0..15, then 16..31: one scale each
        const float s0 = d * float(sc[h]), s2 = d * float(sc[h + 2]);
        const float s4 = d * float(sc[h + 4]), s6 = d * float(sc[h + 6]);
        ATTN_SIMD
        for (int l = 16 * h; l < 16 * h + 16; ++l) {
          y[l] = s0 * float(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
          y[l + 32] = s2 * float(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
          y[l + 64] = s4 * float(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          y[l + 96] = s6 * float(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
      }
  }
};

// ---- Q4_1: 32 weights, 20 bytes: f16 d, f16 m, uint8 qs[16], nibbles as Q4_0's;
// weight = q * d + m.
struct Q4_1 {
  static constexpr std::int64_t kBlock = 32, kBytes = 20;
  static constexpr int kScaleAt = 0, kMinAt = 2;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b)), m = f16_to_f32(le16(b + 2));
    const std::uint8_t* qs = b + 4;
    ATTN_SIMD
    for (int j = 0; j < 16; ++j) {
      y[j] = float(qs[j] & 0x0F) * d + m;
      y[j + 16] = float(qs[j] >> 4) * d + m;
    }
  }
};

// A Q5_0 or Q5_1 block's 5-bit quants: nibbles as Q4_0's, the fifth bit of weight j in bit j of
// the little-endian qh (bytes at `qh`), q[j] for j < 32.
[[gnu::always_inline]] inline void five_bit_quants(const std::uint8_t* qh_at,
                                                   const std::uint8_t* qs, int* q) {
  const std::uint32_t qh = le32(qh_at);
  ATTN_SIMD
  for (int j = 0; j < 16; ++j) {
    q[j] = int((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10));
    q[j + 16] = int((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
  }
}

// ---- Q5_0: 32 weights, 22 bytes: f16 d, qh[4], qs[16]; weight = (q - 16) * d.
struct Q5_0 {
  static constexpr std::int64_t kBlock = 32, kBytes = 22;
  static constexpr int kScaleAt = 0, kMinAt = -1;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b));
    int q[32];
    five_bit_quants(b + 2, b + 6, q);
    ATTN_SIMD
    for (int j = 0; j < 32; ++j) y[j] = float(q[j] - 16) * d;
  }
};

// ---- Q5_1: 32 weights, 24 bytes: f16 d, f16 m, qh[4], qs[16]; weight = q * d + m.
struct Q5_1 {
  static constexpr std::int64_t kBlock = 32, kBytes = 24;
  static constexpr int kScaleAt = 0, kMinAt = 2;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b)), m = f16_to_f32(le16(b + 2));
    int q[32];
    five_bit_quants(b + 4, b + 8, q);
    ATTN_SIMD
    for (int j = 0; j < 32; ++j) y[j] = float(q[j]) * d + m;
  }
};

// ---- Q2_K: 256 weights, 84 bytes: scales[16] (a 4-bit scale low, a 4-bit min high, one per 16
// weights), qs[64] (2 bits a weight), f16 d, f16 dmin; weight = (d * sc) * q - dmin * m. Each
// half of 128 weights takes 32 bytes of qs: its bit pair j (j = 0..3) holds weights 32 j ..
// 32 j + 31, bytes 0..15 the first 16 of them (scale 2 j) and bytes 16..31 the others.
struct Q2_K {
  static constexpr std::int64_t kBlock = 256, kBytes = 84;
  static constexpr int kScaleAt = 80, kMinAt = 82;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b + 80)), min = f16_to_f32(le16(b + 82));
    const std::uint8_t* q = b + 16;
    for (int is = 0; is < 16; ++is, y += 16) {  // 16 weights a scale
      const std::uint8_t sc = b[is];
      const float dl = d * float(sc & 0xF), ml = min * float(sc >> 4);
      const std::uint8_t* ql = q + 32 * (is / 8) + 16 * (is % 2);
      const int shift = 2 * (is % 8 / 2);
      ATTN_SIMD
      for (int l = 0; l < 16; ++l) y[l] = dl * float((ql[l] >> shift) & 3) - ml;
    }
  }
};

// ---- Q3_K: 256 weights, 110 bytes: hmask[32] (the third bit), qs[64] (the low 2 bits, laid out
// as Q2_K's), scales[12] (16 six-bit scales), f16 d; weight = (d * (sc - 32)) * (q - 4), q's third
// bit that of weight 32 j + l in bit j of hmask[l]. Scale i's low 4 bits are the low (i < 8) or
// high nibble of scales[i % 8], its top 2 bits bits 2 (i / 4) of scales[8 + i % 4].
struct Q3_K {
  static constexpr std::int64_t kBlock = 256, kBytes = 110;
  static constexpr int kScaleAt = 108, kMinAt = -1;
  static int scale(const std::uint8_t* s, int i) {
    return ((s[i % 8] >> (4 * (i / 8))) & 0xF) | (((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4);
  }
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b + 108));
    const std::uint8_t* hm = b;
    for (int is = 0; is < 16; ++is, y += 16) {
      const float dl = d * float(scale(b + 96, is) - 32);
      const int j = is / 2;  // the 32-weight group: bit j of hmask, bit pair j % 4 of qs
      const std::uint8_t* ql = b + 32 + 32 * (j / 4);
      const int l0 = 16 * (is % 2), shift = 2 * (j % 4);
      ATTN_SIMD
      for (int l = l0; l < l0 + 16; ++l)
        y[l - l0] = dl * float(((ql[l] >> shift) & 3) - ((hm[l] >> j) & 1 ? 0 : 4));
    }
  }
};

// IQ4_NL's and IQ4_XS's 16 non-linear levels (ggml-common.h's kvalues_iq4nl).
inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// ---- IQ4_NL: 32 weights, 18 bytes: f16 d, qs[16], nibbles as Q4_0's;
// weight = d * kIq4nlValues[q].
struct IQ4_NL {
  static constexpr std::int64_t kBlock = 32, kBytes = 18;
  static constexpr int kScaleAt = 0, kMinAt = -1;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b));
    const std::uint8_t* qs = b + 2;
    ATTN_SIMD
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float(kIq4nlValues[qs[j] & 0xF]);
      y[j + 16] = d * float(kIq4nlValues[qs[j] >> 4]);
    }
  }
};

// ---- IQ4_XS: 256 weights, 136 bytes: f16 d, scales_h (u16), scales_l[4], qs[128]; 8
// sub-blocks of 32 as IQ4_NL's, each with a 6-bit scale ls (low nibble in scales_l, high 2 bits
// in scales_h): weight = (d * (ls - 32)) * kIq4nlValues[q].
struct IQ4_XS {
  static constexpr std::int64_t kBlock = 256, kBytes = 136;
  static constexpr int kScaleAt = 0, kMinAt = -1;
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b));
    const std::uint16_t sh = le16(b + 2);
    const std::uint8_t* qs = b + 8;
    for (int ib = 0; ib < 8; ++ib, y += 32, qs += 16) {
      const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
      const float dl = d * float(ls - 32);
      ATTN_SIMD
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * float(kIq4nlValues[qs[j] & 0xF]);
        y[j + 16] = dl * float(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
};

// A block's F16 scales (d, and the min where it has one) are finite: a block's only NaN or Inf.
template <typename B>
bool finite_block(const std::uint8_t* b) {
  return !non_finite16(b + B::kScaleAt) && (B::kMinAt < 0 || !non_finite16(b + B::kMinAt));
}

// n weights (whole blocks of B) widened, a block at a time.
template <typename B>
void widen_row(const void* p, std::int64_t n, float* out) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  for (std::int64_t i = 0; i < n / B::kBlock; ++i) B::widen(b + i * B::kBytes, out + i * B::kBlock);
}

template <typename B>
void store_row(const float* x, std::int64_t n, void* out) {
  auto* b = static_cast<std::uint8_t*>(out);
  for (std::int64_t i = 0; i < n / B::kBlock; ++i) B::store(x + i * B::kBlock, b + i * B::kBytes);
}

// The first weight of the first block whose scale is NaN or Inf, or -1.
template <typename B>
std::int64_t first_non_finite_row(const void* p, std::int64_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  for (std::int64_t i = 0; i < n / B::kBlock; ++i)
    if (!finite_block<B>(b + i * B::kBytes)) return i * B::kBlock;
  return -1;
}

}  // namespace attn::quant
