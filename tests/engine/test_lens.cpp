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

#include "attn/engine/lens.hpp"
#include "attn/engine/run.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

// The golden models whole: the embeddings and the head.
constexpr attn::ModelEnds kTokenEnds{true, true};

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
  attn::LensRecorder rec(m, 5, /*keep_logits=*/true);
  const attn::LogitLens& lens = rec.lens();
  attn::observe(m, &rec.observer());
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
    const attn::ModelArgs a = attn::load_config(dir / c["config"].get<std::string>());
    const std::vector<std::int32_t> ids = test::i32_tensor(dir / "expected.safetensors", "tokens");
    for (const int threads : {1, 2})
      for (const std::int64_t seqlen : {1, 2, 7}) {
        CAPTURE(name);
        CAPTURE(threads);
        CAPTURE(seqlen);
        const std::int64_t bsz = c["batch"];
        attn::Transformer m = attn::make_transformer(
            a, attn::load_weights(a, dir / c["weights"].get<std::string>(), {}, kTokenEnds),
            bsz * seqlen, attn::make_runtime(threads, threads > 1 ? 0 : attn::kParallelFlops));
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
      attn::Session e = attn::open_session(spec_of(gguf, threads), {1, seqlen, 4});
      const std::vector<std::int32_t> ids = {1, 365, 301, 236, 263, 2, 73, 411, 99};
      check_last_layer(e.model, ids, 1, seqlen, 2);
    }
}

TEST_CASE("lens: refusals name the setting, before any work") {
  const attn::ModelArgs a = attn::load_config(test::model_dir("meta_f32") / "config.json");
  attn::Transformer m = attn::make_transformer(
      a, attn::load_weights(a, golden_weights("meta_f32"), {}, kTokenEnds), 4);
  CHECK(test::setting_of([&] { attn::make_logit_lens(m, 0); }) == "logit_lens");
  CHECK(test::setting_of([&] { attn::make_logit_lens(m, -1); }) == "logit_lens");
  CHECK(test::setting_of([&] { attn::make_logit_lens(m, attn::kLensMaxK + 1); }) == "logit_lens");
  CHECK(test::setting_of([&] { attn::make_logit_lens(m, attn::kLensMaxK); }) == "(none)");
  CHECK(test::setting_of([&] { attn::make_logit_lens(m, 1); }) == "(none)");
  // k past the vocabulary: every token, in order.
  CHECK(attn::make_logit_lens(m, attn::kLensMaxK).k_used == std::min<int>(attn::kLensMaxK, 128));
  m.ends.logits_out = false;  // a slice of layers short of the last, without the head
  CHECK(test::setting_of([&] { attn::make_logit_lens(m, 5); }) == "logit_lens");
  m.ends.logits_out = true;
  m.args.vocab_size = 0;
  CHECK(test::setting_of([&] { attn::make_logit_lens(m, 5); }) == "logit_lens");
}

