// The logit lens (attn/engine/lens.hpp): the last block's lens equals the model's logits bit for
// bit (prefill of every position, decode steps; rows on both sides of the batched kernel's
// bound; 1 and 2 threads), every block's lens against make_lens.py's float64 PyTorch
// reference, the top-k against a sort, and the refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "attn/engine/engine.hpp"
#include "attn/engine/lens.hpp"
#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

// The n best of logits by a full sort: higher logit first, then the lower id.
std::vector<attn::TopLogit> sorted_top(const std::vector<float>& logits, int n) {
  std::vector<attn::TopLogit> all;
  for (std::size_t i = 0; i < logits.size(); ++i) all.push_back({std::int32_t(i), logits[i]});
  std::stable_sort(all.begin(), all.end(), [](const attn::TopLogit& a, const attn::TopLogit& b) {
    return a.logit > b.logit;
  });
  all.resize(std::min(all.size(), std::size_t(n)));
  return all;
}

bool same_bits(const float* a, const float* b, std::int64_t n) {
  return std::memcmp(a, b, std::size_t(n) * sizeof(float)) == 0;
}

template <class Call>
std::string setting_of(Call call) {
  try {
    call();
  } catch (const attn::InputError& e) {
    return e.setting;
  }
  return "(none)";
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

attn::ModelSpec spec_of(const fs::path& weights, int threads) {
  attn::ModelSpec s;
  s.weights = weights;
  s.threads = threads;
  return s;
}

fs::path golden_weights(const std::string& name) {
  return test::model_dir(name) /
         (name.starts_with("hf") ? "model.safetensors" : "weights.safetensors");
}

// The last block's lens against the model's own logits, bit for bit: a prefill of `rows`
// positions of every sequence (every position's logits), then `steps` decode steps.
void check_last_layer(attn::Transformer& m, const std::vector<std::int32_t>& ids, std::int64_t bsz,
                      std::int64_t seqlen, std::int64_t steps) {
  const std::int64_t V = m.args.vocab_size, L = m.args.n_layers;
  attn::LogitLens lens = attn::make_logit_lens(m, 5, /*keep_logits=*/true);
  const attn::Observer obs = attn::lens_observer(lens, m);
  attn::observe(m, &obs);
  std::vector<float> logits(std::size_t(bsz * seqlen * V));
  std::vector<std::int32_t> prompt(std::size_t(bsz * seqlen));
  for (std::int64_t b = 0; b < bsz; ++b)
    for (std::int64_t t = 0; t < seqlen; ++t)
      prompt[std::size_t(b * seqlen + t)] = ids[std::size_t((b * 31 + t) % ids.size())];
  attn::forward(m, prompt.data(), bsz, seqlen, 0, logits.data(), /*all_positions=*/true);
  CHECK(lens.calls == 1);
  CHECK(lens.bsz == bsz);
  CHECK(lens.seqlen == seqlen);
  CHECK(std::all_of(lens.fed.begin(), lens.fed.end(), [](auto f) { return f != 0; }));
  CHECK(same_bits(attn::lens_logits(lens, L - 1), logits.data(), bsz * seqlen * V));
  for (std::int64_t r = 0; r < bsz * seqlen; ++r) {
    const std::vector<attn::TopLogit> want =
        sorted_top(std::vector<float>(logits.begin() + r * V, logits.begin() + (r + 1) * V), 5);
    const attn::TopLogit* got = attn::lens_top(lens, L - 1, r / seqlen, r % seqlen);
    for (std::size_t j = 0; j < want.size(); ++j) {
      CHECK(got[j].id == want[j].id);
      CHECK(got[j].logit == want[j].logit);
    }
  }
  std::vector<std::int32_t> next(static_cast<std::size_t>(bsz));
  for (std::int64_t i = 0; i < steps; ++i) {
    for (std::int64_t b = 0; b < bsz; ++b)
      next[std::size_t(b)] = ids[std::size_t(b + i) % ids.size()];
    attn::forward(m, next.data(), bsz, 1, seqlen + i, logits.data());
    CHECK(lens.calls == 2 + i);
    CHECK(lens.start_pos == seqlen + i);
    CHECK(same_bits(attn::lens_logits(lens, L - 1), logits.data(), bsz * V));
  }
  attn::observe(m, nullptr);
}

}  // namespace

