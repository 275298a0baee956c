// The ops and the model's pieces against values worked out by hand or by plain double loops.
#include <doctest/doctest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/kernels/attention.hpp"
#include "attn/kernels/kernels.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "test_support.hpp"

using doctest::Approx;

TEST_CASE("rmsnorm: x / sqrt(mean(x^2) + eps) * weight") {
  const float x[8] = {1, 2, 3, 4, -2, 0, 0, 0}, w[4] = {1, 1, 1, 2};
  float out[8];
  attn::rmsnorm(attn::Runtime{}, out, x, w, 2, 4, 0.0f);
  const double inv = 1 / std::sqrt(7.5);  // mean(1, 4, 9, 16) = 7.5
  CHECK(out[0] == Approx(inv));
  CHECK(out[2] == Approx(3 * inv));
  CHECK(out[3] == Approx(8 * inv));
  CHECK(out[4] == Approx(-2.0));  // mean(4, 0, 0, 0) = 1
  attn::rmsnorm(attn::Runtime{}, out, x, w, 1, 4, 0.5f);
  CHECK(out[0] == Approx(1 / std::sqrt(8.0)));
}

TEST_CASE("rope: each layout rotates its own pairs by pos * theta^(-2i/head_dim)") {
  // head_dim 4, theta 10000: frequencies 1 and 0.01. Position 1 for row t=0 with start_pos 1.
  SUBCASE("interleaved pairs (x0, x1), (x2, x3)") {
    const auto table = attn::make_rope_table(attn::Rope::interleaved, 4, 8, 10000);
    float x[4] = {1, 0, 0, 1};
    attn::apply_rope(attn::Runtime{}, table, x, 1, 1, 1, 1);
    CHECK(x[0] == Approx(std::cos(1.0)));
    CHECK(x[1] == Approx(std::sin(1.0)));
    CHECK(x[2] == Approx(-std::sin(0.01)));
    CHECK(x[3] == Approx(std::cos(0.01)));
  }
  SUBCASE("half pairs (x0, x2), (x1, x3)") {
    const auto table = attn::make_rope_table(attn::Rope::half, 4, 8, 10000);
    float x[4] = {1, 0, 0, 1};
    attn::apply_rope(attn::Runtime{}, table, x, 1, 1, 1, 1);
    CHECK(x[0] == Approx(std::cos(1.0)));
    CHECK(x[2] == Approx(std::sin(1.0)));
    CHECK(x[1] == Approx(-std::sin(0.01)));
    CHECK(x[3] == Approx(std::cos(0.01)));
  }
  SUBCASE("position start_pos + t, and none leaves x alone") {
    const auto table = attn::make_rope_table(attn::Rope::interleaved, 2, 8, 10000);
    float x[4] = {1, 0, 1, 0};  // [1, 2, 1, 2]: rows at positions 3 and 4
    attn::apply_rope(attn::Runtime{}, table, x, 1, 2, 1, 3);
    CHECK(x[0] == Approx(std::cos(3.0)));
    CHECK(x[3] == Approx(std::sin(4.0)));
    const auto none = attn::make_rope_table(attn::Rope::none, 2, 8, 10000);
    float y[2] = {1, 2};
    attn::apply_rope(attn::Runtime{}, none, y, 1, 1, 1, 5);
    CHECK(y[0] == 1.0f);
    CHECK(y[1] == 2.0f);
  }
}

TEST_CASE("rope: partial rotary turns the leading rot_dims only, factors and magnitude scale") {
  // head_dim 6, rot_dims 4 (halves within them: pairs (x0, x2), (x1, x3)), theta 10000:
  // frequencies 10000^(-2i/4) = 1 and 0.01, divided by factors 2 and 4; cos and sin times 0.5.
  const float factors[2] = {2, 4};
  const auto table =
      attn::make_rope_table(attn::Rope::half, 6, 8, 10000, nullptr, -1, factors, 4, 0.5);
  float x[12] = {1, 0, 0, 1, 7, 9, 1, 0, 0, 1, 7, 9};  // two heads at position 3
  attn::apply_rope(attn::Runtime{}, table, x, 1, 1, 2, 3);
  for (int h = 0; h < 2; ++h) {
    const float* v = x + 6 * h;
    CHECK(v[0] == Approx(0.5 * std::cos(1.5)));
    CHECK(v[2] == Approx(0.5 * std::sin(1.5)));
    CHECK(v[1] == Approx(-0.5 * std::sin(0.0075)));
    CHECK(v[3] == Approx(0.5 * std::cos(0.0075)));
    CHECK(v[4] == 7.0f);  // past rot_dims: passed through
    CHECK(v[5] == 9.0f);
  }
}

