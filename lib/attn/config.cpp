#include "attn/config.hpp"

#include <spdlog/spdlog.h>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "attn/error.hpp"

namespace attn {

using nlohmann::json;

namespace {

struct Reader {
  const json& j;
  const std::string& source;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(source + ": key '" + key + "': " + what);
  }

  void integer(const char* key, std::int64_t& out) const {
    if (!j.contains(key)) return;
    const json& v = j.at(key);
    if (!v.is_number_integer()) fail(key, "expected an integer, got " + v.dump());
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX) fail(key, "too large");
    out = v.get<std::int64_t>();
  }

  void number(const char* key, double& out) const {
    if (!j.contains(key)) return;
    const json& v = j.at(key);
    if (!v.is_number()) fail(key, "expected a number, got " + v.dump());
    out = v.get<double>();
    if (!std::isfinite(out)) fail(key, "expected a finite number");
  }

  template <typename E>
  void choice(const char* key, E& out,
              std::initializer_list<std::pair<const char*, E>> names) const {
    if (!j.contains(key)) return;
    const json& v = j.at(key);
    std::string allowed;
    for (auto& [name, value] : names) {
      if (v.is_string() && v.get<std::string>() == name) {
        out = value;
        return;
      }
      allowed += std::string(allowed.empty() ? "" : ", ") + "\"" + name + "\"";
    }
    fail(key, "expected one of " + allowed + ", got " + v.dump());
  }
};

void read_keys(const Reader& r, ModelArgs& a) {
  const json& j = r.j;
  r.integer("dim", a.dim);
  r.integer("n_layers", a.n_layers);
  r.integer("n_heads", a.n_heads);
  a.n_kv_heads = a.n_heads;
  if (j.contains("n_kv_heads") && !j.at("n_kv_heads").is_null())
    r.integer("n_kv_heads", a.n_kv_heads);
  r.integer("vocab_size", a.vocab_size);
  r.integer("multiple_of", a.multiple_of);
  if (j.contains("ffn_dim_multiplier") && !j.at("ffn_dim_multiplier").is_null()) {
    double m = 0;
    r.number("ffn_dim_multiplier", m);
    a.ffn_dim_multiplier = m;
  }
  r.number("norm_eps", a.norm_eps);
  r.number("rope_theta", a.rope_theta);
  r.integer("max_batch_size", a.max_batch_size);
  r.integer("max_seq_len", a.max_seq_len);
  r.integer("model_parallel_size", a.model_parallel_size);
  r.choice("block", a.block, {{"llama", Block::llama}, {"attention", Block::attention}});
  r.choice("rope", a.rope,
           {{"interleaved", Rope::interleaved}, {"half", Rope::half}, {"none", Rope::none}});
  if (j.contains("attention_bias")) {
    if (!j.at("attention_bias").is_boolean())
      r.fail("attention_bias", "expected true or false, got " + j.at("attention_bias").dump());
    a.attention_bias = j.at("attention_bias").get<bool>();
  }
}

// Mistral's sliding window changes the mask once a sequence is longer than the window.
std::string window_text(const ModelArgs& a) {
  return "a sliding window of " + std::to_string(a.sliding_window) +
         " positions is not supported: use --max-seq-len " + std::to_string(a.sliding_window) +
         " or less";
}

void validate(const Reader& r, const ModelArgs& a) {
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"dim", a.dim},
      {"n_layers", a.n_layers},
      {"n_heads", a.n_heads},
      {"n_kv_heads", a.n_kv_heads},
      {"multiple_of", a.multiple_of},
      {"max_batch_size", a.max_batch_size},
      {"max_seq_len", a.max_seq_len},
      {"model_parallel_size", a.model_parallel_size}};
  for (auto& [key, v] : sizes)
    if (v < 1) r.fail(key, "must be at least 1, got " + std::to_string(v));
  // Caps keep every derived size and product far inside 64 bits.
  for (auto& [key, v] : sizes)
    if (v > (std::int64_t{1} << 24)) r.fail(key, "too large: " + std::to_string(v));
  if (a.head_dim_set == 0 && a.dim % a.n_heads != 0)
    r.fail("n_heads", "dim " + std::to_string(a.dim) + " is not divisible by n_heads " +
                          std::to_string(a.n_heads));
  if (a.n_heads % a.n_kv_heads != 0)
    r.fail("n_kv_heads", "n_heads " + std::to_string(a.n_heads) +
                             " is not divisible by n_kv_heads " + std::to_string(a.n_kv_heads));
  if (a.rope != Rope::none && a.head_dim() % 2 != 0)
    r.fail("rope", "head_dim " + std::to_string(a.head_dim()) +
                       " is odd: RoPE rotates pairs (use \"rope\": \"none\")");
  if (a.n_kv_heads % a.model_parallel_size != 0)
    r.fail("model_parallel_size", "n_kv_heads " + std::to_string(a.n_kv_heads) +
                                      " is not divisible by model_parallel_size " +
                                      std::to_string(a.model_parallel_size));
  // Each rank holds whole query heads and whole KV heads, and a equal share of the FFN's rows.
  if (a.n_heads % a.model_parallel_size != 0)
    r.fail("model_parallel_size", "n_heads " + std::to_string(a.n_heads) +
                                      " is not divisible by model_parallel_size " +
                                      std::to_string(a.model_parallel_size));
  if (a.block == Block::llama && a.ffn_hidden() % a.model_parallel_size != 0)
    r.fail("model_parallel_size", "ffn_hidden " + std::to_string(a.ffn_hidden()) +
                                      " is not divisible by model_parallel_size " +
                                      std::to_string(a.model_parallel_size));
  if (a.vocab_size == 0 || a.vocab_size < -1)
    r.fail("vocab_size",
           "must be -1 (hidden states in and out), got " + std::to_string(a.vocab_size));
  if (a.vocab_size > 0)
    r.fail("vocab_size", "token models (embedding and output head) are not supported yet (use -1)");
  if (a.norm_eps < 0) r.fail("norm_eps", "must not be negative");
  if (a.rope_theta <= 0) r.fail("rope_theta", "must be positive");
  if (a.sliding_window && a.sliding_window < a.max_seq_len)
    r.fail("sliding_window", window_text(a));
  if (a.ffn_dim_multiplier && (*a.ffn_dim_multiplier <= 0 || *a.ffn_dim_multiplier > 64))
    r.fail("ffn_dim_multiplier", "must be in (0, 64]");
}

