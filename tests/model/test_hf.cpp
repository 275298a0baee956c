// Hugging Face checkpoints as they are: config.json keys, model.layers.* names, an index over
// several shards, Qwen2's biases, Llama 3.1's RoPE scaling and --layers, against the Meta-named
// equivalent computed by the PyTorch reference (tests/golden/make_hf.py).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/model/config.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

fs::path hf_dir() {
  return test::golden_dir() / "hf";
}

// Appending, not operator+: GCC 12 at -O3 warns falsely (-Wrestrict) on "'" + s + "'".
std::string quoted(const fs::path& p) {
  std::string s(1, '\'');
  s += p.string();
  s += '\'';
  return s;
}

// Runs one case through the CLI and compares every tensor of its dump with the reference's.
void check_case(const nlohmann::json& c) {
  const fs::path dir = hf_dir() / c.at("name").get<std::string>();
  const fs::path dump = fs::temp_directory_path() / ("attn_hf_" + c.at("name").get<std::string>() +
                                                     "." + std::to_string(::getpid()));
  const std::string args = "run --config " + quoted(dir / "config.json") + " --weights " +
                           quoted(dir / "model.safetensors.index.json") + " --input " +
                           quoted(dir / "input.safetensors") + " --prefill " +
                           std::to_string(c.at("prefill").get<int>()) + " --steps " +
                           std::to_string(c.at("steps").get<int>()) + " " +
                           c.at("flags").get<std::string>() + " --dump " + quoted(dump);
  const test::CliResult r = test::run_cli(args);
  INFO(args << "\n" << r.err);
  REQUIRE(r.status == 0);
  const double worst = test::compare_files(dump, dir / "expected.safetensors").worst_ratio;
  CHECK(attn::open_safetensors(dump).header.tensors.size() ==
        attn::open_safetensors(dir / "expected.safetensors").header.tensors.size());
  MESSAGE("hf " << c.at("name").get<std::string>() << ": worst " << worst << " of tolerance");
  fs::remove(dump);
}

attn::ModelArgs hf_args(nlohmann::json j) {
  return attn::parse_config(j.dump(), "config.json");
}

nlohmann::json llama_config() {
  return {{"hidden_size", 64},        {"num_hidden_layers", 4},
          {"num_attention_heads", 8}, {"num_key_value_heads", 2},
          {"intermediate_size", 96},  {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},   {"max_position_embeddings", 131072},
          {"model_type", "llama"},    {"hidden_act", "silu"}};
}

