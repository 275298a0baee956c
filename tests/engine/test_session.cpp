// The engine through its API, as every front calls it: files found beside the weights or in a
// folder, the golden token models' greedy chains (make_model.py's float64 reference), cache
// session files continued in another engine, and each check at and around its boundary with
// the setting it names.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>

#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

attn::ModelSpec spec_of(const std::string& name) {
  attn::ModelSpec s;
  s.weights = test::model_dir(name) /
              (name.starts_with("hf") ? "model.safetensors" : "weights.safetensors");
  s.threads = 2;
  return s;
}

std::vector<std::int32_t> run_generate(attn::Session& e, std::span<const std::int32_t> prompt,
                                       std::int64_t steps, const attn::Sampling& s,
                                       bool feed_last = false) {
  std::vector<std::int32_t> ids;
  attn::generate(e, prompt, steps, s, {}, feed_last,
                 [&](const attn::Generated& t) { ids.push_back(t.id); });
  return ids;
}

attn::ModelArgs small_args() {
  attn::ModelArgs a = attn::seed_args();  // dim 18, 6 heads, 2 KV heads
  a.max_seq_len = 8;
  a.max_batch_size = 2;
  return a;
}

}  // namespace

TEST_CASE("engine: a folder's index or file, with the config and tokenizer beside it") {
  const fs::path dir = test::temp_path("engine-folder");
  fs::remove_all(dir);
  fs::create_directories(dir);
  attn::ModelSpec s;
  s.weights = dir;
  CHECK(test::setting_of([&] { (void)attn::open_model(s); }) == "weights");  // no checkpoint in it
  fs::copy_file(test::model_dir("hf_untied_f32") / "model.safetensors", dir / "model.safetensors");
  attn::ModelFiles f = attn::open_model(s).files;
  CHECK(f.weights == dir / "model.safetensors");
  CHECK(f.config.empty());
  CHECK(f.tokenizer.empty());
  CHECK(test::setting_of([&] { attn::open_session(s); }) == "config");
  fs::copy_file(test::model_dir("hf_untied_f32") / "config.json", dir / "config.json");
  std::ofstream(dir / "model.safetensors.index.json") << "{}";
  std::ofstream(dir / "tokenizer.json") << "{}";
  f = attn::open_model(s).files;
  CHECK(f.weights == dir / "model.safetensors.index.json");  // the index wins, as HF loads it
  CHECK(f.config == dir / "config.json");
  CHECK(f.tokenizer == dir / "tokenizer.json");
  s.weights = dir / "missing";
  CHECK(test::setting_of([&] { (void)attn::open_model(s); }) == "weights");
}

TEST_CASE("engine: every golden token model's greedy chain, and a session continued elsewhere") {
  for (const std::string name : {"meta_f32", "meta_bf16", "hf_untied_f32", "hf_tied_bf16"}) {
    INFO(name);
    const std::vector<std::int32_t> tokens = test::i32_tensor(
                                        test::model_dir(name) / "expected.safetensors", "tokens"),
                                    greedy = test::i32_tensor(
                                        test::model_dir(name) / "expected.safetensors", "greedy");
    const std::span<const std::int32_t> prompt(tokens.data(), 7);  // each case's first prompt
    attn::Session e = attn::open_session(spec_of(name), {1, 7, 32});
    CHECK(run_generate(e, prompt, 32, {}) ==
          std::vector<std::int32_t>(greedy.begin(), greedy.begin() + 32));
    CHECK(e.filled == 7 + 31);  // the last token is not fed unless asked
    // Sampled: k steps, the session saved, then continued by another engine.
    const attn::Sampling s{0.8, 40, 0.95, 0.05, 5};
    attn::Session whole = attn::open_session(spec_of(name), {1, 7, 12});
    const std::vector<std::int32_t> one = run_generate(whole, prompt, 12, s);
    for (const std::int64_t k : {1, 6, 11}) {
      attn::Session a = attn::open_session(spec_of(name), {1, 7, 12});
      std::vector<std::int32_t> ids = run_generate(a, prompt, k, s, true);
      const fs::path path = test::temp_path("engine-" + name + ".session");
      attn::stage_cache_session(a, path).commit();
      attn::Session b = attn::open_session(spec_of(name), {1, 7, 12});
      attn::load_cache_session(b, path);
      CHECK(b.filled == 7 + k);
      const std::vector<std::int32_t> rest = run_generate(b, {}, 12 - k, s);
      ids.insert(ids.end(), rest.begin(), rest.end());
      CHECK(ids == one);
    }
  }
}