void warn_unknown_keys(const json& j, const std::string& source) {
  static const std::set<std::string> known = {"dim",
                                              "n_layers",
                                              "n_heads",
                                              "n_kv_heads",
                                              "vocab_size",
                                              "multiple_of",
                                              "ffn_dim_multiplier",
                                              "norm_eps",
                                              "rope_theta",
                                              "max_batch_size",
                                              "max_seq_len",
                                              "model_parallel_size",
                                              "block",
                                              "rope",
                                              "attention_bias"};
  for (auto& [key, value] : j.items())
    if (!known.count(key)) spdlog::warn("{}: unknown key '{}' ignored", source, key);
}

// ---- Hugging Face config.json ----

// Keys of Hugging Face's LlamaConfig, MistralConfig and Qwen2Config that describe the token
// model around the layers (embedding, head, generation) or training: not the layers' arithmetic.
const std::set<std::string> kHfIgnoredKeys = {
    "architectures",       "model_type",        "torch_dtype",         "transformers_version",
    "vocab_size",          "bos_token_id",      "eos_token_id",        "pad_token_id",
    "tie_word_embeddings", "use_cache",         "initializer_range",   "pretraining_tp",
    "attention_dropout",   "mlp_bias",          "max_window_layers",   "use_sliding_window",
    "sliding_window",      "hidden_act",        "rope_scaling",        "_name_or_path",
    "hidden_size",         "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "intermediate_size",   "rms_norm_eps",      "rope_theta",          "max_position_embeddings",
    "attention_bias",      "head_dim"};

// llama.cpp's default context: a hub config's max_position_embeddings (up to 131072) would
// make a cache of many GiB. --max-seq-len sets it.
constexpr std::int64_t kHfDefaultSeqLen = 4096;

