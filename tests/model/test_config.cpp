// attn::parse_config against CONTRACT §1: defaults, Meta's FFN size, the seed's ModelArgs, and
// every refusal naming the source and the key.
#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "attn/error.hpp"
#include "attn/model/config.hpp"
#include "test_support.hpp"

namespace {

const std::string kSrc = "cfg/params.json";

// A valid config (the seed's shape, rope none) with the JSON members `extra` added or replacing
// the base's, so the text never holds a key twice.
std::string seed_with(const std::string& extra) {
  nlohmann::json j = {
      {"dim", 18}, {"n_heads", 6}, {"n_kv_heads", 2}, {"multiple_of", 10}, {"rope", "none"}};
  j.update(nlohmann::json::parse("{" + extra + "}"));
  return j.dump();
}

// Whether `key` occurs in `msg` as a whole word (so "dim" is not found inside "head_dim").
bool names_key(const std::string& msg, const std::string& key) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = msg.find(key); at != std::string::npos; at = msg.find(key, at + 1)) {
    const bool left = at == 0 || !ident(msg[at - 1]);
    const bool right = at + key.size() == msg.size() || !ident(msg[at + key.size()]);
    if (left && right) return true;
  }
  return false;
}

// The InputError message parse_config throws for `text`; fails the check if it throws none or
// something else. The message must be one line and name the source.
std::string refusal(const std::string& text) {
  CAPTURE(text);
  try {
    attn::parse_config(text, kSrc);
  } catch (const attn::InputError& e) {
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find(kSrc) != std::string::npos, "message does not name the file: ", msg);
    CHECK_MESSAGE(msg.find('\n') == std::string::npos, "message is not one line: ", msg);
    return msg;
  } catch (const std::exception& e) {
    FAIL_CHECK("expected attn::InputError, got another exception: " << e.what());
    return {};
  }
  FAIL_CHECK("no InputError thrown");
  return {};
}

// Refused, and the message names one of `keys`.
void check_refused(const std::string& text, std::initializer_list<const char*> keys) {
  const std::string msg = refusal(text);
  bool named = false;
  std::string wanted;
  for (const char* k : keys) {
    named = named || names_key(msg, k);
    wanted += std::string(wanted.empty() ? "" : " or ") + k;
  }
  CHECK_MESSAGE(named, "message should name the key ", wanted, ": ", msg);
}

// Restores the default spdlog logger when it goes out of scope; captures what is logged meanwhile.
struct CapturedLog {
  std::ostringstream text;
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  CapturedLog() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
    auto logger = std::make_shared<spdlog::logger>("attn-config-test", sink);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous); }
};

}  // namespace

TEST_CASE("config: only dim and n_heads given, every other key takes its ModelArgs default") {
  const attn::ModelArgs a = attn::parse_config(R"({"dim": 64, "n_heads": 4})", kSrc);
  CHECK(a.dim == 64);
  CHECK(a.n_heads == 4);
  CHECK(a.n_kv_heads == 4);
  CHECK(a.n_layers == 1);
  CHECK(a.vocab_size == -1);
  CHECK(a.multiple_of == 256);
  CHECK_FALSE(a.ffn_dim_multiplier.has_value());
  CHECK(a.norm_eps == 1e-5);
  CHECK(a.rope_theta == 500000.0);
  CHECK(a.max_batch_size == 32);
  CHECK(a.max_seq_len == 2048);
  CHECK(a.model_parallel_size == 1);
  CHECK(a.block == attn::Block::llama);
  CHECK(a.rope == attn::Rope::interleaved);
  CHECK(a.attention_bias == false);
  CHECK(a.head_dim() == 16);
  CHECK(a.n_rep() == 1);
}

TEST_CASE("config: n_kv_heads null means n_heads and a given value is kept") {
  CHECK(attn::parse_config(R"({"dim": 64, "n_heads": 8, "n_kv_heads": null})", kSrc).n_kv_heads ==
        8);
  const attn::ModelArgs gqa =
      attn::parse_config(R"({"dim": 64, "n_heads": 8, "n_kv_heads": 2})", kSrc);
  CHECK(gqa.n_kv_heads == 2);
  CHECK(gqa.n_rep() == 4);
  const attn::ModelArgs mqa =
      attn::parse_config(R"({"dim": 64, "n_heads": 8, "n_kv_heads": 1})", kSrc);
  CHECK(mqa.n_kv_heads == 1);
  CHECK(mqa.n_rep() == 8);
}

