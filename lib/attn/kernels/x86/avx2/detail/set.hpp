#pragma once
// The avx2 set: AVX2 with FMA and F16C, vectors of 8 floats, 16 registers. Each of the set's
// generated files (set.cpp.in) includes this first, then detail/define_kernels.hpp, which
// compiles the shared templates for it.
#if defined(__x86_64__)
#include <cstdint>

#include "attn/kernels/kernels.hpp"
#include "attn/kernels/x86/avx2/detail/vec.hpp"

#define ATTN_SET_TARGET __attribute__((target("avx2,fma,f16c")))

namespace attn {
namespace {

struct Set {
  static constexpr int W = 8;
  // The batched kernel for M rows (K: define_kernels.hpp's kernel of a blocking), by M: each
  // output's 16 chains take two ymm accumulators (the canonical order, vectors.hpp's kChains),
  // so 2 x 2 (8 accumulators, 2 x vectors, a weight vector, room for the compiler) for every M;
  // 4 x 2 and 3 x 3 spilled accumulators through the stack.
  template <template <int, int, bool, bool> class K>
  static constexpr BatchFn batch(std::int64_t M, bool) {
    return M == 2 ? K<2, 2, true, true>::run : K<2, 2, false, true>::run;
  }
  // The quantized blocks' batched kernels (quant_batch.hpp): 2 weight rows by up to 2 rows of x,
  // as the F32 kernel.
  static constexpr int kBlockRows = 2, kBlockCols = 2;
  static constexpr bool kBlockExact = true;
};

}  // namespace
}  // namespace attn
#endif