void read_hf_rope_scaling(const Reader& r, ModelArgs& a) {
  if (!r.j.contains("rope_scaling") || r.j.at("rope_scaling").is_null()) return;
  const json& s = r.j.at("rope_scaling");
  const std::string type = s.is_object() ? s.value("rope_type", s.value("type", "")) : "";
  if (type == "default") return;
  if (type != "llama3")
    r.fail("rope_scaling", "only rope_type \"llama3\" is supported, got " + s.dump());
  RopeScaling rs;
  const Reader sr{s, r.source};
  sr.number("factor", rs.factor);
  sr.number("low_freq_factor", rs.low_freq_factor);
  sr.number("high_freq_factor", rs.high_freq_factor);
  sr.number("original_max_position_embeddings", rs.original_max_position_embeddings);
  if (!(rs.factor > 0 && rs.low_freq_factor > 0 && rs.high_freq_factor > rs.low_freq_factor &&
        rs.original_max_position_embeddings > 0))
    r.fail("rope_scaling", "needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  a.rope_scaling = rs;
}

void read_hf_keys(const Reader& r, ModelArgs& a) {
  const json& j = r.j;
  for (const char* key :
       {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"})
    if (!j.contains(key)) r.fail(key, "required key is missing");
  a.block = Block::llama;
  a.rope = Rope::half;  // Hugging Face permutes wq/wk rows for rotate_half
  a.rope_theta = 10000;
  a.norm_eps = 1e-6;
  a.max_batch_size = 1;
  a.multiple_of = 1;
  r.integer("hidden_size", a.dim);
  r.integer("num_hidden_layers", a.n_layers);
  r.integer("num_attention_heads", a.n_heads);
  a.n_kv_heads = a.n_heads;
  if (j.contains("num_key_value_heads") && !j.at("num_key_value_heads").is_null())
    r.integer("num_key_value_heads", a.n_kv_heads);
  r.integer("intermediate_size", a.ffn_hidden_set);
  if (j.contains("head_dim") && !j.at("head_dim").is_null()) r.integer("head_dim", a.head_dim_set);
  r.number("rms_norm_eps", a.norm_eps);
  r.number("rope_theta", a.rope_theta);
  std::int64_t positions = kHfDefaultSeqLen;
  r.integer("max_position_embeddings", positions);
  a.max_seq_len = std::min(positions, kHfDefaultSeqLen);
  const bool qwen2 = j.value("model_type", "") == "qwen2";
  if (qwen2) a.attention_bias = true, a.attention_out_bias = false;  // q/k/v biases, no o bias
  if (j.contains("attention_bias")) {
    if (!j.at("attention_bias").is_boolean())
      r.fail("attention_bias", "expected true or false, got " + j.at("attention_bias").dump());
    a.attention_bias = j.at("attention_bias").get<bool>();
  }
  if (j.contains("hidden_act") && j.at("hidden_act") != "silu")
    r.fail("hidden_act", "only \"silu\" (SwiGLU) is supported, got " + j.at("hidden_act").dump());
  read_hf_rope_scaling(r, a);
  const bool window = j.contains("sliding_window") && !j.at("sliding_window").is_null() &&
                      j.value("use_sliding_window", true);
  if (window) r.integer("sliding_window", a.sliding_window);
}

bool is_hf_config(const json& j) {
  return j.contains("hidden_size") && !j.contains("dim");
}

void warn_unknown_hf_keys(const json& j, const std::string& source) {
  for (auto& [key, value] : j.items())
    if (!kHfIgnoredKeys.count(key)) spdlog::warn("{}: unknown key '{}' ignored", source, key);
}

}  // namespace

std::int64_t ModelArgs::ffn_hidden() const {
  if (ffn_hidden_set) return ffn_hidden_set;
  std::int64_t h = 4 * dim;
  h = 2 * h / 3;
  if (ffn_dim_multiplier)
    h = static_cast<std::int64_t>(*ffn_dim_multiplier * static_cast<double>(h));
  return multiple_of * ((h + multiple_of - 1) / multiple_of);
}

ModelArgs seed_args() {
  ModelArgs a;
  a.dim = 18;
  a.n_layers = 1;
  a.n_heads = 6;
  a.n_kv_heads = 2;
  a.vocab_size = -1;
  a.multiple_of = 10;
  a.norm_eps = 1e-5;
  a.rope_theta = 500000;
  a.max_batch_size = 2;
  a.max_seq_len = 17;
  a.model_parallel_size = 1;
  a.block = Block::attention;
  a.rope = Rope::none;
  return a;
}

ModelArgs llama3_8b_layer_args() {
  ModelArgs a;
  a.dim = 4096;
  a.n_heads = 32;
  a.n_kv_heads = 8;
  a.multiple_of = 1024;
  a.ffn_dim_multiplier = 1.3;
  a.rope_theta = 500000;
  a.max_batch_size = 1;
  a.max_seq_len = 2048;
  return a;
}

ModelArgs parse_config(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw InputError(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw InputError(source + ": expected a JSON object of ModelArgs keys");
  Reader r{j, source};
  if (is_hf_config(j)) {
    ModelArgs a;
    read_hf_keys(r, a);
    validate(r, a);
    warn_unknown_hf_keys(j, source);
    return a;
  }
  for (const char* key : {"dim", "n_heads"})
    if (!j.contains(key)) r.fail(key, "required key is missing");
  ModelArgs a;
  read_keys(r, a);
  validate(r, a);
  warn_unknown_keys(j, source);
  return a;
}

ModelArgs load_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open config file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(path.string() + ": cannot read config file");
  return parse_config(text.str(), path.string());
}

void apply_overrides(ModelArgs& a, const ConfigOverrides& o, const std::string& source) {
  const std::int64_t cap = std::int64_t{1} << 24;  // as the config's own sizes
  auto size = [&](const char* flag, std::int64_t v, std::int64_t& out) {
    if (v == 0) return;
    if (v < 1 || v > cap)
      throw InputError(std::string(flag) + ": must be in [1, 2^24], got " + std::to_string(v));
    out = v;
  };
  size("--max-seq-len", o.max_seq_len, a.max_seq_len);
  size("--max-batch", o.max_batch_size, a.max_batch_size);
  if (a.sliding_window && a.sliding_window < a.max_seq_len)
    throw InputError("--max-seq-len: " + source + ": " + window_text(a));
  const std::int64_t end = o.layer_end < 0 ? a.n_layers : o.layer_end;
  if (o.layer_begin < 0 || o.layer_begin >= end || end > a.n_layers)
    throw InputError("--layers " + std::to_string(o.layer_begin) + ":" + std::to_string(end) +
                     ": " + source + " has layers 0:" + std::to_string(a.n_layers));
  a.first_layer = o.layer_begin;
  a.n_layers = end - o.layer_begin;
}

const char* block_name(Block b) {
  return b == Block::llama ? "llama" : "attention";
}

const char* rope_name(Rope r) {
  switch (r) {
    case Rope::interleaved:
      return "interleaved";
    case Rope::half:
      return "half";
    default:
      return "none";
  }
}

}  // namespace attn
