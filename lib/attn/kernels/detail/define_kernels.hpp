#pragma once
// An instruction set's kernels, each a function compiled for `target` with the code of
// vectors.hpp and elementwise.hpp inlined into it. ATTN_TYPED_SET(name, target, W, BATCH, T)
// defines one weight type's (the costly ones: every register blocking is an unrolled copy) and
// <name>_<T>_kernels(full_width) that returns them; ATTN_KERNELS(name, target, W, GEMM) the rest
// and <name>_kernels(), the set's table. Each weight type has a file of its own (avx512_f32.cpp,
// ...), so that two cores compile them side by side: a set in one file took clang with the
// sanitizers 2-3 minutes, CI's longest step.
#include "attn/kernels/detail/elementwise.hpp"
#include "attn/kernels/detail/probe_loops.hpp"
#include "attn/kernels/detail/quant_batch.hpp"
#include "attn/kernels/detail/quant_gemv.hpp"
#include "attn/kernels/detail/vectors.hpp"
#include "attn/kernels/kernels.hpp"

// flatten: everything the kernel calls is compiled into it, for its ISA (the F16 conversions
// above included).
#define ATTN_FLATTEN __attribute__((flatten))

// batch_rows with the register blocking R x C for M rows: R x C accumulators, C input vectors
// and a weight vector share the register file. With 16 registers, 4 x 3 (generic) or 3 x 3 and
// 4 x 2 (AVX2, whose 4 x 3 spilled: see ATTN_BATCH_AVX2). With 32 (AVX-512), as many weight rows
// as come near filling it beside all M rows, even past it (GCC then spills a few): more weight
// streams in flight while the FMAs run; from 8 or 9 rows on, groups (ATTN_BATCH_WIDE). Each
// blocking is the fastest of its candidates for its M (docs/perf/kernels.md). The bits do not
// depend on the blocking: every accumulator sums the same products in the same order.
//
// One batched kernel per register blocking R x C (Exact: C == M), each its own function: one
// function holding every blocking took clang several minutes to compile with the sanitizers.
#define ATTN_BATCH_FN(name, target, W, T, R, C, suffix, Exact, Stepped)                        \
  target ATTN_FLATTEN __attribute__((noinline)) void batch_##name##_##T##_##R##x##C##suffix(   \
      const void* w, std::int64_t ldw, const float* xp, const float* x, std::int64_t M,        \
      std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {           \
    batch_rows<W, R, C, Exact, Stepped>(static_cast<const T*>(w), ldw, xp, x, M, K, y, ldy, n, \
                                        accumulate);                                           \
  }
#define ATTN_BATCH(name, target, W, T, R, C, Exact) \
  ATTN_BATCH_FN(name, target, W, T, R, C, , Exact, true)

// R x C over x's rows in groups of up to C (Exact false), named _RxC_groups: the groups take
// turns every kStepCols columns.
#define ATTN_BATCH_GROUPED(name, target, W, T, R, C) \
  ATTN_BATCH_FN(name, target, W, T, R, C, _groups, false, true)

// The same, each group over a whole column chunk in turn, named _RxC_passes.
#define ATTN_BATCH_PASSES(name, target, W, T, R, C) \
  ATTN_BATCH_FN(name, target, W, T, R, C, _passes, false, false)

// The batched kernels of a set with 16 vector registers compiled without FMA (generic): 4 x 3
// for every M.
#define ATTN_BATCH_NARROW(name, target, W, T)                                               \
  ATTN_BATCH(name, target, W, T, 4, 3, false)                                               \
  void batch_##name##_##T(const void* w, std::int64_t ldw, const float* xp, const float* x, \
                          std::int64_t M, std::int64_t K, float* y, std::int64_t ldy,       \
                          std::int64_t n, bool accumulate) {                                \
    batch_##name##_##T##_4x3(w, ldw, xp, x, M, K, y, ldy, n, accumulate);                   \
  }                                                                                         \
  constexpr BatchFn batch_##name##_##T##_split = batch_##name##_##T;

