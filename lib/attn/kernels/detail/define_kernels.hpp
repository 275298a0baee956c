#pragma once
// An instruction set's kernels, each a function compiled for the set's target with the code of
// vectors.hpp, quant_gemv.hpp, quant_batch.hpp, elementwise.hpp and probe_loops.hpp inlined into
// it. Included by each of the set's files that CMake generates from set.cpp.in, after the set's
// detail/set.hpp (generic/detail/set.hpp, x86/avx2/detail/set.hpp, ...), which defines
// ATTN_SET_TARGET (the target attribute) and struct Set (the vector width and the register
// blockings). A set is five files:
// its table (set_kernels: scores, mix and the rest, the quantized blocks' gemv and widening), its
// kernels for each element type (typed_kernels<T>: the costly ones, every register blocking an
// unrolled copy) and its quantized blocks' batched kernels (block_batch), so that two cores
// compile them side by side: a set in one file took clang with the sanitizers 2-3 minutes, CI's
// longest step. Everything here is in an unnamed namespace: each file gets its own copy, so no
// instance compiled for one set can stand in for another's at link time.
#include <algorithm>
#include <cstdint>
#include <iterator>

#include "attn/kernels/detail/elementwise.hpp"
#include "attn/kernels/detail/probe_loops.hpp"
#include "attn/kernels/detail/quant_batch.hpp"
#include "attn/kernels/detail/quant_gemv.hpp"
#include "attn/kernels/detail/sets.hpp"
#include "attn/kernels/detail/vectors.hpp"
#include "attn/kernels/kernels.hpp"

#ifndef ATTN_SET_TARGET
#error "include the set's set.hpp before define_kernels.hpp"
#endif

// flatten: everything the kernel calls is compiled into it, for its ISA (the F16 conversions
// included).
#define ATTN_FLATTEN __attribute__((flatten))

namespace attn {
namespace {

constexpr int kW = Set::W;

// batch_rows with the register blocking R x C for M rows (the set's Set::batch picks one for
// each M): R x C accumulators, C input vectors and a weight vector share the register file. Each
// blocking is the fastest of its candidates for its M (docs/perf/kernels.md). The bits do not
// depend on the blocking: every accumulator sums the same products in the same order. Each
// blocking is its own function: one function holding every blocking took clang several minutes
// to compile with the sanitizers.
template <typename T>
struct Batch {
  template <int R, int C, bool Exact, bool Stepped>
  struct Kernel {
    ATTN_SET_TARGET ATTN_FLATTEN __attribute__((noinline)) static void run(
        const void* w, std::int64_t ldw, const float* xp, const float* x, std::int64_t M,
        std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
      batch_rows<kW, R, C, Exact, Stepped>(static_cast<const T*>(w), ldw, xp, x, M, K, y, ldy, n,
                                           accumulate);
    }
  };

