#pragma once
// Element-wise and row-wise operators of the block, all f32 over row-major buffers.
#include <cstdint>
#include <vector>

#include "attn/config.hpp"
#include "attn/runtime.hpp"

namespace attn {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `dim`.
void rmsnorm(const Runtime& rt, float* out, const float* x, const float* weight, std::int64_t rows,
             std::int64_t dim, float eps);

// torch's LayerNorm: out[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias (biased variance).
// out may be x.
void layernorm(const Runtime& rt, float* out, const float* x, const float* weight,
               const float* bias, std::int64_t rows, std::int64_t dim, float eps);

// The encoder FFN's activation in place over n values: relu, or gelu in its exact erf form
// (torch's default).
void activate(const Runtime& rt, Activation act, float* x, std::int64_t n);

// cos/sin of pos * theta^(-2i/head_dim), precomputed for every position as Meta's freqs_cis.
struct RopeTable {
  Rope layout = Rope::none;
  std::int64_t head_dim = 0;
  std::vector<float> cos_sin;  // [max_seq_len, head_dim/2, 2]
};
RopeTable make_rope_table(Rope layout, std::int64_t head_dim, std::int64_t max_seq_len,
                          double theta, const RopeScaling* scaling = nullptr);

// Rotates x: [bsz, seqlen, n_heads, head_dim] in place, row (b, t) at position start_pos + t.
void apply_rope(const Runtime& rt, const RopeTable& rope, float* x, std::int64_t bsz,
                std::int64_t seqlen, std::int64_t n_heads, std::int64_t start_pos);

// Softmax of x[0:n] in place (max subtracted first, so no overflow); x[n:len] set to 0, which is
// the causal mask: positions after the query's own contribute nothing.
void softmax_masked(float* x, std::int64_t n, std::int64_t len);

// SwiGLU gate: h1 = silu(h1) * h3, element-wise over n values.
void swiglu(const Runtime& rt, float* h1, const float* h3, std::int64_t n);

}  // namespace attn