// AVX2's, by M: 4 x 2 at 2 and 4 rows, 3 x 3 otherwise. 4 x 3 (12 accumulators, 3 x vectors and
// a weight vector: all 16 registers) leaves no room for the compiler, which then spills
// accumulators through the stack in the loop (docs/perf/kernels.md).
#define ATTN_BATCH_AVX2(name, target, W, T)                                                 \
  ATTN_BATCH(name, target, W, T, 4, 2, true)                                                \
  ATTN_BATCH_GROUPED(name, target, W, T, 4, 2)                                              \
  ATTN_BATCH(name, target, W, T, 3, 3, true)                                                \
  ATTN_BATCH_GROUPED(name, target, W, T, 3, 3)                                              \
  void batch_##name##_##T(const void* w, std::int64_t ldw, const float* xp, const float* x, \
                          std::int64_t M, std::int64_t K, float* y, std::int64_t ldy,       \
                          std::int64_t n, bool accumulate) {                                \
    auto f = M == 2   ? batch_##name##_##T##_4x2                                            \
             : M == 3 ? batch_##name##_##T##_3x3                                            \
             : M == 4 ? batch_##name##_##T##_4x2_groups                                     \
                      : batch_##name##_##T##_3x3_groups;                                    \
    f(w, ldw, xp, x, M, K, y, ldy, n, accumulate);                                          \
  }                                                                                         \
  constexpr BatchFn batch_##name##_##T##_split = batch_##name##_##T;

// The batched kernels of a set with 32 (AVX-512), chosen by M. Where 512-bit FMAs run at full
// width (Intel, Zen 5), 8 rows and more in groups of up to 8 under 3 weight rows, each group over
// a whole column chunk, its 24 accumulators in registers throughout: each weight row then serves
// 8 input rows per load. Where they run as two 256-bit halves (Zen 4) another blocking is the
// faster there: groups of 4 under 8 rows at M = 8 (4 x 8 in one group would need 32 accumulators
// and spill), and from 9 rows on groups of up to 4 under 6 weight rows taking turns every
// kStepCols columns. The figures: docs/perf/kernels.md,
// docs/perf/batched-decode.md. batch_<name>_<T> is full width's, _split Zen 4's.
#define ATTN_BATCH_WIDE(name, target, W, T)                                                        \
  ATTN_BATCH(name, target, W, T, 8, 2, true)                                                       \
  ATTN_BATCH(name, target, W, T, 8, 3, true)                                                       \
  ATTN_BATCH(name, target, W, T, 8, 4, true)                                                       \
  ATTN_BATCH(name, target, W, T, 6, 5, true)                                                       \
  ATTN_BATCH(name, target, W, T, 5, 6, true)                                                       \
  ATTN_BATCH(name, target, W, T, 4, 7, true)                                                       \
  ATTN_BATCH(name, target, W, T, 3, 8, true)                                                       \
  ATTN_BATCH_GROUPED(name, target, W, T, 8, 4)                                                     \
  ATTN_BATCH_GROUPED(name, target, W, T, 6, 4)                                                     \
  ATTN_BATCH_PASSES(name, target, W, T, 3, 8)                                                      \
  BatchFn batch_by_m_##name##_##T(std::int64_t M, bool full_width) {                               \
    return M == 2   ? batch_##name##_##T##_8x2                                                     \
           : M == 3 ? batch_##name##_##T##_8x3                                                     \
           : M == 4 ? batch_##name##_##T##_8x4                                                     \
           : M == 5 ? batch_##name##_##T##_6x5                                                     \
           : M == 6 ? batch_##name##_##T##_5x6                                                     \
           : M == 7 ? batch_##name##_##T##_4x7                                                     \
           : M == 8                                                                                \
               ? (full_width ? batch_##name##_##T##_3x8 : batch_##name##_##T##_8x4_groups)         \
               : (full_width ? batch_##name##_##T##_3x8_passes : batch_##name##_##T##_6x4_groups); \
  }                                                                                                \
  void batch_##name##_##T(const void* w, std::int64_t ldw, const float* xp, const float* x,        \
                          std::int64_t M, std::int64_t K, float* y, std::int64_t ldy,              \
                          std::int64_t n, bool accumulate) {                                       \
    batch_by_m_##name##_##T(M, true)(w, ldw, xp, x, M, K, y, ldy, n, accumulate);                  \
  }                                                                                                \
  void batch_##name##_##T##_split(const void* w, std::int64_t ldw, const float* xp,                \
                                  const float* x, std::int64_t M, std::int64_t K, float* y,        \
                                  std::int64_t ldy, std::int64_t n, bool accumulate) {             \
    batch_by_m_##name##_##T(M, false)(w, ldw, xp, x, M, K, y, ldy, n, accumulate);                 \
  }

