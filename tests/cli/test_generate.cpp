// attn-cli generate on the golden token models (tests/golden/model, make_model.py's float64
// reference): the greedy chain from the command line, sessions split across processes, bad ids
// and mismatched sessions refused with exit 2.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "attn/io/safetensors.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string ids_text(const std::vector<std::int32_t>& ids, std::size_t from, std::size_t n) {
  std::string s;
  for (std::size_t i = from; i < from + n; ++i) {
    if (i > from) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

std::string model_flags(const std::string& name) {
  const std::string weights = name.starts_with("hf") ? "model.safetensors" : "weights.safetensors";
  return "--config " + (test::model_dir(name) / "config.json").string() + " -m " +
         (test::model_dir(name) / weights).string() + " -t 2";
}

// The token events' ids and the JSON text of each token's top logits (the bits, as printed).
struct Tokens {
  std::vector<std::int32_t> ids;
  std::vector<std::string> tops;
};

Tokens tokens_of(const std::string& out) {
  Tokens t;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line);
    if (e["event"] != "token") continue;
    t.ids.push_back(e["id"]);
    t.tops.push_back(e["top"].dump());
  }
  return t;
}

}  // namespace

TEST_CASE("generate: the greedy chain of every golden token model, from the command line") {
  for (const std::string name : {"meta_f32", "hf_untied_f32", "hf_tied_bf16"}) {
    INFO(name);
    const std::vector<std::int32_t> prompt = test::i32_tensor(
                                        test::model_dir(name) / "expected.safetensors", "tokens"),
                                    greedy = test::i32_tensor(
                                        test::model_dir(name) / "expected.safetensors", "greedy");
    const test::CliResult r = test::run_cli("generate " + model_flags(name) + " --tokens " +
                                            ids_text(prompt, 0, prompt.size()) + " -n 32 --json");
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(tokens_of(r.out).ids == std::vector<std::int32_t>(greedy.begin(), greedy.begin() + 32));
    CHECK(r.err.find("prompt eval time") != std::string::npos);
    CHECK(r.err.find("tokens per second") != std::string::npos);
  }
}

TEST_CASE("generate: a session saved after k steps and continued gives the bits of one run") {
  const std::string name = "hf_tied_bf16", flags = model_flags(name);
  const std::vector<std::int32_t> prompt =
      test::i32_tensor(test::model_dir(name) / "expected.safetensors", "tokens");
  const std::string tokens = " --tokens " + ids_text(prompt, 0, prompt.size());
  const test::CliResult one = test::run_cli("generate " + flags + tokens + " -n 20 --json");
  REQUIRE_MESSAGE(one.status == 0, one.err);
  const Tokens whole = tokens_of(one.out);
  REQUIRE(whole.ids.size() == 20);
  for (const int k : {1, 7, 19}) {
    INFO("split after " << k << " steps");
    const fs::path s = test::temp_path("session" + std::to_string(k) + ".safetensors");
    const test::CliResult a =
        test::run_cli("generate " + flags + tokens + " -n " + std::to_string(k) +
                      " --json --save-session " + s.string());
    REQUIRE_MESSAGE(a.status == 0, a.err);
    const test::CliResult b = test::run_cli("generate " + flags + " -n " + std::to_string(20 - k) +
                                            " --json --load-session " + s.string());
    REQUIRE_MESSAGE(b.status == 0, b.err);
    Tokens split = tokens_of(a.out);
    const Tokens rest = tokens_of(b.out);
    split.ids.insert(split.ids.end(), rest.ids.begin(), rest.ids.end());
    split.tops.insert(split.tops.end(), rest.tops.begin(), rest.tops.end());
    CHECK(split.ids == whole.ids);
    CHECK(split.tops == whole.tops);  // the logits' bits, as JSON prints them
  }
  SUBCASE("sampling with a seed continues the same draws") {
    const std::string sampling = " --temp 0.9 --top-k 20 --seed 7";
    const test::CliResult full =
        test::run_cli("generate " + flags + tokens + sampling + " -n 12 --json");
    const fs::path s = test::temp_path("sampled.safetensors");
    const test::CliResult a = test::run_cli("generate " + flags + tokens + sampling +
                                            " -n 5 --json --save-session " + s.string());
    const test::CliResult b =
        test::run_cli("generate " + flags + sampling + " -n 7 --json --load-session " + s.string());
    REQUIRE((full.status == 0 && a.status == 0 && b.status == 0));
    std::vector<std::int32_t> split = tokens_of(a.out).ids;
    for (const std::int32_t id : tokens_of(b.out).ids) split.push_back(id);
    CHECK(split == tokens_of(full.out).ids);
  }
}

