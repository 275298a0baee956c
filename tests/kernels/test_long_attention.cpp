// Split attention (flash-decoding, attention.hpp's key_chunk) against plain double loops: depths
// at and around the split's start and each chunk boundary, B = 1..4, GQA/MQA/MHA, causal, none
// and padded keys; the same bits for 1, 2, 3 and 16 threads, with and without probabilities.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/kernels/attention.hpp"
#include "attn/model/cache.hpp"
#include "attn/model/model.hpp"
#include "test_support.hpp"

using doctest::Approx;

namespace {

constexpr std::int64_t kHd = 8;

struct Case {
  std::int64_t n_heads, n_kv_heads, bsz, seqlen, total;
  attn::Mask kind = attn::Mask::causal;
  std::int64_t padded = 0;  // keys 0 .. padded-1 of batch row 0 are padding (all: padded >= total)
  std::int64_t window = 0;  // Gemma's sliding window (AttentionMask's), and its soft-cap
  float softcap = 0;
};

// A cache [bsz, n_kv_heads, total, kHd] and queries [bsz, seqlen, n_heads, kHd] of smooth values.
struct Inputs {
  attn::KVCache cache;
  std::vector<float> xq;
  std::vector<std::uint8_t> keep;  // [bsz, total]
};

Inputs make_inputs(const Case& c) {
  attn::ModelArgs a = attn::seed_args();
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.dim = c.n_heads * kHd;
  a.max_batch_size = c.bsz;
  a.max_seq_len = c.total;
  Inputs in{attn::make_kv_cache(a), {}, {}};
  std::vector<float> xk(std::size_t(c.bsz * c.total * c.n_kv_heads * kHd)), xv(xk.size());
  for (std::size_t i = 0; i < xk.size(); ++i) {  // [bsz, total, n_kv_heads, kHd] as store_kv
    xk[i] = float(std::sin(0.37 * double(i) + 0.1));
    xv[i] = float(std::cos(0.11 * double(i)));
  }
  attn::store_kv(in.cache, 0, xk.data(), xv.data(), c.bsz, c.total, 0);
  in.xq.resize(std::size_t(c.bsz * c.seqlen * c.n_heads * kHd));
  for (std::size_t i = 0; i < in.xq.size(); ++i)
    in.xq[i] = 3.0f * float(std::sin(1.3 * double(i) + 0.2));  // peaked weights, not uniform
  in.keep.assign(std::size_t(c.bsz * c.total), 1);
  for (std::int64_t j = 0; j < std::min(c.padded, c.total); ++j) in.keep[std::size_t(j)] = 0;
  return in;
}

struct Result {
  std::vector<float> out, probs;
};

Result run_attention(const Case& c, const Inputs& in, int threads, bool with_probs) {
  const attn::KVView kv = in.cache.layer(0);
  std::vector<float> scratch(
      std::size_t(attn::attention_scratch_floats(kv.max_seq_len, threads, c.bsz, c.n_heads, kHd)));
  Result r{std::vector<float>(in.xq.size()), {}};
  if (with_probs) r.probs.assign(std::size_t(c.bsz * c.n_heads * c.seqlen * c.total), -1.0f);
  attn::AttentionMask mask;
  mask.kind = c.kind;
  mask.window = c.window;
  mask.softcap = c.softcap;
  if (c.padded > 0) {
    mask.keep = in.keep.data();
    mask.ld = c.total;
  }
  attn::attention(attn::make_runtime(threads, 0), r.out.data(), in.xq.data(), kv, c.n_heads, c.bsz,
                  c.seqlen, c.total - c.seqlen, scratch.data(), mask,
                  with_probs ? r.probs.data() : nullptr);
  return r;
}

// The probabilities and output of (b, row i, head h) in double, as Meta's model.py with Hugging
// Face's padding: padded keys get nothing unless every visible key is padded (then uniform).
void check_row(const Case& c, const Inputs& in, const Result& r, std::int64_t b, std::int64_t i,
               std::int64_t h) {
  const std::int64_t start_pos = c.total - c.seqlen, g = h / (c.n_heads / c.n_kv_heads);
  const std::int64_t visible = c.kind == attn::Mask::causal ? start_pos + i + 1 : c.total;
  const float* q = in.xq.data() + ((b * c.seqlen + i) * c.n_heads + h) * kHd;
  bool any_real = false;
  for (std::int64_t j = 0; j < visible; ++j) any_real |= in.keep[std::size_t(b * c.total + j)] != 0;
  std::vector<double> p(static_cast<std::size_t>(visible));
  double mx = -1e300, sum = 0;
  for (std::int64_t j = 0; j < visible; ++j) {
    const float* k = in.cache.k(0, b, g, j);
    double d = 0;
    for (std::int64_t e = 0; e < kHd; ++e) d += double(q[e]) * k[e];
    p[std::size_t(j)] = d / std::sqrt(double(kHd));
    if (c.softcap > 0) p[std::size_t(j)] = c.softcap * std::tanh(p[std::size_t(j)] / c.softcap);
    if (any_real && !in.keep[std::size_t(b * c.total + j)]) p[std::size_t(j)] = -1e300;
    if (c.window > 0 && start_pos + i - j >= c.window) p[std::size_t(j)] = -1e300;
    mx = std::max(mx, p[std::size_t(j)]);
  }
  if (!any_real) mx = 0, std::fill(p.begin(), p.end(), 0.0);
  for (double& x : p) sum += (x = x == -1e300 ? 0 : std::exp(x - mx));
  for (std::int64_t e = 0; e < kHd; ++e) {
    double o = 0;
    for (std::int64_t j = 0; j < visible; ++j)
      o += p[std::size_t(j)] / sum * in.cache.v(0, b, g, j)[e];
    CHECK(r.out[std::size_t(((b * c.seqlen + i) * c.n_heads + h) * kHd + e)] ==
          Approx(o).epsilon(1e-5).scale(1.0));
  }
  if (r.probs.empty()) return;
  const float* pr = r.probs.data() + ((b * c.n_heads + h) * c.seqlen + i) * c.total;
  for (std::int64_t j = 0; j < c.total; ++j) {
    const double want = j < visible ? p[std::size_t(j)] / sum : 0.0;
    if (std::fabs(pr[j] - want) > 1e-6 + 1e-5 * want) {
      CHECK(pr[j] == Approx(want).epsilon(1e-5).scale(1e-6));  // the first wrong key only
      return;
    }
  }
}

void check_case(const Case& c) {
  CAPTURE(c.n_heads);
  CAPTURE(c.n_kv_heads);
  CAPTURE(c.bsz);
  CAPTURE(c.seqlen);
  CAPTURE(c.total);
  CAPTURE(int(c.kind));
  CAPTURE(c.padded);
  CAPTURE(c.window);
  CAPTURE(c.softcap);
  const Inputs in = make_inputs(c);
  const Result one = run_attention(c, in, 1, true);
  for (std::int64_t b = 0; b < c.bsz; ++b)
    for (std::int64_t i = 0; i < c.seqlen; ++i)
      for (std::int64_t h = 0; h < c.n_heads; ++h) check_row(c, in, one, b, i, h);
  for (int threads : {2, 3, 16}) {  // 16 on 2 cores: more threads than items at B = 1
    CAPTURE(threads);
    const Result r = run_attention(c, in, threads, threads == 3);
    CHECK(std::memcmp(r.out.data(), one.out.data(), r.out.size() * sizeof(float)) == 0);
    if (threads == 3)
      CHECK(std::memcmp(r.probs.data(), one.probs.data(), r.probs.size() * sizeof(float)) == 0);
  }
  // An observer's probabilities do not change the output's bits.
  const Result bare = run_attention(c, in, 2, false);
  CHECK(std::memcmp(bare.out.data(), one.out.data(), one.out.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("split attention: the chunk follows the keys, from kSplitFrom, for short query blocks") {
  CHECK(attn::key_chunk(1, attn::kSplitFrom - 1) == 0);
  CHECK(attn::key_chunk(1, attn::kSplitFrom) == attn::kKeyChunk);
  CHECK(attn::key_chunk(attn::kSplitRows, attn::kSplitFrom) == attn::kKeyChunk);
  CHECK(attn::key_chunk(attn::kSplitRows + 1, 100000) == 0);
  CHECK(attn::key_chunk(1, attn::kKeyChunk * attn::kMaxKeyChunks) == attn::kKeyChunk);
  CHECK(attn::key_chunk(1, attn::kKeyChunk * attn::kMaxKeyChunks + 1) == 2 * attn::kKeyChunk);
  CHECK(attn::key_chunk(1, 2 * attn::kKeyChunk * attn::kMaxKeyChunks + 1) == 4 * attn::kKeyChunk);
}

TEST_CASE("split attention: depths around the split and the chunk boundaries, B = 1..4") {
  const std::int64_t from = attn::kSplitFrom, chunk = attn::kKeyChunk;
  const std::int64_t doubled = chunk * attn::kMaxKeyChunks;  // the chunk doubles past this
  struct Heads {
    std::int64_t n_heads, n_kv_heads;
  };
  for (const Heads hs : {Heads{8, 2}, Heads{4, 1}, Heads{3, 3}})  // GQA, MQA, MHA
    for (std::int64_t total :
         {std::int64_t(1), from - 1, from, from + 1, 5 * chunk - 1, 5 * chunk, 5 * chunk + 1})
      for (std::int64_t seqlen : {std::int64_t(1), attn::kSplitRows, attn::kSplitRows + 1})
        if (seqlen <= total)
          for (std::int64_t bsz : {1, 4})
            check_case({hs.n_heads, hs.n_kv_heads, bsz, seqlen, total});
  check_case({8, 2, 2, 1, from + 3});
  check_case({8, 2, 3, 2, from + 3});
  // Large: the chunk doubled, once and twice.
  for (std::int64_t total : {doubled, doubled + 1, 2 * doubled + 1})
    check_case({8, 2, 1, 1, total});
  check_case({4, 1, 2, attn::kSplitRows, doubled + 1});
}

TEST_CASE("split attention: no mask, and padded keys (a whole chunk of them, or every key)") {
  const std::int64_t from = attn::kSplitFrom, chunk = attn::kKeyChunk;
  for (std::int64_t seqlen : {std::int64_t(1), std::int64_t(3)}) {
    check_case({8, 2, 2, seqlen, from + 5, attn::Mask::none});
    check_case({8, 2, 2, seqlen, from + 5, attn::Mask::causal, chunk + 7});  // chunk 0 all padded
    check_case({4, 1, 2, seqlen, from + 5, attn::Mask::none, from + 5});     // row 0 all padded
    check_case({4, 1, 1, seqlen, from + 5, attn::Mask::causal, from + 5 - 1});  // a real last key
  }
}

TEST_CASE("split attention: decode steps past kSplitFrom match one prefill of the same positions") {
  // The prefill runs the whole-row path (more than kSplitRows rows), the decode steps the split
  // one from kSplitFrom keys on: the same model, so the same values within float rounding.
  const attn::Runtime rt = attn::make_runtime(2);
  attn::ModelArgs a = attn::load_config(test::source_dir() / "configs" / "llama-tiny.json");
  const std::int64_t P = attn::kSplitFrom - 3, N = 6;
  a.max_seq_len = P + N;
  const attn::RunOptions split{2, P, N}, whole{2, P + N, 0};
  const std::vector<float> x = attn::seeded_input(a, split, 7);
  attn::Transformer m1 = attn::make_transformer(a, attn::seeded_weights(a, 7), 2 * P, rt);
  attn::Transformer m2 = attn::make_transformer(a, attn::seeded_weights(a, 7), 2 * (P + N), rt);
  const auto r1 = attn::run(m1, x, split, [](const attn::Event&) {});
  const auto r2 = attn::run(m2, x, whole, [](const attn::Event&) {});
  const std::int64_t dim = a.dim;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 1; i <= N; ++i) {
      const test::Diff d =
          test::compare(r1.decode_output.data() + ((i - 1) * 2 + b) * dim,
                        r2.prefill_output.data() + (b * (P + N) + P - 1 + i) * dim, dim, {});
      CAPTURE(b);
      CAPTURE(i);
      CHECK(d.failures == 0);
    }
}

TEST_CASE("split attention: Gemma's sliding window and soft-cap, whole rows and split") {
  // Keys at i - j >= window get exactly 0, the scores capped (cap * tanh(s / cap)) before the
  // mask: on the own kernels, OpenBLAS's rows, and split chunks some of which are wholly hidden.
  const std::int64_t from = attn::kSplitFrom, chunk = attn::kKeyChunk;
  for (std::int64_t window : {std::int64_t(1), std::int64_t(3), chunk + 5})
    for (float cap : {0.0f, 0.5f})
      for (std::int64_t total : {std::int64_t(9), std::int64_t(300), from + 5}) {
        check_case({8, 2, 2, 1, total, attn::Mask::causal, 0, window, cap});
        check_case({4, 1, 1, 3, total, attn::Mask::causal, 0, window, cap});
        if (total < from) check_case({4, 2, 1, total, total, attn::Mask::causal, 0, window, cap});
      }
}
