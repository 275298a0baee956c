#pragma once
// Each instruction set's table, defined in the file named after it, and its kernels for each
// weight type (generic_f32.cpp, avx2_bf16.cpp, ...; see define_kernels.hpp).
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

// The avx512 set's target. FMA and F16C besides AVX-512F (every AVX-512 CPU has them), which GCC
// does not imply: without them the 8-lane helpers the set's BF16 and F16 gemv uses (fma_lanes,
// widen8: target "avx2,fma,f16c") are not a subset of the caller's ISA, so flatten left them out
// of line, a call per FMA with the accumulators in memory: the F16 gemv ran at half the
// stream (docs/perf/kernels.md).
#define ATTN_AVX512_TARGET __attribute__((target("avx512f,fma,f16c")))

// Whether this CPU's 512-bit FMAs run at full width: false on AMD's family 25 (Zen 4: two 256-bit
// halves), true elsewhere (Intel, Zen 5). Read from CPUID once.
bool fma512_full_width();

// k with each quantized type's batched kernel set to batch(type) (the set's <name>_blocks.cpp).
Kernels with_block_batches(Kernels k, BatchFn (*batch)(WeightType));

// Kernels::lanes_from of a set with the own GEMM (AVX-512) or without.
std::int64_t lanes_from(bool own_gemm);

}  // namespace attn
