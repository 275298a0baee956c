// Hugging Face's config.json (LlamaConfig, MistralConfig, Qwen2Config, Phi3Config keys) read as the
// ModelArgs it describes: the llama block with its architecture row's RoPE and biases.
#include <algorithm>
#include <cmath>
#include <set>
#include <span>
#include <string>

#include "attn/model/arch.hpp"
#include "attn/model/config.hpp"
#include "attn/model/detail/config_checks.hpp"
#include "attn/model/detail/config_reader.hpp"

namespace attn {

namespace {

// Keys of Hugging Face's LlamaConfig, MistralConfig and Qwen2Config that describe the token
// model around the layers (embedding, head, generation) or training: not the layers' arithmetic.
const std::set<std::string> kHfIgnoredKeys = {
    "architectures",        "model_type",        "torch_dtype",          "transformers_version",
    "vocab_size",           "bos_token_id",      "eos_token_id",         "pad_token_id",
    "tie_word_embeddings",  "use_cache",         "initializer_range",    "pretraining_tp",
    "attention_dropout",    "mlp_bias",          "max_window_layers",    "use_sliding_window",
    "sliding_window",       "hidden_act",        "rope_scaling",         "_name_or_path",
    "hidden_size",          "num_hidden_layers", "num_attention_heads",  "num_key_value_heads",
    "intermediate_size",    "rms_norm_eps",      "rope_theta",           "max_position_embeddings",
    "attention_bias",       "head_dim",          "embedding_multiplier", "residual_multiplier",
    "attention_multiplier", "logits_scaling"};
// Gemma2Config's and Gemma3TextConfig's keys beside those (read by read_hf_gemma).
const std::set<std::string> kHfGemmaKeys = {
    "hidden_activation",       "query_pre_attn_scalar",  "attn_logit_softcapping",
    "final_logit_softcapping", "sliding_window_pattern", "layer_types",
    "rope_local_base_freq",    "cache_implementation",   "use_bidirectional_attention"};
// Phi3Config's (read by read_hf_partial_rotary and read_hf_longrope; its dropouts).
const std::set<std::string> kHfPhi3Keys = {"original_max_position_embeddings",
                                           "partial_rotary_factor", "embd_pdrop", "resid_pdrop"};

// Phi3Config's partial_rotary_factor: the leading int(head_dim * factor) dimensions of each head
// rotate (Phi-4-mini's 0.75), as transformers' Phi3 counts them.
void read_hf_partial_rotary(const Reader& r, ModelArgs& a) {
  double f = 1;
  r.number("partial_rotary_factor", f);
  if (!(f > 0 && f <= 1)) r.fail("partial_rotary_factor", "must be in (0, 1]");
  const auto rot = static_cast<std::int64_t>(double(a.head_dim()) * f);
  if (rot < 2 || rot % 2 != 0)
    r.fail("partial_rotary_factor", std::to_string(rot) + " of the head's " +
                                        std::to_string(a.head_dim()) +
                                        " dimensions: RoPE rotates an even number, at least 2");
  if (rot != a.head_dim()) a.rope_dims = rot;
}

// One of LongRoPE's factor lists: a number per rotated pair, each finite and positive.
std::vector<float> longrope_factors(const Reader& sr, const char* key, std::int64_t pairs) {
  if (!sr.j.contains(key)) sr.fail(key, "required key is missing (LongRoPE)");
  const json& v = sr.j.at(key);
  if (!v.is_array() || std::int64_t(v.size()) != pairs)
    sr.fail(key, "expected " + std::to_string(pairs) + " numbers (half the " +
                     std::to_string(2 * pairs) + " rotated dimensions), got " + excerpt(v));
  std::vector<float> out;
  for (const json& x : v) {
    if (!x.is_number() || !(x.get<double>() > 0) || !std::isfinite(x.get<double>()))
      sr.fail(key, "each factor must be a finite positive number, got " + excerpt(x));
    out.push_back(x.get<float>());
  }
  return out;
}

// Phi-3's LongRoPE (rope_scaling type "longrope"): short and long factors, the original context
// beside max_position_embeddings, and cos and sin scaled by attention_factor (transformers'
// default: sqrt(1 + ln(scale) / ln(original)), scale = max / original; 1 when scale <= 1).
// Which factors run is decided by the run's context as for a GGUF (rope_factors()).
void read_hf_longrope(const Reader& r, const Reader& sr, ModelArgs& a) {
  const std::int64_t pairs = a.rotary_dims() / 2;
  a.rope_freq_factors = longrope_factors(sr, "short_factor", pairs);
  a.rope_long_factors = longrope_factors(sr, "long_factor", pairs);
  std::int64_t orig = 0;
  r.integer("original_max_position_embeddings", orig);
  sr.integer("original_max_position_embeddings", orig);
  if (orig < 1) r.fail("original_max_position_embeddings", "LongRoPE needs it, at least 1");
  a.rope_original_context = orig;
  double scale = double(a.max_position_embeddings) / double(orig);
  sr.number("factor", scale);
  a.rope_attn_factor = scale <= 1 ? 1.0 : std::sqrt(1 + std::log(scale) / std::log(double(orig)));
  sr.number("attention_factor", a.rope_attn_factor);
  if (!(a.rope_attn_factor > 0)) sr.fail("attention_factor", "must be positive");
}

void read_hf_rope_scaling(const Reader& r, ModelArgs& a) {
  if (!r.j.contains("rope_scaling") || r.j.at("rope_scaling").is_null()) return;
  const json& s = r.j.at("rope_scaling");
  if (!s.is_object()) r.fail("rope_scaling", "expected an object or null, got " + excerpt(s));
  const Reader sr{s, r.source, ConfigFormat::hugging_face, "rope_scaling."};
  const std::string type = sr.text("rope_type", sr.text("type", ""));
  if (type == "default") return;
  if (type == "longrope" && a.arch == "phi3") return read_hf_longrope(r, sr, a);
  if (type == "linear" && a.norm_weight_offset != 0) {  // Gemma 3's (4B+), global layers only
    double factor = 1;
    sr.number("factor", factor);
    if (!(factor > 0)) r.fail("rope_scaling", "needs factor > 0");
    a.rope_freq_scale = 1 / factor;
    return;
  }
  if (type != "llama3")
    r.fail("rope_scaling",
           "only rope_type \"llama3\" (and phi3's \"longrope\") is supported, got " + excerpt(s));
  RopeScaling rs;
  sr.number("factor", rs.factor);
  sr.number("low_freq_factor", rs.low_freq_factor);
  sr.number("high_freq_factor", rs.high_freq_factor);
  sr.number("original_max_position_embeddings", rs.original_max_position_embeddings);
  if (!(rs.factor > 0 && rs.low_freq_factor > 0 && rs.high_freq_factor > rs.low_freq_factor &&
        rs.original_max_position_embeddings > 0))
    r.fail("rope_scaling", "needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  a.rope_scaling = rs;
}

// The sizes, each checked as the file writes it: a 0 that Meta's keys read as "derive it" is an
// error here (Hugging Face configs always state intermediate_size and head_dim when they have
// them).
void read_hf_sizes(const Reader& r, ModelArgs& a) {
  for (const char* key :
       {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"})
    if (!r.j.contains(key)) r.fail(key, "required key is missing");
  r.integer("hidden_size", a.dim);
  r.integer("num_hidden_layers", a.n_layers);
  r.integer("num_attention_heads", a.n_heads);
  a.n_kv_heads = a.n_heads;
  if (r.j.contains("num_key_value_heads") && !r.j.at("num_key_value_heads").is_null())
    r.integer("num_key_value_heads", a.n_kv_heads);
  r.integer("intermediate_size", a.ffn_hidden_set);
  if (a.ffn_hidden_set < 1)
    r.fail("intermediate_size", "must be at least 1, got " + std::to_string(a.ffn_hidden_set));
  if (r.j.contains("head_dim") && !r.j.at("head_dim").is_null()) {
    r.integer("head_dim", a.head_dim_set);
    if (a.head_dim_set < 1)
      r.fail("head_dim", "must be at least 1, got " + std::to_string(a.head_dim_set));
  }
  std::int64_t positions = kDefaultSeqLen;
  r.integer("max_position_embeddings", positions);
  a.max_position_embeddings = positions;
  a.max_seq_len = std::min(positions, kDefaultSeqLen);
}

// The row a config.json describes: its model_type's, else (a config without one) the first of
// its architectures' classes that a row names. Any other config is read as llama's, as it was
// before the table.
const Architecture& hf_architecture(const Reader& r) {
  const std::string type = r.text("model_type", "");
  const auto has = [](std::span<const char* const> names, const std::string& name) {
    return std::find_if(names.begin(), names.end(), [&](const char* n) { return name == n; }) !=
           names.end();
  };
  for (const Architecture& row : architectures())
    if (has(row.hf_model_types, type)) return row;
  const json* classes = r.j.contains("architectures") ? &r.j.at("architectures") : nullptr;
  if (type.empty() && classes && classes->is_array())
    for (const json& c : *classes)
      for (const Architecture& row : architectures())
        if (c.is_string() && has(row.hf_classes, c.get<std::string>())) return row;
  return *find_architecture("llama");
}

// Which layers slide: layer_types ("sliding_attention" / "full_attention" per layer), else
// every layer but each n-th (Gemma 2's n = 2; Gemma 3's sliding_window_pattern, 6).
void read_hf_sliding_layers(const Reader& r, ModelArgs& a, std::int64_t n) {
  if (a.n_layers < 1 || a.n_layers > (std::int64_t{1} << 24)) return;  // validate refuses it
  a.sliding_layers.assign(std::size_t(a.n_layers), 0);
  if (r.j.contains("layer_types") && !r.j.at("layer_types").is_null()) {
    const json& t = r.j.at("layer_types");
    if (!t.is_array() || std::int64_t(t.size()) != a.n_layers)
      r.fail("layer_types", "expected an array of num_hidden_layers strings");
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] != "sliding_attention" && t[i] != "full_attention")
        r.fail("layer_types",
               "expected \"sliding_attention\" or \"full_attention\", got " + excerpt(t[i]));
      a.sliding_layers[i] = t[i] == "sliding_attention";
    }
    return;
  }
  r.integer("sliding_window_pattern", n);
  if (n < 1) r.fail("sliding_window_pattern", "must be at least 1, got " + std::to_string(n));
  for (std::int64_t il = 0; il < a.n_layers; ++il)
    a.sliding_layers[std::size_t(il)] = il % n < n - 1;
}

// A soft-cap: null means none (0); Gemma 2's defaults when absent.
double read_hf_cap(const Reader& r, const char* key, double fallback) {
  if (!r.j.contains(key)) return fallback;
  if (r.j.at(key).is_null()) return 0;
  double cap = 0;
  r.number(key, cap);
  if (cap < 0) r.fail(key, "must not be negative");
  return cap;
}

// Gemma2Config and Gemma3TextConfig: GeGLU (gelu_pytorch_tanh), embeddings times
// sqrt(hidden_size), q times query_pre_attn_scalar^-0.5, soft-caps, sliding layers (Gemma 3's
// with rope_local_base_freq, unscaled), norm weights w multiplying by 1 + w.
void read_hf_gemma(const Reader& r, ModelArgs& a, bool gemma2) {
  const std::string act = r.text("hidden_activation", r.text("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    r.fail("hidden_activation",
           "only \"gelu_pytorch_tanh\" (GeGLU) is supported, got " + quoted(act, 60));
  a.geglu = true;
  a.embedding_scale = double(std::sqrt(float(a.dim)));
  std::int64_t scalar = 256;
  r.integer("query_pre_attn_scalar", scalar);
  if (scalar < 1) r.fail("query_pre_attn_scalar", "must be at least 1");
  if (scalar != a.head_dim()) a.attention_scale = 1 / std::sqrt(double(scalar));
  a.attn_softcap = read_hf_cap(r, "attn_logit_softcapping", gemma2 ? 50 : 0);
  a.final_softcap = read_hf_cap(r, "final_logit_softcapping", gemma2 ? 30 : 0);
  a.sliding_window = 4096;
  r.integer("sliding_window", a.sliding_window);
  if (a.sliding_window < 1)
    r.fail("sliding_window", "must be at least 1, got " + std::to_string(a.sliding_window));
  read_hf_sliding_layers(r, a, gemma2 ? 2 : 6);
  a.rope_theta_swa = gemma2 ? a.rope_theta : 10000;
  if (!gemma2) r.number("rope_local_base_freq", a.rope_theta_swa);
  if (!(a.rope_theta_swa > 0)) r.fail("rope_local_base_freq", "must be positive");
  a.rope_freq_scale_swa = gemma2 ? a.rope_freq_scale : 1;
}

void read_hf_keys(const Reader& r, ModelArgs& a) {
  a.format = ConfigFormat::hugging_face;
  a.rope_theta = 10000;
  a.norm_eps = 1e-6;
  a.max_batch_size = 1;  // plan_run grows it to the run's batch
  a.batch_from_run = true;
  a.multiple_of = 1;
  read_hf_sizes(r, a);
  r.number("rms_norm_eps", a.norm_eps);
  r.number("rope_theta", a.rope_theta);
  const Architecture& row = hf_architecture(r);
  a.arch = row.name;
  a.block = row.block;
  a.rope = row.rope(ConfigFormat::hugging_face);
  a.qk_norm = row.qk_norm;
  a.post_norms = row.post_norms;
  a.pre_norms = row.pre_norms;
  if (row.gemma) a.norm_weight_offset = 1;  // Gemma's RMSNorm multiplies by 1 + w
  if (std::string_view(row.name) == "phi3") read_hf_partial_rotary(r, a);
  if (std::string_view(row.name) == "granite") {  // GraniteConfig's multipliers
    r.number("embedding_multiplier", a.embedding_scale);
    r.number("residual_multiplier", a.residual_scale);
    r.number("attention_multiplier", a.attention_scale);
    r.number("logits_scaling", a.logit_scale);
    if (!(a.embedding_scale > 0 && a.residual_scale > 0 && a.attention_scale >= 0 &&
          a.logit_scale > 0))
      r.fail("logits_scaling", "granite's multipliers must be positive");
  }
  a.attention_bias = row.qkv_bias;
  a.attention_out_bias = row.out_bias;
  a.attention_bias = r.flag("attention_bias", a.attention_bias);
  if (const std::string act = r.text("hidden_act", "silu"); act != "silu" && !row.gemma)
    r.fail("hidden_act", "only \"silu\" (SwiGLU) is supported, got " + quoted(act, 60));
  read_hf_rope_scaling(r, a);
  if (r.j.contains("vocab_size") && !r.j.at("vocab_size").is_null())
    r.integer("vocab_size", a.vocab_size);
  a.tie_word_embeddings = r.flag("tie_word_embeddings", row.gemma);  // Gemma's default: tied
  if (row.gemma) return read_hf_gemma(r, a, std::string_view(row.name) == "gemma2");
  const bool window = r.j.contains("sliding_window") && !r.j.at("sliding_window").is_null() &&
                      r.flag("use_sliding_window", true);
  if (window) r.integer("sliding_window", a.sliding_window);
  // Phi-3's window (2047 of Phi-3-mini's 4096 positions; llama.cpp runs its GGUFs without one)
  // bounds the default cache, where every key is still seen as transformers sees it: a longer
  // max_seq_len is refused as for any window (validate, override_sizes).
  if (a.arch == "phi3" && a.sliding_window > 0)
    a.max_seq_len = std::min(a.max_seq_len, a.sliding_window);
}

}  // namespace

ModelArgs read_hf_config(const Reader& r) {
  ModelArgs a;
  a.source = r.source;
  read_hf_keys(r, a);
  validate(r, a);
  std::set<std::string> known = kHfIgnoredKeys;
  if (find_architecture(a.arch)->gemma) known.insert(kHfGemmaKeys.begin(), kHfGemmaKeys.end());
  if (a.arch == "phi3") known.insert(kHfPhi3Keys.begin(), kHfPhi3Keys.end());
  warn_unknown(r.j, r.source, known);
  a.checkpoint_layers = a.n_layers;
  return a;
}

}  // namespace attn