TEST_CASE("config: every key is read") {
  const attn::ModelArgs a = attn::parse_config(R"({
    "dim": 96, "n_layers": 3, "n_heads": 12, "n_kv_heads": 4, "vocab_size": -1,
    "multiple_of": 32, "ffn_dim_multiplier": 1.5, "norm_eps": 1e-6, "rope_theta": 10000.0,
    "max_batch_size": 4, "max_seq_len": 128, "model_parallel_size": 1,
    "block": "attention", "rope": "half", "attention_bias": true})",
                                               kSrc);
  CHECK(a.dim == 96);
  CHECK(a.n_layers == 3);
  CHECK(a.n_heads == 12);
  CHECK(a.n_kv_heads == 4);
  CHECK(a.vocab_size == -1);
  CHECK(a.multiple_of == 32);
  REQUIRE(a.ffn_dim_multiplier.has_value());
  CHECK(*a.ffn_dim_multiplier == 1.5);
  CHECK(a.norm_eps == 1e-6);
  CHECK(a.rope_theta == 10000.0);
  CHECK(a.max_batch_size == 4);
  CHECK(a.max_seq_len == 128);
  CHECK(a.model_parallel_size == 1);
  CHECK(a.block == attn::Block::attention);
  CHECK(a.rope == attn::Rope::half);
  CHECK(a.attention_bias == true);
  CHECK(a.head_dim() == 8);
  CHECK(a.n_rep() == 3);
  // 4*96 = 384; int(2*384/3) = 256; int(1.5*256) = 384; rounded up to 32: 384.
  CHECK(a.ffn_hidden() == 384);
  // The remaining spellings of block and rope.
  CHECK(attn::parse_config(seed_with(R"("block": "llama")"), kSrc).block == attn::Block::llama);
  CHECK(attn::parse_config(R"({"dim": 16, "n_heads": 2, "rope": "interleaved"})", kSrc).rope ==
        attn::Rope::interleaved);
  CHECK(attn::parse_config(seed_with(R"("attention_bias": false)"), kSrc).attention_bias == false);
  CHECK_FALSE(attn::parse_config(seed_with(R"("ffn_dim_multiplier": null)"), kSrc)
                  .ffn_dim_multiplier.has_value());
}

TEST_CASE("config: FFN hidden size as Meta's FeedForward computes it") {
  SUBCASE("the seed's ModelArgs: dim 18, multiple_of 10 -> 50") {
    // 4*18 = 72; int(2*72/3) = 48; 10 * ceil(48/10) = 50.
    CHECK(attn::parse_config(seed_with(""), kSrc).ffn_hidden() == 50);
  }
  SUBCASE("Llama-3-8B: dim 4096, multiple_of 1024, ffn_dim_multiplier 1.3 -> 14336") {
    const attn::ModelArgs a = attn::parse_config(
        R"({"dim": 4096, "n_heads": 32, "n_kv_heads": 8, "multiple_of": 1024,
            "ffn_dim_multiplier": 1.3})",
        kSrc);
    CHECK(a.ffn_hidden() == 14336);
  }
  SUBCASE("Llama-2-7B: dim 4096, multiple_of 256 -> 11008") {
    CHECK(attn::parse_config(R"({"dim": 4096, "n_heads": 32, "multiple_of": 256})", kSrc)
              .ffn_hidden() == 11008);
  }
  SUBCASE("Llama-3-70B: dim 8192, multiple_of 4096, ffn_dim_multiplier 1.3 -> 28672") {
    // int(1.3 * 21845) = 28398, rounded up to 4096: 28672.
    CHECK(attn::parse_config(R"({"dim": 8192, "n_heads": 64, "n_kv_heads": 8,
                                 "multiple_of": 4096, "ffn_dim_multiplier": 1.3})",
                             kSrc)
              .ffn_hidden() == 28672);
  }
  SUBCASE("already a multiple: no rounding up") {
    // 4*24 = 96; int(2*96/3) = 64; multiple_of 16 -> 64.
    CHECK(
        attn::parse_config(R"({"dim": 24, "n_heads": 6, "multiple_of": 16})", kSrc).ffn_hidden() ==
        64);
  }
}

TEST_CASE("config: seed_args() is the seed notebook's ModelArgs, run as the notebook runs it") {
  const attn::ModelArgs a = attn::seed_args();
  CHECK(a.dim == 18);
  CHECK(a.n_layers == 1);
  CHECK(a.n_heads == 6);
  CHECK(a.n_kv_heads == 2);
  CHECK(a.vocab_size == -1);
  CHECK(a.multiple_of == 10);
  CHECK_FALSE(a.ffn_dim_multiplier.has_value());
  CHECK(a.norm_eps == 1e-5);
  CHECK(a.rope_theta == 500000.0);
  CHECK(a.max_batch_size == 2);
  CHECK(a.max_seq_len == 17);
  CHECK(a.model_parallel_size == 1);
  CHECK(a.block == attn::Block::attention);
  CHECK(a.rope == attn::Rope::none);
  CHECK(a.attention_bias == false);
  CHECK(a.head_dim() == 3);
  CHECK(a.n_rep() == 3);
  CHECK(a.ffn_hidden() == 50);
}

