// The shape space: every path the engine picks by size, at and around each boundary, against a
// float64 reference written here from Meta's model.py (independent of the engine's code):
// batch 1 to 5, products of 1, 2, 3, 4 and more rows (gemv below 4, sgemm from 4), an FFN wider
// than one hidden block, prefills longer than one attention chunk, prefills at start_pos > 0,
// 1 to 4 threads with every parallel path forced, every block and RoPE layout.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/kernels/attention.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "test_support.hpp"

namespace {

using Vec = std::vector<double>;

// y[rows, n] = x[rows, k] w[n, k]^T + b
Vec linear_ref(const Vec& x, const attn::Matrix& w, const float* b, std::int64_t rows,
               std::int64_t k, std::int64_t n) {
  Vec y(std::size_t(rows * n));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < n; ++o) {
      double s = b ? b[o] : 0.0;
      for (std::int64_t i = 0; i < k; ++i)
        s += x[std::size_t(r * k + i)] * attn::element(w, o * k + i);
      y[std::size_t(r * n + o)] = s;
    }
  return y;
}

Vec rmsnorm_ref(const Vec& x, const float* w, std::int64_t rows, std::int64_t dim, double eps) {
  Vec y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t i = 0; i < dim; ++i)
      ss += x[std::size_t(r * dim + i)] * x[std::size_t(r * dim + i)];
    const double inv = 1.0 / std::sqrt(ss / double(dim) + eps);
    for (std::int64_t i = 0; i < dim; ++i)
      y[std::size_t(r * dim + i)] = x[std::size_t(r * dim + i)] * inv * w[i];
  }
  return y;
}

// x: [B, T, heads, hd], position t; Meta's freqs_cis (interleaved) or rotate_half pairs.
void rope_ref(Vec& x, const attn::ModelArgs& a, std::int64_t B, std::int64_t T,
              std::int64_t heads) {
  if (a.rope == attn::Rope::none) return;
  const std::int64_t hd = a.head_dim(), half = hd / 2;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < half; ++i) {
          const double ang = double(t) * std::pow(a.rope_theta, -double(2 * i) / double(hd));
          double* v = x.data() + ((b * T + t) * heads + h) * hd;
          double& p = a.rope == attn::Rope::interleaved ? v[2 * i] : v[i];
          double& q = a.rope == attn::Rope::interleaved ? v[2 * i + 1] : v[i + half];
          const double p0 = p, q0 = q;
          p = p0 * std::cos(ang) - q0 * std::sin(ang);
          q = p0 * std::sin(ang) + q0 * std::cos(ang);
        }
}

// Causal grouped-query attention over all T positions: out [B, T, n_heads*hd].
Vec attention_ref(const Vec& q, const Vec& k, const Vec& v, const attn::ModelArgs& a,
                  std::int64_t B, std::int64_t T) {
  const std::int64_t H = a.n_heads, KV = a.n_kv_heads, hd = a.head_dim();
  Vec out(std::size_t(B * T * H * hd), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t g = h / a.n_rep();
      for (std::int64_t t = 0; t < T; ++t) {
        Vec s(std::size_t(t + 1));
        double mx = -1e300;
        for (std::int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (std::int64_t i = 0; i < hd; ++i)
            d += q[std::size_t(((b * T + t) * H + h) * hd + i)] *
                 k[std::size_t(((b * T + u) * KV + g) * hd + i)];
          s[std::size_t(u)] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[std::size_t(u)]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (std::int64_t u = 0; u <= t; ++u)
          for (std::int64_t i = 0; i < hd; ++i)
            out[std::size_t(((b * T + t) * H + h) * hd + i)] +=
                s[std::size_t(u)] / sum * v[std::size_t(((b * T + u) * KV + g) * hd + i)];
      }
    }
  return out;
}

// The block stack over x [B, T, dim] in float64.
Vec forward_ref(const attn::ModelArgs& a, const attn::TransformerWeights& w, const Vec& x0,
                std::int64_t B, std::int64_t T) {
  const std::int64_t rows = B * T, dim = a.dim, hd = a.head_dim();
  const std::int64_t q_n = a.n_heads * hd, kv_n = a.n_kv_heads * hd, hidden = a.ffn_hidden();
  Vec h = x0;
  for (const attn::LayerWeights& l : w.layers) {
    const bool llama = a.block == attn::Block::llama;
    const Vec xa = llama ? rmsnorm_ref(h, l.attention_norm, rows, dim, a.norm_eps) : h;
    Vec q = linear_ref(xa, l.wq, l.bq, rows, dim, q_n);
    Vec k = linear_ref(xa, l.wk, l.bk, rows, dim, kv_n);
    const Vec v = linear_ref(xa, l.wv, l.bv, rows, dim, kv_n);
    rope_ref(q, a, B, T, a.n_heads);
    rope_ref(k, a, B, T, a.n_kv_heads);
    const Vec o = linear_ref(attention_ref(q, k, v, a, B, T), l.wo, l.bo, rows, q_n, dim);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += o[i];
    if (!llama) continue;
    const Vec xf = rmsnorm_ref(h, l.ffn_norm, rows, dim, a.norm_eps);
    Vec g = linear_ref(xf, l.w1, nullptr, rows, dim, hidden);
    const Vec u = linear_ref(xf, l.w3, nullptr, rows, dim, hidden);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    const Vec f = linear_ref(g, l.w2, nullptr, rows, hidden, dim);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += f[i];
  }
  return h;
}

attn::ModelArgs sweep_args(attn::Block block, attn::Rope rope, bool bias) {
  attn::ModelArgs a;
  a.dim = 16;
  a.n_layers = 2;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.multiple_of = 8;  // ffn_hidden 48: six blocks of 8
  a.rope_theta = 10000;
  a.max_batch_size = 5;
  a.max_seq_len = 80;
  a.block = block;
  a.rope = rope;
  a.attention_bias = bias;
  return a;
}

// Runs forward over `schedule` (seqlens of consecutive calls, from start_pos 0) and compares
// every output position with the reference's.
void check_schedule(const attn::ModelArgs& a, std::int64_t B, const std::vector<float>& x,
                    const Vec& ref, std::int64_t T, const std::vector<std::int64_t>& schedule,
                    const attn::Runtime& rt, test::Diff& worst) {
  std::int64_t max_rows = 0;
  for (std::int64_t s : schedule) max_rows = std::max(max_rows, B * s);
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 7), max_rows, rt);
  m.act.ffn_rows = 5;  // the FFN runs in several passes of rows, with a remainder
  const std::int64_t dim = a.dim;
  std::int64_t pos = 0;
  for (std::int64_t s : schedule) {
    std::vector<float> in(std::size_t(B * s * dim)), out(in.size());
    for (std::int64_t b = 0; b < B; ++b)
      std::copy_n(x.data() + (b * T + pos) * dim, s * dim, in.data() + b * s * dim);
    attn::forward(m, in.data(), B, s, pos, out.data());
    std::vector<float> expected(in.size());
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < s * dim; ++i)
        expected[std::size_t(b * s * dim + i)] = float(ref[std::size_t((b * T + pos) * dim + i)]);
    const test::Diff d = test::compare(out.data(), expected.data(), B * s * dim, {});
    INFO("chunk of " << s << " at start_pos " << pos << ": worst " << d.worst_ratio);
    CHECK(d.failures == 0);
    worst.worst_ratio = std::max(worst.worst_ratio, d.worst_ratio);
    pos += s;
  }
}

}  // namespace

