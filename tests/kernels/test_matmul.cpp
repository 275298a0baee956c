// Products as the model uses them: projections sharing x, a batch of B sequences decoded
// together against each decoded alone, decode attention's group kernels against double loops.
// Each product kernel over the shape space, every weight type and kernel set, is a case of the
// registry (kernels/test_kernel_cases.cpp).
#include <doctest/doctest.h>

#include <cmath>

#include "attn/engine/run.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "attn/model/rng.hpp"
#include "test_support.hpp"

namespace {

std::vector<float> uniform(std::size_t n, std::uint64_t stream, double scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(attn::uniform_pm1(11, stream, i) * scale);
  return v;
}

}  // namespace

TEST_CASE("linear: projections sharing x each get their own rows, batched and gemv alike") {
  const attn::Runtime rt = attn::make_runtime(2, 0);
  for (std::int64_t M : {1, 2, 7, 32}) {
    const std::int64_t K = 40;
    const std::vector<float> x = uniform(std::size_t(M * K), 5, 1.0);
    const std::vector<float> wa = uniform(std::size_t(70 * K), 6, 0.2);
    const std::vector<float> wb = uniform(std::size_t(3 * K), 7, 0.2);
    std::vector<float> a(std::size_t(M * 70)), b(std::size_t(M * 3));
    const attn::Projection ps[2] = {{a.data(), wa.data(), nullptr, 70},
                                    {b.data(), wb.data(), nullptr, 3}};
    std::vector<float> pack(std::size_t(attn::pack_floats(M, K)));
    attn::linear(rt, ps, x.data(), M, K, pack.data());
    for (std::int64_t m = 0; m < M; ++m) {
      double ra = 0, rb = 0;  // the last row of each projection
      for (std::int64_t k = 0; k < K; ++k) {
        ra += double(x[std::size_t(m * K + k)]) * wa[std::size_t(69 * K + k)];
        rb += double(x[std::size_t(m * K + k)]) * wb[std::size_t(2 * K + k)];
      }
      CAPTURE(M);
      CHECK(a[std::size_t(m * 70 + 69)] == doctest::Approx(ra).epsilon(1e-5));
      CHECK(b[std::size_t(m * 3 + 2)] == doctest::Approx(rb).epsilon(1e-5));
    }
  }
}

// A prefill's items cut x's rows into tiles and the weights into 64-row blocks of every
// projection in turn (matmul.cpp, linear_tiles): each projection, with its bias, gets the bits it
// gets alone, every block and tile included (70 rows: a short second block; 61 and 95 rows of x:
// three and four tiles), on 1 and 2 threads; and every output the float64 product.
TEST_CASE("linear: a prefill's projections sharing x get the bits each gets alone, with bias") {
  for (int threads : {1, 2}) {
    const attn::Runtime rt = attn::make_runtime(threads, 0);
    for (std::int64_t M : {33, 61, 95}) {
      const std::int64_t K = 40, na = 70, nb = 3;
      const std::vector<float> x = uniform(std::size_t(M * K), 5, 1.0);
      const std::vector<float> wa = uniform(std::size_t(na * K), 6, 0.2);
      const std::vector<float> wb = uniform(std::size_t(nb * K), 7, 0.2);
      const std::vector<float> bias = uniform(std::size_t(nb), 8, 1.0);
      std::vector<float> a(std::size_t(M * na)), b(std::size_t(M * nb));
      std::vector<float> a1(a.size()), b1(b.size());
      const attn::Projection ps[2] = {{a.data(), wa.data(), nullptr, na},
                                      {b.data(), wb.data(), bias.data(), nb}};
      const attn::Projection pa{a1.data(), wa.data(), nullptr, na};
      const attn::Projection pb{b1.data(), wb.data(), bias.data(), nb};
      std::vector<float> scratch(std::size_t(attn::scratch_floats(M, K, threads)));
      attn::linear(rt, ps, x.data(), M, K, scratch.data());
      attn::linear(rt, {&pa, 1}, x.data(), M, K, scratch.data());
      attn::linear(rt, {&pb, 1}, x.data(), M, K, scratch.data());
      CAPTURE(threads);
      CAPTURE(M);
      CHECK(a == a1);
      CHECK(b == b1);
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t j = 0; j < na + nb; ++j) {
          const bool in_a = j < na;
          const std::int64_t r = in_a ? j : j - na;
          const std::vector<float>& w = in_a ? wa : wb;
          double ref = in_a ? 0.0 : double(bias[std::size_t(r)]);
          for (std::int64_t k = 0; k < K; ++k)
            ref += double(x[std::size_t(m * K + k)]) * w[std::size_t(r * K + k)];
          const float got = in_a ? a[std::size_t(m * na + r)] : b[std::size_t(m * nb + r)];
          CHECK(got == doctest::Approx(ref).epsilon(1e-5));
        }
    }
  }
}