// The built-in configs exist twice, in code and as files users copy: every key of the config
// table (config_values, the table parsing reads) must agree.
TEST_CASE("config: each built-in config equals its file in configs/, key by key") {
  const std::pair<const char*, attn::ModelArgs> pairs[] = {
      {"gqa.json", attn::seed_args()}, {"llama3-8b-layer.json", attn::llama3_8b_layer_args()}};
  for (const auto& [file_, builtin] : pairs) {
    const auto& file = file_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(file);
    const attn::ModelArgs loaded = attn::load_config(test::source_dir() / "configs" / file);
    const auto got = attn::config_values(loaded), expected = attn::config_values(builtin);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(expected[i].first);
      CHECK(got[i] == expected[i]);
    }
  }
}

TEST_CASE("config: text that is not JSON is refused, naming the source") {
  refusal("");
  refusal("{\"dim\": 18, \"n_heads\": 6");
  refusal("{dim: 18, n_heads: 6}");
  refusal("{\"dim\": 18, \"n_heads\": 6,}");
}

TEST_CASE("config: JSON that is not an object is refused, naming the source") {
  refusal("[18, 6]");
  refusal("18");
  refusal("\"dim\"");
  refusal("null");
}

TEST_CASE("config: missing dim or n_heads is refused, naming the key") {
  check_refused(R"({"n_heads": 6})", {"dim"});
  check_refused(R"({"dim": 18})", {"n_heads"});
  check_refused(R"({})", {"dim", "n_heads"});
}

TEST_CASE("config: a value of the wrong type is refused, naming the key") {
  check_refused(seed_with(R"("dim": "18")"), {"dim"});
  check_refused(seed_with(R"("dim": 18.5)"), {"dim"});
  check_refused(seed_with(R"("dim": true)"), {"dim"});
  check_refused(seed_with(R"("n_heads": [6])"), {"n_heads"});
  check_refused(seed_with(R"("n_kv_heads": "2")"), {"n_kv_heads"});
  check_refused(seed_with(R"("max_seq_len": 17.5)"), {"max_seq_len"});
  check_refused(seed_with(R"("norm_eps": "1e-5")"), {"norm_eps"});
  check_refused(seed_with(R"("rope_theta": null)"), {"rope_theta"});
  check_refused(seed_with(R"("ffn_dim_multiplier": "1.3")"), {"ffn_dim_multiplier"});
  check_refused(seed_with(R"("attention_bias": "yes")"), {"attention_bias"});
  check_refused(seed_with(R"("attention_bias": 1)"), {"attention_bias"});
  check_refused(seed_with(R"("block": "mlp")"), {"block"});
  check_refused(seed_with(R"("block": 1)"), {"block"});
  check_refused(seed_with(R"("rope": "rotary")"), {"rope"});
  check_refused(seed_with(R"("rope": "Interleaved")"), {"rope"});
  check_refused(seed_with(R"("rope": null)"), {"rope"});
}

TEST_CASE("config: dim not divisible by n_heads is refused") {
  check_refused(R"({"dim": 20, "n_heads": 6, "rope": "none"})", {"n_heads", "dim"});
  check_refused(R"({"dim": 18, "n_heads": 4, "rope": "none"})", {"n_heads", "dim"});
}

TEST_CASE("config: n_heads not divisible by n_kv_heads is refused") {
  check_refused(seed_with(R"("n_kv_heads": 4)"), {"n_kv_heads", "n_heads"});
  check_refused(R"({"dim": 64, "n_heads": 8, "n_kv_heads": 3})", {"n_kv_heads", "n_heads"});
  // More kv heads than query heads.
  check_refused(R"({"dim": 64, "n_heads": 4, "n_kv_heads": 8})", {"n_kv_heads", "n_heads"});
}

TEST_CASE("config: an odd head_dim is refused with RoPE, accepted without") {
  check_refused(seed_with(R"("rope": "interleaved")"), {"rope", "head_dim"});
  check_refused(seed_with(R"("rope": "half")"), {"rope", "head_dim"});
  // rope defaults to interleaved: the seed's shape without a rope key is refused too.
  check_refused(R"({"dim": 18, "n_heads": 6, "n_kv_heads": 2})", {"rope", "head_dim"});
  const attn::ModelArgs a = attn::parse_config(seed_with(R"("rope": "none")"), kSrc);
  CHECK(a.rope == attn::Rope::none);
  CHECK(a.head_dim() == 3);
  // An even head_dim takes either rotation.
  CHECK(attn::parse_config(R"({"dim": 16, "n_heads": 4, "rope": "half"})", kSrc).rope ==
        attn::Rope::half);
}

