#include "attn/kernels/detail/q8_dot.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/kernels.hpp"
#include "attn/kernels/matmul.hpp"

namespace attn {

bool q8_weights(WeightType type) {
  return type == WeightType::q8_0 || type == WeightType::q4_k || type == WeightType::q6_k;
}

std::int64_t q8_row_bytes(WeightType type, std::int64_t K) {
  if (type == WeightType::q8_0) return K + 4 * (K / 32);
  return K + 4 * (K / 256) + 2 * (K / 16);
}

std::int64_t q8_offset(WeightType type, std::int64_t M, std::int64_t K) {
  if (type == WeightType::q8_0 || K % 32 != 0) return 0;
  return round_up(M * q8_row_bytes(WeightType::q8_0, K), 64);
}

std::int64_t q8_input_bytes(std::int64_t M, std::int64_t K) {
  const std::int64_t k = K % 256 == 0 ? M * q8_row_bytes(WeightType::q4_k, K) : 0;
  return q8_offset(WeightType::q4_k, M, K) + k;
}

#if defined(__x86_64__)

bool has_q8_dot() {
  return cpu_features().avx512_vnni;
}

namespace {

#define ATTN_Q8 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))

// Every lane: the masked forms avoid GCC 12's -Wmaybe-uninitialized on the plain intrinsics'
// undefined source (as vec.hpp).
constexpr __mmask16 kAll = 0xFFFF;
constexpr __mmask8 kAll8 = 0xFF;

// The 16 lanes summed by one fixed tree: the halves, the quarters, the pairs, the lanes.
struct Add {
  ATTN_Q8 __m512 operator()(__m512 a, __m512 b) const { return _mm512_add_ps(a, b); }
};
struct Max {
  ATTN_Q8 __m512 operator()(__m512 a, __m512 b) const { return _mm512_maskz_max_ps(kAll, a, b); }
};

template <typename Op>
ATTN_Q8 inline float reduce(__m512 v) {
  v = Op{}(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0x4E));
  v = Op{}(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0xB1));
  v = Op{}(v, _mm512_maskz_permute_ps(kAll, v, 0x4E));
  v = Op{}(v, _mm512_maskz_permute_ps(kAll, v, 0xB1));
  return _mm512_cvtss_f32(v);
}

ATTN_Q8 inline float reduce_add(__m512 v) {
  return reduce<Add>(v);
}

ATTN_Q8 inline float reduce_max(__m512 v) {
  return reduce<Max>(v);
}

// The low half, the high one zero.
ATTN_Q8 inline __m512i zext(__m256i v) {
  return _mm512_maskz_broadcast_i64x4(0x0F, v);
}

ATTN_Q8 inline int reduce_add_i(__m512i v) {
  alignas(64) std::int32_t l[16];
  _mm512_store_si512(l, v);
  int s = 0;
  for (const std::int32_t e : l) s += e;
  return s;
}

// ---- x quantized (llama.cpp's reference quantizers, vectorized with the same roundings).

// quantize_row_q8_0_ref: d = amax / 127, id = 1 / d (0 for a zero block), the F16 of d kept,
// q = roundf(x * id) (half away from zero), stored as q + 128 (vpdpbusd's unsigned operand).
ATTN_Q8 void quantize_q8_0(const float* x, std::int64_t K, std::uint8_t* out) {
  const std::int64_t blocks = K / 32;
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const __m512 v[2] = {_mm512_loadu_ps(x + 32 * b), _mm512_loadu_ps(x + 32 * b + 16)};
    const float amax =
        reduce_max(_mm512_maskz_max_ps(kAll, _mm512_abs_ps(v[0]), _mm512_abs_ps(v[1])));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float dh = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(out + K + 4 * b, &dh, sizeof dh);
    for (int h = 0; h < 2; ++h) {
      const __m512 s = _mm512_mul_ps(v[h], _mm512_set1_ps(id));
      __m512 t = _mm512_maskz_roundscale_ps(kAll, s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(s, t)), half, _CMP_GE_OQ);
      const __m512 sign = _mm512_castsi512_ps(_mm512_or_si512(
          _mm512_castps_si512(one),
          _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32(int(0x80000000u)))));
      t = _mm512_mask_add_ps(t, up, t, sign);
      const __m512i q =
          _mm512_add_epi32(_mm512_maskz_cvttps_epi32(kAll, t), _mm512_set1_epi32(128));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * b + 16 * h),
                       _mm512_maskz_cvtepi32_epi8(kAll, q));
    }
  }
}