// The weights digest decides whether a saved session loads: were it to drift, every session saved
// before would be refused. Pinned as computed before the digest sampled whole blocks.
TEST_CASE("generate: a session's weights fingerprint is the one sessions were saved with") {
  for (const auto& pinned : {std::pair<std::string, std::string>{"meta_f32", "7b4124bb1759138a"},
                             {"meta_bf16", "f3f9e3bfe38e317c"}}) {
    const std::string& name = pinned.first;          // a plain reference: clang 14's CAPTURE cannot
    const std::string& fingerprint = pinned.second;  // capture a structured binding
    CAPTURE(name);
    const fs::path s = test::temp_path("fingerprint_" + name + ".safetensors");
    REQUIRE(test::run_cli("generate " + model_flags(name) + " --tokens 1,2,3 -n 1 --save-session " +
                          s.string())
                .status == 0);
    CHECK(attn::open_safetensors(s).header.metadata.at("weights") == fingerprint);
  }
}

TEST_CASE("generate: sessions of another config or other weights, and bad ids, are refused") {
  const std::string name = "hf_tied_bf16";
  const fs::path s = test::temp_path("refused.safetensors");
  REQUIRE(test::run_cli("generate " + model_flags(name) + " --tokens 1,2,3 -n 2 --save-session " +
                        s.string())
              .status == 0);
  const test::CliResult other_config = test::run_cli("generate " + model_flags("hf_untied_f32") +
                                                     " -n 1 --load-session " + s.string());
  CHECK(other_config.status == 2);
  CHECK(other_config.err.find("does not match this run: key '") != std::string::npos);
  const test::CliResult other_weights =
      test::run_cli("generate --config " + (test::model_dir(name) / "config.json").string() +
                    " -n 1 --load-session " + s.string());
  CHECK(other_weights.status == 2);
  CHECK(other_weights.err.find("other weights") != std::string::npos);
  const test::CliResult bad =
      test::run_cli("generate " + model_flags(name) + " --tokens 1,2,300 -n 1");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("token 300 at index 2 is outside the vocabulary [0, 300)") !=
        std::string::npos);
  const test::CliResult junk =
      test::run_cli("generate " + model_flags(name) + " --tokens 1,x -n 1");
  CHECK(junk.status == 2);
  CHECK(junk.err.find("token 1 is not a token id: 'x'") != std::string::npos);
  const test::CliResult blocks =
      test::run_cli("generate --config " + (test::source_dir() / "configs" / "gqa.json").string() +
                    " --tokens 1 -n 1");
  CHECK(blocks.status == 2);
  CHECK(blocks.err.find("needs a token model") != std::string::npos);
}

namespace {

std::vector<float> dump_tensor(const fs::path& path, const std::string& name) {
  const attn::SafetensorsFile f = attn::open_safetensors(path);
  std::vector<float> storage;
  const float* p = attn::tensor_as_f32(f, name, storage);
  return std::vector<float>(p, p + f.info(name).numel());
}

std::vector<float> expected_floats(const std::string& name, const std::string& tensor) {
  return dump_tensor(test::model_dir(name) / "expected.safetensors", tensor);
}

}  // namespace

