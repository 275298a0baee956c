// The matrix products against plain double loops over the shape space the engine chooses from:
// every row count 1..33 (gemv, the batched kernel up to kBatchRows, sgemm beyond), weight rows
// around the 4-row register blocks and the 64-row dynamic blocks, K around the vector width and
// the kernel's column chunks, strided weights, bias, accumulate, 1 and 2 threads, every ISA
// this CPU runs. Then a batch of B sequences decoded together against each decoded alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "attn/kernels/detail/batch_lanes.hpp"
#include "attn/kernels/detail/gemm.hpp"
#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/detail/sets.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "attn/model/rng.hpp"
#include "attn/model/session.hpp"
#include "test_support.hpp"

namespace {

struct Shape {
  std::int64_t n, K, ldw;  // ldw > K: w is a column block of a wider matrix
};

// n: 4-row blocks with a remainder, several 64-row blocks; K: below one vector, odd, a whole
// number of 16-float blocks, and past the kernel's 512-column steps and its column chunks
// (4096 floats at 16 rows, 2560 at 24) with a remainder.
constexpr Shape kShapes[] = {
    {53, 37, 37}, {130, 100, 100}, {67, 64, 80}, {5, 3, 3}, {9, 4500, 4503}};

std::vector<float> uniform(std::size_t n, std::uint64_t stream, double scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(attn::uniform_pm1(11, stream, i) * scale);
  return v;
}

// w32 in one weight type (0: F32, 1: BF16, 2: F16, as WeightType): its 16-bit bits, and the
// values a kernel multiplies (the bits widened, or w32 itself).
struct TypedWeights {
  const std::vector<float>& w32;
  int type;
  std::vector<std::uint16_t> bits;
  std::vector<float> values;

  TypedWeights(const std::vector<float>& w, int t)
      : w32(w), type(t), bits(w.size()), values(w.size()) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      bits[i] = type == 1 ? attn::f32_to_bf16(w[i]) : attn::f32_to_f16(w[i]);
      values[i] = type == 0   ? w[i]
                  : type == 1 ? attn::bf16_to_f32(bits[i])
                              : attn::f16_to_f32(bits[i]);
    }
  }
  const void* data() const {
    return type == 0 ? static_cast<const void*>(w32.data()) : bits.data();
  }
};

}  // namespace

TEST_CASE("linear: rows 1 to 33 on every kernel set match a double loop") {
  const std::vector<std::string> isas = test::kernel_names();
  REQUIRE(!isas.empty());
  CHECK(isas.back() == "generic");
  CHECK(attn::make_runtime(1).kernels->name == isas.front());
  CHECK_THROWS(attn::make_runtime(1, 0, "no-such-isa"));
  for (const Shape& s : kShapes)
    for (std::int64_t M = 1; M <= 33; ++M) {
      const double scale = 1 / std::sqrt(double(s.K));  // products of order 1 at any K
      const std::vector<float> x = uniform(std::size_t(M * s.K), 1, 1.0);
      const std::vector<float> w = uniform(std::size_t(s.n * s.ldw), 2, scale);
      const std::vector<float> bias = uniform(std::size_t(s.n), 3, 1.0);
      const std::vector<float> init = uniform(std::size_t(M * s.n), 4, 1.0);
      std::vector<double> ref(std::size_t(M * s.n));  // x w^T, in double
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t j = 0; j < s.n; ++j) {
          double acc = 0;
          for (std::int64_t k = 0; k < s.K; ++k)
            acc += double(x[std::size_t(m * s.K + k)]) * w[std::size_t(j * s.ldw + k)];
          ref[std::size_t(m * s.n + j)] = acc;
        }
      for (const std::string& isa : isas)
        for (int threads : {1, 2})
          for (bool accumulate : {false, true})
            for (bool with_bias : {false, true}) {
              const attn::Runtime rt = attn::make_runtime(threads, 0, isa);
              std::vector<float> out = init;
              std::vector<float> pack(std::size_t(
                  attn::scratch_floats(M, s.K, threads, false, *attn::find_kernels(isa))));
              const attn::Projection p{out.data(),
                                       {w.data(), attn::WeightType::f32, s.ldw},
                                       with_bias ? bias.data() : nullptr,
                                       s.n};
              attn::linear(rt, {&p, 1}, x.data(), M, s.K, pack.data(), accumulate);
              std::vector<float> expected(out.size());
              for (std::size_t i = 0; i < expected.size(); ++i)
                expected[i] = float(ref[i] + (accumulate ? init[i] : 0.0) +
                                    (with_bias ? bias[i % std::size_t(s.n)] : 0.0));
              const test::Diff d =
                  test::compare(out.data(), expected.data(), std::int64_t(out.size()), {});
              CAPTURE(isa);
              CAPTURE(threads);
              CAPTURE(M);
              CAPTURE(s.n);
              CAPTURE(s.K);
              CAPTURE(accumulate);
              CAPTURE(with_bias);
              CAPTURE(d.worst_ratio);
              CHECK(d.failures == 0);
            }
    }
}

