// Errors in the user's own words (issue 20): every config error names the file and the key as
// that file writes it (Hugging Face or Meta) with exit status 2, values are short escaped
// excerpts, one message style for every error (CLI11's too), flags that would be accepted
// silently are refused, a Hugging Face config is sized by the run, and the JSON files read are
// bounded before they are parsed.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using test::TempDir;

std::string q(const fs::path& p) {
  std::string s = "'";
  s.append(p.string()).append("'");
  return s;
}

fs::path hf_case() {
  return test::golden_dir() / "hf" / "llama31_gqa_bf16";
}

json hf_config() {
  std::ifstream in(hf_case() / "config.json");
  return json::parse(in);
}

void write_json(const fs::path& p, const json& j) {
  std::ofstream(p) << j.dump();
}

// Exit 2 before any work, one "attn-cli: error: " line under 600 bytes holding every needle.
test::CliResult refused(const std::string& args, const std::vector<std::string>& needles) {
  const test::CliResult r = test::run_cli(args);
  INFO("attn-cli " << args << "\nstderr: " << r.err.substr(0, 2000));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  const std::size_t line = r.err.rfind("attn-cli: error: ");
  REQUIRE(line != std::string::npos);
  CHECK(r.err.size() - line < 600);
  CHECK(r.err.find('\n', line) == r.err.size() - 1);
  for (const std::string& n : needles) CHECK_MESSAGE(r.err.find(n) != std::string::npos, n);
  return r;
}

}  // namespace

TEST_CASE("user's words: a Hugging Face config's wrong types and values exit 2 naming its keys") {
  TempDir dir;
  const fs::path cfg = dir.path / "config.json";
  const std::string big(600000, 'x');
  struct Case {
    json change;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {{{"model_type", 5}}, {"'model_type'", "expected a string, got 5"}},
      {{{"use_sliding_window", "no"}, {"sliding_window", 4}}, {"'use_sliding_window'"}},
      {{{"rope_scaling", {{"rope_type", 5}}}}, {"'rope_scaling.rope_type'"}},
      {{{"rope_scaling", {{"type", nullptr}}}}, {"'rope_scaling'", "llama3"}},
      {{{"rope_scaling", "llama3"}}, {"'rope_scaling'", "expected an object"}},
      {{{"rope_scaling", {{"rope_type", "llama3"}, {"factor", big}}}}, {"'rope_scaling.factor'"}},
      {{{"hidden_act", big}}, {"'hidden_act'", "silu", "..."}},
      {{{"attention_bias", big}}, {"'attention_bias'", "..."}},
      {{{"intermediate_size", 0}}, {"'intermediate_size'", "at least 1, got 0"}},
      {{{"head_dim", -4}}, {"'head_dim'", "at least 1, got -4"}},
      {{{"head_dim", std::int64_t(1) << 62}}, {"'head_dim'", "[1, 2^16]"}},
      {{{"num_attention_heads", 5}},
       {"'num_attention_heads'", "hidden_size 32 is not divisible by num_attention_heads 5"}},
      {{{"num_key_value_heads", 3}}, {"'num_key_value_heads'", "num_attention_heads 8"}},
      {{{"max_position_embeddings", 0}}, {"'max_position_embeddings'", "at least 1"}},
      {{{"rms_norm_eps", "x"}}, {"'rms_norm_eps'", "expected a number"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.change.dump().substr(0, 100));
    json j = hf_config();
    j.update(c.change);
    write_json(cfg, j);
    std::vector<std::string> needles = c.needles;
    needles.push_back(cfg.string());
    const test::CliResult r = refused("run --config " + q(cfg), needles);
    for (const char* meta : {"'dim'", "'n_heads'", "'n_kv_heads'", "'max_seq_len'", "'norm_eps'"})
      CHECK_MESSAGE(r.err.find(meta) == std::string::npos, meta);
  }
}

TEST_CASE("user's words: a Hugging Face config takes its batch from the run and says its cap") {
  const std::string base = "run --config " + q(hf_case() / "config.json") + " --weights " +
                           q(hf_case() / "model.safetensors.index.json");
  test::CliResult r = test::run_cli(base + " -b 2 --json");
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("\"input\":[2,7,32]") != std::string::npos);
  CHECK(r.err.find("max_position_embeddings is 131072; the cache holds 4096 positions") !=
        std::string::npos);
  // The flag sets it, and then it holds.
  refused(base + " -b 2 --max-batch 1",
          {"max_batch_size 1", "max_batch_size 2 makes room", "(set with --max-batch)"});
  refused(base + " --prefill 5000", {"max_seq_len is 4096", "--max-seq-len"});
  r = test::run_cli(base + " --max-seq-len 64");
  CHECK(r.status == 0);
  CHECK(r.err.find("max_position_embeddings") == std::string::npos);  // asked for: not said
  // Model parallel from the flag: without mpirun it says how to run it.
  refused(base + " --model-parallel 2", {"model_parallel_size 2", "mpirun -np 2"});
  refused(
      base + " --model-parallel 3",
      {"model_parallel_size 3", "num_key_value_heads 2 is not divisible by model_parallel_size 3",
       "(set with --model-parallel)"});
}

