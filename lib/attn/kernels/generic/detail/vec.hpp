#pragma once
// The generic set's vector primitives (Isa<W>, declared in detail/vectors.hpp): plain C++ over
// GCC vector types of W floats, for any W, so that the set compiles for any CPU. Each gives the
// bits of the x86 sets' instructions: the FMAs are std::fma, the widenings exact.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attn/kernels/detail/vectors.hpp"

namespace attn {
namespace {

template <int W>
struct Isa {
  using V = typename Vec<W>::type;
  using U = typename Bits<W>::type;

  // W BF16 weights widened to F32 lanes: each shifted into a float's top 16 bits.
  [[gnu::always_inline]] static void widen(V& v, const Bf16* p) {
    typename Halves<W>::type h;
    std::memcpy(&h, p, sizeof h);
    const U b = __builtin_convertvector(h, U) << 16;
    std::memcpy(&v, &b, sizeof v);
  }

  // f16_to_f32 (matrix.hpp) lane-wise, without branches: exponent 1..30 rebased by 127 - 15;
  // 31 (Inf, NaN) to 255, a NaN made quiet; 0 (zero, subnormal) as (2^-14 + mant x 2^-24) -
  // 2^-14, exact. (GCC 12 converts _Float16 vectors element by element through libgcc; clang 14
  // has no _Float16 on x86.)
  [[gnu::always_inline]] static void widen(V& v, const F16* p) {
    typename Halves<W>::type h;
    std::memcpy(&h, p, sizeof h);
    const U u = __builtin_convertvector(h, U);
    const U em = (u & 0x7FFFu) << 13, e = em & 0x0F800000u;
    const U special = U(e == 0x0F800000u), tiny = U(e == 0u);
    const U nan = special & U((em & 0x007FE000u) != 0u);
    const U normal = (em + (112u << 23) + (special & (112u << 23))) | (nan & 0x00400000u);
    V sub;
    const U sub_bits = em + (113u << 23);
    std::memcpy(&sub, &sub_bits, sizeof sub);
    sub -= 0x1p-14f;
    U sub_u;
    std::memcpy(&sub_u, &sub, sizeof sub_u);
    const U out = ((tiny & sub_u) | (~tiny & normal)) | ((u & 0x8000u) << 16);
    std::memcpy(&v, &out, sizeof v);
  }

  // a += b * c in one rounding, lane by lane.
  [[gnu::always_inline]] static void fma(V& a, const V& b, const V& c) {
    for (int l = 0; l < W; ++l) a[l] = std::fma(b[l], c[l], a[l]);
  }

  // W bytes from p, each in a 32-bit lane: signed (Sign) or not.
  template <bool Sign>
  [[gnu::always_inline]] static void bytes(typename Ints<W>::type& q, const std::uint8_t* p) {
    typedef std::conditional_t<Sign, std::int8_t, std::uint8_t> E __attribute__((vector_size(W)));
    E b;
    std::memcpy(&b, p, sizeof b);
    q = __builtin_convertvector(b, typename Ints<W>::type);
  }

  // v = scale in every lane.
  [[gnu::always_inline]] static void splat(V& v, float scale) {
    for (int l = 0; l < W; ++l) v[l] = scale;
  }

  // v = the F16 h widened (f16_to_f32) in every lane.
  [[gnu::always_inline]] static void splat_f16(V& v, std::uint16_t h) { splat(v, f16_to_f32(h)); }

  // Keeps v in a register (vectors.hpp's pin): on x86, an empty asm naming it in a vector
  // register, which the generic set's 4 lanes fit as the other sets' do.
  [[gnu::always_inline]] static void pin(V& v) {
#if defined(__x86_64__)
    asm("" : "+v"(v));
#else
    (void)v;
#endif
  }

  // No rows of quantized blocks of its own (quant_gemv.hpp: block_chunks for every type).
  template <typename B>
  static constexpr bool kQuantRows = false;
};

}  // namespace
}  // namespace attn
