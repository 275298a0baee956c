// A GGUF's metadata as ModelArgs: the "{arch}.*" keys llama.cpp's llama_model::load_hparams and
// its llama/qwen2 models read, with llama.cpp's defaults where a key is absent, and the tensor
// list for what no key says (biases, a tied head).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/text.hpp"
#include "attn/model/arch.hpp"
#include "attn/model/config.hpp"
#include "attn/model/detail/config_checks.hpp"

namespace attn {

namespace {

// Tensors of blocks this engine does not run, by their name in a layer (or the whole name): the
// reason a file holding one is refused. Any other tensor no row reads is refused too (llama.cpp
// refuses a file with tensors its model did not take).
struct Unsupported {
  const char* name;
  const char* what;
};
constexpr Unsupported kUnsupportedTensors[] = {
    {"attn_qkv.weight", "q, k and v fused"},
    {"ffn_gate_inp.weight", "mixture-of-experts routing"},
    {"ffn_gate.bias", "FFN biases"},
    {"ffn_down.bias", "FFN biases"},
    {"ffn_up.bias", "FFN biases"}};

struct Meta {
  const GgufFile& f;
  const Architecture& row;
  std::string arch;  // row.name: the keys' prefix

  std::string key(const char* suffix) const { return arch + "." + suffix; }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(f.path + ": key " + quoted(key, 80) + ": " + what);
  }

  // llama.cpp's required keys (get_key without a default).
  std::int64_t required(const char* suffix) const {
    const std::optional<std::int64_t> v = f.integer(key(suffix));
    if (!v) fail(key(suffix), "required key is missing");
    return *v;
  }

  bool has_tensor(const std::string& name) const { return f.find_tensor(name) != nullptr; }
};

// The row of the file's general.architecture, among those llama.cpp's files hold (arch.hpp).
const Architecture& architecture(const GgufFile& f) {
  const std::optional<std::string> arch = f.string("general.architecture");
  if (!arch) throw InputError(f.path + ": key 'general.architecture' is missing: not a model file");
  if (const Architecture* row = find_architecture(*arch); row && row->gguf) return *row;
  throw InputError(f.path + ": key 'general.architecture': " + quoted(*arch, 60) +
                   " is not supported (" +
                   architecture_names([](const Architecture& a) { return a.gguf; }) + ")");
}

// head_dim: {arch}.attention.key_length (value_length the same), rotated whole.
void read_head(const Meta& m, ModelArgs& a) {
  const std::int64_t whole = a.n_heads > 0 ? a.dim / a.n_heads : 0;
  const std::optional<std::int64_t> key_length = m.f.integer(m.key("attention.key_length"));
  const std::int64_t k = key_length.value_or(whole);
  const std::int64_t v = m.f.integer(m.key("attention.value_length")).value_or(k);
  if (v != k)
    m.fail(m.key("attention.value_length"),
           std::to_string(v) + " differs from " + m.key("attention.key_length") + " " +
               std::to_string(k) + ": keys and values of one size are supported");
  if (key_length && k < 1)
    m.fail(m.key("attention.key_length"), "must be at least 1, got " + std::to_string(k));
  if (k < 1) return;  // a bad embedding_length or head_count: check_config names it
  if (k != whole) a.head_dim_set = k;
  // Partial rotary (Phi-4-mini's 0.75): the leading rot dims of each head rotate, in pairs.
  const std::int64_t rot = m.f.integer(m.key("rope.dimension_count")).value_or(k);
  if (rot < 2 || rot > k || rot % 2 != 0)
    m.fail(m.key("rope.dimension_count"), std::to_string(rot) +
                                              ": RoPE rotates an even number of the head's " +
                                              std::to_string(k) + " dimensions, at least 2");
  // llama.cpp's llama rotates whole heads (it refuses another n_rot): so does its row here.
  if (rot != k && std::string_view(m.row.name) == "llama")
    m.fail(m.key("rope.dimension_count"),
           std::to_string(rot) + " of the head's " + std::to_string(k) +
               " dimensions rotated: partial rotary is not llama's (llama.cpp refuses it too)");
  if (rot != k) a.rope_dims = rot;
}

// RoPE frequency factors, one per rotated pair, F32 as llama.cpp's converter writes them
// (llama.cpp reads them as F32 too), each finite and positive: Llama 3.1's rope_freqs.weight,
// Phi-3's rope_factors_short/long.weight. False if the file has no tensor `name`.
bool read_factors(const Meta& m, const ModelArgs& a, const char* name, std::vector<float>& out) {
  const GgufTensorInfo* t = m.f.find_tensor(name);
  if (!t) return false;
  const std::int64_t half = a.rotary_dims() / 2;
  const auto refuse = [&](const std::string& why) {
    throw InputError(m.f.path + ": tensor " + attn::quoted(name) + ": " + why);
  };
  if (t->ggml_type != 0) refuse("expected F32, got " + ggml_type_name(t->ggml_type));
  if (t->shape != std::vector<std::int64_t>{half})
    refuse("expected shape [" + std::to_string(half) + "] (half the head's " +
           std::to_string(a.rotary_dims()) + " rotated dimensions)");
  out.resize(std::size_t(half));
  std::memcpy(out.data(), m.f.bytes.data() + t->offset, std::size_t(half) * 4);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!(out[i] > 0 && std::isfinite(out[i])))
      refuse("factor " + std::to_string(i) + " is " + std::to_string(out[i]) +
             ": each must be finite and positive");
  return true;
}