TEST_CASE("lens: top_logits is a sort's first n, ties to the lower id") {
  for (const std::int64_t vocab : {1, 2, 5, 6, 64, 513}) {
    std::vector<float> logits(static_cast<std::size_t>(vocab));
    for (std::int64_t i = 0; i < vocab; ++i)  // repeats: ties everywhere
      logits[std::size_t(i)] = float((i * 7919) % 13) - 6.0f + (i % 5 == 0 ? 0.5f : 0.0f);
    if (vocab > 3) logits[3] = std::numeric_limits<float>::infinity();
    for (const int n : {1, 2, 5, 6, 100}) {
      CAPTURE(vocab);
      CAPTURE(n);
      std::vector<attn::TopLogit> got(std::size_t(std::min<std::int64_t>(n, vocab)));
      attn::top_logits(logits.data(), vocab, n, got.data());
      const std::vector<attn::TopLogit> want = sorted_top(logits, n);
      REQUIRE(got.size() == want.size());
      for (std::size_t j = 0; j < want.size(); ++j) {
        CHECK(got[j].id == want[j].id);
        CHECK(got[j].logit == want[j].logit);
      }
    }
  }
}

TEST_CASE(
    "lens: the last layer's lens is the logits, bit for bit (golden models, 1 and 2 threads)") {
  for (const nlohmann::json& c : read_json(test::golden_dir() / "model" / "cases.json")) {
    const std::string name = c["name"];
    const fs::path dir = test::model_dir(name);
    attn::ModelArgs a = attn::load_config(dir / c["config"].get<std::string>());
    a.tokens_in = a.logits_out = true;
    const std::vector<std::int32_t> ids = test::i32_tensor(dir / "expected.safetensors", "tokens");
    for (const int threads : {1, 2})
      for (const std::int64_t seqlen : {1, 2, 7}) {
        CAPTURE(name);
        CAPTURE(threads);
        CAPTURE(seqlen);
        const std::int64_t bsz = c["batch"];
        attn::Transformer m = attn::make_transformer(
            a, attn::load_weights(a, dir / c["weights"].get<std::string>()), bsz * seqlen,
            attn::make_runtime(threads, threads > 1 ? 0 : attn::kParallelFlops));
        check_last_layer(m, ids, bsz, seqlen, 3);
      }
  }
}

TEST_CASE("lens: stories260K, rows around the batched kernel's bound, 1 and 2 threads") {
  const fs::path gguf = test::source_dir() / "weights" / "stories260K.gguf";
  for (const int threads : {1, 2})
    for (const std::int64_t seqlen :
         {std::int64_t(1), attn::kBatchRows - 1, attn::kBatchRows, attn::kBatchRows + 1}) {
      CAPTURE(threads);
      CAPTURE(seqlen);
      attn::Engine e = attn::open_engine(spec_of(gguf, threads), {1, seqlen, 4});
      const std::vector<std::int32_t> ids = {1, 365, 301, 236, 263, 2, 73, 411, 99};
      check_last_layer(e.model, ids, 1, seqlen, 2);
    }
}

TEST_CASE("lens: refusals name the setting, before any work") {
  attn::ModelArgs a = attn::load_config(test::model_dir("meta_f32") / "config.json");
  a.tokens_in = a.logits_out = true;
  attn::Transformer m =
      attn::make_transformer(a, attn::load_weights(a, golden_weights("meta_f32")), 4);
  CHECK(setting_of([&] { attn::make_logit_lens(m, 0); }) == "logit_lens");
  CHECK(setting_of([&] { attn::make_logit_lens(m, -1); }) == "logit_lens");
  CHECK(setting_of([&] { attn::make_logit_lens(m, attn::kLensMaxK + 1); }) == "logit_lens");
  CHECK(setting_of([&] { attn::make_logit_lens(m, attn::kLensMaxK); }) == "(none)");
  CHECK(setting_of([&] { attn::make_logit_lens(m, 1); }) == "(none)");
  // k past the vocabulary: every token, in order.
  CHECK(attn::make_logit_lens(m, attn::kLensMaxK).k_used == std::min<int>(attn::kLensMaxK, 128));
  m.args.logits_out = false;  // a slice of layers short of the last, without the head
  CHECK(setting_of([&] { attn::make_logit_lens(m, 5); }) == "logit_lens");
  m.args.logits_out = true;
  m.args.vocab_size = 0;
  CHECK(setting_of([&] { attn::make_logit_lens(m, 5); }) == "logit_lens");
}

