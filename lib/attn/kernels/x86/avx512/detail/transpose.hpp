#pragma once
// A 16 x 16 block of 32-bit elements transposed in registers (engine-internal): the compute-bf16
// prefill GEMM packs weight rows into panels of columns of BF16 pairs with it (bf16_dot.cpp).
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

}  // namespace attn
#endif
