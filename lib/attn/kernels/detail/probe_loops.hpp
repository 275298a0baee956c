#pragma once
// The machine probes' loops, inlined into each instruction set's functions (define_kernels.hpp)
// as the products are: the streaming reads `attn-cli bench` sets a decode step against, and the
// FMA loop that measures the peak. In an unnamed namespace, as vectors.hpp.
#include <cstdint>

#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/detail/vectors.hpp"
#include "attn/kernels/probe.hpp"

namespace attn {
namespace {

// Sums n floats with 64 independent lanes, which the compiler keeps in vector registers, so
// the loop is bound by memory, not by an add chain.
[[gnu::always_inline]] inline float sum_lanes(const float* p, std::int64_t n) {
  float acc[64] = {};
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 64; ++j) acc[j] += p[i + j];
  for (; i < n; ++i) acc[0] += p[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

// Sums R rows of k floats (ld apart) side by side, as the decode kernels read them.
template <int R>
[[gnu::always_inline]] inline float sum_rows(const float* p, std::int64_t ld, std::int64_t k) {
  float s[R] = {};
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < k; ++j)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) s[r] += p[r * ld + j];
  float t = 0;
  for (float v : s) t += v;
  return t;
}

// sum_rows, asking for the rows ahead as the decode kernels do (attn/prefetch.hpp).
template <int R>
[[gnu::always_inline]] inline float sum_rows_prefetched(const float* p, std::int64_t ld,
                                                        std::int64_t k) {
  constexpr std::int64_t line = 16;
  const Stream stream{0, k, R};
  float s[R][line] = {};
  std::int64_t j = 0;
  for (; j + line <= k; j += line) {
    const std::int64_t ahead = stream.ahead<float>(j, ld);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      prefetch_at(p + r * ld + j, ahead);
#pragma omp simd
      for (int l = 0; l < line; ++l) s[r][l] += p[r * ld + j + l];
    }
  }
  float t = 0;
  for (; j < k; ++j)
    for (int r = 0; r < R; ++r) t += p[r * ld + j];
  for (const auto& row : s)
    for (float v : row) t += v;
  return t;
}

[[gnu::always_inline]] inline float read_rows_loop(const float* p, std::int64_t rows,
                                                   std::int64_t k, int interleave) {
  float t = 0;
  std::int64_t r = 0;
  if (interleave == kPrefetchedRows)
    for (; r + 8 <= rows; r += 8) t += sum_rows_prefetched<8>(p + r * k, k, k);
  if (interleave == 8)
    for (; r + 8 <= rows; r += 8) t += sum_rows<8>(p + r * k, k, k);
  if (interleave >= 4)
    for (; r + 4 <= rows; r += 4) t += sum_rows<4>(p + r * k, k, k);
  for (; r < rows; ++r) t += sum_lanes(p + r * k, k);
  return t;
}

// Independent FMA chains in registers: 12 accumulators of W lanes hide the FMA latency. The
// generic set, for CPUs without FMA, multiplies and adds.
template <int W>
[[gnu::always_inline]] inline double fma_loop(std::int64_t iters) {
  using V = typename Vec<W>::type;
  V a, b, acc[12];
  for (int i = 0; i < W; ++i) a[i] = 0.999999f, b[i] = 1e-7f;
  for (int i = 0; i < 12; ++i)
    for (int l = 0; l < W; ++l) acc[i][l] = 1e-3f * float(i + 1);
  for (std::int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      if constexpr (W == 4)
        acc[i] = acc[i] * a + b;
      else
        fmadd<W>(acc[i], a, b);
    }
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += acc[i][0];
  return double(sink);
}

}  // namespace
}  // namespace attn
