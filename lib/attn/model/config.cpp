// What every config shares: the key names of each file format (kKeyNames), the checks, reading
// a JSON file (Meta's keys in config_meta.cpp, Hugging Face's in config_hf.cpp) or picking the
// reader of a model file (config_gguf.cpp, config_llama2c.cpp), and the command line's overrides.
#include "attn/model/config.hpp"

#include <spdlog/spdlog.h>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/detail/json_checks.hpp"
#include "attn/io/files.hpp"
#include "attn/io/format.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/llama2c.hpp"
#include "attn/io/model_file.hpp"
#include "attn/io/text.hpp"
#include "attn/model/detail/config_checks.hpp"
#include "attn/model/detail/config_reader.hpp"

namespace attn {

namespace {

// A config is a handful of keys: a larger or deeper file is not one, and is refused before it
// can cost memory or stack.
constexpr std::uint64_t kMaxConfigBytes = 1 << 20;
constexpr JsonLimits kConfigLimits{64, 1 << 14, 1 << 10};  // depth, values, one array's elements

// The key a message about a value names: the last one read.
std::string near(const JsonStructure& s) {
  return s.last_key.empty() ? "" : " (in key " + quoted(s.last_key, 60) + ")";
}

// Each key under Meta's name, Hugging Face's, a GGUF's (after "{arch}.") and a llama2.c
// header's: what messages about it say for a config of each kind. A kind without the key keeps
// Meta's name (null); so do keys in none (max_batch_size and model_parallel_size: such files set
// neither, the options of those names do).
struct KeyNames {
  const char* meta;
  const char* hf;
  const char* gguf;
  const char* llama2c;
};
const KeyNames kKeyNames[] = {
    {"dim", "hidden_size", "embedding_length", "dim"},
    {"n_layers", "num_hidden_layers", "block_count", "n_layers"},
    {"n_heads", "num_attention_heads", "attention.head_count", "n_heads"},
    {"n_kv_heads", "num_key_value_heads", "attention.head_count_kv", "n_kv_heads"},
    {"vocab_size", "vocab_size", "vocab_size", "vocab_size"},
    {"norm_eps", "rms_norm_eps", "attention.layer_norm_rms_epsilon", nullptr},
    {"rope_theta", "rope_theta", "rope.freq_base", nullptr},
    {"ffn_hidden", "intermediate_size", "feed_forward_length", "hidden_dim"},
    {"max_seq_len", "max_position_embeddings", "context_length", "seq_len"},
    {"head_dim", "head_dim", "attention.key_length", nullptr},
    {"rope", "head_dim", "rope.dimension_count", nullptr},
    {"rope_scaling", "rope_scaling", "rope.scaling.type", nullptr},
};

// Values that parse but cannot run: a denormal base turns every RoPE angle into inf/NaN, and an
// FFN that rounds to 0 hidden units is no FFN.
void check_numbers(const Reader& r, const ModelArgs& a) {
  if (!std::isnormal(a.rope_theta))
    r.fail("rope_theta", fmt::format("must be a normal positive number, got {}", a.rope_theta));
  if (a.block == Block::llama && a.ffn_hidden() < 1)
    r.fail(
        a.ffn_dim_multiplier ? "ffn_dim_multiplier" : "dim",
        "the FFN hidden size rounds to " + std::to_string(a.ffn_hidden()) + " (needs at least 1)");
}

// Mistral's sliding window changes the mask once a sequence is longer than the window.
std::string window_text(const ModelArgs& a) {
  return "a sliding window of " + std::to_string(a.sliding_window) +
         " positions is not supported: use max_seq_len " + std::to_string(a.sliding_window) +
         " or less";
}

// The model-parallel split: each rank holds whole query heads and whole KV heads, and an equal
// share of the FFN's rows. `fail(key, what)` throws.
template <typename Fail>
void check_split(const ModelArgs& a, const Fail& fail,
                 const std::function<std::string(const char*)>& k) {
  const std::int64_t K = a.model_parallel_size;
  const std::pair<const char*, std::int64_t> parts[] = {
      {"n_kv_heads", a.n_kv_heads},
      {"n_heads", a.n_heads},
      {"ffn_hidden", a.block == Block::llama ? a.ffn_hidden() : K}};
  for (const auto& [key, n] : parts)
    if (n % K != 0)
      fail("model_parallel_size", k(key) + " " + std::to_string(n) + " is not divisible by " +
                                      k("model_parallel_size") + " " + std::to_string(K));
  if (a.block == Block::encoder && K > 1)
    fail("model_parallel_size", "the encoder block runs on one process (use 1)");
}

constexpr std::int64_t kMaxSize = std::int64_t{1} << 24;  // every size key's cap
constexpr std::int64_t kMaxHeadDim = std::int64_t{1} << 16;

void check_sizes(const Reader& r, const ModelArgs& a) {
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
    if (v > kMaxSize) r.fail(key, "too large: " + std::to_string(v) + " (at most 2^24)");
  if (a.head_dim_set != 0 && (a.head_dim_set < 1 || a.head_dim_set > kMaxHeadDim))
    r.fail("head_dim", "must be in [1, 2^16], got " + std::to_string(a.head_dim_set));
  if (a.n_heads * a.head_dim() > kMaxSize)
    r.fail("head_dim", r.k("n_heads") + " x head_dim is " +
                           std::to_string(a.n_heads * a.head_dim()) + ", over 2^24");
}

bool is_hf_config(const json& j) {
  return j.contains("hidden_size") && !j.contains("dim");
}

}  // namespace

std::string key_name(ConfigFormat format, const std::string& arch, const std::string& meta_key) {
  for (const KeyNames& k : kKeyNames) {
    if (meta_key != k.meta) continue;
    switch (format) {
      case ConfigFormat::hugging_face:
        return k.hf;
      case ConfigFormat::gguf:
        return k.gguf ? arch + "." + k.gguf : meta_key;
      case ConfigFormat::llama2c:
        return k.llama2c ? k.llama2c : meta_key;
      default:
        return meta_key;
    }
  }
  return meta_key;
}

void validate(const Reader& r, const ModelArgs& a) {
  check_sizes(r, a);
  if (a.head_dim_set == 0 && a.dim % a.n_heads != 0)
    r.fail("n_heads", r.k("dim") + " " + std::to_string(a.dim) + " is not divisible by " +
                          r.k("n_heads") + " " + std::to_string(a.n_heads));
  if (a.n_heads % a.n_kv_heads != 0)
    r.fail("n_kv_heads", r.k("n_heads") + " " + std::to_string(a.n_heads) +
                             " is not divisible by " + r.k("n_kv_heads") + " " +
                             std::to_string(a.n_kv_heads));
  if (a.rope != Rope::none && a.head_dim() % 2 != 0)
    r.fail("rope", "head_dim " + std::to_string(a.head_dim()) + " is odd: RoPE rotates pairs" +
                       (r.format != ConfigFormat::meta ? "" : " (use \"rope\": \"none\")"));
  check_split(
      a,
      [&](const char* key, const std::string& what) { r.fail(key, what, "model_parallel_size"); },
      [&](const char* key) { return r.k(key); });
  if (a.vocab_size == 0 || a.vocab_size < -1 || a.vocab_size > kMaxSize)
    r.fail("vocab_size", "must be -1 (hidden states in and out) or in [1, 2^24], got " +
                             std::to_string(a.vocab_size));
  if (a.vocab_size > 0 && a.block != Block::llama)
    r.fail("vocab_size", "a token model needs block \"llama\" (use -1)");
  if (a.norm_eps < 0) r.fail("norm_eps", "must not be negative");
  if (!std::isfinite(a.norm_eps))  // a binary file's float can be NaN or Inf, JSON's cannot
    r.fail("norm_eps", fmt::format("must be finite, got {}", a.norm_eps));
  if (a.rope_theta <= 0) r.fail("rope_theta", "must be positive");
  // Before check_numbers, which computes the FFN width from it (a float to integer conversion).
  if (a.ffn_dim_multiplier && !(*a.ffn_dim_multiplier > 0 && *a.ffn_dim_multiplier <= 64))
    r.fail("ffn_dim_multiplier", "must be in (0, 64]");
  check_numbers(r, a);
  if (a.sliding_window && a.sliding_layers.empty() && a.sliding_window < a.max_seq_len)
    r.fail("sliding_window", window_text(a), "max_seq_len");
  if (a.ffn_hidden_set > kMaxSize)
    r.fail("ffn_hidden", "too large: " + std::to_string(a.ffn_hidden_set) + " (at most 2^24)");
  if (a.block == Block::encoder && !a.attention_bias)
    r.fail("attention_bias",
           "block \"encoder\" (torch's TransformerEncoderLayer) needs attention_bias true");
}

void warn_unknown(const json& j, const std::string& source, const std::set<std::string>& known) {
  std::vector<std::string> unknown;
  for (auto& [key, value] : j.items())
    if (!known.count(key)) unknown.push_back(key);
  if (!unknown.empty())
    spdlog::warn("{}: {} ignored", source,
                 summarise(unknown, unknown.size() == 1 ? "unknown key" : "unknown keys"));
}

std::int64_t ModelArgs::ffn_hidden() const {
  if (ffn_hidden_set > 0) return ffn_hidden_set;
  std::int64_t h = 4 * dim;
  h = 2 * h / 3;
  if (ffn_dim_multiplier) {
    // Clamped before the conversion: a multiplier from a file can be anything (NaN, 1e300), and
    // a width past 2^40 is refused by every caller all the same.
    const double p = *ffn_dim_multiplier * static_cast<double>(h), cap = 0x1p40;
    h = !(p < cap) ? std::int64_t(cap) : !(p > -cap) ? -std::int64_t(cap) : std::int64_t(p);
  }
  return multiple_of * ((h + multiple_of - 1) / multiple_of);
}

std::span<const float> rope_factors(const ModelArgs& a) {
  const std::int64_t padded = (a.max_seq_len + 255) / 256 * 256;
  if (!a.rope_long_factors.empty() && padded > a.rope_original_context) return a.rope_long_factors;
  return a.rope_freq_factors;
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

namespace {

ModelArgs read_config(const json& j, const std::string& source) {
  const bool hf = is_hf_config(j);
  const Reader r{j, source, hf ? ConfigFormat::hugging_face : ConfigFormat::meta};
  return hf ? read_hf_config(r) : read_meta_config(r);
}

}  // namespace

ModelArgs parse_config(const std::string& json_text, const std::string& source) {
  const JsonStructure shape = check_json_structure(
      json_text, kConfigLimits,
      [&](const JsonStructure& s) {
        throw InputError(source + ": nested deeper than " +
                         std::to_string(kConfigLimits.max_depth) + " levels" + near(s));
      },
      [&](const JsonStructure&, const std::string& key) {
        throw InputError(source + ": key " + quoted(key, 60) + " appears twice");
      },
      [&](const JsonStructure& s, const std::string& what) {
        throw InputError(source + ": holds " + what + near(s) + ", too many for a config");
      });
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw InputError(source + ": not valid JSON: " + escape(e.what(), 160));
  } catch (const json::exception& e) {  // e.g. 1e400: out_of_range while parsing a number
    throw InputError(source + ": not a usable JSON value" + near(shape) + ": " +
                     escape(e.what(), 160));
  }
  if (!j.is_object()) throw InputError(source + ": expected a JSON object of ModelArgs keys");
  try {
    return read_config(j, source);
  } catch (const json::exception& e) {  // a type the readers did not foresee: still the input's
    throw InputError(source + ": a value of the wrong type" + near(shape) + ": " +
                     escape(e.what(), 160));
  }
}

void check_config(const ModelArgs& a) {
  static const json no_keys = json::object();
  validate(Reader{no_keys, a.source, a.format, "", a.arch}, a);
}

void finish_file_config(ModelArgs& a) {
  a.multiple_of = 1;
  a.max_batch_size = 1;  // plan_run grows it to the run's batch
  a.batch_from_run = true;
  check_config(a);
  a.checkpoint_layers = a.n_layers;
}

ModelArgs load_config(const ModelFile& f) {
  switch (f.format) {
    case FileFormat::gguf:
      return gguf_config(*f.gguf);
    case FileFormat::llama2c_checkpoint:
      return llama2c_config(llama2c_header_of(f.head), escape(f.path.string(), 300));
    default:
      expect_format(f.format, f.source, {FileFormat::json},
                    "a config (JSON, a GGUF or a llama2.c checkpoint)");
      return parse_config(read_small_file(*f.file, "config", kMaxConfigBytes),
                          escape(f.path.string(), 300));
  }
}

ModelArgs load_config(const std::filesystem::path& path) {
  const FileHead head = read_head(path, "config", kFormatHeadBytes);
  const FileFormat format = detect_format(head.bytes, head.size);
  check_config_format(head, format);  // before any reader: what a file of no format looks like
  switch (format) {
    case FileFormat::gguf:
      return gguf_config(*open_gguf(path));
    case FileFormat::llama2c_checkpoint:
      return llama2c_config(read_llama2c_header(path), escape(path.string(), 300));
    default:  // JSON, or what its parser will say is not
      expect_format(format, head.source, {FileFormat::json},
                    "a config (JSON, a GGUF or a llama2.c checkpoint)");
      return parse_config(read_small_file(path, "config", kMaxConfigBytes),
                          escape(path.string(), 300));
  }
}

std::string config_key(const ModelArgs& a, const std::string& meta_key) {
  return key_name(a.format, a.arch, meta_key);
}

namespace {

void override_sizes(ModelArgs& a, const ConfigOverrides& o) {
  auto size = [&](const char* option, std::int64_t v, std::int64_t& out) {
    if (v == 0) return false;
    if (v < 1 || v > kMaxSize)
      throw InputError(std::string(option) + ": must be in [1, 2^24], got " + std::to_string(v),
                       option);
    out = v;
    return true;
  };
  if (size("max_batch_size", o.max_batch_size, a.max_batch_size)) a.batch_from_run = false;
  if (!size("max_seq_len", o.max_seq_len, a.max_seq_len) &&
      a.max_position_embeddings > a.max_seq_len)
    spdlog::warn(
        "{}: {} is {}; the cache holds {} positions (llama.cpp's default context): set "
        "max_seq_len for more",
        a.source, config_key(a, "max_seq_len"), a.max_position_embeddings, a.max_seq_len);
  if (a.sliding_window && a.sliding_layers.empty() && a.sliding_window < a.max_seq_len)
    throw InputError("max_seq_len: " + a.source + ": " + window_text(a), "max_seq_len");
}

void override_split(ModelArgs& a, const ConfigOverrides& o) {
  if (o.model_parallel_size == 0) return;
  const std::string option = "model_parallel_size " + std::to_string(o.model_parallel_size);
  if (o.model_parallel_size < 1 || o.model_parallel_size > 1024)
    throw InputError(option + ": must be in [1, 1024]", "model_parallel_size");
  a.model_parallel_size = o.model_parallel_size;
  check_split(
      a,
      [&](const char*, const std::string& what) {
        throw InputError(option + ": " + a.source + ": " + what, "model_parallel_size");
      },
      [&](const char* key) { return config_key(a, key); });
}

}  // namespace

void apply_overrides(ModelArgs& a, const ConfigOverrides& o) {
  override_sizes(a, o);
  override_split(a, o);
  const std::int64_t end = o.layer_end < 0 ? a.n_layers : o.layer_end;
  if (o.layer_begin < 0 || o.layer_begin >= end || end > a.n_layers)
    throw InputError("layers " + std::to_string(o.layer_begin) + ":" + std::to_string(end) + ": " +
                         a.source + " has layers 0:" + std::to_string(a.n_layers),
                     "layers");
  a.first_layer = o.layer_begin;
  a.n_layers = end - o.layer_begin;
}

const char* block_name(Block b) {
  return b == Block::llama ? "llama" : b == Block::attention ? "attention" : "encoder";
}

const char* mask_name(Mask m) {
  return m == Mask::causal ? "causal" : "none";
}

Mask parse_mask(std::string_view name, const std::string& what) {
  if (name == "causal") return Mask::causal;
  if (name == "none") return Mask::none;
  throw InputError(what + ": expected \"causal\" or \"none\", got " + quoted(std::string(name), 40),
                   "mask");
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