// One instance per ISA and weight type.
#define ATTN_TYPED_KERNELS(name, target, W, BATCH, T)                                             \
  BATCH(name, target, W, T)                                                                       \
  target ATTN_FLATTEN void gemv_##name##_##T(const void* w, std::int64_t ldw, const float* x,     \
                                             const float* xd, float* y, std::int64_t n,           \
                                             std::int64_t K, bool accumulate) {                   \
    gemv_rows<W>(static_cast<const T*>(w), ldw, x, xd, y, n, K, accumulate);                      \
  }                                                                                               \
  target ATTN_FLATTEN void widen_##name##_##T(const void* w, std::int64_t ldw, std::int64_t rows, \
                                              std::int64_t K, float* out) {                       \
    widen_block<W>(static_cast<const T*>(w), ldw, rows, K, out);                                  \
  }

// One weight type's kernels of a set, and name_T_kernels(full_width) (declared in sets.hpp)
// returning them: the batched kernel for a CPU whose 512-bit FMAs run at full width, or not
// (fma512_full_width(); the sets without AVX-512 have one).
#define ATTN_TYPED_SET(name, target, W, BATCH, T)                                            \
  namespace {                                                                                \
  ATTN_TYPED_KERNELS(name, target, W, BATCH, T)                                              \
  }                                                                                          \
  TypedKernels name##_##T##_kernels(bool full_width) {                                       \
    return {gemv_##name##_##T, full_width ? batch_##name##_##T : batch_##name##_##T##_split, \
            widen_##name##_##T};                                                             \
  }

// The set's table entry of one element type, in ATTN_STORAGE_TYPES' order.
#define ATTN_TYPED_ENTRY(T, name) name##_##T##_kernels(fma512_full_width()),
// And of one quantized block, in ATTN_BLOCK_TYPES' order: its gemv (quant_gemv.hpp) and widening;
// its batched kernel is the set's <name>_blocks.cpp's (ATTN_BLOCK_BATCH_SET), set by
// with_block_batches.
#define ATTN_BLOCK_ENTRY(B, name) \
  TypedKernels{gemv_blocks_##name<B>, nullptr, widen_blocks_##name<B>},
// Every entry of a set's table, by WeightType.
#define ATTN_TABLE_ENTRIES(name) \
  ATTN_STORAGE_TYPES(ATTN_TYPED_ENTRY, name) ATTN_BLOCK_TYPES(ATTN_BLOCK_ENTRY, name)

// A set's widening of the quantized blocks (quant_gemv.hpp's widen_block_rows) and their gemv
// (quant_gemv.hpp), compiled for it.
#define ATTN_BLOCK_WIDENING(name, target, W)                                                       \
  template <typename B>                                                                            \
  target ATTN_FLATTEN void widen_blocks_##name(const void* w, std::int64_t ldw, std::int64_t rows, \
                                               std::int64_t K, float* out) {                       \
    widen_block_rows<W, B>(w, ldw, rows, K, out);                                                  \
  }                                                                                                \
  template <typename B>                                                                            \
  target ATTN_FLATTEN void gemv_blocks_##name(const void* w, std::int64_t ldw, const float* x,     \
                                              const float*, float* y, std::int64_t n,              \
                                              std::int64_t K, bool accumulate) {                   \
    gemv_blocks<W, B>(w, ldw, x, y, n, K, accumulate);                                             \
  }