// quantize_row_q8_K_ref: max the first value of largest magnitude, iscale = -127 / max,
// q = min(127, nearest-even(iscale * x)), d = 1 / iscale, and the sums of each 16 quants; a zero
// block all zeros.
ATTN_Q8 void quantize_q8_k(const float* x, std::int64_t K, std::uint8_t* out) {
  const std::int64_t blocks = K / 256;
  auto* qs = reinterpret_cast<std::int8_t*>(out);
  std::uint8_t* ds = out + K;
  std::uint8_t* sums = out + K + 4 * blocks;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + 256 * b;
    __m512 mx = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i)
      mx = _mm512_maskz_max_ps(kAll, mx, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i)));
    const float amax = reduce_max(mx);
    std::int16_t bsums[16] = {};
    float d = 0.0f;
    if (amax == 0.0f) {
      std::memset(qs + 256 * b, 0, 256);
    } else {
      int first = 0;
      for (int i = 0; i < 16; ++i) {
        const __mmask16 at = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i)),
                                                _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (at) {
          first = 16 * i + __builtin_ctz(at);
          break;
        }
      }
      const float iscale = -127.0f / xb[first];
      for (int i = 0; i < 16; ++i) {
        const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(xb + 16 * i), _mm512_set1_ps(iscale));
        const __m512i q = _mm512_maskz_min_epi32(
            kAll,
            _mm512_maskz_cvtps_epi32(
                kAll,
                _mm512_maskz_roundscale_ps(kAll, s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
            _mm512_set1_epi32(127));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 256 * b + 16 * i),
                         _mm512_maskz_cvtepi32_epi8(kAll, q));
        bsums[i] = std::int16_t(reduce_add_i(q));
      }
      d = 1.0f / iscale;
    }
    std::memcpy(ds + 4 * b, &d, sizeof d);
    std::memcpy(sums + 32 * b, bsums, sizeof bsums);
  }
}

void quantize(WeightType type, const float* x, std::int64_t M, std::int64_t K, std::uint8_t* out) {
  const std::int64_t row = q8_row_bytes(type, K);
  for (std::int64_t m = 0; m < M; ++m)
    if (type == WeightType::q8_0)
      quantize_q8_0(x + m * K, K, out + m * row);
    else
      quantize_q8_k(x + m * K, K, out + m * row);
}

// ---- The weights' blocks, unpacked once for every row of x, and their products.

