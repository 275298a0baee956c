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

void boolean(const Reader& r, const char* key, bool& out) {
  if (!r.j.contains(key)) return;
  if (!r.j.at(key).is_boolean()) r.fail(key, "expected true or false, got " + r.j.at(key).dump());
  out = r.j.at(key).get<bool>();
}

// Keys of issue 7: the mask, the FFN width, and torch's TransformerEncoderLayer. An encoder is
// torch's layer unless the config says otherwise: biases, no mask, no RoPE, dim_feedforward 2048.
void read_encoder_keys(const Reader& r, ModelArgs& a) {
  if (a.block == Block::encoder) {
    if (!r.j.contains("attention_bias")) a.attention_bias = true;
    if (!r.j.contains("rope")) a.rope = Rope::none;
    a.mask = Mask::none;
    a.ffn_hidden_set = 2048;
  }
  r.choice("mask", a.mask, {{"causal", Mask::causal}, {"none", Mask::none}});
  r.integer("ffn_hidden", a.ffn_hidden_set);
  if (r.j.contains("ffn_hidden") && a.ffn_hidden_set < 1)
    r.fail("ffn_hidden", "must be at least 1, got " + std::to_string(a.ffn_hidden_set));
  r.choice("activation", a.activation, {{"relu", Activation::relu}, {"gelu", Activation::gelu}});
  boolean(r, "norm_first", a.norm_first);
}

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
  r.choice("block", a.block,
           {{"llama", Block::llama}, {"attention", Block::attention}, {"encoder", Block::encoder}});
  r.choice("rope", a.rope,
           {{"interleaved", Rope::interleaved}, {"half", Rope::half}, {"none", Rope::none}});
  if (j.contains("attention_bias")) {
    if (!j.at("attention_bias").is_boolean())
      r.fail("attention_bias", "expected true or false, got " + j.at("attention_bias").dump());
    a.attention_bias = j.at("attention_bias").get<bool>();
  }
  read_encoder_keys(r, a);
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
  if (a.dim % a.n_heads != 0)
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
  if (a.model_parallel_size > 1)
    r.fail("model_parallel_size", "splitting heads across ranks is not supported yet (use 1)");
  if (a.vocab_size == 0 || a.vocab_size < -1)
    r.fail("vocab_size",
           "must be -1 (hidden states in and out), got " + std::to_string(a.vocab_size));
  if (a.vocab_size > 0)
    r.fail("vocab_size", "token models (embedding and output head) are not supported yet (use -1)");
  if (a.norm_eps < 0) r.fail("norm_eps", "must not be negative");
  if (a.rope_theta <= 0) r.fail("rope_theta", "must be positive");
  if (a.ffn_dim_multiplier && (*a.ffn_dim_multiplier <= 0 || *a.ffn_dim_multiplier > 64))
    r.fail("ffn_dim_multiplier", "must be in (0, 64]");
  if (a.ffn_hidden_set > (std::int64_t{1} << 24))
    r.fail("ffn_hidden", "too large: " + std::to_string(a.ffn_hidden_set));
  if (a.block == Block::encoder && !a.attention_bias)
    r.fail("attention_bias",
           "block \"encoder\" (torch's TransformerEncoderLayer) needs attention_bias true");
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
                                              "attention_bias",
                                              "mask",
                                              "ffn_hidden",
                                              "activation",
                                              "norm_first"};
  for (auto& [key, value] : j.items())
    if (!known.count(key)) spdlog::warn("{}: unknown key '{}' ignored", source, key);
}

}  // namespace

std::int64_t ModelArgs::ffn_hidden() const {
  if (ffn_hidden_set > 0) return ffn_hidden_set;
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

const char* block_name(Block b) {
  return b == Block::llama ? "llama" : b == Block::attention ? "attention" : "encoder";
}

const char* mask_name(Mask m) {
  return m == Mask::causal ? "causal" : "none";
}

const char* activation_name(Activation a) {
  return a == Activation::relu ? "relu" : "gelu";
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
