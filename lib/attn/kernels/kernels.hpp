#pragma once
// The own kernels as one table per instruction set, BLIS's context: make_runtime resolves the
// table once (Runtime::kernels) and every product, decode attention and element-wise loop calls
// through it. Each set is a folder (generic/, x86/avx2/, x86/avx512/: detail/set.hpp, vec.hpp)
// whose files CMake generates from set.cpp.in; adding a set is adding its folder, its line in
// lib/CMakeLists.txt and its lines in detail/sets.hpp and kernels.cpp.
#include <cstdint>
#include <string_view>
#include <vector>

#include "attn/weight_type.hpp"

namespace attn {

// y[r] (=|+=) w[r] . x for n rows of w (ldw apart) and K features; xd: x deinterleaved for BF16.
using GemvFn = void (*)(const void* w, std::int64_t ldw, const float* x, const float* xd, float* y,
                        std::int64_t n, std::int64_t K, bool accumulate);
// y[m * ldy + r] (=|+=) w[r] . x[m] for n <= 64 rows of w and 2 <= M <= kBatchRows rows of x
// (xp: x packed as matmul.cpp packs it).
using BatchFn = void (*)(const void* w, std::int64_t ldw, const float* xp, const float* x,
                         std::int64_t M, std::int64_t K, float* y, std::int64_t ldy, std::int64_t n,
                         bool accumulate);
// out[rows, K] = w[rows, K] (ldw apart) widened to F32.
using WidenFn = void (*)(const void* w, std::int64_t ldw, std::int64_t rows, std::int64_t K,
                         float* out);
// s[h * keys + j] = scale * (q[h] . k[j]) for the n query heads of one KV head.
using ScoresFn = void (*)(const float* q, std::int64_t n, const float* k, std::int64_t keys,
                          std::int64_t hd, float scale, float* s);
// out[h * hd + :] = sum over j of p[h * keys + j] v[j].
using MixFn = void (*)(const float* p, std::int64_t n, const float* v, std::int64_t keys,
                       std::int64_t hd, float* out);
// Softmax of x[0:n] in place, x[n:len] set to 0 (the causal mask).
using SoftmaxFn = void (*)(float* x, std::int64_t n, std::int64_t len);
// x[0:n] = exp(x - max) in place, n >= 1: returns the max and *sum the sum (the softmax's first
// half, for a chunk of split attention).
using ExpRowFn = float (*)(float* x, std::int64_t n, float* sum);
// h1[i] = silu(h1[i]) * h3[i] for i < n.
using SwigluFn = void (*)(float* h1, const float* h3, std::int64_t n);
// The machine probes (probe.hpp): 12 FMA chains for `iters` rounds; sums of n floats, or of
// rows x k floats read `interleave` rows at a time.
using FmaLoopFn = double (*)(std::int64_t iters);
using ReadContiguousFn = float (*)(const float* p, std::int64_t n);
using ReadRowsFn = float (*)(const float* p, std::int64_t rows, std::int64_t k, int interleave);

// The kernels for one weight type.
struct TypedKernels {
  GemvFn gemv;
  BatchFn batch;
  WidenFn widen;
};

// Every set gives the same bits: the FMAs are written out and the sums run in one order.
struct Kernels {
  const char* name;  // "avx512", "avx2", "generic"
  int width;         // floats per vector
  int lanes;         // V of the BF16 gemv, which x is deinterleaved for
  // By WeightType: every kernel of each element type (ATTN_STORAGE_TYPES, lanes.hpp) and of each
  // quantized block (ATTN_BLOCK_TYPES), whose prefill runs on widened F32 tiles.
  TypedKernels of[kWeightTypeCount];
  ScoresFn scores;  // decode attention, one KV head's group
  MixFn mix;
  SoftmaxFn softmax;
  ExpRowFn exp_row;
  SwigluFn swiglu;
  FmaLoopFn fma_loop;
  ReadContiguousFn read_contiguous;
  ReadRowsFn read_rows;

  const TypedKernels& typed(WeightType t) const { return of[std::size_t(t)]; }
};

// The sets this CPU runs, best first, whatever the build's -march; generic is always last.
std::vector<const Kernels*> supported_kernels();
const Kernels& best_kernels();

// Whether the CPU (and the OS) runs AVX-512DQ, from the one probe the kernel sets are picked by.
bool cpu_avx512dq();
// AVX-512 F, BW, DQ and VL; with VNNI (--compute q8); with AVX512-BF16 (--compute bf16).
bool cpu_avx512bw_vl();
bool cpu_avx512_vnni();
bool cpu_avx512_bf16();
const Kernels& generic_kernels();
// nullptr for a name that is unknown or that this CPU cannot run.
const Kernels* find_kernels(std::string_view name);

}  // namespace attn
