#pragma once
// Element-wise and row-wise operators of the block, all f32 over row-major buffers.
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "attn/kernels/buffer.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/types.hpp"

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
// The rows of positions 0..filled-1 are computed; later rows as a run first reaches them
// (extend_rope), so a capacity of millions of positions costs only the positions used.
struct RopeTable {
  Rope layout = Rope::none;
  std::int64_t head_dim = 0;
  std::int64_t rot_dims = 0;  // each head's leading dims rotated (partial rotary); the rest pass
  double magnitude = 1;       // cos and sin both times it (Phi-3's rope.scaling.attn_factor)
  std::vector<double> freq;   // [rot_dims/2]: theta^(-2i/rot_dims), scaled
  FloatBuffer cos_sin;        // [max_seq_len, rot_dims/2, 2]
  std::int64_t filled = 0;
};
// The table for max_seq_len positions, with `filled` of them computed (all by default).
// freq_factors (empty, or rot_dims/2 of them): each frequency divided by its factor, as
// llama.cpp's rope with freq_factors (Llama 3.1's rope_freqs.weight, Phi-3's LongRoPE factors).
// rot_dims (0: head_dim): the leading dims of each head rotated, pairs and frequencies taken
// within them (llama.cpp's n_rot); magnitude multiplies cos and sin (its attn_factor).
RopeTable make_rope_table(Rope layout, std::int64_t head_dim, std::int64_t max_seq_len,
                          double theta, const RopeScaling* scaling = nullptr,
                          std::int64_t filled = -1, std::span<const float> freq_factors = {},
                          std::int64_t rot_dims = 0, double magnitude = 1);
// Computes the rows up to `positions` (at most the table's max_seq_len).
void extend_rope(RopeTable& t, std::int64_t positions);

// Rotates x: [bsz, seqlen, n_heads, head_dim] in place, row (b, t) at position start_pos + t.
void apply_rope(const Runtime& rt, const RopeTable& rope, float* x, std::int64_t bsz,
                std::int64_t seqlen, std::int64_t n_heads, std::int64_t start_pos);

// exp(x) in straight-line float code that GCC and clang vectorize in the loops that call it
// (softmax, SwiGLU), where std::exp is a libm call per element (a third of decode attention's
// time at batch 16, perf).
// Cephes' expf: x = n ln 2 + r with |r| <= ln 2 / 2, a degree-5 polynomial in r, times 2^n.
// Within 1.03 ulp of exp for every float in [-86.5, 88.7] (all 2.2e9 of them, checked once
// against double exp; tests/kernels/test_ops.cpp checks every 4099th); 0 below -86.5, where exp is
// under 3e-38 (2^(n - 1) would not be a normal float); +inf above 88.7; NaN stays NaN.
[[gnu::always_inline]] inline float exp_lanes(float x) {
  const float t = x < -86.5f ? -86.5f : x > 88.7f ? 88.7f : x;  // NaN passes through as NaN
  const float shifted =
      t * 1.44269504f + 12582912.0f;  // 1.5 x 2^23: round(t / ln 2) in the low bits
  const float n = shifted - 12582912.0f;
  const float r = (t - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(shifted);
  const float half = std::bit_cast<float>((bits - 0x4B400000u + 126u) << 23);  // 2^(n - 1)
  const float e = y * half * 2.0f;  // 2^n in two steps: 2^128 is not a float
  return x < -86.5f ? 0.0f : x > 88.7f ? HUGE_VALF : e;
}

// Softmax of x[0:n] in place (max subtracted first, so no overflow); x[n:len] set to 0, which is
// the causal mask: positions after the query's own contribute nothing.
void softmax_masked(const Runtime& rt, float* x, std::int64_t n, std::int64_t len);

// SwiGLU gate: h1 = silu(h1) * h3, element-wise over n values.
void swiglu(const Runtime& rt, float* h1, const float* h3, std::int64_t n);

// GeGLU gate (Gemma): h1 = gelu(h1) * h3 with GELU's tanh form, 0.5 x (1 + tanh(sqrt(2/pi)
// (x + 0.044715 x^3))), as Hugging Face's gelu_pytorch_tanh and llama.cpp's GELU, computed in
// float (llama.cpp's CPU reads an F16 table instead).
void geglu(const Runtime& rt, float* h1, const float* h3, std::int64_t n);

// x = cap * tanh(x / cap) over n values: Gemma's soft-capping of scores and logits.
void softcap(float* x, std::int64_t n, float cap);

}  // namespace attn