// A set's batched kernels of the quantized blocks (quant_batch.hpp) and <name>_block_batch(t)
// (sets.hpp) returning type t's: R weight rows by M rows of x for M = 2 up to C (and 3, 4 if C
// is; all M in groups where EXACT is false), beyond that in groups of up to C taking turns over
// each widened step; a blocking for each M as the set's F32 kernels have would compile each
// block's widening into every one (the sanitized build's time), and the widening, not the
// blocking, sets their pace.
#define ATTN_BLOCK_BATCH_ENTRY(B, name) block_batch_by_m_##name<B>,
#define ATTN_BLOCK_BATCH_SET(name, target, W, R, C, EXACT)                                        \
  namespace {                                                                                     \
  template <typename B, int Rr, int Cc, bool Exact>                                               \
  target ATTN_FLATTEN                                                                             \
      __attribute__((noinline)) void block_batch_##name(const void* w, std::int64_t ldw,          \
                                                        const float* xp, const float*,            \
                                                        std::int64_t M, std::int64_t K, float* y, \
                                                        std::int64_t ldy, std::int64_t n,         \
                                                        bool accumulate) {                        \
    batch_blocks<W, Rr, Cc, Exact, B>(w, ldw, xp, M, K, y, ldy, n, accumulate);                   \
  }                                                                                               \
  template <typename B>                                                                           \
  void block_batch_by_m_##name(const void* w, std::int64_t ldw, const float* xp, const float* x,  \
                               std::int64_t M, std::int64_t K, float* y, std::int64_t ldy,        \
                               std::int64_t n, bool accumulate) {                                 \
    constexpr int C3 = std::min(C, 3), C4 = std::min(C, 4);                                       \
    if constexpr (!(EXACT)) {                                                                     \
      block_batch_##name<B, R, C, false>(w, ldw, xp, x, M, K, y, ldy, n, accumulate);             \
    } else {                                                                                      \
      const BatchFn f = M == 2              ? block_batch_##name<B, R, 2, true>                   \
                        : M == 3 && C3 == 3 ? block_batch_##name<B, R, C3, true>                  \
                        : M == 4 && C4 == 4 ? block_batch_##name<B, R, C4, true>                  \
                                            : block_batch_##name<B, R, C, false>;                 \
      f(w, ldw, xp, x, M, K, y, ldy, n, accumulate);                                              \
    }                                                                                             \
  }                                                                                               \
  }                                                                                               \
  BatchFn name##_block_batch(WeightType t) {                                                      \
    static constexpr BatchFn fns[] = {ATTN_BLOCK_TYPES(ATTN_BLOCK_BATCH_ENTRY, name)};            \
    const std::size_t i = std::size_t(t) - kElementTypeCount; /* lanes.hpp checks the order */    \
    return std::size_t(t) >= kElementTypeCount && i < std::size(fns) ? fns[i] : nullptr;          \
  }

// The set's other kernels and its table, name_kernels() (sets.hpp), holding the typed kernels
// of ATTN_TYPED_SET for each of ATTN_STORAGE_TYPES and the widening of each of ATTN_BLOCK_TYPES.
#define ATTN_KERNELS(name, target, W, GEMM)                                                     \
  namespace {                                                                                   \
  target ATTN_FLATTEN void scores_##name(const float* q, std::int64_t n, const float* k,        \
                                         std::int64_t keys, std::int64_t hd, float scale,       \
                                         float* s) {                                            \
    group_scores<W>(q, n, k, keys, hd, scale, s);                                               \
  }                                                                                             \
  target ATTN_FLATTEN void mix_##name(const float* p, std::int64_t n, const float* v,           \
                                      std::int64_t keys, std::int64_t hd, float* out) {         \
    group_mix<W>(p, n, v, keys, hd, out);                                                       \
  }                                                                                             \
  target ATTN_FLATTEN void softmax_##name(float* x, std::int64_t n, std::int64_t len) {         \
    softmax_row(x, n, len);                                                                     \
  }                                                                                             \
  target ATTN_FLATTEN float exp_row_##name(float* x, std::int64_t n, float* sum) {              \
    return exp_row(x, n, sum);                                                                  \
  }                                                                                             \
  target ATTN_FLATTEN void swiglu_##name(float* h1, const float* h3, std::int64_t n) {          \
    swiglu_range(h1, h3, n);                                                                    \
  }                                                                                             \
  target ATTN_FLATTEN double fma_loop_##name(std::int64_t iters) {                              \
    return fma_loop<W>(iters);                                                                  \
  }                                                                                             \
  target ATTN_FLATTEN float read_contiguous_##name(const float* p, std::int64_t n) {            \
    return sum_lanes(p, n);                                                                     \
  }                                                                                             \
  target ATTN_FLATTEN float read_rows_##name(const float* p, std::int64_t rows, std::int64_t k, \
                                             int interleave) {                                  \
    return read_rows_loop(p, rows, k, interleave);                                              \
  }                                                                                             \
  ATTN_BLOCK_WIDENING(name, target, W)                                                          \
  }                                                                                             \
  const Kernels& name##_kernels() {                                                             \
    static const Kernels k = with_block_batches({#name,                                         \
                                                 W,                                             \
                                                 kGemvLanes<W, Bf16>,                           \
                                                 {ATTN_TABLE_ENTRIES(name)},                    \
                                                 GEMM,                                          \
                                                 lanes_from(GEMM),                              \
                                                 scores_##name,                                 \
                                                 mix_##name,                                    \
                                                 softmax_##name,                                \
                                                 exp_row_##name,                                \
                                                 swiglu_##name,                                 \
                                                 fma_loop_##name,                               \
                                                 read_contiguous_##name,                        \
                                                 read_rows_##name},                             \
                                                name##_block_batch);                            \
    return k;                                                                                   \
  }
