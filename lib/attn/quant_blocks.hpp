#pragma once
// ggml's quantized blocks (ggml/src/ggml-common.h), read in place from GGUF files: Q8_0, Q4_0,
// Q4_K, Q5_K and Q6_K. Widening is exactly ggml's dequantize_row_* (ggml/src/ggml-quants.c): the
// same operations in the same order on the same floats, so every weight has the bits llama.cpp's
// reference and gguf-py's numpy dequantization give it (tests/golden/make_quant.py). Storing is
// ggml's quantize_row_*_ref, for Q8_0 and Q4_0 (seeded weights); the K-quants have none here.
//
// Where rounding happens: every product below is exact. A scale is an F16 (11 significant bits);
// Q8_0's qs * d has at most 11 + 7 bits, Q4_0's (q - 8) * d 11 + 4; Q4_K's and Q5_K's d * sc and
// dmin * m 11 + 6, and (d * sc) * q at most 17 + 5; Q6_K's (d * sc) * q at most 11 + 7 + 5 = 23
// bits (|sc| <= 128, |q| <= 32, the powers of two adding no bits): under F32's 24, so the order of
// Q6_K's two products does not change a bit either. The one rounding is Q4_K's and Q5_K's
// d1 * q - m1, one subtraction of exact terms: a fused multiply-subtract rounds it the same way,
// so no -ffp-contract setting changes a widened weight. Only the quantizers (storing) round
// products before adding, and keep the product apart (rounded()).
//
// Widening is written as plain loops over a block (ATTN_SIMD: OpenMP's simd where the file is
// compiled with OpenMP) so that each kernel set's widening (define_kernels.hpp) vectorizes them
// for its instruction set, with the same bits as here.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attn/halves.hpp"

#if defined(_OPENMP)
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
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b));
    const auto* qs = reinterpret_cast<const std::int8_t*>(b + 2);
    ATTN_SIMD
    for (int j = 0; j < 32; ++j) y[j] = float(qs[j]) * d;
  }
  static bool finite(const std::uint8_t* b) { return !non_finite16(b); }
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
  static void widen(const std::uint8_t* b, float* y) {
    const float d = f16_to_f32(le16(b));
    const std::uint8_t* qs = b + 2;
    ATTN_SIMD
    for (int j = 0; j < 16; ++j) {
      y[j] = float((qs[j] & 0x0F) - 8) * d;
      y[j + 16] = float((qs[j] >> 4) - 8) * d;
    }
  }
  static bool finite(const std::uint8_t* b) { return !non_finite16(b); }
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
  static bool finite(const std::uint8_t* b) { return !non_finite16(b) && !non_finite16(b + 2); }
};

// ---- Q5_K: 256 weights, 176 bytes: f16 d, f16 dmin, scales[12], qh[32], qs[128]: Q4_K with a
// fifth bit per weight, sub-block s's in bit s of qh[l].
struct Q5_K {
  static constexpr std::int64_t kBlock = 256, kBytes = 176;
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
  static bool finite(const std::uint8_t* b) { return !non_finite16(b) && !non_finite16(b + 2); }
};

// ---- Q6_K: 256 weights, 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), int8
// scales[16] (one per 16 weights), f16 d; weight = (d * sc) * (q - 32). Each half of 128 weights
// takes 64 bytes of ql and 32 of qh: weights l, l + 32, l + 64, l + 96 from ql[l] and ql[l + 32]'s
// nibbles and qh[l]'s bit pairs.
struct Q6_K {
  static constexpr std::int64_t kBlock = 256, kBytes = 210;
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
  static bool finite(const std::uint8_t* b) { return !non_finite16(b + 208); }
};

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
    if (!B::finite(b + i * B::kBytes)) return i * B::kBlock;
  return -1;
}

}  // namespace attn::quant
