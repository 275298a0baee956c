#pragma once
// A 16 x 16 block of 32-bit elements transposed in registers (engine-internal): the prefill GEMMs
// pack weight rows into panels of columns with it, F32 weights as floats, BF16 ones as pairs, and
// x's rows are laid out column by column (rows_to_columns).
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace attn {

// The 64-bit halves interleaved: the low (high) pair of each 128-bit lane of a, then of b.
__attribute__((target("avx512f"))) inline __m512 pairs_lo(__m512 a, __m512 b) {
  return _mm512_castpd_ps(
      _mm512_maskz_unpacklo_pd(__mmask8(0xFF), _mm512_castps_pd(a), _mm512_castps_pd(b)));
}
__attribute__((target("avx512f"))) inline __m512 pairs_hi(__m512 a, __m512 b) {
  return _mm512_castpd_ps(
      _mm512_maskz_unpackhi_pd(__mmask8(0xFF), _mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// r[i] holds row i's 16 values; afterwards r[k] holds column k's. The masked forms (maskz, all
// lanes) avoid GCC 12's -Wmaybe-uninitialized on the plain intrinsics' undefined source.
__attribute__((target("avx512f"))) inline void transpose16(__m512 r[16]) {
  const __mmask16 all = 0xFFFF;
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(all, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(all, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = pairs_lo(t[i], t[i + 2]);
    r[i + 1] = pairs_hi(t[i], t[i + 2]);
    r[i + 2] = pairs_lo(t[i + 1], t[i + 3]);
    r[i + 3] = pairs_hi(t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_maskz_shuffle_f32x4(all, r[h + i], r[h + 4 + i], 0x88);
      t[h + 4 + i] = _mm512_maskz_shuffle_f32x4(all, r[h + i], r[h + 4 + i], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_maskz_shuffle_f32x4(all, t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_maskz_shuffle_f32x4(all, t[i], t[i + 8], 0xdd);
  }
}

// x's rows m0..m0+lanes-1 (lanes <= 16; rows at or past M read as zero) column by column:
// out[k * width + i] = x[m0 + i, k] for k < K, i < lanes. The prefill GEMM's 8-row panels and
// batched decode's rows in lanes are both this, 16 columns at a time through transpose16.
__attribute__((target("avx512f"))) inline void rows_to_columns(const float* x, std::int64_t M,
                                                               std::int64_t K, std::int64_t m0,
                                                               int lanes, std::int64_t width,
                                                               float* out) {
  const __mmask16 live = __mmask16((1u << lanes) - 1);
  std::int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i)
      r[i] = i < lanes && m0 + i < M ? _mm512_loadu_ps(x + (m0 + i) * K + k) : _mm512_setzero_ps();
    transpose16(r);
    for (int c = 0; c < 16; ++c) _mm512_mask_storeu_ps(out + (k + c) * width, live, r[c]);
  }
  for (; k < K; ++k)
    for (int i = 0; i < lanes; ++i) out[k * width + i] = m0 + i < M ? x[(m0 + i) * K + k] : 0.0f;
}

}  // namespace attn
#endif