void refused(const nlohmann::json& j, const std::string& key) {
  CAPTURE(j.dump());
  try {
    hf_args(j);
    FAIL("accepted");
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()).find("config.json") != std::string::npos);
    CHECK(std::string(e.what()).find(key) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("hf: every Hugging Face-layout checkpoint matches its Meta-named reference") {
  std::ifstream in(hf_dir() / "cases.json");
  REQUIRE(in);
  const nlohmann::json cases = nlohmann::json::parse(in);
  REQUIRE(cases.size() >= 3);
  for (const auto& c : cases) {
    CAPTURE(c.dump());
    check_case(c);
  }
}

TEST_CASE("hf: a config.json is read as the ModelArgs it describes") {
  const attn::ModelArgs a = hf_args(llama_config());
  CHECK(a.dim == 64);
  CHECK(a.n_layers == 4);
  CHECK(a.n_heads == 8);
  CHECK(a.n_kv_heads == 2);
  CHECK(a.ffn_hidden() == 96);
  CHECK(a.head_dim() == 8);
  CHECK(a.block == attn::Block::llama);
  CHECK(a.rope == attn::Rope::half);
  CHECK(a.max_seq_len == 4096);  // not 131072: --max-seq-len sets more
  CHECK(a.max_batch_size == 1);
  CHECK_FALSE(a.attention_bias);

  nlohmann::json q = llama_config();
  q["model_type"] = "qwen2";
  q["head_dim"] = 16;
  const attn::ModelArgs qa = hf_args(q);
  CHECK(qa.attention_bias);
  CHECK_FALSE(qa.attention_out_bias);
  CHECK(qa.head_dim() == 16);
}

TEST_CASE("hf: unsupported or broken configs are refused naming the key") {
  nlohmann::json j = llama_config();
  j.erase("intermediate_size");
  refused(j, "intermediate_size");
  j = llama_config();
  j["hidden_act"] = "gelu";
  refused(j, "hidden_act");
  j = llama_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  refused(j, "rope_scaling");
  j = llama_config();
  j["sliding_window"] = 1024;
  refused(j, "sliding_window");
  j["use_sliding_window"] = false;
  CHECK(hf_args(j).max_seq_len == 4096);
}

TEST_CASE("hf: --layers, --max-seq-len and --max-batch override the config") {
  attn::ModelArgs a = hf_args(llama_config());
  attn::apply_overrides(a, {256, 3, 1, 3});
  CHECK(a.max_seq_len == 256);
  CHECK(a.max_batch_size == 3);
  CHECK(a.first_layer == 1);
  CHECK(a.n_layers == 2);
  for (attn::ConfigOverrides bad :
       {attn::ConfigOverrides{0, 0, 2, 2}, attn::ConfigOverrides{0, 0, 0, 5},
        attn::ConfigOverrides{-1, 0, 0, -1}}) {
    attn::ModelArgs b = hf_args(llama_config());
    CHECK_THROWS_AS(attn::apply_overrides(b, bad), attn::InputError);
  }
}

TEST_CASE("hf: the CLI refuses bad --layers and an index that points outside its directory") {
  const fs::path dir = hf_dir() / "llama_layers_1_3";
  const std::string model = "run --config " + quoted(dir / "config.json") + " --weights ";
  test::CliResult r = test::run_cli(model + quoted(dir / "model.safetensors.index.json") +
                                    " --layers 3:9 --prefill 2 --steps 1");
  CHECK(r.status == 2);
  CHECK(r.err.find("--layers") != std::string::npos);
  r = test::run_cli(model + quoted(dir / "model.safetensors.index.json") + " --layers x");
  CHECK(r.status == 2);

  // A directory of its own: ctest runs test cases side by side.
  const fs::path tmp = fs::temp_directory_path() / ("attn_hf." + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const fs::path bad = tmp / "bad.index.json";
  std::ofstream(bad) << R"({"weight_map": {"model.layers.0.self_attn.q_proj.weight": "../x"}})";
  r = test::run_cli(model + quoted(bad) + " --prefill 2 --steps 1");
  CHECK(r.status == 2);
  CHECK(r.err.find("weight_map") != std::string::npos);
  std::ofstream(bad) << R"({"weight_map": {"model.layers.0.self_attn.q_proj.weight": )"
                     << R"("model-00002-of-00002.safetensors"}})";
  fs::copy_file(dir / "model-00002-of-00002.safetensors", tmp / "model-00002-of-00002.safetensors",
                fs::copy_options::overwrite_existing);
  r = test::run_cli(model + quoted(bad) + " --prefill 2 --steps 1");
  CHECK(r.status == 2);
  CHECK(r.err.find("q_proj") != std::string::npos);
  fs::remove_all(tmp);
}

// Phi3Config's keys as Phi-3-mini-128k and Phi-4-mini write them (the logits of such folders:
// model.hf_archs); transformers' default attention_factor sqrt(1 + ln(s) / ln(original)).
TEST_CASE("hf: a phi3 config.json: LongRoPE factors, partial rotary, its window, each checked") {
  nlohmann::json j = llama_config();  // head_dim 8: 4 pairs, 3 of them with factor 0.75
  j["model_type"] = "phi3";
  j["max_position_embeddings"] = 131072;
  j["original_max_position_embeddings"] = 4096;
  j["partial_rotary_factor"] = 0.75;
  j["sliding_window"] = 2047;
  j["rope_scaling"] = {
      {"type", "longrope"}, {"short_factor", {1.0, 1.5, 2.0}}, {"long_factor", {3.0, 4.0, 5.0}}};
  attn::ModelArgs a = hf_args(j);
  CHECK(a.arch == "phi3");
  CHECK(a.rotary_dims() == 6);
  CHECK(a.rope_freq_factors == std::vector<float>{1.0f, 1.5f, 2.0f});
  CHECK(a.rope_long_factors == std::vector<float>{3.0f, 4.0f, 5.0f});
  CHECK(a.rope_original_context == 4096);
  CHECK(a.rope_attn_factor == doctest::Approx(std::sqrt(1 + std::log(32.0) / std::log(4096.0))));
  CHECK(a.max_seq_len == 2047);  // the window bounds the default cache
  j["rope_scaling"]["attention_factor"] = 1.25;
  CHECK(hf_args(j).rope_attn_factor == 1.25);
  nlohmann::json bad = j;
  bad["rope_scaling"]["long_factor"] = {1.0, 2.0};
  refused(bad, "rope_scaling.long_factor");
  bad = j;
  bad["rope_scaling"]["short_factor"] = {1.0, -2.0, 1.0};
  refused(bad, "rope_scaling.short_factor");
  bad = j;
  bad.erase("original_max_position_embeddings");
  refused(bad, "original_max_position_embeddings");
  bad = j;
  bad["partial_rotary_factor"] = 0.4;  // 3.2: 3 dimensions of 8, odd
  refused(bad, "partial_rotary_factor");
  bad = j;
  bad["model_type"] = "llama";  // LongRoPE is Phi-3's only
  refused(bad, "rope_scaling");
}