TEST_CASE("exp_lanes: within 1.5 ulp of exp over the float range it computes, limits outside") {
  // Every 4099th float in [-86.5, 88.7], against exp in double, in an array loop as softmax and
  // swiglu run it (vectorized).
  auto bits = [](float x) { return std::bit_cast<std::uint32_t>(x); };
  std::vector<float> xs;
  for (std::uint32_t u = 0; u <= bits(88.7f); u += 4099) xs.push_back(std::bit_cast<float>(u));
  for (std::uint32_t u = 0x80000000u; u <= bits(-86.5f); u += 4099)
    xs.push_back(std::bit_cast<float>(u));
  xs.insert(xs.end(), {-86.5f, 88.7f, 1.0f, -1.0f, 1e-30f, -1e-30f});
  std::vector<float> ys(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) ys[i] = attn::exp_lanes(xs[i]);
  double worst = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double e = std::exp(double(xs[i]));
    const float ef = float(e);
    worst = std::max(worst, std::fabs(ys[i] - e) / double(std::nextafter(ef, INFINITY) - ef));
  }
  CAPTURE(worst);
  CHECK(xs.size() > 500000);
  CHECK(worst < 1.5);
  CHECK(attn::exp_lanes(0.0f) == 1.0f);
  CHECK(attn::exp_lanes(-86.6f) == 0.0f);
  CHECK(attn::exp_lanes(-INFINITY) == 0.0f);
  CHECK(attn::exp_lanes(-FLT_MAX) == 0.0f);
  CHECK(attn::exp_lanes(88.8f) == INFINITY);
  CHECK(attn::exp_lanes(INFINITY) == INFINITY);
  CHECK(std::isnan(attn::exp_lanes(NAN)));
}