TEST_CASE("equivalence: a batch of B decoded together equals each sequence decoded alone") {
  const attn::Runtime rt = attn::make_runtime(2, 0);
  attn::ModelArgs a = attn::load_config(test::source_dir() / "configs" / "llama-tiny.json");
  a.dim = 64;  // head_dim 16: whole vectors and a tail in the products
  a.n_heads = 4;
  a.n_kv_heads = 2;
  const std::int64_t P = 3, N = 4, dim = a.dim;
  // Decode rows B: the batched kernel (2..kBatchRows, its blockings by B) and the GEMM.
  for (std::int64_t B : std::initializer_list<std::int64_t>{2, 3, 5, 8, 16, 17, attn::kBatchRows,
                                                            attn::kBatchRows + 1, 33}) {
    a.max_batch_size = B;
    const attn::RunOptions together{B, P, N}, alone{1, P, N};
    const std::vector<float> x = attn::seeded_input(a, together, 9);  // [B, P + N, dim]
    attn::Transformer mb = attn::make_transformer(a, attn::seeded_weights(a, 9), B * P, rt);
    const attn::RunOutputs rb = attn::run(mb, x, together, [](const attn::Event&) {});
    attn::ModelArgs a1 = a;
    a1.max_batch_size = 1;
    attn::Transformer m1 = attn::make_transformer(a1, attn::seeded_weights(a1, 9), P, rt);
    for (std::int64_t b = 0; b < B; ++b) {
      const std::vector<float> xb(x.begin() + b * (P + N) * dim,
                                  x.begin() + (b + 1) * (P + N) * dim);
      const attn::RunOutputs r1 = attn::run(m1, xb, alone, [](const attn::Event&) {});
      CAPTURE(B);
      CAPTURE(b);
      const test::Diff head = test::compare(rb.prefill_output.data() + b * P * dim,
                                            r1.prefill_output.data(), P * dim, {});
      CHECK(head.failures == 0);
      for (std::int64_t i = 0; i < N; ++i) {
        const test::Diff d = test::compare(rb.decode_output.data() + (i * B + b) * dim,
                                           r1.decode_output.data() + i * dim, dim, {});
        CAPTURE(i);
        CHECK(d.failures == 0);
      }
    }
  }
}

TEST_CASE("decode attention: the group kernels at and around their key, head and lane blocks") {
  // group_scores takes keys 4 at a time (then one by one), group_mix heads 4 at a time (then
  // 3, 2 or 1), both head_dim in vectors of the kernel set's width (16, 8 or 4) and a scalar
  // tail. Against double loops, with |q| |k| and sum p |v| of order 1.
  const std::int64_t heads[] = {1, 2, 3, 4, 5, 7, 8, 9};
  const std::int64_t key_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 17, 130};
  const std::int64_t dims[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 128, 130};
  for (std::int64_t hd : dims)
    for (std::int64_t keys : key_counts) {
      const std::vector<float> k = uniform(std::size_t(keys * hd), 21, 1 / std::sqrt(double(hd)));
      const std::vector<float> v = uniform(std::size_t(keys * hd), 22, 1.0);
      for (std::int64_t n : heads) {
        const std::vector<float> q = uniform(std::size_t(n * hd), 23, 1.0);
        std::vector<float> p = uniform(std::size_t(n * keys), 24, 1.0 / double(keys));
        for (float& x : p) x = std::fabs(x);  // probabilities are >= 0
        const float scale = 0.5f;
        std::vector<float> want_s(std::size_t(n * keys)), want_o(std::size_t(n * hd));
        for (std::int64_t h = 0; h < n; ++h) {
          for (std::int64_t j = 0; j < keys; ++j) {
            double acc = 0;
            for (std::int64_t c = 0; c < hd; ++c)
              acc += double(q[std::size_t(h * hd + c)]) * k[std::size_t(j * hd + c)];
            want_s[std::size_t(h * keys + j)] = float(scale * acc);
          }
          for (std::int64_t c = 0; c < hd; ++c) {
            double acc = 0;
            for (std::int64_t j = 0; j < keys; ++j)
              acc += double(p[std::size_t(h * keys + j)]) * v[std::size_t(j * hd + c)];
            want_o[std::size_t(h * hd + c)] = float(acc);
          }
        }
        for (const std::string& isa : test::kernel_names()) {
          const attn::Runtime rt = attn::make_runtime(1, 0, isa);
          std::vector<float> s(want_s.size(), NAN), o(want_o.size(), NAN);
          attn::group_scores(rt, q.data(), n, k.data(), keys, hd, scale, s.data());
          attn::group_mix(rt, p.data(), n, v.data(), keys, hd, o.data());
          const test::Tolerance tol{1e-6, 1e-6};
          const test::Diff ds = test::compare(s.data(), want_s.data(), n * keys, tol);
          const test::Diff dout = test::compare(o.data(), want_o.data(), n * hd, tol);
          CAPTURE(isa);
          CAPTURE(hd);
          CAPTURE(keys);
          CAPTURE(n);
          CAPTURE(ds.worst_ratio);
          CAPTURE(dout.worst_ratio);
          CHECK(ds.failures == 0);
          CHECK(dout.failures == 0);
        }
      }
    }
}
