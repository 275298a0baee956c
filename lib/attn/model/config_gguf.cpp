// A GGUF's metadata as ModelArgs: the "{arch}.*" keys llama.cpp's llama_model::load_hparams and
// its llama/qwen2 models read, with llama.cpp's defaults where a key is absent, and the tensor
// list for what no key says (biases, a tied head).
#include <algorithm>
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

// Tensors of blocks this engine does not run: present, the file is refused naming them rather
// than run without them.
constexpr const char* kUnsupportedTensors[] = {
    "rope_freqs.weight",          // Llama 3.1's frequency factors
    "blk.0.attn_qkv.weight",      // q, k and v fused
    "blk.0.ffn_gate_inp.weight",  // mixture of experts
    "blk.0.ffn_gate.bias",       "blk.0.ffn_down.bias", "blk.0.ffn_up.bias"};

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
  const std::int64_t rot = m.f.integer(m.key("rope.dimension_count")).value_or(k);
  if (rot != k)
    m.fail(m.key("rope.dimension_count"),
           std::to_string(rot) + " of the head's " + std::to_string(k) +
               " dimensions rotated: partial rotary embeddings are not supported");
}

// llama.cpp's default type is "linear", with factor 0 (or 1) meaning no scaling.
void read_rope_scaling(const Meta& m) {
  const std::string type = m.f.string(m.key("rope.scaling.type")).value_or("linear");
  if (type == "none") return;
  if (type != "linear")
    m.fail(m.key("rope.scaling.type"),
           quoted(type, 40) + " is not supported (none, or linear with factor 1)");
  std::optional<double> factor = m.f.number(m.key("rope.scaling.factor"));
  std::string key = m.key("rope.scaling.factor");
  if (!factor) factor = m.f.number(key = m.key("rope.scale_linear"));
  if (factor && *factor != 0 && *factor != 1)
    m.fail(key, "linear RoPE scaling by " + std::to_string(*factor) + " is not supported");
}

// {arch}.vocab_size, else the tokenizer's token count (llama.cpp's order).
std::int64_t vocab_size(const Meta& m) {
  if (const std::optional<std::int64_t> n = m.f.integer(m.key("vocab_size"))) return *n;
  const GgufValue* tokens = m.f.find("tokenizer.ggml.tokens");
  if (tokens && tokens->type == GgufValueType::array) return std::int64_t(tokens->count);
  m.fail(m.key("vocab_size"), "missing, and no tokenizer.ggml.tokens to count");
}

// A name the row reads (a fused tensor's, say) is not refused.
bool row_reads(const Architecture& row, std::string_view name) {
  const TensorTable& t = *row.tensors;
  const std::string_view prefix = t.layer_prefix[int(Naming::gguf)];
  if (name.starts_with(prefix)) name.remove_prefix(name.find('.', prefix.size()) + 1);
  for (const TensorNames& n : t.layer)
    if (n.gguf && name == n.gguf) return true;
  for (const FusedTensor& f : t.fused)
    if (f.names.gguf && name == f.names.gguf) return true;
  for (const TensorNames& n : t.token)
    if (n.gguf && name == n.gguf) return true;
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

void check_tensors(const Meta& m) {
  for (const char* name : kUnsupportedTensors)
    if (m.has_tensor(name) && !row_reads(m.row, name))
      throw InputError(m.f.path + ": tensor " + quoted(name) + ": not supported (" + m.arch +
                       " blocks with it are not this engine's)");
  if (m.f.integer(m.key("expert_count")).value_or(0) > 0)
    m.fail(m.key("expert_count"), "mixture-of-experts blocks are not supported");
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
  read_rope_scaling(m);
  check_tensors(m);
  // llama.cpp treats the attention biases as optional (qwen2's are always there, with none on
  // the output projection), and the head as the embeddings when output.weight is absent.
  a.attention_bias = m.has_tensor(gguf_name(row, "attention.wq.bias", true));
  a.attention_out_bias = m.has_tensor(gguf_name(row, "attention.wo.bias", true));
  a.tie_word_embeddings = !m.has_tensor(gguf_name(row, "output.weight", false));
  a.max_seq_len = std::min(a.max_position_embeddings, kDefaultSeqLen);
  finish_file_config(a);
  return a;
}

}  // namespace attn
