#pragma once
// ModelArgs as in Meta's llama model.py, read from JSON, with the tool's extensions: the file's
// config. What a run makes of it (which ends of the model it builds: ModelEnds) is the run's.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/types.hpp"

namespace attn {

enum class Block { llama, attention, encoder };

// A norm of q and k before RoPE (the architecture row's): none, RMSNorm of each head with one
// head_dim weight (qwen3, gemma3).
enum class QkNorm { none, per_head, whole };  // whole: over all heads' q (k), olmo2

// The kind of file a config was read from, which names the keys its messages say (config_key):
// Meta's ModelArgs keys (JSON), Hugging Face's config.json, a GGUF's "{arch}.*" metadata, a
// llama2.c checkpoint's header fields. All but Meta's leave the batch and the model-parallel
// split to the run.
enum class ConfigFormat { meta, hugging_face, gguf, llama2c };

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
  std::int64_t head_dim_set = 0;             // Hugging Face's head_dim; 0: dim / n_heads
  bool attention_out_bias = true;  // with attention_bias, wo has one too (Qwen2's has none)
  std::int64_t first_layer = 0;    // the checkpoint's index of block 0 (--layers A:B)
  std::optional<RopeScaling> rope_scaling;
  // A GGUF's rope_freqs.weight [head_dim/2] (Llama 3.1's scaling as llama.cpp's converter stores
  // it): frequency i is divided by factor i. Empty: none.
  std::vector<float> rope_freq_factors;
  // Phi-3's LongRoPE (GGUF rope_factors_short/long.weight, [rope_dims/2] each): the short ones in
  // rope_freq_factors, the long ones here, run instead when the run's context (max_seq_len rounded
  // up to 256, as llama.cpp pads n_ctx) exceeds rope_original_context (rope_factors()).
  std::vector<float> rope_long_factors;
  std::int64_t rope_original_context = 0;
  // RoPE's magnitude (Phi-3's rope.scaling.attn_factor): cos and sin both times it.
  double rope_attn_factor = 1;
  // The leading dims of each head RoPE rotates (rope.dimension_count); the rest pass. 0: all.
  std::int64_t rope_dims = 0;
  QkNorm qk_norm = QkNorm::none;  // the architecture row's (arch.hpp)
  // OLMo 2's block: no norm before attention or the FFN, an RMSNorm of each one's output before
  // the residual add (post_attention_norm, post_ffn_norm). The row's.
  bool post_norms = false;
  // Granite's multipliers: the embeddings times embedding_scale, attention scores times
  // attention_scale (0: 1/sqrt(head_dim)), each block's attention and FFN output times
  // residual_scale before the residual add, the logits divided by logit_scale.
  double embedding_scale = 1, attention_scale = 0, residual_scale = 1, logit_scale = 1;
  // Mistral's (every layer's, refused when shorter than max_seq_len), or, with sliding_layers,
  // the window of those layers: a key at position j is hidden from the query at i when
  // i - j >= sliding_window (llama.cpp's LLAMA_SWA_TYPE_STANDARD), over a cache of every position.
  std::int64_t sliding_window = 0;
  // Gemma 2/3: by the checkpoint's layer index, 1 where the layer attends within sliding_window
  // (empty: no layer does). Those layers rotate with rope_theta_swa and rope_freq_scale_swa.
  std::vector<std::uint8_t> sliding_layers;
  double rope_theta_swa = 0, rope_freq_scale_swa = 1;
  // Linear RoPE scaling (rope.scaling.factor, Hugging Face's rope_type "linear"): every angle
  // times rope_freq_scale (1/factor), on the layers that do not slide.
  double rope_freq_scale = 1;
  // Gemma 2/3: the norms before attention and the FFN kept beside post_norms (pre_norms false:
  // OLMo 2's, after only), the FFN's gate through GELU's tanh form (GeGLU) instead of SiLU, and
  // soft-capping: attention scores (scaled, before the mask) and the logits become
  // cap * tanh(x / cap) (0: none).
  bool pre_norms = true;
  bool geglu = false;
  double attn_softcap = 0, final_softcap = 0;
  // Added to every RMSNorm weight at load: Hugging Face's Gemma stores w and multiplies by 1 + w
  // (llama.cpp's converter stores the sum). 0 for every other file.
  float norm_weight_offset = 0;
  // Where the config came from, for messages: the file (escaped) or "the built-in config". The
  // file's provenance, which every check of the config names: kept with it.
  std::string source = "the built-in config";
  // Not Meta's: messages name the file's keys, and the run sizes what it leaves out
  // (max_batch_size from the batch, model_parallel_size from mpirun's ranks).
  ConfigFormat format = ConfigFormat::meta;
  // The architecture's row (arch.hpp; empty: the block's Meta row), a GGUF's
  // general.architecture: its keys are "{arch}.*".
  std::string arch;
  // The file's context length (max_position_embeddings, {arch}.context_length, seq_len), before
  // the cache's default cap.
  std::int64_t max_position_embeddings = 0;
  // The file says no batch size (Hugging Face, GGUF, llama2.c): max_batch_size is a placeholder
  // that grows to the run's batch. Said of the file as `format` is, and cleared by the user's
  // max_batch_size override, so it stays with the config; the run only reads it.
  bool batch_from_run = false;
  // The token model (vocab_size > 0): tok_embeddings [vocab_size, dim] before block 0, norm
  // and output [vocab_size, dim] after the last (output is tok_embeddings when tied).
  bool tie_word_embeddings = false;
  std::int64_t checkpoint_layers = 0;  // the checkpoint's n_layers (--layers A:B keeps B-A)