ATTN_Q8 inline float f16(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

ATTN_Q8 inline float f32(const std::uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

// 16 lanes: a in 0-7, b in 8-15.
ATTN_Q8 inline __m512 halves(float a, float b) {
  return _mm512_maskz_insertf32x8(kAll, _mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

// Q8_0: two blocks (64 weights) a step, the second absent past an odd count. vpdpbusd wants an
// unsigned operand: x is stored as q + 128, and the weights' own sum times 128 starts the sum
// (neg), so it is the signed sum exactly (the weights may be -128: no sign trick needed).
struct Q80 {
  static constexpr std::int64_t kBlock = 32, kBytes = 34;
  static constexpr WeightType kType = WeightType::q8_0;
  static constexpr int kRows = 4;  // weight rows unpacked at a time for a batch (registers: 3 each)
  struct U {
    __m512i w, neg;
    __m512 d;
  };
  struct X {
    __m512i q;
    __m512 d;
  };
  static std::int64_t steps(std::int64_t blocks) { return (blocks + 1) / 2; }
  [[gnu::always_inline]] ATTN_Q8 static void unpack(const std::uint8_t* row, std::int64_t s,
                                                    std::int64_t blocks, U& u) {
    const std::uint8_t* p = row + 2 * s * kBytes;
    const bool two = 2 * s + 1 < blocks;
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kBytes + 2))
                           : _mm256_setzero_si256();
    u.w = _mm512_maskz_inserti64x4(kAll8, _mm512_maskz_broadcast_i64x4(kAll8, lo), hi, 1);
    const __m512i sum =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(char(0x80)), u.w);
    u.neg = _mm512_sub_epi32(_mm512_setzero_si512(), sum);
    u.d = halves(f16(p), two ? f16(p + kBytes) : 0.0f);
  }
  [[gnu::always_inline]] ATTN_Q8 static void load_x(const std::uint8_t* xr, std::int64_t s,
                                                    std::int64_t blocks, std::int64_t K, X& x) {
    const bool two = 2 * s + 1 < blocks;
    const std::uint8_t* q = xr + 64 * s;
    x.q =
        two ? _mm512_loadu_si512(q) : zext(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
    const std::uint8_t* d = xr + K + 8 * s;
    x.d = halves(f32(d), two ? f32(d + 4) : 0.0f);
  }
  [[gnu::always_inline]] ATTN_Q8 static __m512 dot(const U& u, const X& x, __m512 acc) {
    const __m512i i = _mm512_dpbusd_epi32(u.neg, x.q, u.w);
    return _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, i), _mm512_mul_ps(u.d, x.d), acc);
  }
};

// x against the K-quants (Q8_K): 256 quants in k order, d, the 16-sums.
struct XK {
  __m512i q[4];
  __m256i sums;
  float d;
};

[[gnu::always_inline]] ATTN_Q8 inline void load_xk(const std::uint8_t* xr, std::int64_t b,
                                                   std::int64_t K, XK& x) {
  for (int j = 0; j < 4; ++j) x.q[j] = _mm512_loadu_si512(xr + 256 * b + 64 * j);
  x.d = f32(xr + K + 4 * b);
  x.sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + K + 4 * (K / 256) + 32 * b));
}

// Lane l of 32 16-bit lanes: table[l] (vpermw's indices).
alignas(64) constexpr std::int16_t kQ4Scales[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
     1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
     3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
     5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
     7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}};
alignas(32) constexpr std::int16_t kQ4Mins[16] = {8,  8,  9,  9,  10, 10, 11, 11,
                                                  12, 12, 13, 13, 14, 14, 15, 15};
