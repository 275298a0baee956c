#pragma once
// ModelArgs as in Meta's llama model.py, read from JSON, with the tool's extensions.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace attn {

enum class Block { llama, attention, encoder };
enum class Rope { interleaved, half, none };
enum class Mask { causal, none };
enum class Activation { relu, gelu };

struct ModelArgs {
  std::int64_t dim = 4096;
  std::int64_t n_layers = 1;
  std::int64_t n_heads = 32;
  std::int64_t n_kv_heads = 32;  // null in JSON means n_heads
  std::int64_t vocab_size = -1;
  std::int64_t multiple_of = 256;
  std::optional<double> ffn_dim_multiplier;
  double norm_eps = 1e-5;
  double rope_theta = 500000;
  std::int64_t max_batch_size = 32;
  std::int64_t max_seq_len = 2048;
  std::int64_t model_parallel_size = 1;
  Block block = Block::llama;
  Rope rope = Rope::interleaved;
  bool attention_bias = false;
  Mask mask = Mask::causal;                  // "none" by default for block encoder
  std::int64_t ffn_hidden_set = 0;           // key ffn_hidden; 0: Meta's formula (2048 for encoder)
  Activation activation = Activation::relu;  // block encoder only
  bool norm_first = false;                   // block encoder only

  std::int64_t head_dim() const { return dim / n_heads; }
  std::int64_t n_rep() const { return n_heads / n_kv_heads; }
  std::int64_t ffn_hidden() const;  // ffn_hidden if set, else Meta's FeedForward hidden size
};

// The seed notebook's ModelArgs, run as the notebook runs it (block attention, rope none).
ModelArgs seed_args();

// One Llama-3-8B layer (configs/llama3-8b-layer.json): the benchmark's default workload.
ModelArgs llama3_8b_layer_args();

// Parses and validates; `source` names the file in messages. Throws InputError.
ModelArgs parse_config(const std::string& json_text, const std::string& source);
ModelArgs load_config(const std::filesystem::path& path);

const char* block_name(Block b);
const char* rope_name(Rope r);
const char* mask_name(Mask m);
const char* activation_name(Activation a);

}  // namespace attn