// Llama 3.1's rope_freqs.weight; Phi-3's LongRoPE factors, both or neither, with the original
// context that chooses between them (rope_factors()) and the magnitude of cos and sin.
void read_rope_freqs(const Meta& m, ModelArgs& a) {
  read_factors(m, a, "rope_freqs.weight", a.rope_freq_factors);
  const bool has_short = read_factors(m, a, "rope_factors_short.weight", a.rope_freq_factors);
  const bool has_long = read_factors(m, a, "rope_factors_long.weight", a.rope_long_factors);
  if (has_short != has_long)
    throw InputError(m.f.path + ": tensor " +
                     (has_short ? "'rope_factors_long.weight'" : "'rope_factors_short.weight'") +
                     " is missing beside the other LongRoPE factors");
  if (!has_long) return;
  const std::string orig = m.key("rope.scaling.original_context_length");
  a.rope_original_context = m.f.integer(orig).value_or(a.max_position_embeddings);
  if (a.rope_original_context < 1)
    m.fail(orig, "must be at least 1, got " + std::to_string(a.rope_original_context));
  const std::string factor = m.key("rope.scaling.attn_factor");
  a.rope_attn_factor = m.f.number(factor).value_or(1.0);
  if (!(a.rope_attn_factor > 0 && std::isfinite(a.rope_attn_factor)))
    m.fail(factor, "must be finite and positive, got " + std::to_string(a.rope_attn_factor));
}

// llama.cpp's default type is "linear", with factor 0 (or 1) meaning no scaling. Linear scaling
// by another factor is run for Gemma (3 4B+'s 8, on its global layers), refused elsewhere.
void read_rope_scaling(const Meta& m, ModelArgs& a) {
  const std::string type = m.f.string(m.key("rope.scaling.type")).value_or("linear");
  if (type == "none") return;
  // Phi-3's: its factors and magnitude are read with rope_freqs (read_rope_freqs).
  if (type == "longrope" && std::string_view(m.row.name) == "phi3") return;
  if (type != "linear")
    m.fail(m.key("rope.scaling.type"),
           quoted(type, 40) + " is not supported (none, or linear with factor 1)");
  std::optional<double> factor = m.f.number(m.key("rope.scaling.factor"));
  std::string key = m.key("rope.scaling.factor");
  if (!factor) factor = m.f.number(key = m.key("rope.scale_linear"));
  if (!factor || *factor == 0 || *factor == 1) return;
  if (!m.row.gemma)
    m.fail(key, "linear RoPE scaling by " + std::to_string(*factor) + " is not supported");
  if (!(*factor > 0 && std::isfinite(*factor)))
    m.fail(key, "must be finite and positive, got " + std::to_string(*factor));
  a.rope_freq_scale = 1 / *factor;
}