TEST_CASE("lens: every block's lens matches make_lens.py's float64 PyTorch reference") {
  for (const nlohmann::json& c : read_json(test::golden_dir() / "lens" / "cases.json")) {
    const std::string name = c["name"];
    const fs::path dir = test::model_dir(name);
    const attn::ModelArgs a = attn::load_config(dir / "config.json");
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
          a, attn::load_weights(a, golden_weights(name), {}, kTokenEnds), bsz * T,
          attn::make_runtime(threads, threads > 1 ? 0 : attn::kParallelFlops));
      attn::LensRecorder rec(m, K, /*keep_logits=*/true);
      const attn::LogitLens& lens = rec.lens();
      attn::observe(m, &rec.observer());
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

namespace {

std::vector<nlohmann::json> events_of(const std::string& out, const std::string& event) {
  std::vector<nlohmann::json> ev;
  std::size_t at = 0;
  while (at < out.size()) {
    const std::size_t end = out.find('\n', at);
    const nlohmann::json j = nlohmann::json::parse(out.substr(at, end - at));
    if (j.at("event") == event) ev.push_back(j);
    at = end == std::string::npos ? out.size() : end + 1;
  }
  return ev;
}

std::string q(const fs::path& p) {
  return "'" + p.string() + "'";
}

// A lens event's top [batch row][position] against logits [B, positions, V], bit for bit: the
// ids of a sort and the logits' own floats.
void check_top(const nlohmann::json& top, const float* logits, std::int64_t B,
               std::int64_t positions, std::int64_t V, int k) {
  REQUIRE(std::int64_t(top.size()) == B);
  for (std::int64_t b = 0; b < B; ++b) {
    REQUIRE(std::int64_t(top[std::size_t(b)].size()) == positions);
    for (std::int64_t t = 0; t < positions; ++t) {
      const float* row = logits + (b * positions + t) * V;
      const std::vector<attn::TopLogit> want = sorted_top(std::vector<float>(row, row + V), k);
      const nlohmann::json& got = top[std::size_t(b)][std::size_t(t)];
      REQUIRE(got.size() == want.size());
      for (std::size_t j = 0; j < want.size(); ++j) {
        CHECK(got[j].at("id").get<std::int32_t>() == want[j].id);
        CHECK(got[j].at("logit").get<float>() == want[j].logit);
      }
    }
  }
}

}  // namespace

TEST_CASE("lens cli: run --logit-lens --json on stories260K, the last layer is the logits") {
  const test::TempDir dir;
  const fs::path dump = dir.path / "lens.safetensors";
  const std::int64_t N = 2, K = 3;
  const test::CliResult r = test::run_cli(
      "run -m " + q(test::source_dir() / "weights" / "stories260K.gguf") +
      " -p 'Once upon a time, there was' -n 2 --all-logits --logit-lens 3 --json --dump " +
      q(dump));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const attn::SafetensorsFile f = attn::open_safetensors(dump);
  const std::int64_t L = 5, V = 512, B = 1;
  const std::int64_t P = f.info("prefill.logits").shape[1];
  const std::vector<nlohmann::json> lens = events_of(r.out, "lens");
  REQUIRE(std::int64_t(lens.size()) == L * (1 + N));
  std::vector<float> s1, s2;
  for (const nlohmann::json& e : lens) {
    const std::int64_t l = e.at("layer");
    const bool prefill = e.at("of") == "prefill";
    const std::string call =
        prefill ? "prefill" : "decode." + std::to_string(e.at("step").get<int>());
    INFO(call << " layer " << l);
    const std::string name = "lens." + std::to_string(l) + "." + call;
    const attn::TensorInfo& info = f.info(name);
    CHECK(info.shape == std::vector<std::int64_t>{B, prefill ? P : 1, V});
    const float* got = attn::tensor_as_f32(f, name, s1);
    check_top(e.at("top"), got, B, prefill ? P : 1, V, K);  // the dump's lens is the events'
    if (l == L - 1) {                                       // and the model's logits, bit for bit
      const float* logits = attn::tensor_as_f32(f, call + ".logits", s2);
      CHECK(same_bits(got, logits, info.numel()));
    }
  }
}

TEST_CASE("lens cli: the dump's lens of every layer against make_lens.py's reference") {
  const std::string name = "meta_f32";
  const fs::path dir = test::model_dir(name);
  std::vector<std::int32_t> ids = test::i32_tensor(dir / "expected.safetensors", "tokens");
  const std::vector<std::int32_t> greedy = test::i32_tensor(dir / "expected.safetensors", "greedy");
  ids.insert(ids.end(), greedy.begin(), greedy.begin() + 3);  // fed by decode steps 1..3
  std::string list;
  for (const std::int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  const test::TempDir tmp;
  const fs::path dump = tmp.path / "lens.safetensors";
  const test::CliResult r = test::run_cli("run -m " + q(golden_weights(name)) + " --tokens " +
                                          list + " -n 3 --logit-lens --dump " + q(dump));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("lens prefill layer 1:") != std::string::npos);
  const attn::SafetensorsFile got = attn::open_safetensors(dump);
  const attn::SafetensorsFile want =
      attn::open_safetensors(test::golden_dir() / "lens" / (name + ".safetensors"));
  const test::Tolerance tol{1e-4, 1e-4};
  for (const std::string call : {"prefill", "decode.1", "decode.2", "decode.3"})
    for (const std::string l : {"0", "1"}) {
      INFO(call << " layer " << l);
      std::vector<float> s1, s2;
      const float* g = attn::tensor_as_f32(got, "lens." + l + "." + call, s1);
      const attn::TensorInfo& e = want.info(call + "." + l + ".logits");
      CHECK(got.info("lens." + l + "." + call).numel() == e.numel());
      const test::Diff d = test::compare(
          g, attn::tensor_as_f32(want, call + "." + l + ".logits", s2), e.numel(), tol);
      CHECK_MESSAGE(d.failures == 0, "worst ratio " << d.worst_ratio);
    }
}

TEST_CASE("lens cli: generate --logit-lens --json, one lens per call, the last layer the token's") {
  const test::CliResult r =
      test::run_cli("generate -m " + q(test::source_dir() / "weights" / "stories260K.gguf") +
                    " -p 'Once upon a time' -n 4 --temp 0 --logit-lens 5 --json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::vector<nlohmann::json> lens = events_of(r.out, "lens");
  const std::vector<nlohmann::json> tokens = events_of(r.out, "token");
  REQUIRE(tokens.size() == 4);
  REQUIRE(lens.size() == 5 * 4);  // the prompt's call and the calls of tokens 1..3
  CHECK(lens[0].at("of") == "prefill");
  CHECK(lens[4].at("layer") == 4);
  for (std::size_t i = 1; i < 4; ++i) {
    const nlohmann::json& last = lens[5 * i + 4];
    CHECK(last.at("of") == "decode");
    CHECK(last.at("step") == i);
    CHECK(last.at("layer") == 4);
    // A decode call's head is one row, as the model's: the token's top logits, bit for bit.
    CHECK(last.at("top")[0][0] == tokens[i].at("top"));
  }
  // Text mode: the text on stdout as without the lens, the lens lines on stderr.
  const test::CliResult plain =
      test::run_cli("generate -m " + q(test::source_dir() / "weights" / "stories260K.gguf") +
                    " -p 'Once upon a time' -n 4 --temp 0");
  const test::CliResult text =
      test::run_cli("generate -m " + q(test::source_dir() / "weights" / "stories260K.gguf") +
                    " -p 'Once upon a time' -n 4 --temp 0 --logit-lens 2");
  REQUIRE(text.status == 0);
  CHECK(text.out == plain.out);
  CHECK(text.err.find("lens decode 3 layer 4:") != std::string::npos);
}

TEST_CASE("lens cli: refusals exit 2 naming --logit-lens, before any work") {
  const test::TempDir dir;
  const fs::path dump = dir.path / "out.safetensors";
  const std::string stories = " -m " + q(test::source_dir() / "weights" / "stories260K.gguf");
  const fs::path big = dir.path / "big.json";  // 128 layers x 2^20 tokens: 1.5 GiB for 3 positions
  std::ofstream(big) << R"({"dim": 16, "n_heads": 4, "n_kv_heads": 2, "n_layers": 128,
                           "vocab_size": 1048576, "max_batch_size": 1, "max_seq_len": 16})";
  for (const std::string& args :
       {std::string("run --logit-lens --dump ") + q(dump),  // no token input: no head
        "run" + stories + " --layers 0:3 -p 'Once upon a time' -n 1 --logit-lens --dump " + q(dump),
        "run" + stories + " -p 'Once upon a time' --logit-lens 0 --dump " + q(dump),
        "run" + stories + " -p 'Once upon a time' --logit-lens -3 --dump " + q(dump),
        "run" + stories + " -p 'Once upon a time' --logit-lens 101 --dump " + q(dump),
        "run" + stories + " -p 'Once upon a time' --logit-lens 99999999999999999999 --dump " +
            q(dump),
        "generate" + stories + " -p 'Once' --logit-lens 0",
        "run --config " + q(big) + " --tokens 1,2,3 -n 1 --logit-lens --dump " + q(dump)}) {
    CAPTURE(args);
    const test::CliResult r = test::run_cli(args);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--logit-lens") != std::string::npos);
    CHECK_FALSE(fs::exists(dump));
  }
  const test::CliResult r = test::run_cli("run --config " + q(big) +
                                          " --tokens 1,2,3 -n 1 --logit-lens --dump " + q(dump));
  CHECK(r.err.find("1 GiB") != std::string::npos);
}