// The element-wise entries of every kernel set this CPU runs, against double loops, at lengths
// around the vector widths (4, 8, 16) and the softmax's 8 running sums; every set gives the bits
// of the generic one.
TEST_CASE("kernels: softmax and swiglu of every set against double, bit-identical across sets") {
  const attn::Kernels& generic = attn::generic_kernels();
  for (const std::string& name : test::kernel_names())
    for (std::int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200}) {
      CAPTURE(name);
      CAPTURE(n);
      const attn::Kernels& k = *attn::find_kernels(name);
      std::vector<float> x(std::size_t(n + 3)), h3(std::size_t(n + 3));
      for (std::int64_t i = 0; i < n + 3; ++i) x[std::size_t(i)] = float(std::sin(0.7 * i) * 9);
      for (std::int64_t i = 0; i < n; ++i) h3[std::size_t(i)] = float(std::cos(1.3 * i) * 2);
      std::vector<float> s = x, s0 = x;
      k.softmax(s.data(), n, n + 3);
      generic.softmax(s0.data(), n, n + 3);
      double mx = x[0], sum = 0;
      for (std::int64_t j = 0; j < n; ++j) mx = std::max(mx, double(x[std::size_t(j)]));
      for (std::int64_t j = 0; j < n; ++j) sum += std::exp(double(x[std::size_t(j)]) - mx);
      for (std::int64_t j = 0; j < n; ++j)
        CHECK(s[std::size_t(j)] ==
              Approx(std::exp(double(x[std::size_t(j)]) - mx) / sum).epsilon(1e-5));
      for (std::int64_t j = n; j < n + 3; ++j) CHECK(s[std::size_t(j)] == 0.0f);
      CHECK(std::memcmp(s.data(), s0.data(), s.size() * sizeof(float)) == 0);
      std::vector<float> g = x, g0 = x;
      k.swiglu(g.data(), h3.data(), n);
      generic.swiglu(g0.data(), h3.data(), n);
      for (std::int64_t i = 0; i < n; ++i) {
        const double v = x[std::size_t(i)];
        CHECK(g[std::size_t(i)] ==
              Approx(v / (1 + std::exp(-v)) * h3[std::size_t(i)]).epsilon(1e-5));
      }
      CHECK(g[std::size_t(n)] == x[std::size_t(n)]);  // nothing past n is written
      CHECK(std::memcmp(g.data(), g0.data(), g.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("softmax: stable for large scores, masked tail is zero") {
  float a[3] = {1, 2, 3};
  attn::softmax_masked(attn::Runtime{}, a, 3, 3);
  CHECK(a[0] == Approx(0.09003057));
  CHECK(a[2] == Approx(0.66524096));
  float b[4] = {1000, 1000, 5, 7};
  attn::softmax_masked(attn::Runtime{}, b, 2, 4);
  CHECK(b[0] == Approx(0.5));
  CHECK(b[1] == Approx(0.5));
  CHECK(b[2] == 0.0f);
  CHECK(b[3] == 0.0f);
}

TEST_CASE("linear: matches a double loop, with bias, accumulate, gemv and gemm paths") {
  for (int threads : {1, 2})
    for (std::int64_t M : {1, 3, 5, 70}) {
      const std::int64_t K = 37, N = 53;  // N not a multiple of the 16-row slices
      std::vector<float> x(std::size_t(M * K)), w(std::size_t(N * K)),
          b(static_cast<std::size_t>(N));
      std::vector<float> out(std::size_t(M * N), 1.0f);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.1 * double(i)));
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(std::cos(0.07 * double(i)));
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i) * 0.01f;
      const attn::Runtime rt = attn::make_runtime(threads, 0);
      const attn::Projection p{out.data(), w.data(), b.data(), N};
      std::vector<float> pack(std::size_t(attn::scratch_floats(M, K, threads)));
      attn::linear(rt, {&p, 1}, x.data(), M, K, pack.data(), /*accumulate=*/true);
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
          double ref = 1.0 + b[std::size_t(n)];
          for (std::int64_t k = 0; k < K; ++k)
            ref += double(x[std::size_t(m * K + k)]) * w[std::size_t(n * K + k)];
          CAPTURE(M);
          CHECK(out[std::size_t(m * N + n)] == Approx(ref).epsilon(1e-5));
        }
    }
}