TEST_CASE("engine: the cache's capacity, at and around each bound, names its setting") {
  const attn::ModelArgs a = small_args();
  CHECK(test::setting_of([&] { attn::check_fits(a, 2, 0, 8, "x"); }) == "(none)");
  CHECK(test::setting_of([&] { attn::check_fits(a, 2, 7, 1, "x"); }) == "(none)");
  CHECK(test::setting_of([&] { attn::check_fits(a, 2, 8, 0, "x"); }) == "(none)");
  CHECK(test::setting_of([&] { attn::check_fits(a, 2, 0, 9, "x"); }) == "max_seq_len");
  CHECK(test::setting_of([&] { attn::check_fits(a, 2, 8, 1, "x"); }) == "max_seq_len");
  CHECK(test::setting_of([&] { attn::check_fits(a, 1, INT64_MAX, INT64_MAX, "x"); }) ==
        "max_seq_len");
  CHECK(test::setting_of([&] { attn::check_fits(a, 1, -1, 1, "x"); }) == "max_seq_len");
  CHECK(test::setting_of([&] { attn::check_fits(a, 3, 0, 1, "x"); }) == "max_batch_size");
  CHECK(test::setting_of([&] { attn::check_fits(a, 0, 0, 1, "x"); }) == "batch");
  // A run's prefill and steps together: the room it names is their sum.
  CHECK_THROWS_WITH_AS(attn::check_capacity(a, {1, 7, 3}),
                       doctest::Contains("positions 0..9 need 10, but max_seq_len is 8"),
                       attn::InputError);
  CHECK_THROWS_WITH_AS(attn::check_capacity(a, {1, 7, 3}),
                       doctest::Contains("max_seq_len 10 makes room"), attn::InputError);
  CHECK(test::setting_of([&] {
          attn::check_capacity(a, {1, INT64_MAX, INT64_MAX});
        }) == "max_seq_len");
  CHECK(test::setting_of([&] { attn::check_capacity(a, {2, 5, 3}); }) == "(none)");
}

TEST_CASE("engine: hidden-state calls continue the cache they hold, padding is 0 or 1") {
  attn::ModelSpec s;
  s.threads = 1;
  attn::Session e = attn::open_session(s, {2, 0, 0}, small_args());
  const std::int64_t dim = e.model.args.dim;
  std::vector<float> x(std::size_t(2 * 8 * dim), 0.25f), y(x.size());
  attn::forward_hidden(e, x.data(), 2, 5, 0, y.data());
  CHECK(e.filled == 5);
  CHECK_THROWS_WITH_AS(attn::forward_hidden(e, x.data(), 1, 1, 5, y.data()),
                       doctest::Contains("differs from the 2 sequences"), attn::InputError);
  attn::forward_hidden(e, x.data(), 2, 1, 5, y.data());
  CHECK(e.filled == 6);
  attn::forward_hidden(e, x.data(), 2, 5, 0, y.data());
  CHECK(test::setting_of([&] { attn::forward_hidden(e, x.data(), 2, 1, 6, y.data()); }) ==
        "start_pos");
  CHECK(test::setting_of([&] { attn::forward_hidden(e, x.data(), 2, 4, 5, y.data()); }) ==
        "max_seq_len");
  const float good[2] = {1, 0}, bad[2] = {1, 0.5f};
  CHECK_THROWS_AS(attn::set_padding(e, bad, 2, 1, 5), attn::InputError);
  CHECK(e.model.mask.keep == nullptr);  // a refused mask changes nothing
  attn::set_padding(e, good, 2, 1, 5);
  REQUIRE(e.model.mask.keep != nullptr);
  CHECK(e.model.mask.keep[5] == 1);
  CHECK(e.model.mask.keep[e.model.mask.ld + 5] == 0);
  attn::set_padding(e, nullptr, 2, 3, 0);  // a new prefill forgets it
  CHECK(e.model.mask.keep == nullptr);
}

TEST_CASE("engine: what one process cannot open or run is refused with its setting") {
  attn::ModelArgs a = small_args();
  a.model_parallel_size = 2;
  attn::ModelSpec s;
  CHECK(test::setting_of([&] { attn::open_session(s, {}, a); }) == "model_parallel_size");
  attn::Session blocks = attn::open_session(s, {}, small_args());
  const std::int32_t id = 1;
  CHECK_THROWS_WITH_AS(attn::forward_tokens(blocks, &id, 1, 1, 0, nullptr, false),
                       doctest::Contains("needs a token model"), attn::InputError);
  attn::Session m = attn::open_session(spec_of("meta_f32"), {1, 4, 4});
  const std::int32_t outside[2] = {3, 128};  // vocab 128
  std::vector<float> logits(128);
  CHECK_THROWS_WITH_AS(attn::forward_tokens(m, outside, 1, 2, 0, logits.data(), false),
                       doctest::Contains("token 128 at index 1"), attn::InputError);
  CHECK(test::setting_of([&] { run_generate(m, {}, 1, {}); }) == "prompt");
  CHECK(test::setting_of([&] { attn::stage_cache_session(m, test::temp_path("none.session")); }) ==
        "save_session");
}

TEST_CASE("engine: attn-cli run and generate take a checkpoint folder, its config beside") {
  const fs::path dir = test::temp_path("engine-cli-folder");
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(test::model_dir("hf_untied_f32") / f, dir / f);
  const test::CliResult run =
      test::run_cli("run -m " + dir.string() + " --prefill 3 --steps 1 -t 1 --json");
  REQUIRE_MESSAGE(run.status == 0, run.err);
  CHECK(run.out.find("\"dim\":24") != std::string::npos);  // hidden_size of the folder's config
  const test::CliResult gen =
      test::run_cli("generate -m " + dir.string() + " --tokens 1,5,9 -n 3 -t 1 --json");
  REQUIRE_MESSAGE(gen.status == 0, gen.err);
  CHECK(gen.out.find("\"event\":\"token\"") != std::string::npos);
}
