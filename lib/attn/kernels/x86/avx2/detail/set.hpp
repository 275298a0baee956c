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
  static constexpr bool kGemm = false;
  // The batched kernel for M rows (K: define_kernels.hpp's kernel of a blocking), by M: 4 x 2 at
  // 2 and 4 rows, 3 x 3 otherwise. 4 x 3 (12 accumulators, 3 x vectors and a weight vector: all
  // 16 registers) leaves no room for the compiler, which then spills accumulators through the
  // stack in the loop (docs/perf/kernels.md).
  template <template <int, int, bool, bool> class K>
  static constexpr BatchFn batch(std::int64_t M, bool) {
    return M == 2   ? K<4, 2, true, true>::run
           : M == 3 ? K<3, 3, true, true>::run
           : M == 4 ? K<4, 2, false, true>::run
                    : K<3, 3, false, true>::run;
  }
  // The quantized blocks' batched kernels (quant_batch.hpp): 4 weight rows by up to 2 rows of x
  // (16 registers: 8 accumulators, 2 vectors of x, a weight vector).
  static constexpr int kBlockRows = 4, kBlockCols = 2;
  static constexpr bool kBlockExact = true;
};

}  // namespace
}  // namespace attn
#endif
