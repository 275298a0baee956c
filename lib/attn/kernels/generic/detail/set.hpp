#pragma once
// The generic set: the kernels every x86-64 (and any other) CPU runs, vectors of 4 floats, the
// FMAs in software where the CPU has none (std::fma), so the bits are those of the other sets.
// Each of the set's generated files (set.cpp.in) includes this first, then
// detail/define_kernels.hpp, which compiles the shared templates for it.
#include <cstdint>

#include "attn/kernels/generic/detail/vec.hpp"
#include "attn/kernels/kernels.hpp"

// The set's functions' target attribute: none, the build's own (-march).
#define ATTN_SET_TARGET

namespace attn {
namespace {

struct Set {
  static constexpr int W = 4;  // floats per vector
  // The batched kernel for M rows, K<R, C, Exact, Stepped> being define_kernels.hpp's of that
  // register blocking: each output's 8 chains take two vectors (the canonical order,
  // vectors.hpp's kChains), so with 16 vector registers 2 x 2 for every M.
  template <template <int, int, bool, bool> class K>
  static constexpr BatchFn batch(std::int64_t, bool) {
    return K<2, 2, false, true>::run;
  }
  // The quantized blocks' batched kernels (quant_batch.hpp): 2 weight rows by x's rows in groups
  // of up to 2, one kernel for every M (the fallback set: one compile of each widening).
  static constexpr int kBlockRows = 2, kBlockCols = 2;
  static constexpr bool kBlockExact = false;
};

}  // namespace
}  // namespace attn
