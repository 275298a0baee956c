#pragma once
// Each instruction set's table and its kernels for each weight type, defined in the set's files
// that CMake generates from set.cpp.in (avx512.cpp, avx2_bf16.cpp, ...; see
// define_kernels.hpp).
#include "attn/kernels/detail/lanes.hpp"
#include "attn/kernels/kernels.hpp"

namespace attn {

#define ATTN_DECLARE_TYPED(T, name) TypedKernels name##_##T##_kernels(bool full_width);
#define ATTN_DECLARE_SET(name)              \
  const Kernels& name##_kernels();          \
  BatchFn name##_block_batch(WeightType t); \
  ATTN_STORAGE_TYPES(ATTN_DECLARE_TYPED, name)

ATTN_DECLARE_SET(generic)
#if defined(__x86_64__)
ATTN_DECLARE_SET(avx2)
ATTN_DECLARE_SET(avx512)
#endif

#undef ATTN_DECLARE_SET
#undef ATTN_DECLARE_TYPED

// k with each quantized type's batched kernel set to batch(type) (the set's <name>_blocks.cpp).
Kernels with_block_batches(Kernels k, BatchFn (*batch)(WeightType));

}  // namespace attn