TEST_CASE("lens: a run's lens beside kept probabilities and the caller's filtered observer") {
  const attn::ModelArgs a = attn::load_config(test::model_dir("meta_f32") / "config.json");
  const std::vector<std::int32_t> ids =
      test::i32_tensor(test::model_dir("meta_f32") / "expected.safetensors", "tokens");
  const attn::RunOptions o{1, 5, 2};
  attn::Transformer m = attn::make_transformer(
      a, attn::load_weights(a, golden_weights("meta_f32"), {}, kTokenEnds), 5);
  std::vector<float> x(std::size_t(7 * a.dim));
  attn::embed(m, ids.data(), 7, x.data());
  std::int64_t seen = 0;  // the caller's observer: layer 1's resid_post and probabilities
  attn::Observer mine;
  mine.sites = attn::site_bit(attn::Site::resid_post) | attn::site_bit(attn::Site::attn_probs);
  mine.layers = {0, 1};
  mine.on_tensor = [&](const attn::Observation& t) {
    CHECK(t.layer == 1);
    ++seen;
  };
  attn::observe(m, &mine);
  attn::Inspect inspect;
  inspect.attention_weights = true;
  inspect.logit_lens = 3;
  inspect.lens_logits = true;
  std::int64_t events = 0;
  const attn::RunOutputs out = attn::run(
      m, x, o,
      [&](const attn::Event& e) {
        ++events;
        REQUIRE(e.lens != nullptr);
        CHECK(e.lens->calls == events);
        CHECK(e.lens->seqlen == e.seqlen);
        CHECK(std::all_of(e.lens->fed.begin(), e.lens->fed.end(), [](auto f) { return f != 0; }));
        CHECK(e.attn.size() == 2);
      },
      inspect);
  CHECK(events == 3);
  CHECK(seen == 2 * 3);
  CHECK(m.observer == &mine);
  // The kept lens of the last layer is the head over the run's outputs, bit for bit.
  std::vector<float> logits(std::size_t(5 * a.vocab_size));
  attn::observe(m, nullptr);
  attn::output_logits(m, out.prefill_output.data(), 5, logits.data());
  CHECK(same_bits(out.lens_prefill[1].data(), logits.data(), 5 * a.vocab_size));
  for (std::int64_t i = 0; i < o.steps; ++i)
    CHECK(same_bits(out.lens_decode[std::size_t(i)][1].data(),
                    out.decode_logits.data() + i * a.vocab_size, a.vocab_size));
  // The probabilities kept beside the lens and the caller's observer are those a run keeping
  // them alone keeps (test_golden's against PyTorch), every layer and call.
  attn::Inspect alone;
  alone.attention_weights = true;
  const attn::RunOutputs ref = attn::run(m, x, o, [](const attn::Event&) {}, alone);
  for (std::size_t l = 0; l < 2; ++l) {
    CHECK(same_bits(out.attn_prefill[l].data(), ref.attn_prefill[l].data(),
                    std::int64_t(ref.attn_prefill[l].size())));
    for (std::size_t i = 0; i < std::size_t(o.steps); ++i)
      CHECK(same_bits(out.attn_decode[i][l].data(), ref.attn_decode[i][l].data(),
                      std::int64_t(ref.attn_decode[i][l].size())));
  }
}

TEST_CASE("lens cli: generate counts the lens's buffers in the memory pre-flight") {
  // A drawn model of 2^24 tokens: the lens's logits of the 8000-token prompt's call
  // (8000 x 2^24 floats, 500 GiB) are refused before the 1 GiB of weights is drawn (the
  // pre-flight used to miss them: the run drew the weights, then failed to allocate the lens).
  const fs::path dir = test::temp_path("lens-memory");
  fs::create_directories(dir);
  std::ofstream(dir / "c.json")
      << R"({"dim": 8, "n_heads": 1, "n_layers": 1, "vocab_size": 16777216,
            "max_seq_len": 8192, "max_batch_size": 1, "block": "llama"})";
  std::ofstream ids(dir / "ids.txt");
  for (int i = 1; i <= 8000; ++i) ids << i << (i < 8000 ? "," : "\n");
  ids.close();
  const test::CliResult r =
      test::run_cli("generate --config " + q(dir / "c.json") + " --tokens-file " +
                    q(dir / "ids.txt") + " -n 1 --logit-lens 5");
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.err.find("the largest part is the logit lens (500.") != std::string::npos, r.err);
  CHECK(r.out.empty());
}
