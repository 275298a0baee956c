#pragma once
// Weights as the kernels see them (engine-internal, not installed): F32, or 16 bits each, BF16
// or F16, widened to F32 where they are loaded. Widening is exact (matrix.hpp), so a kernel
// over BF16 weights gives the bits of the same kernel over their F32 widening.
#include <cstdint>
#include <stdexcept>
#include <string>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "attn/matrix.hpp"

namespace attn {

struct Bf16 {
  std::uint16_t bits;
};
struct F16 {
  std::uint16_t bits;
};

// The kernels' element type of each WeightType, in its order: every set's typed kernels
// (define_kernels.hpp, sets.hpp) and the AVX-512 GEMM and lanes kernels are instantiated from
// this list, X(T, args...) for each.
#define ATTN_STORAGE_TYPES(X, ...) X(float, __VA_ARGS__) X(Bf16, __VA_ARGS__) X(F16, __VA_ARGS__)

// ggml's quantized blocks (quant_blocks.hpp) of the rows after the element types, in their order:
// each set's widening of them (define_kernels.hpp) is instantiated from this list, X(B, args...).
#define ATTN_BLOCK_TYPES(X, ...)                                                      \
  X(quant::Q8_0, __VA_ARGS__)                                                         \
  X(quant::Q4_0, __VA_ARGS__) X(quant::Q4_K, __VA_ARGS__) X(quant::Q5_K, __VA_ARGS__) \
      X(quant::Q6_K, __VA_ARGS__)

constexpr bool blocks_match_traits() {
  std::size_t i = kElementTypeCount;
  bool ok = true;
#define ATTN_BLOCK_CHECK(B, ...)                                                \
  ok = ok && i < kWeightTypeCount && kWeightTypeTraits[i].block == B::kBlock && \
       kWeightTypeTraits[i++].block_bytes == B::kBytes;
  ATTN_BLOCK_TYPES(ATTN_BLOCK_CHECK, )
#undef ATTN_BLOCK_CHECK
  return ok && i == kWeightTypeCount;
}
static_assert(blocks_match_traits(),
              "ATTN_BLOCK_TYPES: one block per quantized WeightType, in order");

// One element type per row of the traits table whose blocks hold one weight (the first
// kElementTypeCount rows), each the size of the row's block: a missing one would leave the sets'
// tables with null kernels for its type. The quantized blocks after them are no element type: a
// product widens a tile of their rows and runs the F32 kernels on it (matmul.cpp).
constexpr bool storage_matches_traits() {
  std::size_t i = 0;
  bool ok = true;
#define ATTN_STORAGE_CHECK(T, ...)                                       \
  ok = ok && i < kElementTypeCount && kWeightTypeTraits[i].block == 1 && \
       sizeof(T) == std::size_t(kWeightTypeTraits[i++].block_bytes);
  ATTN_STORAGE_TYPES(ATTN_STORAGE_CHECK, )
#undef ATTN_STORAGE_CHECK
  return ok && i == kElementTypeCount;
}
static_assert(storage_matches_traits(),
              "ATTN_STORAGE_TYPES: one type per WeightType of one weight a block, in order");

// f(static_cast<const T*>(w)) for w's element type T: one dispatch per matrix, the kernels
// being templates over T. A block type has none: its callers widen it first (logic_error).
template <typename F>
void with_storage(WeightType type, const void* w, F&& f) {
  std::size_t i = 0;
#define ATTN_STORAGE_CASE(T, ...) \
  if (std::size_t(type) == i++) return f(static_cast<const T*>(w));
  ATTN_STORAGE_TYPES(ATTN_STORAGE_CASE, )
#undef ATTN_STORAGE_CASE
  throw std::logic_error(std::string("with_storage: ") + weight_type_name(type) +
                         " is not an element type");
}

[[gnu::always_inline]] inline float to_f32(float w) {
  return w;
}
[[gnu::always_inline]] inline float to_f32(Bf16 w) {
  return bf16_to_f32(w.bits);
}
[[gnu::always_inline]] inline float to_f32(F16 w) {
  return f16_to_f32(w.bits);
}

// 16 or 8 weights widened to F32 lanes: BF16 by a zero extension and a shift (GCC 12 splits
// __builtin_convertvector of 16 halves into two 8-lane extensions and a merge), F16 by
// vcvtph2ps. Not always_inline: ISA-neutral templates call them, and only code compiled for the
// ISA inlines them; by reference, so no vector crosses an ABI. The masked forms (maskz) avoid GCC
// 12's -Wmaybe-uninitialized on the plain intrinsics' undefined source.
#if defined(__x86_64__)
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
__attribute__((target("avx2"))) inline void widen8(__m256& v, const Bf16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  v = __m256(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
__attribute__((target("avx2,f16c"))) inline void widen8(__m256& v, const F16* p) {
  v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
#endif

}  // namespace attn