namespace {

// A set's kernels for one weight type, for a CPU whose 512-bit FMAs run at full width or not.
attn::TypedKernels typed_kernels(const std::string& set, int type, bool full_width) {
  using Get = attn::TypedKernels (*)(bool);
  using Gets = std::array<Get, 3>;  // by WeightType
  Gets get = {attn::generic_float_kernels, attn::generic_Bf16_kernels, attn::generic_F16_kernels};
#if defined(__x86_64__)
  if (set == "avx2")
    get = Gets{attn::avx2_float_kernels, attn::avx2_Bf16_kernels, attn::avx2_F16_kernels};
  if (set == "avx512")
    get = Gets{attn::avx512_float_kernels, attn::avx512_Bf16_kernels, attn::avx512_F16_kernels};
#endif
  return get[std::size_t(type)](full_width);
}

}  // namespace

// linear() reaches only the blocking its CPU's FMA width picks (M = 8 with AVX-512: one group
// under 3 weight rows where 512-bit FMAs are full width, groups of 4 under 8 rows on Zen 4);
// here both, on every set and weight type, against a double loop and against each other.
TEST_CASE("batched kernel: each blocking at 2 to 32 rows, both FMA widths, every weight type") {
  const std::int64_t K = 4500, ldw = 4503;  // past the column chunks and steps, a remainder
  for (std::int64_t n : {64, 13}) {
    const std::vector<float> w32 = uniform(std::size_t(n * ldw), 5, 1 / std::sqrt(double(K)));
    for (int type = 0; type < 3; ++type) {
      const TypedWeights typed(w32, type);
      const std::vector<float>& wf = typed.values;
      const void* w = typed.data();
      for (std::int64_t M : {2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 24, 32}) {
        const std::vector<float> x = uniform(std::size_t(M * K), 6, 1.0);
        std::vector<float> xp(std::size_t(M * K));  // [K / kPack, M, kPack], as linear() packs
        for (std::int64_t b = 0; b < K / attn::kPack; ++b)
          for (std::int64_t m = 0; m < M; ++m)
            for (std::int64_t l = 0; l < attn::kPack; ++l)
              xp[std::size_t((b * M + m) * attn::kPack + l)] =
                  x[std::size_t(m * K + b * attn::kPack + l)];
        std::vector<float> expected(std::size_t(M * n));
        for (std::int64_t m = 0; m < M; ++m)
          for (std::int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (std::int64_t k = 0; k < K; ++k)
              acc += double(x[std::size_t(m * K + k)]) * wf[std::size_t(j * ldw + k)];
            expected[std::size_t(m * n + j)] = float(acc);
          }
        for (const std::string& set : test::kernel_names()) {
          std::vector<float> out[2];
          for (bool full_width : {false, true}) {
            std::vector<float>& y = out[full_width];
            y.assign(std::size_t(M * n), 0.0f);
            typed_kernels(set, type, full_width)
                .batch(w, ldw, xp.data(), x.data(), M, K, y.data(), n, n, false);
            const test::Diff d = test::compare(y.data(), expected.data(), M * n, {});
            CAPTURE(set);
            CAPTURE(type);
            CAPTURE(full_width);
            CAPTURE(M);
            CAPTURE(n);
            CAPTURE(d.worst_ratio);
            CHECK(d.failures == 0);
          }
          CAPTURE(set);
          CAPTURE(M);
          CHECK(out[0] == out[1]);  // the bits do not depend on the blocking
        }
      }
    }
  }
}