alignas(64) constexpr std::int16_t kQ6Scales[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5,
     6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8,  8,  8,  8,  8,  8,  8,  8,  9,  9,  9,  9,  9,  9,  9,  9,
     10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13,
     14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

ATTN_Q8 inline __m512i table(const std::int16_t* t) {
  return _mm512_load_si512(t);
}

// 32 bytes at p in both halves of a zmm.
ATTN_Q8 inline __m512i both_halves(const std::uint8_t* p) {
  return _mm512_maskz_broadcast_i64x4(kAll8,
                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// 16-bit lanes shifted by a in the low half, b in the high one.
ATTN_Q8 inline __m512i shifts(short a, short b) {
  return _mm512_maskz_inserti64x4(kAll8, _mm512_set1_epi16(a), _mm256_set1_epi16(b), 1);
}

// Q4_K: 64 weights a zmm in k order (sub-blocks 2j and 2j + 1: the low, then the high nibbles of
// qs[32j..32j + 31]); the 6-bit scales as 16-bit lanes beside them (vpmaddubsw's pair sums times
// the scale by vpdpwssd), the mins against x's 16-sums.
struct Q4K {
  static constexpr std::int64_t kBlock = 256, kBytes = 144;
  static constexpr WeightType kType = WeightType::q4_k;
  static constexpr int kRows = 2;  // 9 registers each
  struct U {
    __m512i w[4], s[4];
    __m256i mins;
    float d, dmin;
  };
  using X = XK;
  static std::int64_t steps(std::int64_t blocks) { return blocks; }
  [[gnu::always_inline]] ATTN_Q8 static void unpack(const std::uint8_t* row, std::int64_t b,
                                                    std::int64_t, U& u) {
    const std::uint8_t* p = row + b * kBytes;
    u.d = f16(p);
    u.dmin = f16(p + 2);
    // get_scale_min_k4 for all eight at once (as ggml's kernels): sc0..7, then m0..7.
    std::uint32_t a[4];
    std::memcpy(a, p + 4, 12);
    constexpr std::uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    a[3] = ((a[2] >> 4) & k2) | (((a[1] >> 6) & k3) << 4);
    const std::uint32_t m = a[1] & k1;
    a[1] = (a[2] & k2) | (((a[0] >> 6) & k3) << 4);
    a[2] = m;
    a[0] &= k1;
    const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
    const __m512i sm5 = _mm512_maskz_broadcast_i64x4(kAll8, sm);
    const __m512i nib = _mm512_set1_epi8(0x0F), by = shifts(0, 4);
    for (int j = 0; j < 4; ++j) {
      u.s[j] = _mm512_permutexvar_epi16(table(kQ4Scales[j]), sm5);
      u.w[j] = _mm512_and_si512(_mm512_srlv_epi16(both_halves(p + 16 + 32 * j), by), nib);
    }
    u.mins =
        _mm256_permutexvar_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(kQ4Mins)), sm);
  }
  [[gnu::always_inline]] ATTN_Q8 static void load_x(const std::uint8_t* xr, std::int64_t b,
                                                    std::int64_t, std::int64_t K, X& x) {
    load_xk(xr, b, K, x);
  }
  [[gnu::always_inline]] ATTN_Q8 static __m512 dot(const U& u, const X& x, __m512 acc) {
    __m512i i = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j)
      i = _mm512_dpwssd_epi32(i, _mm512_maddubs_epi16(u.w[j], x.q[j]), u.s[j]);
    const __m256i mins = _mm256_madd_epi16(x.sums, u.mins);
    acc = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, i), _mm512_set1_ps(u.d * x.d), acc);
    return _mm512_mask3_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, zext(mins)),
                                 _mm512_set1_ps(-(u.dmin * x.d)), acc, 0x00FF);
  }
};

// Q6_K: in each half of 128 weights, the low nibbles of ql[0..63] with bits 0-1 / 2-3 of
// qh[0..31] (quarters 0, 1), then the high nibbles with bits 4-5 / 6-7 (quarters 2, 3): the
// unsigned q + 32; the 32 taken off as 32 times the scales against x's 16-sums.
struct Q6K {
  static constexpr std::int64_t kBlock = 256, kBytes = 210;
  static constexpr WeightType kType = WeightType::q6_k;
  static constexpr int kRows = 2;
  struct U {
    __m512i w[4], s[4];
    __m256i sc;
    float d;
  };
  using X = XK;
  static std::int64_t steps(std::int64_t blocks) { return blocks; }
  [[gnu::always_inline]] ATTN_Q8 static void unpack(const std::uint8_t* row, std::int64_t b,
                                                    std::int64_t, U& u) {
    const std::uint8_t* p = row + b * kBytes;
    u.d = f16(p + 208);
    u.sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    const __m512i sc5 = _mm512_maskz_broadcast_i64x4(kAll8, u.sc);
    for (int j = 0; j < 4; ++j) u.s[j] = _mm512_permutexvar_epi16(table(kQ6Scales[j]), sc5);
    const __m512i nib = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
    const __m512i low_quarters = shifts(4, 2), high_quarters = shifts(0, 2);
    for (int n = 0; n < 2; ++n) {
      const __m512i l = _mm512_loadu_si512(p + 64 * n);
      const __m512i h = both_halves(p + 128 + 32 * n);
      u.w[2 * n] = _mm512_or_si512(_mm512_and_si512(l, nib),
                                   _mm512_and_si512(_mm512_sllv_epi16(h, low_quarters), top));
      u.w[2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), nib),
                                       _mm512_and_si512(_mm512_srlv_epi16(h, high_quarters), top));
    }
  }
  [[gnu::always_inline]] ATTN_Q8 static void load_x(const std::uint8_t* xr, std::int64_t b,
                                                    std::int64_t, std::int64_t K, X& x) {
    load_xk(xr, b, K, x);
  }
  [[gnu::always_inline]] ATTN_Q8 static __m512 dot(const U& u, const X& x, __m512 acc) {
    __m512i i = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j)
      i = _mm512_dpwssd_epi32(i, _mm512_maddubs_epi16(u.w[j], x.q[j]), u.s[j]);
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(x.sums, u.sc), 5);
    i = _mm512_sub_epi32(i, zext(off));
    return _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, i), _mm512_set1_ps(u.d * x.d), acc);
  }
};