TEST_CASE("config: model_parallel_size must divide n_heads, n_kv_heads and the FFN width") {
  check_refused(seed_with(R"("model_parallel_size": 3)"), {"model_parallel_size", "n_kv_heads"});
  check_refused(seed_with(R"("model_parallel_size": 4)"), {"model_parallel_size", "n_heads"});
  // 6 heads, 6 KV heads: divisible by 3, but Meta's FFN width 64 is not.
  check_refused(
      R"({"dim": 24, "n_heads": 6, "n_kv_heads": 6, "multiple_of": 32, "model_parallel_size": 3})",
      {"model_parallel_size", "ffn_hidden"});
  CHECK(attn::parse_config(seed_with(R"("model_parallel_size": 2)"), kSrc).model_parallel_size ==
        2);
  CHECK(attn::parse_config(seed_with(R"("model_parallel_size": 1)"), kSrc).model_parallel_size ==
        1);
}

TEST_CASE("config: vocab_size is -1 or a token model's, on block llama only") {
  check_refused(seed_with(R"("block": "attention", "vocab_size": 32000)"),
                {"vocab_size", "block \"llama\""});
  check_refused(seed_with(R"("vocab_size": 0)"), {"vocab_size"});
  check_refused(seed_with(R"("vocab_size": -2)"), {"vocab_size"});
  CHECK(attn::parse_config(seed_with(R"("vocab_size": -1)"), kSrc).vocab_size == -1);
  const std::string llama = R"({"dim": 64, "n_heads": 4, "block": "llama", "vocab_size": )";
  CHECK(attn::parse_config(llama + "32000}", kSrc).vocab_size == 32000);
  check_refused(llama + "16777217}", {"vocab_size", "2^24"});
}

TEST_CASE("config: Meta's params.json as published (Llama 3.1 8B) is read as it is") {
  CapturedLog log;
  const attn::ModelArgs a = attn::parse_config(
      R"({"dim": 4096, "ffn_dim_multiplier": 1.3, "multiple_of": 1024, "n_heads": 32,
          "n_kv_heads": 8, "n_layers": 32, "norm_eps": 1e-05, "rope_theta": 500000.0,
          "use_scaled_rope": true, "vocab_size": 128256})",
      kSrc);
  CHECK_MESSAGE(log.text.str().empty(), log.text.str());
  CHECK(a.vocab_size == 128256);
  CHECK(a.ffn_hidden() == 14336);
  REQUIRE(a.rope_scaling.has_value());  // Meta's apply_scaling constants
  CHECK(a.rope_scaling->factor == 8);
  CHECK(a.rope_scaling->low_freq_factor == 1);
  CHECK(a.rope_scaling->high_freq_factor == 4);
  CHECK(a.rope_scaling->original_max_position_embeddings == 8192);
  CHECK(a.tie_word_embeddings == false);
}

TEST_CASE("config: each size below 1 is refused, naming the key") {
  for (const char* key : {"dim", "n_layers", "n_heads", "n_kv_heads", "multiple_of",
                          "max_batch_size", "max_seq_len", "model_parallel_size"})
    for (const char* value : {"0", "-1"}) {
      CAPTURE(key);
      CAPTURE(value);
      std::string member = "\"";
      member.append(key).append("\": ").append(value);
      check_refused(seed_with(member), {key});
    }
}

TEST_CASE("config: a negative norm_eps is refused but zero is accepted") {
  check_refused(seed_with(R"("norm_eps": -1e-5)"), {"norm_eps"});
  CHECK(attn::parse_config(seed_with(R"("norm_eps": 0)"), kSrc).norm_eps == 0.0);
  CHECK(attn::parse_config(seed_with(R"("norm_eps": 1e-6)"), kSrc).norm_eps == 1e-6);
}

TEST_CASE("config: an unknown key is accepted with a warning naming it") {
  CapturedLog log;
  const attn::ModelArgs a =
      attn::parse_config(seed_with(R"("use_fancy_rope": true, "max_seq_len": 9)"), kSrc);
  CHECK(a.dim == 18);
  CHECK(a.n_kv_heads == 2);
  CHECK(a.max_seq_len == 9);
  const std::string logged = log.text.str();
  CHECK_MESSAGE(logged.find("use_fancy_rope") != std::string::npos, "log: ", logged);
  CHECK_MESSAGE(logged.find(kSrc) != std::string::npos, "log: ", logged);
}

TEST_CASE("config: a config with only known keys logs no warning") {
  CapturedLog log;
  attn::parse_config(seed_with(R"("n_layers": 2, "attention_bias": true)"), kSrc);
  CHECK(log.text.str().empty());
}