TEST_CASE("cache: layout [layer][batch][kv head][position][head_dim], stored at start_pos") {
  attn::ModelArgs a = attn::seed_args();  // 2 kv heads, head_dim 3, max_batch 2, max_seq 17
  a.n_layers = 2;
  attn::KVCache c = attn::make_kv_cache(a);
  CHECK(c.cache_k.size() == std::size_t(2 * 2 * 2 * 17 * 3));
  CHECK(c.offset(1, 1, 1, 2) == (((1 * 2 + 1) * 2 + 1) * 17 + 2) * 3);
  // xk: [bsz 2, seqlen 1, 2 kv heads, 3]
  const float xk[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  attn::store_kv(c, 1, xk, xk, 2, 1, 4);
  CHECK(*c.k(1, 1, 0, 4) == 6.0f);  // batch 1, head 0
  CHECK(c.k(1, 0, 1, 4)[2] == 5.0f);
  const std::vector<float> f = attn::filled_k(c, 1, 2, 5);  // [2, 2, 5, 3]
  CHECK(f[std::size_t(((1 * 2 + 1) * 5 + 4) * 3)] == 9.0f);
  CHECK(f[0] == 0.0f);
}

TEST_CASE("attention: causal rows and grouped heads read the right KV head in place") {
  attn::ModelArgs a = attn::seed_args();
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.dim = 8;  // head_dim 2, n_rep 2
  attn::KVCache c = attn::make_kv_cache(a);
  std::vector<float> scratch(
      std::size_t(attn::attention_scratch_floats(c.max_seq_len, 4, 1, 4, 2)));
  // Keys and values for positions 0 and 1 of each KV head; v differs by head.
  const float xk[8] = {1, 0, 0, 1, 0, 1, 1, 0}, xv[8] = {1, 2, 10, 20, 3, 4, 30, 40};
  attn::store_kv(c, 0, xk, xv, 1, 2, 0);
  float xq[16] = {};  // [1, 2, 4 heads, 2], zero queries: uniform weights over visible keys
  float out[16];
  attn::attention(attn::Runtime{}, out, xq, c.layer(0), 4, 1, 2, 0, scratch.data());
  // Row 0 sees position 0 only; heads 0, 1 read KV head 0, heads 2, 3 read KV head 1.
  CHECK(out[0] == 1.0f);
  CHECK(out[3] == 2.0f);
  CHECK(out[4] == 10.0f);
  CHECK(out[7] == 20.0f);
  // Row 1 sees positions 0 and 1 equally.
  CHECK(out[8 + 0] == Approx(2.0));
  CHECK(out[8 + 4] == Approx(20.0));  // head 2: mean of KV head 1 values (10, 20), (30, 40)
  CHECK(out[8 + 5] == Approx(30.0));
}

TEST_CASE("attention: a decode step of a group wider than a score chunk (130 heads, 1 KV head)") {
  // Decode takes a KV head's query heads together, kAttentionChunk at a time: 64 + 64 + 2.
  attn::ModelArgs a = attn::seed_args();
  a.n_heads = 130;
  a.n_kv_heads = 1;
  a.dim = 130 * 3;  // head_dim 3
  const std::int64_t hd = 3, keys = 5;
  attn::KVCache c = attn::make_kv_cache(a);
  std::vector<float> scratch(
      std::size_t(attn::attention_scratch_floats(c.max_seq_len, 16, 1, 130, 3)));
  std::vector<float> xk(std::size_t(keys * hd)), xv(xk.size()), xq(std::size_t(a.dim));
  for (std::size_t i = 0; i < xk.size(); ++i) {
    xk[i] = float(std::sin(0.7 * double(i)));
    xv[i] = float(std::cos(0.3 * double(i)));
  }
  for (std::size_t i = 0; i < xq.size(); ++i) xq[i] = float(std::sin(1.3 * double(i) + 0.2));
  attn::store_kv(c, 0, xk.data(), xv.data(), 1, keys, 0);
  std::vector<float> out(xq.size()), probs(std::size_t(a.n_heads * keys));
  for (int threads : {1, 2, 16}) {  // 16 on 2 cores: more threads than KV heads
    attn::Runtime rt = attn::make_runtime(threads, 0);
    attn::attention(rt, out.data(), xq.data(), c.layer(0), a.n_heads, 1, 1, keys - 1,
                    scratch.data(), {}, probs.data());
    for (std::int64_t h = 0; h < a.n_heads; ++h) {
      double p[keys], sum = 0, mx = -1e30;
      for (std::int64_t j = 0; j < keys; ++j) {
        p[j] = 0;
        for (std::int64_t d = 0; d < hd; ++d)
          p[j] += double(xq[std::size_t(h * hd + d)]) * xk[std::size_t(j * hd + d)];
        p[j] /= std::sqrt(double(hd));
        mx = std::max(mx, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (std::int64_t j = 0; j < keys; ++j) {
        CAPTURE(h);
        CHECK(probs[std::size_t(h * keys + j)] == Approx(p[j] / sum).epsilon(1e-5));
      }
      for (std::int64_t d = 0; d < hd; ++d) {
        double o = 0;
        for (std::int64_t j = 0; j < keys; ++j) o += p[j] / sum * xv[std::size_t(j * hd + d)];
        CAPTURE(h);
        CHECK(out[std::size_t(h * hd + d)] == Approx(o).epsilon(1e-5));
      }
    }
  }
}

// Prefill attention runs a head's rows on the decode kernels, one row at a time: against double,
// and each row bit for bit the row's own decode step (one order per output: docs/design.md), at
// and around a chunk's size (OpenBLAS's sgemm took chunks past 2^18 multiply-adds before).
TEST_CASE("attention: prefill rows against double and bit for bit their decode steps") {
  const std::int64_t hd = 64;
  attn::ModelArgs a = attn::seed_args();
  a.n_heads = 2;
  a.n_kv_heads = 1;
  a.dim = 2 * hd;
  a.max_seq_len = 96;
  for (attn::Mask kind : {attn::Mask::causal, attn::Mask::none})
    for (std::int64_t S : {2, 63, 64, 65, 80}) {
      attn::KVCache c = attn::make_kv_cache(a);
      std::vector<float> xk(std::size_t(S * hd)), xv(xk.size()), xq(std::size_t(S * a.dim));
      for (std::size_t i = 0; i < xk.size(); ++i) {
        xk[i] = float(std::sin(0.7 * double(i)));
        xv[i] = float(std::cos(0.3 * double(i)));
      }
      for (std::size_t i = 0; i < xq.size(); ++i) xq[i] = float(std::sin(1.3 * double(i) + 0.2));
      attn::store_kv(c, 0, xk.data(), xv.data(), 1, S, 0);
      std::vector<float> scratch(
          std::size_t(attn::attention_scratch_floats(c.max_seq_len, 2, 1, 2, hd)));
      std::vector<float> out(xq.size());
      attn::AttentionMask mask;
      mask.kind = kind;
      attn::attention(attn::make_runtime(2, 0), out.data(), xq.data(), c.layer(0), a.n_heads, 1, S,
                      0, scratch.data(), mask);
      for (std::int64_t t = 0; t < S && kind == attn::Mask::causal; ++t) {
        std::vector<float> step(std::size_t(a.dim));  // position t alone, its keys 0..t
        attn::attention(attn::make_runtime(1, 0), step.data(), xq.data() + t * a.dim, c.layer(0),
                        a.n_heads, 1, 1, t, scratch.data(), mask);
        CAPTURE(S);
        CAPTURE(t);
        CHECK(std::memcmp(step.data(), out.data() + t * a.dim, step.size() * sizeof(float)) == 0);
      }
      for (std::int64_t t = 0; t < S; ++t)
        for (std::int64_t h = 0; h < a.n_heads; ++h) {
          const std::int64_t keys = kind == attn::Mask::causal ? t + 1 : S;
          std::vector<double> p(static_cast<std::size_t>(keys));
          double sum = 0, mx = -1e300;
          for (std::int64_t j = 0; j < keys; ++j) {
            double d = 0;
            for (std::int64_t e = 0; e < hd; ++e)
              d += double(xq[std::size_t((t * a.n_heads + h) * hd + e)]) *
                   xk[std::size_t(j * hd + e)];
            p[std::size_t(j)] = d / std::sqrt(double(hd));
            mx = std::max(mx, p[std::size_t(j)]);
          }
          for (double& x : p) sum += (x = std::exp(x - mx));
          for (std::int64_t e = 0; e < hd; ++e) {
            double o = 0;
            for (std::int64_t j = 0; j < keys; ++j)
              o += p[std::size_t(j)] / sum * xv[std::size_t(j * hd + e)];
            CAPTURE(S);
            CAPTURE(t);
            CAPTURE(h);
            CHECK(out[std::size_t((t * a.n_heads + h) * hd + e)] ==
                  Approx(o).epsilon(1e-5).scale(1.0));
          }
        }
    }
}

TEST_CASE("equivalence: prefill P then N decode steps equals one prefill of P + N") {
  const attn::Runtime rt = attn::make_runtime(2);
  attn::ModelArgs a = attn::load_config(test::source_dir() / "configs" / "llama-tiny.json");
  const attn::RunOptions split{2, 5, 6}, whole{2, 11, 0};
  const std::vector<float> x = attn::seeded_input(a, split, 7);
  attn::Transformer m1 = attn::make_transformer(a, attn::seeded_weights(a, 7), 2 * 5, rt);
  attn::Transformer m2 = attn::make_transformer(a, attn::seeded_weights(a, 7), 2 * 11, rt);
  const auto r1 = attn::run(m1, x, split, [](const attn::Event&) {});
  const auto r2 = attn::run(m2, x, whole, [](const attn::Event&) {});
  const std::int64_t dim = a.dim;
  for (std::int64_t b = 0; b < 2; ++b) {
    const test::Diff head = test::compare(r1.prefill_output.data() + b * 5 * dim,
                                          r2.prefill_output.data() + b * 11 * dim, 5 * dim, {});
    CHECK(head.failures == 0);
    for (std::int64_t i = 1; i <= 6; ++i) {
      const test::Diff d =
          test::compare(r1.decode_output.data() + ((i - 1) * 2 + b) * dim,
                        r2.prefill_output.data() + (b * 11 + 4 + i) * dim, dim, {});
      CAPTURE(i);
      CHECK(d.failures == 0);
    }
  }
}