TEST_CASE("linear: prefill GEMM at and around its row tiles, panels, blocks and column chunks") {
  // Prefill (M > kBatchRows) on AVX-512 runs gemm.hpp: x in panels of 8 rows (every remainder
  // 1..7 below, the rest zero), panels of 48 features and blocks of 192 (in each thread's half of
  // n, rounded to 16), column chunks of 256 transposed 16 at a time. Elsewhere, sgemm on the same
  // halves.
  REQUIRE(attn::kGemmNC == 192);
  REQUIRE(attn::kGemmKC == 256);
  REQUIRE(attn::kGemmMR == 8);
  const std::int64_t rows[] = {33, 36, 39, 40, 41, 64};
  const std::int64_t features[] = {1, 17, 47, 48, 49, 191, 192, 193, 400};
  const std::int64_t columns[] = {1, 15, 16, 17, 255, 256, 257, 600};
  for (std::int64_t K : columns)
    for (std::int64_t n : features) {
      const std::int64_t ldw = K + (n % 2 ? 3 : 0);  // odd n: a column block of a wider matrix
      const std::vector<float> w = uniform(std::size_t(n * ldw), 12, 1 / std::sqrt(double(K)));
      const std::vector<float> bias = uniform(std::size_t(n), 13, 1.0);
      for (std::int64_t M : rows) {
        const std::vector<float> x = uniform(std::size_t(M * K), 14, 1.0);
        const std::vector<float> init = uniform(std::size_t(M * n), 15, 1.0);
        std::vector<double> ref(std::size_t(M * n));
        for (std::int64_t m = 0; m < M; ++m)
          for (std::int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (std::int64_t k = 0; k < K; ++k)
              acc += double(x[std::size_t(m * K + k)]) * w[std::size_t(j * ldw + k)];
            ref[std::size_t(m * n + j)] = acc;
          }
        for (const std::string& isa : test::kernel_names())
          for (bool accumulate : {false, true}) {
            std::vector<float> one_thread;  // the GEMM's sums do not depend on the split
            for (int threads : {1, 2}) {
              const bool with_bias = accumulate;  // bias is added after the product either way
              const attn::Runtime rt = attn::make_runtime(threads, 0, isa);
              std::vector<float> out = init;
              std::vector<float> pack(std::size_t(
                  attn::scratch_floats(M, K, threads, false, *attn::find_kernels(isa))));
              const attn::Projection p{out.data(),
                                       {w.data(), attn::WeightType::f32, ldw},
                                       with_bias ? bias.data() : nullptr,
                                       n};
              attn::linear(rt, {&p, 1}, x.data(), M, K, pack.data(), accumulate);
              std::vector<float> expected(out.size());
              for (std::size_t i = 0; i < expected.size(); ++i)
                expected[i] = float(ref[i] + (accumulate ? init[i] : 0.0) +
                                    (with_bias ? bias[i % std::size_t(n)] : 0.0));
              const test::Diff d =
                  test::compare(out.data(), expected.data(), std::int64_t(out.size()), {});
              CAPTURE(isa);
              CAPTURE(threads);
              CAPTURE(M);
              CAPTURE(n);
              CAPTURE(K);
              CAPTURE(accumulate);
              CAPTURE(d.worst_ratio);
              CHECK(d.failures == 0);
              if (isa != "avx512") continue;
              if (threads == 1)
                one_thread = out;
              else
                CHECK(out == one_thread);
            }
          }
      }
    }
}

