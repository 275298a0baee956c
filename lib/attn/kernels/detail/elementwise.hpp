#pragma once
// The element-wise kernels' code, inlined into each instruction set's functions
// (define_kernels.hpp), where GCC and clang vectorize it for that set. Each element gets the same
// operations in the same order whatever the set, so every set gives the same bits.
#include <algorithm>
#include <cstdint>

#include "attn/kernels/ops.hpp"

namespace attn {
namespace {

// x[0:n] = exp(x - max) in place (n >= 1); returns the max, *sum the sum of the exps: a softmax
// before its division, and a chunk's partial for split attention (attention.cpp).
[[gnu::always_inline]] inline float exp_row(float* x, std::int64_t n, float* sum_out) {
  float mx = x[0];
  for (std::int64_t j = 1; j < n; ++j) mx = std::max(mx, x[j]);
  for (std::int64_t j = 0; j < n; ++j) x[j] = exp_lanes(x[j] - mx);
  float part[8] = {};  // 8 running sums: one add chain would wait 4 cycles an element
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) part[l] += x[j + l];
  float sum = 0;
  for (; j < n; ++j) sum += x[j];
  for (float s : part) sum += s;
  *sum_out = sum;
  return mx;
}

[[gnu::always_inline]] inline void softmax_row(float* x, std::int64_t n, std::int64_t len) {
  float sum;
  exp_row(x, n, &sum);
  const float inv = 1.0f / sum;
  for (std::int64_t j = 0; j < n; ++j) x[j] *= inv;
  for (std::int64_t j = n; j < len; ++j) x[j] = 0;
}

[[gnu::always_inline]] inline void swiglu_range(float* h1, const float* h3, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) h1[i] = h1[i] / (1.0f + exp_lanes(-h1[i])) * h3[i];
}

}  // namespace
}  // namespace attn