  std::int64_t head_dim() const { return head_dim_set ? head_dim_set : dim / n_heads; }
  std::int64_t n_rep() const { return n_heads / n_kv_heads; }
  std::int64_t rotary_dims() const { return rope_dims ? rope_dims : head_dim(); }
  std::int64_t ffn_hidden() const;  // ffn_hidden if set, else Meta's FeedForward hidden size
  bool has_first_layer() const { return first_layer == 0; }
  // Does block l of this model (the checkpoint's first_layer + l) attend within sliding_window?
  bool slides(std::int64_t l) const {
    const std::int64_t i = first_layer + l;
    return i >= 0 && i < std::int64_t(sliding_layers.size()) && sliding_layers[std::size_t(i)];
  }
  bool has_last_layer() const {
    return checkpoint_layers == 0 || first_layer + n_layers == checkpoint_layers;
  }
};

// Which ends of a token model (vocab_size > 0) a run builds around its blocks: not the file's,
// which has them all, but the run's choice (engine/open.hpp's token_ends): a run of hidden states
// has neither; a --layers slice has the embeddings only if it starts at layer 0, the head only if
// it ends at the last or a logit lens asks for it. The weights read, the buffers, the hook points
// and the memory estimate follow it.
struct ModelEnds {
  bool tokens_in = false;   // tok_embeddings before block 0
  bool logits_out = false;  // norm and output after the last block
};

// The frequency factors a run divides RoPE's frequencies by: the long ones when its context
// (max_seq_len rounded up to 256, llama.cpp's padded n_ctx) exceeds rope_original_context, else
// rope_freq_factors (empty: none).
std::span<const float> rope_factors(const ModelArgs& a);

// The seed notebook's ModelArgs, run as the notebook runs it (block attention, rope none).
ModelArgs seed_args();

// One Llama-3-8B layer (configs/llama3-8b-layer.json): the benchmark's default workload.
ModelArgs llama3_8b_layer_args();

// Parses and validates; `source` names the file in messages. Throws InputError.
ModelArgs parse_config(const std::string& json_text, const std::string& source);
// A config by its content: a JSON file (Meta's keys, config_meta.cpp, or Hugging Face's
// config.json -- LlamaConfig, MistralConfig, Qwen2Config keys, recognised by hidden_size -- read
// as the ModelArgs it describes with its model_type's row of arch.hpp, config_hf.cpp), a GGUF model
// file (its metadata, gguf_config) or a llama2.c checkpoint (its header, llama2c_config). Anything
// else: InputError naming what the file is.
ModelArgs load_config(const std::filesystem::path& path);
// The same from a model file opened once (io/model_file.hpp): a GGUF's parsed metadata, a
// llama2.c header from the bytes read, a JSON config read through the open descriptor.
struct ModelFile;
ModelArgs load_config(const ModelFile& file);

struct GgufFile;
struct Llama2cHeader;
// A GGUF's metadata as ModelArgs (config_gguf.cpp): a general.architecture of the architecture
// table (arch.hpp) and its "{arch}.*" keys, read as llama.cpp reads them (its defaults where a key
// is absent), with the tensor list for what the keys do not say (biases, a tied head). Throws
// InputError naming the file and the GGUF key.
ModelArgs gguf_config(const GgufFile& file);
// A llama2.c checkpoint's header as ModelArgs (run.c's model: RMSNorm eps 1e-5, RoPE base
// 10000 on adjacent pairs). `source` names the file.
ModelArgs llama2c_config(const Llama2cHeader& header, const std::string& source);

// What the command line may change after the config is read: the cache's size (a hub config's
// max_position_embeddings can be 131072) and the range of the checkpoint's layers to run.
struct ConfigOverrides {
  std::int64_t max_seq_len = 0, max_batch_size = 0;  // 0: keep the config's
  std::int64_t layer_begin = 0, layer_end = -1;      // [begin, end); end -1: all
  std::int64_t model_parallel_size = 0;              // 0: the config's (or mpirun's, for HF)
};
// Throws InputError naming args.source and the option, with the option as its setting.
void apply_overrides(ModelArgs& args, const ConfigOverrides& o);

// The key a message about `meta_key` names: the file's own (Hugging Face's "hidden_size", a
// GGUF's "llama.embedding_length", a llama2.c header's "dim" for "dim"); a key such a file has
// none of keeps its name ("max_batch_size").
std::string config_key(const ModelArgs& args, const std::string& meta_key);

// Every config key with its value as JSON text, from the table parsing reads them with: the
// config event prints these.
std::vector<std::pair<std::string, std::string>> config_values(const ModelArgs& args);

const char* block_name(Block b);
const char* rope_name(Rope r);
const char* mask_name(Mask m);
// "causal" or "none"; anything else: InputError naming `what` and the choices.
Mask parse_mask(std::string_view name, const std::string& what = "mask");
const char* activation_name(Activation a);

}  // namespace attn
