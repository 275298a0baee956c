#include "attn/model/cache_session.hpp"

#include <nlohmann/json.hpp>

#include <cstring>

#include "attn/error.hpp"
#include "attn/io/detail/json_checks.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/io/text.hpp"
#include "attn/model/finite.hpp"
#include "attn/model/weights.hpp"

namespace attn {

namespace {

using json = nlohmann::json;
constexpr const char* kFormat = "attn-cli session 1";

// FNV-1a, 64-bit.
struct Digest {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void add(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  void add(const std::string& s) { add(s.data(), s.size()); }
};

void add_tensor(Digest& d, const TensorSpec& s) {
  d.add(s.name);
  std::int64_t n = 1;
  for (const std::int64_t x : s.shape) n *= x;
  d.add(s.shape.data(), s.shape.size() * sizeof(std::int64_t));
  const std::int64_t cols = s.shape.size() == 2 ? s.shape[1] : n;
  const Matrix m = s.slot.matrix ? *s.slot.matrix : Matrix{*s.slot.vector};
  d.add(&m.type, sizeof m.type);
  // Each sample is the whole block holding weight i, as stored: for blocks of one weight (F32,
  // BF16, F16) the bytes of that weight alone, so sessions saved before blocks still load.
  const std::size_t block_bytes = std::size_t(traits(m.type).block_bytes);
  const std::int64_t step = std::max<std::int64_t>(1, n / 1024);
  for (std::int64_t i = 0; i < n; i += step)
    d.add(m.row(i / cols, cols).at(i % cols).data, block_bytes);
}

// The config's keys as the config event prints them, less the cache's capacity, which a run
// continuing a session may change.
json config_of(const ModelArgs& a) {
  json j = json::object();
  for (const auto& [key, value] : config_values(a))
    if (key != "max_seq_len" && key != "max_batch_size") j[key] = json::parse(value);
  j["first_layer"] = a.first_layer;
  return j;
}

[[noreturn]] void differs(const std::string& source, const std::string& what,
                          std::string setting = {}) {
  throw InputError(source + ": the session does not match this run: " + what, std::move(setting));
}

std::string meta(const SafetensorsFile& f, const std::string& key) {
  const auto it = f.header.metadata.find(key);
  if (it == f.header.metadata.end())
    throw InputError(f.path + ": not an attn-cli session (no metadata '" + key + "')");
  return it->second;
}

// Metadata `key` as JSON, its depth, size and keys checked before it is built (the DOM, its
// dump and its destructor recurse).
json meta_json(const SafetensorsFile& f, const std::string& key, const JsonLimits& limits) {
  const std::string text = meta(f, key);
  const std::string what = f.path + ": metadata '" + key + "'";
  return parse_checked_json(text, limits, what);
}

// A saved config is flat (a value per key); its ids, an array up to the cache's capacity.
constexpr JsonLimits kConfigLimits{8, 4096, 4096};
constexpr JsonLimits kTokensLimits{2, std::size_t(1) << 25, std::size_t(1) << 25};

void check_config(const SafetensorsFile& f, const ModelArgs& a) {
  const json s = meta_json(f, "config", kConfigLimits);
  if (!s.is_object()) differs(f.path, "its config is not a JSON object");
  const json now = config_of(a);
  for (const auto& [key, value] : now.items())
    if (!s.contains(key) || s[key] != value)
      differs(f.path, "key '" + key + "' was " +
                          (s.contains(key) ? quoted(s[key].dump(), 60) : "absent") +
                          ", this config has " + value.dump());
}

// Each id an integer in [0, vocab_size): not a bool, a fraction or a number wrapped to 32 bits.
std::vector<std::int32_t> read_tokens(const SafetensorsFile& f, const ModelArgs& a) {
  const json list = meta_json(f, "tokens", kTokensLimits);
  const std::string what = f.path + ": metadata 'tokens'";
  if (!list.is_array() || list.empty())
    throw InputError(what + " is not a JSON array of token ids (one or more)");
  std::vector<std::int32_t> tokens;
  tokens.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    const bool integer = t.is_number_integer();
    const bool in_range =
        t.is_number_unsigned() ? t.get<std::uint64_t>() < std::uint64_t(a.vocab_size)
        : integer              ? t.get<std::int64_t>() >= 0 && t.get<std::int64_t>() < a.vocab_size
                               : false;
    if (!in_range)
      throw InputError(what + ": token " + std::to_string(i) + ", " + quoted(t.dump(), 40) + ", " +
                       (integer
                            ? "is outside the vocabulary [0, " + std::to_string(a.vocab_size) + ")"
                            : std::string("is not an integer token id")));
    tokens.push_back(std::int32_t(t.get<std::int64_t>()));
  }
  return tokens;
}

void read_cache(const SafetensorsFile& f, const char* name, Transformer& m, std::int64_t filled) {
  const KVCache& c = m.cache;
  const std::vector<std::int64_t> want = {c.n_layers, 1, c.n_kv_heads, filled, c.head_dim};
  const TensorInfo& t = f.info(name);
  if (t.dtype != Dtype::F32 || t.shape != want)
    throw InputError(f.path + ": tensor '" + name + "': expected F32 " + shape_text(want) +
                     ", got " + dtype_name(t.dtype) + " " + shape_text(t.shape));
  std::vector<float> storage;
  const float* src = tensor_as_f32(f, name, storage);
  check_finite(src, t.numel(), f.path, name);
  const std::size_t row = std::size_t(filled * c.head_dim);
  for (std::int64_t l = 0; l < c.n_layers; ++l)
    for (std::int64_t h = 0; h < c.n_kv_heads; ++h) {
      float* dst = std::strcmp(name, "cache_k") == 0 ? m.cache.k(l, 0, h) : m.cache.v(l, 0, h);
      std::memcpy(dst, src + (l * c.n_kv_heads + h) * std::int64_t(row), row * sizeof(float));
    }
}

}  // namespace

std::string weights_fingerprint(const Transformer& m) {
  Digest d;
  for (std::size_t l = 0; l < m.weights.layers.size(); ++l) {
    LayerWeights views = m.weights.layers[l];  // the specs' slots point into this copy
    for (const TensorSpec& s : layer_tensor_specs(m.local, views, std::int64_t(l)))
      add_tensor(d, s);
  }
  TokenWeights tokens = m.weights.tokens;
  for (const TensorSpec& s : token_tensor_specs(m.args, m.ends, tokens)) add_tensor(d, s);
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(d.h));
  return text;
}