// Batched decode with x's rows in lanes (batch_lanes.hpp), called directly so that every CPU with
// AVX-512 runs it (linear() chooses it only where 512-bit FMAs are full width): one and two
// vectors of rows (16 | 17), blocks of 28 or 14 weight rows then 8, 4 and 1, widened pieces of
// 128 columns, column chunks of 256 and vector tails, each weight type, against a double loop,
// and bit for bit against the prefill GEMM on the same rows, whose summation order it keeps.
TEST_CASE("batch_lanes: rows in lanes around 16 and 32, its row blocks and chunks, as the GEMM") {
  const std::vector<std::string> isas = test::kernel_names();
  if (std::find(isas.begin(), isas.end(), "avx512") == isas.end()) {
    MESSAGE("no AVX-512 on this CPU: batch_lanes is not used here");
    return;
  }
  REQUIRE(attn::kGemmKC == 256);
  const std::int64_t rows[] = {1, 2, 11, 12, 15, 16, 17, 18, 31, 32};
  const std::int64_t features[] = {1, 3, 4, 5, 8, 13, 14, 15, 27, 28, 29, 36, 41, 64};
  const std::int64_t columns[] = {1, 15, 16, 17, 127, 128, 129, 255, 256, 257, 600};
  for (std::int64_t K : columns)
    for (std::int64_t n : features) {
      const std::int64_t ldw = K + (n % 2 ? 5 : 0);  // odd n: a column block of a wider matrix
      const std::vector<float> w32 = uniform(std::size_t(n * ldw), 16, 1 / std::sqrt(double(K)));
      for (int type = 0; type < 3; ++type) {
        const TypedWeights typed(w32, type);
        const std::vector<float>& wf = typed.values;
        const attn::Matrix w{typed.data(), attn::WeightType(type), ldw};
        for (std::int64_t M : rows) {
          const std::vector<float> x = uniform(std::size_t(M * K), 17, 1.0);
          const std::vector<float> init = uniform(std::size_t(M * n), 18, 1.0);
          std::vector<float> xl(static_cast<std::size_t>(attn::lanes_floats(M, K)), -1.0f);
          attn::pack_lanes(x.data(), M, K, xl.data());
          std::vector<float> xg(static_cast<std::size_t>(attn::gemm_rows_floats(M, K)));
          attn::pack_gemm_rows(x.data(), M, K, xg.data());
          std::vector<float> panel(static_cast<std::size_t>(attn::gemm_panel_floats()));
          for (bool accumulate : {false, true}) {
            std::vector<float> out = init, gemm = init;
            attn::batch_lanes(w, ldw, xl.data(), M, K, out.data(), n, n, accumulate);
            attn::gemm_avx512(w, ldw, xg.data(), M, K, gemm.data(), n, n, accumulate, panel.data());
            std::vector<float> expected(out.size());
            for (std::int64_t m = 0; m < M; ++m)
              for (std::int64_t j = 0; j < n; ++j) {
                double acc = accumulate ? init[std::size_t(m * n + j)] : 0.0;
                for (std::int64_t k = 0; k < K; ++k)
                  acc += double(x[std::size_t(m * K + k)]) * wf[std::size_t(j * ldw + k)];
                expected[std::size_t(m * n + j)] = float(acc);
              }
            const test::Diff d =
                test::compare(out.data(), expected.data(), std::int64_t(out.size()), {});
            CAPTURE(type);
            CAPTURE(M);
            CAPTURE(n);
            CAPTURE(K);
            CAPTURE(accumulate);
            CAPTURE(d.worst_ratio);
            CHECK(d.failures == 0);
            CHECK(out == gemm);
          }
        }
      }
    }
}

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
