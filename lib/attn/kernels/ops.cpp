#include "attn/kernels/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace attn {

namespace {

// An element of a norm or a rotation counted as this many flops against Runtime::parallel_flops:
// by default regions of more than 2^16 elements run on every thread.
constexpr std::int64_t kElementFlops = 16;

// Items per thread for element-wise work: enough that a thread slowed by a neighbour leaves the
// others only a small share to wait on.
constexpr std::int64_t kItemsPerThread = 4;

// f(i0, i1) over [0, n) in items of whole `align` steps: one item when not `parallel`, else up to
// kItemsPerThread per thread. The results do not depend on the cut: every element is computed
// alone, and item edges on multiples of `align` keep the vector kernels' tails where they were.
template <typename F>
void ranges(const Runtime& rt, bool parallel, std::int64_t n, std::int64_t align, F f) {
  const std::int64_t steps = (n + align - 1) / align;
  const std::int64_t items =
      parallel ? std::min(steps, kItemsPerThread * std::int64_t(rt.threads)) : 1;
  rt.run(items, parallel, [&](std::int64_t i, int) {
    f(std::min(n, steps * i / items * align), std::min(n, steps * (i + 1) / items * align));
  });
}

}  // namespace

void rmsnorm(const Runtime& rt, float* out, const float* x, const float* weight, std::int64_t rows,
             std::int64_t dim, float eps) {
  ranges(rt, rt.worth_parallel(rows * dim * kElementFlops), rows, 1,
         [&](std::int64_t r0, std::int64_t r1) {
           for (std::int64_t r = r0; r < r1; ++r) {
             const float* xr = x + r * dim;
             float* o = out + r * dim;
             // The sum of squares in double keeps the norm exact to f32 rounding at large dim.
             double ss = 0;
             for (std::int64_t i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
             const float inv = float(1.0 / std::sqrt(ss / double(dim) + double(eps)));
             for (std::int64_t i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
           }
         });
}

namespace {

// Llama 3.1's frequency scaling, as Hugging Face's _compute_llama3_parameters.
double scaled_frequency(double freq, const RopeScaling& s) {
  const double wavelen = 2 * M_PI / freq;
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  if (wavelen < high_wavelen) return freq;
  if (wavelen > low_wavelen) return freq / s.factor;
  const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * freq / s.factor + smooth * freq;
}

}  // namespace

void layernorm(const Runtime& rt, float* out, const float* x, const float* weight,
               const float* bias, std::int64_t rows, std::int64_t dim, float eps) {
  ranges(rt, rt.worth_parallel(rows * dim * kElementFlops), rows, 1,
         [&](std::int64_t r0, std::int64_t r1) {
           for (std::int64_t r = r0; r < r1; ++r) {
             const float* xr = x + r * dim;
             float* o = out + r * dim;
             // Mean and variance in double, in two passes: no cancellation at large dim or offset.
             double mean = 0, var = 0;
             for (std::int64_t i = 0; i < dim; ++i) mean += xr[i];
             mean /= double(dim);
             for (std::int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
             const double inv = 1.0 / std::sqrt(var / double(dim) + double(eps));
             for (std::int64_t i = 0; i < dim; ++i)
               o[i] = float((xr[i] - mean) * inv) * weight[i] + bias[i];
           }
         });
}

// An element of exp or erf work counted as this many flops against Runtime::parallel_flops: one
// element with std::exp costs as much as a few hundred flops of the products
// (docs/perf/kernels.md).
constexpr std::int64_t kTranscendentalFlops = 256;

void activate(const Runtime& rt, Activation act, float* x, std::int64_t n) {
  if (act == Activation::relu) {
    for (std::int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
    return;
  }
  ranges(rt, rt.worth_parallel(n * kTranscendentalFlops), n, 16,
         [&](std::int64_t i0, std::int64_t i1) {
           for (std::int64_t i = i0; i < i1; ++i)
             x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
         });
}

RopeTable make_rope_table(Rope layout, std::int64_t head_dim, std::int64_t max_seq_len,
                          double theta, const RopeScaling* scaling, std::int64_t filled,
                          std::span<const float> freq_factors, std::int64_t rot_dims,
                          double magnitude) {
  RopeTable t{layout, head_dim, rot_dims ? rot_dims : head_dim, magnitude, {}, {}, 0};
  if (layout == Rope::none) return t;
  const std::int64_t half = t.rot_dims / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    double freq = std::pow(theta, -double(2 * i) / double(t.rot_dims));
    if (!freq_factors.empty()) freq /= double(freq_factors[std::size_t(i)]);
    t.freq.push_back(scaling ? scaled_frequency(freq, *scaling) : freq);
  }
  t.cos_sin = FloatBuffer(std::size_t(max_seq_len * half * 2));
  extend_rope(t, filled < 0 ? max_seq_len : filled);
  return t;
}

void extend_rope(RopeTable& t, std::int64_t positions) {
  const std::int64_t half = std::int64_t(t.freq.size());
  for (std::int64_t pos = t.filled; pos < positions; ++pos)
    for (std::int64_t i = 0; i < half; ++i) {
      // Angles in double: at position 2047 an f32 angle is already off by ~1e-4 rad.
      const double angle = double(pos) * t.freq[std::size_t(i)];
      t.cos_sin[std::size_t((pos * half + i) * 2)] = float(std::cos(angle) * t.magnitude);
      t.cos_sin[std::size_t((pos * half + i) * 2 + 1)] = float(std::sin(angle) * t.magnitude);
    }
  t.filled = std::max(t.filled, positions);
}

namespace {

// Rotates one head vector. Interleaved pairs are (x[2i], x[2i+1]) as Meta's complex view;
// half pairs are (x[i], x[i + rot_dims/2]) as Hugging Face's rotate_half, within the rotated
// dims.
void rotate(Rope layout, float* v, const float* cs, std::int64_t half) {
  const std::int64_t stride = layout == Rope::interleaved ? 1 : half;
  const std::int64_t step = layout == Rope::interleaved ? 2 : 1;
  for (std::int64_t i = 0; i < half; ++i) {
    float& a = v[i * step];
    float& b = v[i * step + stride];
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float a0 = a, b0 = b;
    a = a0 * c - b0 * s;
    b = a0 * s + b0 * c;
  }
}

}  // namespace

void apply_rope(const Runtime& rt, const RopeTable& rope, float* x, std::int64_t bsz,
                std::int64_t seqlen, std::int64_t n_heads, std::int64_t start_pos) {
  if (rope.layout == Rope::none) return;
  const std::int64_t hd = rope.head_dim, half = rope.rot_dims / 2;
  ranges(rt, rt.worth_parallel(bsz * seqlen * n_heads * hd * kElementFlops), bsz * seqlen, 1,
         [&](std::int64_t r0, std::int64_t r1) {
           for (std::int64_t r = r0; r < r1; ++r) {  // row r: batch r / seqlen, position r % seqlen
             const float* cs = rope.cos_sin.data() + (start_pos + r % seqlen) * half * 2;
             float* row = x + r * n_heads * hd;
             for (std::int64_t h = 0; h < n_heads; ++h) rotate(rope.layout, row + h * hd, cs, half);
           }
         });
}

void softmax_masked(const Runtime& rt, float* x, std::int64_t n, std::int64_t len) {
  rt.kernels->softmax(x, n, len);
}

void swiglu(const Runtime& rt, float* h1, const float* h3, std::int64_t n) {
  ranges(rt, rt.worth_parallel(n * kTranscendentalFlops), n, 64,
         [&](std::int64_t i0, std::int64_t i1) { rt.kernels->swiglu(h1 + i0, h3 + i0, i1 - i0); });
}

void geglu(const Runtime& rt, float* h1, const float* h3, std::int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  ranges(rt, rt.worth_parallel(n * kTranscendentalFlops), n, 64,
         [&](std::int64_t i0, std::int64_t i1) {
           for (std::int64_t i = i0; i < i1; ++i) {
             const float x = h1[i];
             const float g =
                 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
             h1[i] = g * h3[i];
           }
         });
}

void softcap(float* x, std::int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (std::int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

}  // namespace attn