OutputFile stage_session(const std::filesystem::path& path, const Transformer& m,
                         const Generation& g, std::string_view conversation) {
  const KVCache& c = m.cache;
  const std::int64_t filled = std::int64_t(g.tokens.size());
  std::vector<float> k, v;  // [n_layers, 1, n_kv_heads, filled, head_dim]
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const std::vector<float> kl = filled_k(c, l, 1, filled), vl = filled_v(c, l, 1, filled);
    k.insert(k.end(), kl.begin(), kl.end());
    v.insert(v.end(), vl.begin(), vl.end());
  }
  const std::vector<std::int64_t> shape = {c.n_layers, 1, c.n_kv_heads, filled, c.head_dim};
  OutputFile out(path, "session");
  std::map<std::string, std::string> metadata = {{"format", kFormat},
                                                 {"config", config_of(m.args).dump()},
                                                 {"weights", weights_fingerprint(m)},
                                                 {"tokens", json(g.tokens).dump()}};
  if (!conversation.empty()) metadata.emplace("conversation", conversation);
  write_safetensors(out,
                    {{"cache_k", shape, k.data()},
                     {"cache_v", shape, v.data()},
                     {"logits", {std::int64_t(g.logits.size())}, g.logits.data()}},
                    metadata);
  return out;
}

void load_session(const std::filesystem::path& path, Transformer& m, Generation& g,
                  std::string* conversation) {
  const SafetensorsFile f = open_safetensors(path);
  if (meta(f, "format") != kFormat)
    throw InputError(f.path + ": not an attn-cli session (format " + quoted(meta(f, "format"), 60) +
                     ")");
  check_config(f, m.args);
  if (const std::string w = weights_fingerprint(m); meta(f, "weights") != w)
    differs(f.path, "it was computed with other weights (fingerprint " +
                        quoted(meta(f, "weights"), 40) + ", these weights " + w + ")");
  g.tokens = read_tokens(f, m.args);
  const std::int64_t filled = std::int64_t(g.tokens.size());
  if (filled > m.args.max_seq_len)
    differs(f.path,
            "it holds " + std::to_string(filled) + " positions, over max_seq_len " +
                std::to_string(m.args.max_seq_len),
            "max_seq_len");
  read_cache(f, "cache_k", m, filled);
  read_cache(f, "cache_v", m, filled);
  const TensorInfo& t = f.info("logits");
  if (t.dtype != Dtype::F32 || t.shape != std::vector<std::int64_t>{m.args.vocab_size})
    throw InputError(f.path + ": tensor 'logits': expected F32 [" +
                     std::to_string(m.args.vocab_size) + "]");
  std::vector<float> storage;
  const float* logits = tensor_as_f32(f, "logits", storage);
  check_finite(logits, m.args.vocab_size, f.path, "logits");
  g.logits.assign(logits, logits + m.args.vocab_size);
  if (conversation) {
    const auto it = f.header.metadata.find("conversation");
    *conversation = it == f.header.metadata.end() ? std::string() : it->second;
  }
}

}  // namespace attn