TEST_CASE("lens: every block's lens matches make_lens.py's float64 PyTorch reference") {
  for (const nlohmann::json& c : read_json(test::golden_dir() / "lens" / "cases.json")) {
    const std::string name = c["name"];
    const fs::path dir = test::model_dir(name);
    attn::ModelArgs a = attn::load_config(dir / "config.json");
    a.tokens_in = a.logits_out = true;
    const std::vector<std::int32_t> tokens =
        test::i32_tensor(dir / "expected.safetensors", "tokens");
    const std::vector<std::int32_t> greedy =
        test::i32_tensor(dir / "expected.safetensors", "greedy");
    const std::int64_t steps = c["steps"];
    const int K = c["k"];
    const test::Tolerance tol{c["tolerance"]["rtol"], c["tolerance"]["atol"]};
    const attn::SafetensorsFile expected =
        attn::open_safetensors(test::golden_dir() / "lens" / (name + ".safetensors"));
    const std::int64_t bsz = expected.info("prefill.0.top_ids").shape[0];
    const std::int64_t T = std::int64_t(tokens.size()) / bsz, V = a.vocab_size;
    const std::int64_t G = std::int64_t(greedy.size()) / bsz;
    for (const int threads : {1, 2}) {
      CAPTURE(name);
      CAPTURE(threads);
      attn::Transformer m = attn::make_transformer(
          a, attn::load_weights(a, golden_weights(name)), bsz * T,
          attn::make_runtime(threads, threads > 1 ? 0 : attn::kParallelFlops));
      attn::LogitLens lens = attn::make_logit_lens(m, K, /*keep_logits=*/true);
      const attn::Observer obs = attn::lens_observer(lens, m);
      attn::observe(m, &obs);
      std::vector<float> logits(std::size_t(bsz * T * V));
      std::int64_t ids_checked = 0, ids_skipped = 0;
      for (std::int64_t i = 0; i <= steps; ++i) {
        const std::string call = i == 0 ? "prefill" : "decode." + std::to_string(i);
        if (i == 0) {
          attn::forward(m, tokens.data(), bsz, T, 0, logits.data(), true);
        } else {
          std::vector<std::int32_t> next;
          for (std::int64_t b = 0; b < bsz; ++b) next.push_back(greedy[std::size_t(b * G + i - 1)]);
          attn::forward(m, next.data(), bsz, 1, T + i - 1, logits.data());
        }
        const std::int64_t rows = bsz * lens.seqlen;
        for (std::int64_t l = 0; l < a.n_layers; ++l) {
          const std::string p = call + "." + std::to_string(l);
          INFO(p);
          std::vector<float> s1, s2;
          const float* ref_logits = attn::tensor_as_f32(expected, p + ".top_logits", s1);
          const std::vector<std::int32_t> ref_ids = test::i32_tensor(
              test::golden_dir() / "lens" / (name + ".safetensors"), p + ".top_ids");
          REQUIRE(std::int64_t(ref_ids.size()) == rows * (K + 1));
          if (expected.header.tensors.count(p + ".logits")) {
            const test::Diff d =
                test::compare(attn::lens_logits(lens, l),
                              attn::tensor_as_f32(expected, p + ".logits", s2), rows * V, tol);
            CHECK_MESSAGE(d.failures == 0, "worst ratio " << d.worst_ratio);
          }
          for (std::int64_t r = 0; r < rows; ++r) {
            const attn::TopLogit* got = attn::lens_top(lens, l, r / lens.seqlen, r % lens.seqlen);
            const float* e = ref_logits + r * (K + 1);
            const std::int32_t* ids = ref_ids.data() + r * (K + 1);
            auto apart = [&](int j) {  // the reference's j-th and (j+1)-th further than the error
              return double(e[j]) - double(e[j + 1]) >
                     2 * (tol.atol + tol.rtol * std::fabs(double(e[j])));
            };
            for (int j = 0; j < K; ++j) {
              // The j-th highest value moves by at most the error, however the ids swap.
              CHECK(test::compare(&got[j].logit, &e[j], 1, tol).failures == 0);
              if (apart(j) && (j == 0 || apart(j - 1))) {
                CHECK(got[j].id == ids[j]);
                ++ids_checked;
              } else {
                ++ids_skipped;
              }
            }
          }
        }
      }
      // The models' lenses are not flat: most ranks are decided.
      CHECK(ids_checked > 4 * ids_skipped);
      attn::observe(m, nullptr);
    }
  }
}