// {arch}.attention.sliding_window_pattern as llama.cpp's load_swa_pattern reads it: an array of
// one flag per layer, else an integer n (layer il slides when il % n < n - 1; 0: every layer),
// else the architecture's default n.
void read_swa_pattern(const Meta& m, ModelArgs& a, std::int64_t n) {
  const std::string key = m.key("attention.sliding_window_pattern");
  if (a.n_layers < 1 || a.n_layers > (std::int64_t{1} << 24)) return;  // finish_file_config's
  a.sliding_layers.assign(std::size_t(a.n_layers), 0);
  if (const GgufValue* v = m.f.find(key); v && v->type == GgufValueType::array) {
    if (v->element != GgufValueType::boolean)
      m.fail(key, "expected an integer or an array of bool");
    if (std::int64_t(v->count) != a.n_layers)
      m.fail(key,
             std::to_string(v->count) + " flags for " + std::to_string(a.n_layers) + " layers");
    for (std::size_t i = 0; i < v->count; ++i) a.sliding_layers[i] = v->data[i] != 0;
    return;
  }
  n = m.f.integer(key).value_or(n);
  if (n < 0) m.fail(key, "must not be negative, got " + std::to_string(n));
  for (std::int64_t il = 0; il < a.n_layers; ++il)
    a.sliding_layers[std::size_t(il)] = n == 0 || il % n < n - 1;
}

// A soft-cap key: finite and not negative (0: none).
double read_cap(const Meta& m, const char* suffix, double fallback) {
  const double cap = m.f.number(m.key(suffix)).value_or(fallback);
  if (!(cap >= 0 && std::isfinite(cap)))
    m.fail(m.key(suffix), "must be finite and not negative, got " + std::to_string(cap));
  return cap;
}

// Gemma 2 and 3 as llama.cpp's gemma2.cpp and gemma3.cpp read them: embeddings times
// sqrtf(n_embd), q times 1/sqrt(n_embd/n_head) in the 27B models (46 and 62 layers; else the
// kernel's 1/sqrt(key_length)), soft-caps (Gemma 2's attention 50 and final 30 by default,
// Gemma 3's final 0 and no attention cap), sliding layers (Gemma 2: always, window 4096 by
// default, pattern 2, its global base and scale; Gemma 3: with a sliding_window key, pattern 6,
// base rope.freq_base_swa (10000) unscaled).
void read_gemma(const Meta& m, ModelArgs& a) {
  if (!m.row.gemma) return;
  const bool gemma2 = std::string_view(m.row.name) == "gemma2";
  a.geglu = true;
  a.embedding_scale = double(std::sqrt(float(a.dim)));
  if (a.n_layers == (gemma2 ? 46 : 62) && a.n_heads > 0)
    a.attention_scale = double(1.0f / std::sqrt(float(a.dim / a.n_heads)));
  a.attn_softcap = gemma2 ? read_cap(m, "attn_logit_softcapping", 50) : 0;
  a.final_softcap = read_cap(m, "final_logit_softcapping", gemma2 ? 30 : 0);
  const std::string window = m.key("attention.sliding_window");
  const std::optional<std::int64_t> n_swa = m.f.integer(window);
  if (!gemma2 && n_swa.value_or(0) <= 0) return;
  a.sliding_window = n_swa.value_or(4096);
  if (a.sliding_window < 1)
    m.fail(window, "must be at least 1, got " + std::to_string(a.sliding_window));
  read_swa_pattern(m, a, gemma2 ? 2 : 6);
  a.rope_theta_swa =
      m.f.number(m.key("rope.freq_base_swa")).value_or(gemma2 ? a.rope_theta : 10000.0);
  if (!(a.rope_theta_swa > 0 && std::isfinite(a.rope_theta_swa)))
    m.fail(m.key("rope.freq_base_swa"), "must be finite and positive");
  a.rope_freq_scale_swa = gemma2 ? a.rope_freq_scale : 1;
}

