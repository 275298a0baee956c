#pragma once
// Weights as the kernels see them (engine-internal, not installed): F32, or 16 bits each, BF16
// or F16, widened to F32 where they are loaded. Widening is exact (matrix.hpp), so a kernel
// over BF16 weights gives the bits of the same kernel over their F32 widening.
#include <cstdint>
#include <stdexcept>
#include <string>

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
// clang-format off
#define ATTN_BLOCK_TYPES(X, ...)                                                                \
  X(quant::Q8_0, __VA_ARGS__) X(quant::Q4_0, __VA_ARGS__) X(quant::Q4_K, __VA_ARGS__)           \
  X(quant::Q5_K, __VA_ARGS__) X(quant::Q6_K, __VA_ARGS__) X(quant::Q4_1, __VA_ARGS__)           \
  X(quant::Q5_0, __VA_ARGS__) X(quant::Q5_1, __VA_ARGS__) X(quant::Q2_K, __VA_ARGS__)           \
  X(quant::Q3_K, __VA_ARGS__) X(quant::IQ4_NL, __VA_ARGS__) X(quant::IQ4_XS, __VA_ARGS__)
// clang-format on

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

}  // namespace attn
