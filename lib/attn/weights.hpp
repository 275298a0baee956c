#pragma once
// The block's weights as views (llama2.c's TransformerWeights): F32 tensors point into the
// mapped file; F16/BF16 (converted once at load), misaligned F32 and seeded tensors live in
// `owned`. Layouts are nn.Linear's [out_features, in_features], row-major.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "attn/checkpoint.hpp"
#include "attn/config.hpp"
#include "attn/parallel.hpp"
#include "attn/safetensors.hpp"

namespace attn {

struct LayerWeights {
  const float* attention_norm = nullptr;  // [dim], block llama
  const float* wq = nullptr;              // [n_heads * head_dim, dim]
  const float* wk = nullptr;              // [n_kv_heads * head_dim, dim]
  const float* wv = nullptr;              // [n_kv_heads * head_dim, dim]
  const float* wo = nullptr;              // [dim, n_heads * head_dim]
  const float* bq = nullptr;              // [n_heads * head_dim], attention_bias
  const float* bk = nullptr;              // [n_kv_heads * head_dim]
  const float* bv = nullptr;              // [n_kv_heads * head_dim]
  const float* bo = nullptr;              // [dim]
  const float* ffn_norm = nullptr;        // [dim], block llama
  const float* w1 = nullptr;              // [ffn_hidden, dim]
  const float* w2 = nullptr;              // [dim, ffn_hidden]
  const float* w3 = nullptr;              // [ffn_hidden, dim]
  // Block encoder (torch's norm1, norm2, linear1.bias, linear2.bias); attention_norm, ffn_norm,
  // w1 and w2 above are its other halves.
  const float* attention_norm_bias = nullptr;  // [dim]
  const float* ffn_norm_bias = nullptr;        // [dim]
  const float* b1 = nullptr;                   // [ffn_hidden]
  const float* b2 = nullptr;                   // [dim]
};

struct TransformerWeights {
  std::vector<LayerWeights> layers;
  Checkpoint checkpoint;  // the mapped file(s) the views point into
  std::vector<std::vector<float>> owned;
  std::uint64_t bytes = 0;  // f32 bytes of all tensors the block reads
};

// One expected tensor: its name, shape, and where its view goes.
struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  const float** slot;
  // Model parallel: `shape` is this rank's block of the whole tensor `full` (empty: the whole
  // tensor), its rows from row0 (wq/wk/wv/w1/w3 and their biases) or its columns from col0
  // (wo, w2).
  std::vector<std::int64_t> full = {};
  std::int64_t row0 = 0, col0 = 0;
};

// The tensors of layer l (the checkpoint's layer args.first_layer + l), their views going to
// `layer`'s fields, in args' shapes (a rank's local_args for its slice): the one list that
// loading, seeding, the memory estimate and the benchmark's shapes and FLOP count all read.
std::vector<TensorSpec> layer_tensor_specs(const ModelArgs& args, LayerWeights& layer,
                                           std::int64_t l = 0);

// Every tensor the config needs, in file order (layer by layer); with a shard, its rank's slice.
std::vector<TensorSpec> tensor_specs(const ModelArgs& args, std::vector<LayerWeights>& layers,
                                     const Shard& shard = {});

// Maps the file (or a Hugging Face index's files) and checks every tensor against the config.
// Tensors are found under Meta's names or Hugging Face's (model.layers.{l}.self_attn.q_proj...),
// layer l of the model being layer args.first_layer + l of the checkpoint. Throws InputError naming
// the file, the tensor, what was expected and what was found. With a shard: a path containing
// "{rank}" names per-rank files, each holding its rank's slice in Meta's per-rank shapes
// (consolidated.0{rank}.pth); any other path is the whole model, of which each rank reads only its
// slice.
TransformerWeights load_weights(const ModelArgs& args, const std::filesystem::path& path,
                                const Shard& shard = {});

// Weights drawn deterministically from seed: nn.Linear's U(-1/sqrt(in), 1/sqrt(in)) for
// matrices and biases, ones for norms.
// With a shard, each rank draws only its slice of the same whole model.
TransformerWeights seeded_weights(const ModelArgs& args, std::uint64_t seed,
                                  const Shard& shard = {});

}  // namespace attn