  // The blocking for M rows, for a CPU whose 512-bit FMAs run at full width or not
  // (cpu_features().fma512_full_width; the sets without AVX-512 have one choice).
  template <bool FullWidth>
  static void by_m(const void* w, std::int64_t ldw, const float* xp, const float* x, std::int64_t M,
                   std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
    Set::template batch<Kernel>(M, FullWidth)(w, ldw, xp, x, M, K, y, ldy, n, accumulate);
  }
};

template <typename T>
ATTN_SET_TARGET ATTN_FLATTEN void set_gemv(const void* w, std::int64_t ldw, const float* x,
                                           const float* xd, float* y, std::int64_t n,
                                           std::int64_t K, bool accumulate) {
  gemv_rows<kW>(static_cast<const T*>(w), ldw, x, xd, y, n, K, accumulate);
}

template <typename T>
ATTN_SET_TARGET ATTN_FLATTEN void set_widen(const void* w, std::int64_t ldw, std::int64_t rows,
                                            std::int64_t K, float* out) {
  widen_block<kW>(static_cast<const T*>(w), ldw, rows, K, out);
}

// One element type's kernels (the set's <set>_<T>_kernels, sets.hpp): the batched kernel for a
// CPU whose 512-bit FMAs run at full width, or not.
template <typename T>
TypedKernels typed_kernels(bool full_width) {
  return {set_gemv<T>, full_width ? Batch<T>::template by_m<true> : Batch<T>::template by_m<false>,
          set_widen<T>};
}

// The quantized blocks' widening (quant_gemv.hpp's widen_block_rows) and gemv (quant_gemv.hpp).
template <typename B>
ATTN_SET_TARGET ATTN_FLATTEN void set_widen_blocks(const void* w, std::int64_t ldw,
                                                   std::int64_t rows, std::int64_t K, float* out) {
  widen_block_rows<kW, B>(w, ldw, rows, K, out);
}
template <typename B>
ATTN_SET_TARGET ATTN_FLATTEN void set_gemv_blocks(const void* w, std::int64_t ldw, const float* x,
                                                  const float*, float* y, std::int64_t n,
                                                  std::int64_t K, bool accumulate) {
  gemv_blocks<kW, B>(w, ldw, x, y, n, K, accumulate);
}

// The quantized blocks' batched kernels (quant_batch.hpp): Set::kBlockRows weight rows by M rows
// of x for M = 2 up to C = Set::kBlockCols (and 3, 4 if C is; all M in groups where
// Set::kBlockExact is false), beyond that in groups of up to C taking turns over each widened
// step; a blocking for each M as the set's F32 kernels have would compile each block's widening
// into every one (the sanitized build's time), and the widening, not the blocking, sets their
// pace.
template <typename B, int R, int C, bool Exact, BlockPath P = BlockPath::buffer>
ATTN_SET_TARGET ATTN_FLATTEN __attribute__((noinline)) void block_batch_rc(
    const void* w, std::int64_t ldw, const float* xp, const float*, std::int64_t M, std::int64_t K,
    float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
  batch_blocks<kW, R, C, Exact, B, P>(w, ldw, xp, M, K, y, ldy, n, accumulate);
}

template <typename B>
void block_batch_by_m(const void* w, std::int64_t ldw, const float* xp, const float* x,
                      std::int64_t M, std::int64_t K, float* y, std::int64_t ldy, std::int64_t n,
                      bool accumulate) {
  constexpr int R = Set::kBlockRows, C = Set::kBlockCols;
  constexpr int C3 = std::min(C, 3), C4 = std::min(C, 4);
  // Up to kRegMaxRows rows widened in registers, then the first rows so and the rest from the
  // buffer (quant_batch.hpp); only these are compiled for such a type (the sanitized build's time).
  if constexpr (kRegBlocks<kW, B>) {
    constexpr BlockPath regs = BlockPath::regs;
    const BatchFn f = M <= kRegMaxRows ? block_batch_rc<B, kRegRows, 4, false, regs>
                                       : block_batch_rc<B, R, C, false, BlockPath::first>;
    f(w, ldw, xp, x, M, K, y, ldy, n, accumulate);
  } else if constexpr (!Set::kBlockExact) {
    block_batch_rc<B, R, C, false>(w, ldw, xp, x, M, K, y, ldy, n, accumulate);
  } else {
    const BatchFn f = M == 2              ? block_batch_rc<B, R, 2, true>
                      : M == 3 && C3 == 3 ? block_batch_rc<B, R, C3, true>
                      : M == 4 && C4 == 4 ? block_batch_rc<B, R, C4, true>
                                          : block_batch_rc<B, R, C, false>;
    f(w, ldw, xp, x, M, K, y, ldy, n, accumulate);
  }
}

// Type t's batched kernel of quantized blocks (the set's <set>_block_batch, sets.hpp), null for
// an element type.
inline BatchFn block_batch(WeightType t) {
#define ATTN_BLOCK_BATCH_ENTRY(B, ...) block_batch_by_m<B>,
  static constexpr BatchFn fns[] = {ATTN_BLOCK_TYPES(ATTN_BLOCK_BATCH_ENTRY, )};
#undef ATTN_BLOCK_BATCH_ENTRY
  const std::size_t i = std::size_t(t) - kElementTypeCount;  // lanes.hpp checks the order
  return std::size_t(t) >= kElementTypeCount && i < std::size(fns) ? fns[i] : nullptr;
}

// The set's other kernels (inline: only the table's file uses them).
ATTN_SET_TARGET ATTN_FLATTEN inline void set_scores(const float* q, std::int64_t n, const float* k,
                                                    std::int64_t keys, std::int64_t hd, float scale,
                                                    float* s) {
  group_scores<kW>(q, n, k, keys, hd, scale, s);
}
ATTN_SET_TARGET ATTN_FLATTEN inline void set_mix(const float* p, std::int64_t n, const float* v,
                                                 std::int64_t keys, std::int64_t hd, float* out) {
  group_mix<kW>(p, n, v, keys, hd, out);
}
ATTN_SET_TARGET ATTN_FLATTEN inline void set_softmax(float* x, std::int64_t n, std::int64_t len) {
  softmax_row(x, n, len);
}
ATTN_SET_TARGET ATTN_FLATTEN inline float set_exp_row(float* x, std::int64_t n, float* sum) {
  return exp_row(x, n, sum);
}
ATTN_SET_TARGET ATTN_FLATTEN inline void set_swiglu(float* h1, const float* h3, std::int64_t n) {
  swiglu_range(h1, h3, n);
}
ATTN_SET_TARGET ATTN_FLATTEN inline double set_fma_loop(std::int64_t iters) {
  return fma_loop<kW>(iters);
}
ATTN_SET_TARGET ATTN_FLATTEN inline float set_read_contiguous(const float* p, std::int64_t n) {
  return sum_lanes(p, n);
}
ATTN_SET_TARGET ATTN_FLATTEN inline float set_read_rows(const float* p, std::int64_t rows,
                                                        std::int64_t k, int interleave) {
  return read_rows_loop(p, rows, k, interleave);
}

// The set's table (<set>_kernels, sets.hpp): name, its element types' kernels (typed, by
// ATTN_STORAGE_TYPES, from the set's other files), each quantized block's gemv and widening (its
// batched kernel, block_batch of the set's blocks file, set by with_block_batches).
inline Kernels set_table(const char* name, const TypedKernels (&typed)[kElementTypeCount],
                         BatchFn (*blocks)(WeightType)) {
  Kernels k{name,       kW,           kGemvLanes<kW, Bf16>, {},
            set_scores, set_mix,      set_softmax,          set_exp_row,
            set_swiglu, set_fma_loop, set_read_contiguous,  set_read_rows};
  std::size_t i = 0;
  for (const TypedKernels& t : typed) k.of[i++] = t;
#define ATTN_BLOCK_ENTRY(B, ...) \
  k.of[i++] = TypedKernels{set_gemv_blocks<B>, nullptr, set_widen_blocks<B>};
  ATTN_BLOCK_TYPES(ATTN_BLOCK_ENTRY, )
#undef ATTN_BLOCK_ENTRY
  return with_block_batches(k, blocks);
}

}  // namespace
}  // namespace attn