// R rows of w against the M rows of x: y[m * ldy + r] (=|+=). Each step's blocks of the R rows
// unpacked once, then every row of x dotted with them; the accumulators [R, M, 16] in L1.
template <typename T, int R>
ATTN_Q8 void rows_block(const std::uint8_t* w, std::int64_t row_bytes, const std::uint8_t* xq,
                        std::int64_t xrow, std::int64_t M, std::int64_t K, float* y,
                        std::int64_t ldy, bool accumulate) {
  alignas(64) float acc[R * kBatchRows * 16];  // [R, M, 16]: the first step writes them
  const std::int64_t blocks = K / T::kBlock, steps = T::steps(blocks);
  if (steps == 0) std::fill(acc, acc + R * M * 16, 0.0f);
  constexpr std::int64_t kStepBytes = T::kBlock == 32 ? 2 * T::kBytes : T::kBytes;
  // The weights asked for ahead as the exact gemv asks (prefetch.hpp): past the rows' end, the
  // next R rows' start.
  const Stream stream{0, blocks * T::kBytes, R};
  for (std::int64_t s = 0; s < steps; ++s) {
    typename T::U u[R];
    const std::int64_t ahead = stream.ahead<std::uint8_t>(s * kStepBytes, row_bytes);
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* at = w + r * row_bytes + s * kStepBytes;
      for (std::int64_t j = 0; j < kStepBytes; j += 64) prefetch_at(at + j, ahead);
      T::unpack(w + r * row_bytes, s, blocks, u[r]);
    }
    for (std::int64_t m = 0; m < M; ++m) {
      typename T::X x;
      T::load_x(xq + m * xrow, s, blocks, K, x);
      for (int r = 0; r < R; ++r) {
        float* a = acc + (r * M + m) * 16;
        _mm512_store_ps(a, T::dot(u[r], x, s == 0 ? _mm512_setzero_ps() : _mm512_load_ps(a)));
      }
    }
  }
  for (std::int64_t m = 0; m < M; ++m)
    for (int r = 0; r < R; ++r) {
      const float v = reduce_add(_mm512_load_ps(acc + (r * M + m) * 16));
      y[m * ldy + r] = (accumulate ? y[m * ldy + r] : 0.0f) + v;
    }
}