TEST_CASE("run --tokens: the dump's logits are the reference's, prefill and teacher-forced steps") {
  const std::string name = "meta_f32";
  const std::vector<std::int32_t> prompt = test::i32_tensor(
                                      test::model_dir(name) / "expected.safetensors", "tokens"),
                                  greedy = test::i32_tensor(
                                      test::model_dir(name) / "expected.safetensors", "greedy");
  std::vector<std::int32_t> tokens = prompt;
  tokens.insert(tokens.end(), greedy.begin(), greedy.begin() + 3);
  const fs::path dump = test::temp_path("tokens_dump.safetensors");
  const test::CliResult r =
      test::run_cli("run " + model_flags(name) + " --tokens " + ids_text(tokens, 0, tokens.size()) +
                    " -n 3 --all-logits --dump " + dump.string());
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::vector<float> logits = expected_floats(name, "logits"),
                           steps = expected_floats(name, "greedy_logits");
  const std::int64_t V = 128;
  const test::Tolerance tol{1e-4, 1e-4};                               // cases.json's
  const std::vector<float> got = dump_tensor(dump, "prefill.logits");  // [1, 7, V]
  REQUIRE(got.size() == logits.size());
  CHECK(test::compare(got.data(), logits.data(), std::int64_t(got.size()), tol).failures == 0);
  for (int i = 1; i <= 3; ++i) {  // step i fed greedy[i-1]: the reference chose greedy[i] from it
    const std::vector<float> step = dump_tensor(dump, "decode." + std::to_string(i) + ".logits");
    REQUIRE(std::int64_t(step.size()) == V);
    CHECK(test::compare(step.data(), steps.data() + i * V, V, tol).failures == 0);
  }
}

TEST_CASE("run --tokens: a ragged batch is right-padded, each row's logits its own run's") {
  const std::string name = "meta_bf16", flags = model_flags(name);
  const std::vector<std::int32_t> both =
      test::i32_tensor(test::model_dir(name) / "expected.safetensors", "tokens");  // [2, 7]
  const std::string a = ids_text(both, 0, 7), b = ids_text(both, 7, 4);
  const auto logits = [&](const std::string& tokens, const std::string& file) {
    const fs::path dump = test::temp_path(file);
    const test::CliResult r = test::run_cli("run " + flags + " --tokens '" + tokens +
                                            "' -n 0 --all-logits --dump " + dump.string());
    REQUIRE_MESSAGE(r.status == 0, r.err);
    return dump_tensor(dump, "prefill.logits");
  };
  const std::vector<float> batch = logits(a + ";" + b, "ragged.safetensors");  // [2, 7, V]
  const std::vector<float> one = logits(a, "row0.safetensors"), two = logits(b, "row1.safetensors");
  const std::int64_t V = 250;
  REQUIRE(std::int64_t(batch.size()) == 2 * 7 * V);
  const test::Tolerance tol{1e-5, 1e-5};
  CHECK(test::compare(batch.data(), one.data(), 7 * V, tol).failures == 0);
  CHECK(test::compare(batch.data() + 7 * V, two.data(), 4 * V, tol).failures == 0);
}

TEST_CASE("run --tokens: ids, files and slices refused with the flag, file or key named") {
  const std::string flags = model_flags("hf_tied_bf16");
  const fs::path file = test::temp_path("ids.json");
  std::ofstream(file) << "[[1, 2, 3], [4, 5]]";
  const test::CliResult ok =
      test::run_cli("run " + flags + " --tokens-file " + file.string() + " -n 1 --json");
  CHECK_MESSAGE(ok.status == 0, ok.err);
  CHECK(ok.out.find("\"input\":[2,2,") != std::string::npos);  // B 2, P = 3 - 1
  std::ofstream(file) << "[[1, 2, 3], [4, 300]]";
  const test::CliResult bad = test::run_cli("run " + flags + " --tokens-file " + file.string());
  CHECK(bad.status == 2);
  CHECK(bad.err.find("sequence 1") != std::string::npos);
  const test::CliResult slice = test::run_cli("run " + flags + " --layers 1:2 --tokens 1,2,3");
  CHECK(slice.status == 2);
  CHECK(slice.err.find("token input needs the embeddings") != std::string::npos);
  const test::CliResult both = test::run_cli("run " + flags + " --tokens 1,2 -p hi");
  CHECK(both.status == 2);
  const test::CliResult blocks = test::run_cli("run --tokens 1,2,3");  // the seed config: no vocab
  CHECK(blocks.status == 2);
  CHECK(blocks.err.find("token input needs a token model") != std::string::npos);
}
