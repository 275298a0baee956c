#pragma once
// The avx512 set: AVX-512F, vectors of 16 floats, 32 registers (register blocks chosen by the
// rows). Each of the set's generated files (set.cpp.in) includes this first, then
// detail/define_kernels.hpp, which compiles the shared templates for it.
#if defined(__x86_64__)
#include <cstdint>

#include "attn/kernels/kernels.hpp"
#include "attn/kernels/x86/avx512/detail/vec.hpp"

// FMA and F16C besides AVX-512F (every AVX-512 CPU has them), which GCC does not imply: without
// them the 8-lane helpers the set's BF16 and F16 gemv uses (fma_lanes, widen8: target
// "avx2,fma,f16c") are not a subset of the caller's ISA, so flatten left them out of line, a call
// per FMA with the accumulators in memory: the F16 gemv ran at half the stream
// (docs/perf/kernels.md).
#define ATTN_SET_TARGET __attribute__((target("avx512f,fma,f16c")))

namespace attn {
namespace {

struct Set {
  static constexpr int W = 16;
  // The batched kernel for M rows (K: define_kernels.hpp's kernel of a blocking R x C; Exact:
  // C == M, one group; else x's rows in groups of up to C, Stepped: taking turns every kStepCols
  // columns, or each group over a whole column chunk). Where 512-bit FMAs run at full width
  // (Intel, Zen 5), 8 rows and more in groups of up to 8 under 3 weight rows, each group over a
  // whole column chunk, its 24 accumulators in registers throughout: each weight row then serves
  // 8 input rows per load. Where they run as two 256-bit halves (Zen 4) another blocking is the
  // faster there: groups of 4 under 8 rows at M = 8 (4 x 8 in one group would need 32
  // accumulators and spill), and from 9 rows on groups of up to 4 under 6 weight rows; from 17
  // rows on (a prefill's tiles) groups of up to 6 under 4 weight rows: an item's 64 rows
  // (16 for quantized blocks) then go as blocks of 4, all 24 accumulators busy, where
  // 6 + 6 + 4 left the last block at 16 (docs/perf/batch-invariance.md). On Zen 4 too each group
  // passes over the whole column chunk (not Stepped), its accumulators in registers throughout and
  // the later groups reading the weight rows from L2: 12-19% faster at M = 8..16 and 9-12%
  // at 17..32 than groups taking turns every kStepCols columns (one thread fed from memory). The
  // figures: docs/perf/kernels.md, docs/perf/batched-decode.md ("Zen 4, 16-bit B = 9..16").
  template <template <int, int, bool, bool> class K>
  static constexpr BatchFn batch(std::int64_t M, bool full_width) {
    return M == 2    ? K<8, 2, true, true>::run
           : M == 3  ? K<8, 3, true, true>::run
           : M == 4  ? K<8, 4, true, true>::run
           : M == 5  ? K<6, 5, true, true>::run
           : M == 6  ? K<5, 6, true, true>::run
           : M == 7  ? K<4, 7, true, true>::run
           : M == 8  ? (full_width ? K<3, 8, true, true>::run : K<8, 4, false, false>::run)
           : M <= 16 ? (full_width ? K<3, 8, false, false>::run : K<6, 4, false, false>::run)
                     : (full_width ? K<3, 8, false, false>::run : K<4, 6, false, false>::run);
  }
  // The quantized blocks' batched kernels (quant_batch.hpp): 6 weight rows by up to 4 rows of x
  // (24 accumulators; 8 rows spilled them from the buffer in L1: docs/perf/quant.md).
  static constexpr int kBlockRows = 6, kBlockCols = 4;
  static constexpr bool kBlockExact = true;
};

}  // namespace
}  // namespace attn
#endif
