#pragma once
// The avx2 set's vector primitives: Isa<8> (declared in detail/vectors.hpp), 8 floats in a ymm
// register, with the instructions of AVX2, FMA and F16C; the avx512 set's BF16 and F16 gemv runs
// on them too (kGemvLanes). The helpers are not always_inline: ISA-neutral templates call them,
// and only code compiled for the ISA (flatten, define_kernels.hpp) inlines them; by reference,
// so no vector crosses an ABI.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "attn/kernels/detail/vectors.hpp"

namespace attn {

// 8 weights widened to F32 lanes: BF16 by a zero extension and a shift, F16 by vcvtph2ps.
__attribute__((target("avx2"))) inline void widen8(__m256& v, const Bf16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  v = __m256(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
__attribute__((target("avx2,f16c"))) inline void widen8(__m256& v, const F16* p) {
  v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

namespace {

// a += b * c in one rounding (vfmadd).
__attribute__((target("avx2,fma"))) inline void fma_lanes(Vec<8>::type& a, const Vec<8>::type& b,
                                                          const Vec<8>::type& c) {
  a = Vec<8>::type(_mm256_fmadd_ps(__m256(b), __m256(c), __m256(a)));
}

// 8 bytes from p, each in a 32-bit lane, signed or not (vpmovsxbd, vpmovzxbd): GCC 12 lowers
// __builtin_convertvector of bytes to 32-bit lanes one byte at a time through general registers.
__attribute__((target("avx2"))) inline void bytes8(__m256i& q, const std::uint8_t* p, bool sign) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  q = sign ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
}

// v = scale in every lane: vbroadcastss (GCC 12 made a loop of lane stores one masked broadcast
// per lane; Vt{} + scale would add +0, turning -0 into +0).
__attribute__((target("avx"))) inline void splat8(__m256& v, float scale) {
  v = _mm256_set1_ps(scale);
}

// v = the F16 h widened in every lane: vcvtph2ps (a block's scale, once per 32 weights, where
// the scalar conversion's branches cost as much as the FMAs).
__attribute__((target("avx2,f16c"))) inline void f16_splat8(__m256& v, std::uint16_t h) {
  v = _mm256_cvtph_ps(_mm_set1_epi16(short(h)));
}

template <>
struct Isa<8> {
  using V = Vec<8>::type;
  [[gnu::always_inline]] static void widen(V& v, const Bf16* p) {
    widen8(reinterpret_cast<__m256&>(v), p);
  }
  [[gnu::always_inline]] static void widen(V& v, const F16* p) {
    widen8(reinterpret_cast<__m256&>(v), p);
  }
  [[gnu::always_inline]] static void fma(V& a, const V& b, const V& c) { fma_lanes(a, b, c); }
  template <bool Sign>
  [[gnu::always_inline]] static void bytes(Ints<8>::type& q, const std::uint8_t* p) {
    bytes8(reinterpret_cast<__m256i&>(q), p, Sign);
  }
  [[gnu::always_inline]] static void splat(V& v, float scale) {
    splat8(reinterpret_cast<__m256&>(v), scale);
  }
  [[gnu::always_inline]] static void splat_f16(V& v, std::uint16_t h) {
    f16_splat8(reinterpret_cast<__m256&>(v), h);
  }
  [[gnu::always_inline]] static void pin(V& v) { asm("" : "+v"(v)); }

  template <typename B>
  static constexpr bool kQuantRows = false;
};

}  // namespace
}  // namespace attn
#endif