// Granite's multipliers ({arch}.embedding_scale, residual_scale, attention.scale, logit_scale);
// llama.cpp reads them for granite only, 0 meaning none. Each finite and positive.
void read_scales(const Meta& m, ModelArgs& a) {
  if (std::string_view(m.row.name) != "granite") return;
  const auto read = [&](const char* suffix, double& out) {
    const std::optional<double> v = m.f.number(m.key(suffix));
    if (!v || *v == 0) return;
    if (!(*v > 0 && std::isfinite(*v)))
      m.fail(m.key(suffix), "must be finite and positive, got " + std::to_string(*v));
    out = *v;
  };
  read("embedding_scale", a.embedding_scale);
  read("residual_scale", a.residual_scale);
  read("attention.scale", a.attention_scale);
  read("logit_scale", a.logit_scale);
}

// {arch}.vocab_size, else the tokenizer's token count (llama.cpp's order).
std::int64_t vocab_size(const Meta& m) {
  if (const std::optional<std::int64_t> n = m.f.integer(m.key("vocab_size"))) return *n;
  const GgufValue* tokens = m.f.find("tokenizer.ggml.tokens");
  if (tokens && tokens->type == GgufValueType::array) return std::int64_t(tokens->count);
  m.fail(m.key("vocab_size"), "missing, and no tokenizer.ggml.tokens to count");
}

// Does the row read `name` (a layer's after "blk.{l}.", or a whole one)? A fused tensor's name
// counts.
bool row_reads(const TensorTable& t, std::string_view name, bool layer) {
  for (const TensorNames& n : layer ? t.layer : t.token)
    if (n.gguf && name == n.gguf) return true;
  for (const FusedTensor& f : layer ? t.fused : std::span<const FusedTensor>{})
    if (f.names.gguf && name == f.names.gguf) return true;
  return false;
}

// The row's llama.cpp name for the model's tensor `meta` (layer 0's, for a layer tensor), or of
// the fused tensor holding it; "" if none.
std::string gguf_name(const Architecture& row, std::string_view meta, bool layer) {
  const TensorTable& t = *row.tensors;
  const std::string prefix = layer ? t.layer_prefix[int(Naming::gguf)] + std::string("0.") : "";
  for (const TensorNames& n : layer ? t.layer : t.token)
    if (meta == n.meta) return n.gguf ? prefix + n.gguf : "";
  for (const FusedTensor& f : layer ? t.fused : std::span<const FusedTensor>{})
    for (const char* part : f.parts)
      if (meta == part && f.names.gguf) return prefix + f.names.gguf;
  return "";
}

[[noreturn]] void refuse_tensor(const Meta& m, const std::string& name, const std::string& why) {
  throw InputError(m.f.path + ": tensor " + attn::quoted(name) + ": " + why);
}

// The layer index of "blk.{l}.rest" and rest; nullopt for a name outside the layers.
std::optional<std::pair<std::int64_t, std::string_view>> layer_of(const TensorTable& t,
                                                                  std::string_view name) {
  const std::string_view prefix = t.layer_prefix[int(Naming::gguf)];
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  std::int64_t l = 0;
  std::size_t i = 0;
  for (; i < name.size() && i < 9 && name[i] >= '0' && name[i] <= '9'; ++i)
    l = l * 10 + (name[i] - '0');
  if (i == 0 || i >= name.size() || name[i] != '.') return std::nullopt;
  return std::pair{l, name.substr(i + 1)};
}

// Every tensor of the file is one the row reads, in a layer the file has: a tensor no block here
// uses is refused naming it (what each layer holds of the optional ones is decided per layer
// by the load), never run without.
void check_tensors(const Meta& m, std::int64_t n_layers) {
  const TensorTable& t = *m.row.tensors;
  for (const GgufTensorInfo& info : m.f.tensors) {
    const auto layer = layer_of(t, info.name);
    const std::string_view rest = layer ? layer->second : std::string_view(info.name);
    if (row_reads(t, rest, bool(layer))) {
      if (layer && n_layers > 0 && layer->first >= n_layers)  // a bad count: finish_file_config
        refuse_tensor(m, info.name,
                      "layer " + std::to_string(layer->first) + " is past " + m.key("block_count") +
                          " " + std::to_string(n_layers));
      continue;
    }
    for (const Unsupported& u : kUnsupportedTensors)
      if (rest == u.name)
        refuse_tensor(m, info.name,
                      std::string("not supported (") + u.what + ": " + m.arch +
                          " blocks with it are not this engine's)");
    refuse_tensor(
        m, info.name,
        "no " + m.arch + " block reads it (not a tensor of this engine's " + m.arch + " blocks)");
  }
  if (m.f.integer(m.key("expert_count")).value_or(0) > 0)
    m.fail(m.key("expert_count"), "mixture-of-experts blocks are not supported");
}

