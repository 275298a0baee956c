#include "attn/kernels/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <omp.h>

namespace attn {

namespace {

// An element of a norm or a rotation counted as this many flops against Runtime::parallel_flops:
// by default regions of more than 2^16 elements run on every thread.
constexpr std::int64_t kElementFlops = 16;

}  // namespace

void rmsnorm(const Runtime& rt, float* out, const float* x, const float* weight, std::int64_t rows,
             std::int64_t dim, float eps) {
#pragma omp parallel for num_threads(rt.threads) if (rt.worth_parallel(rows * dim * kElementFlops))
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    // The sum of squares in double keeps the norm exact to f32 rounding at large dim.
    double ss = 0;
    for (std::int64_t i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
    const float inv = float(1.0 / std::sqrt(ss / double(dim) + double(eps)));
    for (std::int64_t i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
  }
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
#pragma omp parallel for num_threads(rt.threads) if (rt.worth_parallel(rows * dim * kElementFlops))
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    // Mean and variance in double, in two passes: no cancellation at large dim or offset.
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= double(dim);
    for (std::int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double inv = 1.0 / std::sqrt(var / double(dim) + double(eps));
    for (std::int64_t i = 0; i < dim; ++i) o[i] = float((xr[i] - mean) * inv) * weight[i] + bias[i];
  }
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
#pragma omp parallel for num_threads(rt.threads) if (rt.worth_parallel(n * kTranscendentalFlops))
  for (std::int64_t i = 0; i < n; ++i)
    x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

RopeTable make_rope_table(Rope layout, std::int64_t head_dim, std::int64_t max_seq_len,
                          double theta, const RopeScaling* scaling, std::int64_t filled) {
  RopeTable t{layout, head_dim, {}, {}, 0};
  if (layout == Rope::none) return t;
  const std::int64_t half = head_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    const double freq = std::pow(theta, -double(2 * i) / double(head_dim));
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
      t.cos_sin[std::size_t((pos * half + i) * 2)] = float(std::cos(angle));
      t.cos_sin[std::size_t((pos * half + i) * 2 + 1)] = float(std::sin(angle));
    }
  t.filled = std::max(t.filled, positions);
}

namespace {

// Rotates one head vector. Interleaved pairs are (x[2i], x[2i+1]) as Meta's complex view;
// half pairs are (x[i], x[i + head_dim/2]) as Hugging Face's rotate_half.
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
  const std::int64_t hd = rope.head_dim, half = hd / 2;
#pragma omp parallel for collapse(2) \
    num_threads(rt.threads) if (rt.worth_parallel(bsz * seqlen * n_heads * hd * kElementFlops))
  for (std::int64_t b = 0; b < bsz; ++b)
    for (std::int64_t t = 0; t < seqlen; ++t) {
      const float* cs = rope.cos_sin.data() + (start_pos + t) * half * 2;
      float* row = x + (b * seqlen + t) * n_heads * hd;
      for (std::int64_t h = 0; h < n_heads; ++h) rotate(rope.layout, row + h * hd, cs, half);
    }
}

void softmax_masked(const Runtime& rt, float* x, std::int64_t n, std::int64_t len) {
  rt.kernels->softmax(x, n, len);
}

void swiglu(const Runtime& rt, float* h1, const float* h3, std::int64_t n) {
  if (!rt.worth_parallel(n * kTranscendentalFlops)) return rt.kernels->swiglu(h1, h3, n);
#pragma omp parallel num_threads(rt.threads)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t i0 = n * t / nt, i1 = n * (t + 1) / nt;
    rt.kernels->swiglu(h1 + i0, h3 + i0, i1 - i0);
  }
}

}  // namespace attn
