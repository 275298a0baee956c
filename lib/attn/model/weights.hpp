#pragma once
// The block's weights as views (llama2.c's TransformerWeights). Matrices keep the file's weight
// type (weight_type.hpp) and point into the mapped file (a rank's block of a whole file's matrix
// too: its columns with a stride); vectors (norms, biases) are read as F32, converted once at
// load. What cannot be a view of the file lives in `owned` (F32: vectors converted from other
// types, blocks of misaligned tensors, seeded tensors) or `owned_blocks` (misaligned matrices of
// other types, seeded matrices of other types, in their bytes).
// Layouts are nn.Linear's [out_features, in_features], row-major.
#include <cstdint>
#include <filesystem>
#include <vector>

#include <memory>

#include "attn/io/safetensors.hpp"  // not used here: callers read inputs and dumps through it
#include "attn/io/tensor_source.hpp"
#include "attn/matrix.hpp"
#include "attn/model/arch.hpp"
#include "attn/model/config.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/tensors.hpp"

namespace attn {

struct LayerWeights {
  const float* attention_norm = nullptr;  // [dim], block llama
  Matrix wq;                              // [n_heads * head_dim, dim]
  Matrix wk;                              // [n_kv_heads * head_dim, dim]
  Matrix wv;                              // [n_kv_heads * head_dim, dim]
  Matrix wo;                              // [dim, n_heads * head_dim]
  const float* bq = nullptr;              // [n_heads * head_dim], attention_bias
  const float* bk = nullptr;              // [n_kv_heads * head_dim]
  const float* bv = nullptr;              // [n_kv_heads * head_dim]
  const float* bo = nullptr;              // [dim]
  const float* q_norm = nullptr;          // [head_dim]: each head's RMSNorm (QkNorm::per_head)
  const float* k_norm = nullptr;          // [head_dim]
  // OLMo 2 (post_norms): the attention's and FFN's outputs' RMSNorms, [dim] each.
  const float* post_attention_norm = nullptr;
  const float* post_ffn_norm = nullptr;
  const float* ffn_norm = nullptr;  // [dim], block llama
  Matrix w1;                        // [ffn_hidden, dim]
  Matrix w2;                        // [dim, ffn_hidden]
  Matrix w3;                        // [ffn_hidden, dim]
  // Block encoder (torch's norm1, norm2, linear1.bias, linear2.bias); attention_norm, ffn_norm,
  // w1 and w2 above are its other halves.
  const float* attention_norm_bias = nullptr;  // [dim]
  const float* ffn_norm_bias = nullptr;        // [dim]
  const float* b1 = nullptr;                   // [ffn_hidden]
  const float* b2 = nullptr;                   // [dim]
};

// The token model around the blocks, as a run that feeds token ids uses it (ModelEnds'
// tokens_in, logits_out): Meta's tok_embeddings, norm and output.
struct TokenWeights {
  Matrix tok_embeddings;        // [vocab_size, dim]: row t is token t's input
  const float* norm = nullptr;  // [dim]: the RMSNorm after the last block
  Matrix output;                // [vocab_size, dim]: tok_embeddings itself when tied
};

struct TransformerWeights {
  std::vector<LayerWeights> layers;
  TokenWeights tokens;
  ModelEnds ends;  // the token model's tensors held: the Transformer built on these has them
  std::unique_ptr<TensorSource> tensors;  // the mapped file(s) the views point into
  std::vector<std::vector<float>> owned;
  std::vector<std::vector<std::uint8_t>> owned_blocks;
  std::uint64_t bytes = 0;  // bytes of all tensors the block reads, as they are stored
  bool halves = false;      // some matrix is not F32
  bool blocks = false;      // some matrix is quantized (ggml's blocks)
};

// The tensors of layer l (the checkpoint's layer args.first_layer + l), their views going to
// `layer`'s fields, in args' shapes (a rank's local_args for its slice): the one list that
// loading, seeding, the memory estimate and the benchmark's shapes and FLOP count all read.
std::vector<TensorSpec> layer_tensor_specs(const ModelArgs& args, LayerWeights& layer,
                                           std::int64_t l = 0);

// The token model's tensors the run uses (none unless ends.tokens_in or ends.logits_out):
// tok_embeddings, norm, output, under Meta's names (Hugging Face's: model.embed_tokens, model.norm,
// lm_head). Tied, output's view is tok_embeddings' (read under that name when the run has no
// embeddings).
std::vector<TensorSpec> token_tensor_specs(const ModelArgs& args, const ModelEnds& ends,
                                           TokenWeights& t);

// Every tensor the config needs, in file order (layer by layer); with a shard, its rank's slice.
std::vector<TensorSpec> tensor_specs(const ModelArgs& args, std::vector<LayerWeights>& layers,
                                     const Shard& shard = {});

// Maps the file (or a Hugging Face index's files) and checks every tensor against the config.
// Tensors are found under the names the config's architecture row gives them (arch.hpp): Meta's,
// Hugging Face's (model.layers.{l}.self_attn.q_proj...) or llama.cpp's, or as rows of a fused
// tensor the row lists; layer l of the model being layer args.first_layer + l of the checkpoint.
// Throws InputError naming the file, the tensor, what was expected and what was found. With a
// shard: a path containing
// "{rank}" names per-rank files, each holding its rank's slice in Meta's per-rank shapes
// (consolidated.0{rank}.pth); any other path is the whole model, of which each rank reads only its
// slice. `ends`: the token model's tensors read besides the blocks' (none: a model of hidden
// states), recorded in the weights' `ends`.
TransformerWeights load_weights(const ModelArgs& args, const std::filesystem::path& path,
                                const Shard& shard = {}, const ModelEnds& ends = {});

// A weights path as load_weights opens it (a "{rank}" path: this rank's file), with nothing
// mapped yet, so that the memory estimate can read the matrices' types first (matrix_types)
// and the load then maps the files without parsing their headers again.
struct WeightsSource {
  std::unique_ptr<TensorSource> tensors;  // opened by open_tensor_source: any format it reads
  bool per_rank = false;                  // the file holds this rank's slice as it is
};
WeightsSource open_weights(const std::filesystem::path& path, const Shard& shard = {});
TransformerWeights load_weights(const ModelArgs& args, WeightsSource source,
                                const Shard& shard = {}, const ModelEnds& ends = {});
// The same under the names of `arch` rather than those of args' row (architecture_of).
TransformerWeights load_weights(const ModelArgs& args, WeightsSource source, const Shard& shard,
                                const Architecture& arch, const ModelEnds& ends = {});

// The types the config's weight matrices are held in, each once, read from the files' headers
// (no file is mapped). A dtype the load will refuse counts as F32; a missing tensor, not at all.
std::vector<WeightType> matrix_types(const ModelArgs& args, WeightsSource& source,
                                     const ModelEnds& ends = {});

// Weights drawn deterministically from seed: nn.Linear's U(-1/sqrt(in), 1/sqrt(in)) for
// matrices and biases, ones for norms.
// With a shard, each rank draws only its slice of the same whole model. matrices: a type other
// than F32 draws each matrix's F32 values and stores them in the type (traits' from_f32: BF16
// and F16 rounded to nearest even). `ends` as load_weights takes them.
// Refuses (InputError, setting weight_types) a type weights cannot be drawn in: one without a
// quantizer (traits' from_f32), such as the K-quants, which are read from files only.
void check_drawable(WeightType matrices);

// threads: the threads a tensor over 4 M values is drawn on (< 1: one per core); the values are
// the same bits on any count.
TransformerWeights seeded_weights(const ModelArgs& args, std::uint64_t seed,
                                  const Shard& shard = {}, WeightType matrices = WeightType::f32,
                                  const ModelEnds& ends = {}, int threads = 0);

}  // namespace attn