// Does any layer hold the row's tensor `meta`? llama.cpp loads the attention biases of each
// layer as not required: the model holds one where its layer does (the load's optional specs).
bool any_layer_has(const Meta& m, std::string_view meta) {
  const TensorTable& t = *m.row.tensors;
  for (const TensorNames& n : t.layer)
    if (meta == n.meta && n.gguf)
      for (const GgufTensorInfo& info : m.f.tensors)
        if (const auto layer = layer_of(t, info.name); layer && layer->second == n.gguf)
          return true;
  return false;
}

}  // namespace

ModelArgs gguf_config(const GgufFile& f) {
  const Architecture& row = architecture(f);
  const Meta m{f, row, row.name};
  ModelArgs a;
  a.source = f.path;
  a.format = ConfigFormat::gguf;
  a.arch = m.arch;
  a.block = row.block;
  a.rope = row.rope(ConfigFormat::gguf);
  a.qk_norm = row.qk_norm;
  a.post_norms = row.post_norms;
  a.pre_norms = row.pre_norms;
  read_scales(m, a);
  a.max_position_embeddings = m.required("context_length");
  a.dim = m.required("embedding_length");
  a.n_layers = m.required("block_count");
  a.ffn_hidden_set = m.required("feed_forward_length");
  a.n_heads = m.required("attention.head_count");
  a.n_kv_heads = f.integer(m.key("attention.head_count_kv")).value_or(a.n_heads);
  const std::optional<double> eps = f.number(m.key("attention.layer_norm_rms_epsilon"));
  if (!eps) m.fail(m.key("attention.layer_norm_rms_epsilon"), "required key is missing");
  a.norm_eps = *eps;
  a.rope_theta = f.number(m.key("rope.freq_base")).value_or(10000.0);
  a.vocab_size = vocab_size(m);
  if (a.ffn_hidden_set < 1)
    m.fail(m.key("feed_forward_length"),
           "must be at least 1, got " + std::to_string(a.ffn_hidden_set));
  if (a.max_position_embeddings < 1)
    m.fail(m.key("context_length"),
           "must be at least 1, got " + std::to_string(a.max_position_embeddings));
  read_head(m, a);
  read_rope_scaling(m, a);
  if (a.n_heads > 0 && a.dim > 0) read_rope_freqs(m, a);
  read_gemma(m, a);
  check_tensors(m, a.n_layers);
  // llama.cpp treats the attention biases as optional in each layer (qwen2's are always there,
  // with none on the output projection), and the head as the embeddings when output.weight is
  // absent. The biases are the model's when some layer has one; a layer without is run so.
  a.attention_out_bias = any_layer_has(m, "attention.wo.bias");
  a.attention_bias = a.attention_out_bias || any_layer_has(m, "attention.wq.bias") ||
                     any_layer_has(m, "attention.wk.bias") || any_layer_has(m, "attention.wv.bias");
  // Granite's residual_scale is applied to the heads' output before wo (linear without a bias):
  // an output bias would escape it. Granite's files have none.
  if (a.attention_out_bias && a.residual_scale != 1)
    throw InputError(f.path + ": tensor 'blk.{l}.attn_output.bias': not supported beside " +
                     m.key("residual_scale"));
  a.tie_word_embeddings = !m.has_tensor(gguf_name(row, "output.weight", false));
  a.max_seq_len = std::min(a.max_position_embeddings, kDefaultSeqLen);
  finish_file_config(a);
  return a;
}

}  // namespace attn
