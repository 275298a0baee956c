#pragma once
// 16 weights widened to F32 lanes with AVX-512F: BF16 by a zero extension and a shift (GCC 12
// splits __builtin_convertvector of 16 halves into two 8-lane extensions and a merge), F16 by
// vcvtph2ps. For the set's kernels (vec.hpp's Isa<16>). Not always_inline: ISA-neutral templates
// call them, and only code compiled for the ISA inlines them; by reference, so no vector crosses
// an ABI. The masked forms (maskz) avoid GCC 12's -Wmaybe-uninitialized on the plain intrinsics'
// undefined source.
#if defined(__x86_64__)
#include <immintrin.h>

#include "attn/kernels/detail/lanes.hpp"

namespace attn {

__attribute__((target("avx512f"))) inline void widen16(__m512& v, const float* p) {
  v = _mm512_loadu_ps(p);
}
__attribute__((target("avx512f"))) inline void widen16(__m512& v, const Bf16* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __mmask16 all = 0xFFFF;
  v = __m512(_mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, h), 16));
}
__attribute__((target("avx512f"))) inline void widen16(__m512& v, const F16* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  v = _mm512_maskz_cvtph_ps(__mmask16(0xFFFF), h);
}

}  // namespace attn
#endif