// rows_block for C <= 4 rows of x, the accumulators in registers (through memory, their chains
// of one or two rows held a step to the store-to-load latency): the same operations in the same
// order on each output.
template <typename T, int R, int C>
ATTN_Q8 void rows_small(const std::uint8_t* w, std::int64_t row_bytes, const std::uint8_t* xq,
                        std::int64_t xrow, std::int64_t K, float* y, std::int64_t ldy,
                        bool accumulate) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  const std::int64_t blocks = K / T::kBlock, steps = T::steps(blocks);
  constexpr std::int64_t kStepBytes = T::kBlock == 32 ? 2 * T::kBytes : T::kBytes;
  const Stream stream{0, blocks * T::kBytes, R};
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t ahead = stream.ahead<std::uint8_t>(s * kStepBytes, row_bytes);
    for (int r = 0; r < R; ++r) {  // one row's block live at a time; x's are in L1
      const std::uint8_t* at = w + r * row_bytes + s * kStepBytes;
      for (std::int64_t j = 0; j < kStepBytes; j += 64) prefetch_at(at + j, ahead);
      typename T::U u;
      T::unpack(w + r * row_bytes, s, blocks, u);
      for (int c = 0; c < C; ++c) {
        typename T::X x;
        T::load_x(xq + c * xrow, s, blocks, K, x);
        acc[r][c] = T::dot(u, x, acc[r][c]);
      }
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r)
      y[c * ldy + r] = (accumulate ? y[c * ldy + r] : 0.0f) + reduce_add(acc[r][c]);
}

// n rows of w against C rows of x: R at a time, then one by one.
template <typename T, int R, int C>
ATTN_Q8 void rows_few(const std::uint8_t* w, std::int64_t row_bytes, const std::uint8_t* xq,
                      std::int64_t xrow, std::int64_t K, float* y, std::int64_t ldy, std::int64_t n,
                      bool accumulate) {
  std::int64_t r = 0;
  for (; r + R <= n; r += R)
    rows_small<T, R, C>(w + r * row_bytes, row_bytes, xq, xrow, K, y + r, ldy, accumulate);
  for (; r < n; ++r)
    rows_small<T, 1, C>(w + r * row_bytes, row_bytes, xq, xrow, K, y + r, ldy, accumulate);
}

template <typename T>
ATTN_Q8 void rows_t(const void* w, std::int64_t ldw, const std::uint8_t* xq, std::int64_t M,
                    std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
  constexpr int R = T::kRows;
  const auto* b = static_cast<const std::uint8_t*>(w);
  const std::int64_t row_bytes = ldw / T::kBlock * T::kBytes, xrow = q8_row_bytes(T::kType, K);
  std::int64_t r = 0;
  constexpr int R1 = 4;  // rows of w a step with the accumulators in registers
  switch (M) {
    case 1:
      return rows_few<T, 4, 1>(b, row_bytes, xq, xrow, K, y, ldy, n, accumulate);
    case 2:
      return rows_few<T, R1, 2>(b, row_bytes, xq, xrow, K, y, ldy, n, accumulate);
    case 3:
      return rows_few<T, R1, 3>(b, row_bytes, xq, xrow, K, y, ldy, n, accumulate);
    case 4:
      return rows_few<T, R1, 4>(b, row_bytes, xq, xrow, K, y, ldy, n, accumulate);
    default:
      break;
  }
  for (; r + R <= n; r += R)
    rows_block<T, R>(b + r * row_bytes, row_bytes, xq, xrow, M, K, y + r, ldy, accumulate);
  for (; r < n; ++r)
    rows_block<T, 1>(b + r * row_bytes, row_bytes, xq, xrow, M, K, y + r, ldy, accumulate);
}

void rows(WeightType type, const void* w, std::int64_t ldw, const std::uint8_t* xq, std::int64_t M,
          std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
  switch (type) {
    case WeightType::q8_0:
      return rows_t<Q80>(w, ldw, xq, M, K, y, ldy, n, accumulate);
    case WeightType::q4_k:
      return rows_t<Q4K>(w, ldw, xq, M, K, y, ldy, n, accumulate);
    case WeightType::q6_k:
      return rows_t<Q6K>(w, ldw, xq, M, K, y, ldy, n, accumulate);
    default:
      break;
  }
}

#undef ATTN_Q8

}  // namespace

const Q8Dot* q8_dot_native() {
  static const Q8Dot native{quantize, rows};
  return has_q8_dot() ? &native : nullptr;
}

#else

bool has_q8_dot() {
  return false;
}
const Q8Dot* q8_dot_native() {
  return nullptr;
}

#endif

}  // namespace attn