TEST_CASE("sweep: every block and RoPE layout, batch 1-5, threads 1-4, every chunking") {
  struct Layout {
    attn::Block block;
    attn::Rope rope;
    bool bias;
  };
  const Layout layouts[] = {{attn::Block::llama, attn::Rope::interleaved, false},
                            {attn::Block::llama, attn::Rope::half, true},
                            {attn::Block::llama, attn::Rope::none, false},
                            {attn::Block::attention, attn::Rope::interleaved, true}};
  constexpr std::int64_t T = 73;  // one more than a full chunk, plus decode steps
  // One prefill over two attention chunks; prefill then decode; short prefills (gemv rows at
  // batch 1); token by token; prefills at start_pos > 0 that cross a chunk boundary.
  const std::vector<std::vector<std::int64_t>> schedules = {
      {73}, {70, 1, 1, 1}, {2, 3, 1, 67}, {1, 1, 1, 1, 1}, {5, 66, 2}};
  test::Diff worst;
  for (const Layout& l : layouts) {
    const attn::ModelArgs a = sweep_args(l.block, l.rope, l.bias);
    for (std::int64_t B = 1; B <= a.max_batch_size; ++B) {
      const attn::RunOptions opts{B, T, 0};
      const std::vector<float> x = attn::seeded_input(a, opts, 11);
      const attn::TransformerWeights w = attn::seeded_weights(a, 7);
      const Vec ref = forward_ref(a, w, Vec(x.begin(), x.end()), B, T);
      for (int threads = 1; threads <= 4; ++threads) {
        const attn::Runtime rt = attn::make_runtime(threads, 0);  // every parallel path
        for (const auto& schedule : schedules) {
          CAPTURE(attn::block_name(l.block));
          CAPTURE(attn::rope_name(l.rope));
          CAPTURE(B);
          CAPTURE(threads);
          CAPTURE(schedule.size());
          std::int64_t total = 0;
          for (std::int64_t s : schedule) total += s;
          if (total > T) continue;
          check_schedule(a, B, x, ref, T, schedule, rt, worst);
        }
      }
    }
  }
  MESSAGE("sweep: worst error " << worst.worst_ratio << " of tolerance");
}

TEST_CASE("sweep: h1/h3 hold a batched decode of a wide FFN (issue 6 heap overflow)") {
  // {"dim":128,"n_heads":2,"multiple_of":1,"ffn_dim_multiplier":64,"max_batch_size":2}:
  // prefill of 2 rows at batch 2 (max_rows 4: sgemm blocks), then decode of 2 rows (gemv over
  // all 21824 hidden units per row) wrote past buffers sized for 4 x 7168.
  attn::ModelArgs a;
  a.dim = 128;
  a.n_heads = 2;
  a.n_kv_heads = 2;
  a.multiple_of = 1;
  a.ffn_dim_multiplier = 64;
  a.max_batch_size = 2;
  a.max_seq_len = 8;
  const attn::RunOptions opts{2, 2, 1};
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 1), 4);
  CHECK(m.act.plan.h3_at >= 2 * a.ffn_hidden());
  CHECK(m.act.work.size() >= std::size_t(2 * m.act.plan.h3_at));
  const std::vector<float> x = attn::seeded_input(a, opts, 1);
  const attn::RunOutputs out = attn::run(m, x, opts, [](const attn::Event&) {});
  const Vec ref = forward_ref(a, m.weights, Vec(x.begin(), x.end()), 2, 3);
  std::vector<float> expected(std::size_t(2 * a.dim));
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < a.dim; ++i)
      expected[std::size_t(b * a.dim + i)] = float(ref[std::size_t((b * 3 + 2) * a.dim + i)]);
  CHECK(test::compare(out.decode_output.data(), expected.data(), 2 * a.dim, {}).failures == 0);
}
