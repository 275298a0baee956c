// Meta's params.json and the tool's keys (ModelArgs'): one table, kConfigKeys, reads them,
// names the unknown ones and prints the config.
#include <spdlog/spdlog.h>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attn/model/arch.hpp"
#include "attn/model/config.hpp"
#include "attn/model/detail/config_reader.hpp"

namespace attn {

namespace {

// The block's row (arch.hpp) and its defaults, applied when `block` is read and before the keys
// after it: an encoder is torch's TransformerEncoderLayer unless the config says otherwise
// (biases and no RoPE from its row; no mask, dim_feedforward 2048).
void read_block(const Reader& r, ModelArgs& a) {
  std::vector<std::pair<const char*, const Architecture*>> blocks;
  for (const Architecture& row : architectures())
    if (row.meta_block) blocks.emplace_back(row.name, &row);
  const Architecture* row = &architecture_of(a);
  r.choice("block", row, blocks);
  a.block = row->block;
  a.rope = row->rope(ConfigFormat::meta);
  a.attention_bias = row->qkv_bias;
  a.attention_out_bias = row->out_bias;
  if (a.block != Block::encoder) return;
  a.mask = Mask::none;
  a.ffn_hidden_set = 2048;
}

void read_n_kv_heads(const Reader& r, ModelArgs& a) {
  a.n_kv_heads = a.n_heads;  // null or absent: MHA
  if (r.j.contains("n_kv_heads") && !r.j.at("n_kv_heads").is_null())
    r.integer("n_kv_heads", a.n_kv_heads);
}

void read_ffn_dim_multiplier(const Reader& r, ModelArgs& a) {
  if (!r.j.contains("ffn_dim_multiplier") || r.j.at("ffn_dim_multiplier").is_null()) return;
  double m = 0;
  r.number("ffn_dim_multiplier", m);
  a.ffn_dim_multiplier = m;
}

void read_ffn_hidden(const Reader& r, ModelArgs& a) {
  r.integer("ffn_hidden", a.ffn_hidden_set);
  if (r.j.contains("ffn_hidden") && a.ffn_hidden_set < 1)
    r.fail("ffn_hidden", "must be at least 1, got " + std::to_string(a.ffn_hidden_set));
}

// Meta's params.json for Llama 3.1 and later: the llama3 frequency scaling with the constants
// of Meta's apply_scaling (factor 8, low 1, high 4, 8192 original positions).
void read_use_scaled_rope(const Reader& r, ModelArgs& a) {
  bool scaled = false;
  boolean(r, "use_scaled_rope", scaled);
  if (scaled) a.rope_scaling = RopeScaling{8, 1, 4, 8192};
}

// One row per config key, in reading order (n_kv_heads defaults to n_heads; block sets the
// defaults of the keys after it): how it is read and how the config event prints it. Parsing,
// the unknown-key warning and the printed config all come from this table.
struct ConfigKey {
  const char* name;
  void (*read)(const Reader&, ModelArgs&);
  json (*value)(const ModelArgs&);
};

#define ATTN_INT(key)                                                                  \
  {                                                                                    \
#key, [](const Reader& r,                                                          \
             ModelArgs& a) { r.integer(#key, a.key); }, [](const ModelArgs& a)         \
                                                             -> json { return a.key; } \
  }
#define ATTN_NUMBER(key)                                                                           \
  {                                                                                                \
#key,                                                                                          \
        [](const Reader& r,                                                                        \
           ModelArgs& a) { r.number(#key, a.key); },                                               \
                                                  [](const ModelArgs& a) -> json { return a.key; } \
  }

const ConfigKey kConfigKeys[] = {
    ATTN_INT(dim),
    ATTN_INT(n_layers),
    ATTN_INT(n_heads),
    {"n_kv_heads", read_n_kv_heads, [](const ModelArgs& a) -> json { return a.n_kv_heads; }},
    ATTN_INT(vocab_size),
    ATTN_INT(multiple_of),
    {"ffn_dim_multiplier", read_ffn_dim_multiplier,
     [](const ModelArgs& a) -> json {
       return a.ffn_dim_multiplier ? json(*a.ffn_dim_multiplier) : json(nullptr);
     }},
    ATTN_NUMBER(norm_eps),
    ATTN_NUMBER(rope_theta),
    ATTN_INT(max_batch_size),
    ATTN_INT(max_seq_len),
    ATTN_INT(model_parallel_size),
    {"block", read_block, [](const ModelArgs& a) -> json { return block_name(a.block); }},
    {"rope",
     [](const Reader& r, ModelArgs& a) {
       r.choice("rope", a.rope,
                {{"interleaved", Rope::interleaved}, {"half", Rope::half}, {"none", Rope::none}});
     },
     [](const ModelArgs& a) -> json { return rope_name(a.rope); }},
    {"attention_bias",
     [](const Reader& r, ModelArgs& a) { boolean(r, "attention_bias", a.attention_bias); },
     [](const ModelArgs& a) -> json { return a.attention_bias; }},
    {"mask",
     [](const Reader& r, ModelArgs& a) {
       r.choice("mask", a.mask, {{"causal", Mask::causal}, {"none", Mask::none}});
     },
     [](const ModelArgs& a) -> json { return mask_name(a.mask); }},
    {"ffn_hidden", read_ffn_hidden, [](const ModelArgs& a) -> json { return a.ffn_hidden(); }},
    {"activation",
     [](const Reader& r, ModelArgs& a) {
       r.choice("activation", a.activation,
                {{"relu", Activation::relu}, {"gelu", Activation::gelu}});
     },
     [](const ModelArgs& a) -> json { return activation_name(a.activation); }},
    {"norm_first", [](const Reader& r, ModelArgs& a) { boolean(r, "norm_first", a.norm_first); },
     [](const ModelArgs& a) -> json { return a.norm_first; }},
    {"tie_word_embeddings",
     [](const Reader& r, ModelArgs& a) {
       boolean(r, "tie_word_embeddings", a.tie_word_embeddings);
     },
     [](const ModelArgs& a) -> json { return a.tie_word_embeddings; }},
    {"use_scaled_rope", read_use_scaled_rope,
     [](const ModelArgs& a) -> json { return a.rope_scaling.has_value(); }},
};

#undef ATTN_INT
#undef ATTN_NUMBER

void read_keys(const Reader& r, ModelArgs& a) {
  for (const ConfigKey& k : kConfigKeys) k.read(r, a);
}

// activation and norm_first shape torch's encoder layer only: on another block they would be
// silently dropped. (multiple_of and ffn_dim_multiplier stay quiet: every Meta ModelArgs, the
// notebooks' too, carries them whatever the block.)
void warn_unused_for_block(const Reader& r, const ModelArgs& a) {
  if (a.block == Block::encoder) return;
  std::vector<std::string> unused;
  for (const char* key : {"activation", "norm_first"})
    if (r.j.contains(key)) unused.push_back(key);
  if (!unused.empty())
    spdlog::warn("{}: {} ignored: only block \"encoder\" uses {}", r.source,
                 summarise(unused, unused.size() == 1 ? "key" : "keys"),
                 unused.size() == 1 ? "it" : "them");
}

std::set<std::string> model_args_keys() {
  std::set<std::string> known;
  for (const ConfigKey& k : kConfigKeys) known.insert(k.name);
  return known;
}

}  // namespace

ModelArgs read_meta_config(const Reader& r) {
  ModelArgs a;
  a.source = r.source;
  for (const char* key : {"dim", "n_heads"})
    if (!r.j.contains(key)) r.fail(key, "required key is missing");
  read_keys(r, a);
  validate(r, a);
  a.checkpoint_layers = a.n_layers;
  warn_unknown(r.j, r.source, model_args_keys());
  warn_unused_for_block(r, a);
  return a;
}

std::vector<std::pair<std::string, std::string>> config_values(const ModelArgs& a) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const ConfigKey& k : kConfigKeys) out.emplace_back(k.name, k.value(a).dump());
  return out;
}

}  // namespace attn
