// A llama2.c checkpoint's header as ModelArgs: the model run.c runs.
#include <algorithm>
#include <cstdlib>

#include "attn/io/llama2c.hpp"
#include "attn/model/arch.hpp"
#include "attn/model/config.hpp"
#include "attn/model/detail/config_checks.hpp"

namespace attn {

ModelArgs llama2c_config(const Llama2cHeader& h, const std::string& source) {
  ModelArgs a;
  a.source = source;
  a.format = ConfigFormat::llama2c;
  const Architecture& row = *find_architecture("llama");  // run.c's model, Meta's names
  a.block = row.block;
  a.dim = h.dim;
  a.ffn_hidden_set = h.hidden_dim;
  a.n_layers = h.n_layers;
  a.n_heads = h.n_heads;
  a.n_kv_heads = h.n_kv_heads;
  a.vocab_size = std::abs(std::int64_t(h.vocab_size));
  a.tie_word_embeddings = h.shared_classifier;
  a.max_position_embeddings = h.seq_len;
  a.max_seq_len = std::min<std::int64_t>(h.seq_len, kDefaultSeqLen);
  // run.c: rmsnorm's 1e-5f, RoPE's 10000.0f over adjacent pairs (Meta's interleaved).
  a.norm_eps = 1e-5;
  a.rope_theta = 10000;
  a.rope = row.rope(ConfigFormat::llama2c);
  finish_file_config(a);
  return a;
}

}  // namespace attn