TEST_CASE("user's words: a Hugging Face checkpoint's tensors are named as it names them") {
  TempDir dir;
  const fs::path cfg = dir.path / "config.json";
  json j = hf_config();
  j["num_hidden_layers"] = 16777216;  // beside a 2-layer checkpoint: refused at once
  write_json(cfg, j);
  const test::CliResult r = refused(
      "run --config " + q(cfg) + " --weights " + q(hf_case() / "model.safetensors.index.json"),
      {"'model.layers.16777215.self_attn.q_proj.weight' is missing", "16777216 layers"});
  CHECK(r.err.find("'layers.") == std::string::npos);
}

TEST_CASE("user's words: flags accepted silently before are refused, CLI11's errors in one style") {
  refused("run --layers 0:-1", {"--layers", "0 <= A < B", "'0:-1'"});
  refused("run --layers 1:1", {"layers 1:1", "has layers 0:1", "(set with --layers)"});
  refused("run --layers x", {"--layers", "'x'"});
  refused("run --max-seq-len 0", {"--max-seq-len", "0"});
  refused("run --max-batch 0", {"--max-batch", "0"});
  refused("run --model-parallel 0", {"--model-parallel"});
  refused("run --stpes 3", {"did you mean --steps?", "attn-cli run --help"});
  refused("rnu", {"did you mean run?"});
  const test::CliResult r = refused("run --steps \"$(printf '\\033[31mred')\"", {"\\x1b[31mred"});
  CHECK(r.err.find('\x1b') == std::string::npos);
}

TEST_CASE("user's words: keys that do nothing for the block are warned about") {
  TempDir dir;
  const fs::path cfg = dir.path / "c.json";
  write_json(cfg, {{"dim", 16}, {"n_heads", 2}, {"activation", "gelu"}, {"norm_first", true}});
  const test::CliResult r = test::run_cli("run --steps 1 --config " + q(cfg));
  CHECK(r.status == 0);
  CHECK(r.err.find("2 keys, e.g. 'activation', 'norm_first' ignored: only block \"encoder\"") !=
        std::string::npos);
}

TEST_CASE("user's words: C1 controls and bidi overrides from a file reach stderr escaped") {
  TempDir dir;
  const fs::path cfg = dir.path / "c.json";
  std::ofstream(cfg) << "{\"dim\":18,\"n_heads\":6,\"rope\":\"none\",\"k\\u009b31m\\u202e\":1}";
  const test::CliResult r = test::run_cli("run --steps 1 --config " + q(cfg));
  CHECK(r.status == 0);
  CHECK(r.err.find("'k\\u009b31m\\u202e'") != std::string::npos);
  CHECK(r.err.find("\xc2\x9b") == std::string::npos);
}

TEST_CASE("user's words: --print-attention is bounded and JSON under --json") {
  refused("run --config " + q(test::source_dir() / "configs" / "llama-tiny.json") +
              " --prefill 2000 --max-seq-len 2001 --steps 0 --print-attention",
          {"--print-attention would print", "--attention-weights"});
  const test::CliResult r = test::run_cli("run --prefill 2 --steps 1 --print-attention --json");
  REQUIRE(r.status == 0);
  int events = 0;
  std::size_t at = 0;
  for (std::size_t nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1) {
    const json e = json::parse(r.out.substr(at, nl - at));  // every line is JSON
    if (e.at("event") != "attention_weights") continue;
    ++events;
    const std::size_t rows = e.at("of") == "prefill" ? 2 : 1;
    CHECK(e.at("weights").size() == rows);
    CHECK(e.at("kv_head") == e.at("head").get<int>() / 3);
  }
  CHECK(events == 12);  // 6 heads, prefill and one step
}

TEST_CASE("user's words: JSON files are bounded before they are parsed") {
  TempDir dir;
  const fs::path index = dir.path / "model.safetensors.index.json";
  // Over the index's size cap: refused before it is read.
  {
    std::ofstream out(index);
    out << "{\"weight_map\":{\"a\":\"" << std::string(17 << 20, 'x') << "\"}}";
  }
  refused("run --config " + q(hf_case() / "config.json") + " --weights " + q(index),
          {"over the limit of 16777216"});
  // Under it, but with too many values.
  {
    std::ofstream out(index);
    out << "{\"weight_map\":{},\"x\":[";
    for (int i = 0; i < 1100000; ++i) out << (i ? ",0" : "0");
    out << "]}";
  }
  refused("run --config " + q(hf_case() / "config.json") + " --weights " + q(index), {"more than"});
  std::ofstream(index) << R"({"weight_map":{"a":"f.safetensors","a":"g.safetensors"}})";
  refused("run --config " + q(hf_case() / "config.json") + " --weights " + q(index),
          {"key 'a' twice"});
  const fs::path cfg = dir.path / "c.json";
  {
    std::ofstream out(cfg);
    out << "{\"dim\":18,\"n_heads\":6,\"x\":[";
    for (int i = 0; i < 2000; ++i) out << (i ? ",0" : "0");
    out << "]}";
  }
  refused("run --config " + q(cfg),
          {"an array of more than 1024 elements", "too many for a config"});
}
