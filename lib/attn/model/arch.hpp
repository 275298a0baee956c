#pragma once
// The architecture table (llama.cpp's llm_arch and LLM_TENSOR_NAMES as one row each): every
// architecture the engine runs is a row saying what its files call it, how its config reads
// (RoPE per file format, biases), which block runs it and what its tensors are called in each
// file format. The config readers, the weights' name lookup and the model's block choice read
// the row; adding an architecture is adding its row (and a block or operation it needs that the
// model and kernels do not have yet).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "attn/model/config.hpp"
#include "attn/types.hpp"

namespace attn {

// How a checkpoint names its tensors: Meta's (llama2.c's checkpoint is read under Meta's names),
// Hugging Face's, llama.cpp's (GGUF). Meta's names are also the model's own: a TensorSpec's.
enum class Naming { meta, hf, gguf };

// One tensor under each naming: a layer's after the layer prefix and its index ("layers.3."),
// the token model's whole. Null: that naming has none.
struct TensorNames {
  const char* meta;
  const char* hf;
  const char* gguf;

  const char* in(Naming n) const { return n == Naming::meta ? meta : n == Naming::hf ? hf : gguf; }
};

// A layer tensor some files store as several of the model's stacked by rows (phi3's attn_qkv,
// q then k then v; a fused gate/up ffn_up): `parts` are the model's tensors (Meta's names after
// the layer prefix) in row order, each taking as many rows as its own shape has, so part i starts
// at the sum of the earlier parts' rows. The load reads each part as a view of those rows.
struct FusedTensor {
  TensorNames names;  // the fused tensor's name under each naming that stores it so
  std::span<const char* const> parts;
};

// The names an architecture's files give its tensors.
struct TensorTable {
  const char* layer_prefix[3];  // by Naming: "layers.", "model.layers.", "blk."
  std::span<const TensorNames> layer;
  std::span<const TensorNames> token;  // the token model's: embeddings, final norm, head
  std::span<const FusedTensor> fused;  // empty: every tensor is stored on its own
};

enum class Norm { rms, layer, none };

struct Architecture {
  // The row's name, which a config's ModelArgs::arch holds; a GGUF's general.architecture for a
  // row GGUF files hold (its metadata keys are "{name}.*").
  const char* name;
  bool meta_block;  // chosen in Meta's params.json by the tool's key "block": name
  bool gguf;        // read from a GGUF whose general.architecture is `name`
  // Hugging Face's config.json: its model_type, else (without one) its architectures' class.
  std::span<const char* const> hf_model_types;
  std::span<const char* const> hf_classes;
  Block block;  // the block the model runs for it
  Norm norm;    // its block's norm (a row with another norm is a new block)
  // How its q/k rows are stored, by the file format they come from: Meta's (and llama.cpp's
  // llama, whose converter puts the rows back in Meta's order) rotate adjacent pairs, Hugging
  // Face's halves (LLAMA_ROPE_TYPE_NORM and _NEOX). Meta's holds for llama2.c's.
  Rope meta_rope, hf_rope, gguf_rope;
  // The attention's biases unless the config says otherwise: q, k and v's; o's beside them.
  bool qkv_bias, out_bias;
  const TensorTable* tensors;
  bool post_norms = false;        // the llama block with its norms after attention and FFN (olmo2)
  QkNorm qk_norm = QkNorm::none;  // q and k normed before RoPE (their norms' tensors in `tensors`)
  bool pre_norms = true;          // norms before attention and FFN (false: olmo2, after only)
  // Gemma's: GeGLU, embeddings times sqrt(dim), soft-capping, sliding layers (read by the config
  // readers from the file's keys), and Hugging Face's norm weights stored as w for 1 + w.
  bool gemma = false;

  Rope rope(ConfigFormat f) const {
    return f == ConfigFormat::hugging_face ? hf_rope
           : f == ConfigFormat::gguf       ? gguf_rope
                                           : meta_rope;
  }
};

// Every row, in the order messages list them.
std::span<const Architecture> architectures();

// The row named `name`; null if none.
const Architecture* find_architecture(std::string_view name);

// The row a config's ModelArgs describe: args.arch's, else (a config that names none: Meta's
// JSON, llama2.c's header, a ModelArgs built in code) its block's Meta row.
const Architecture& architecture_of(const ModelArgs& args);

// The names of the rows `holds` selects, for a message: "llama, mistral or qwen2".
template <typename Pred>
std::string architecture_names(Pred holds) {
  std::string out, last;
  for (const Architecture& a : architectures()) {
    if (!holds(a)) continue;
    if (!last.empty()) out += (out.empty() ? "" : ", ") + last;
    last = a.name;
  }
  return out.empty() ? last : out + " or " + last;
}

}  // namespace attn
