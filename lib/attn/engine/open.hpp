#pragma once
// Opening a model as a user names it: the files found (a checkpoint file, a Hugging Face index
// or a folder holding one; the config and tokenizer beside it), the config with its overrides,
// the memory pre-flight with the weights' headers read and nothing mapped, then the weights, the
// runtime and the model. Every front builds its model here and nowhere else.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "attn/io/model_file.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/matrix.hpp"
#include "attn/model/config.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/model.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/weights.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

inline constexpr int kMaxThreads = 1024;  // as --threads takes

// What a user names: the model's files, the overrides and how to run it.
struct ModelSpec {
  std::filesystem::path weights;    // a safetensors file, an index, or a folder holding one;
                                    // a GGUF or a llama2.c checkpoint; empty: drawn from `seed`
  std::filesystem::path config;     // empty: config.json beside the weights, else the fallback
                                    // (a GGUF or llama2.c checkpoint is its own: none allowed)
  std::filesystem::path tokenizer;  // empty: tokenizer.json beside the config, if there (a
                                    // GGUF's own)
  ConfigOverrides overrides;
  std::optional<Mask> mask;  // none: the config's
  std::uint64_t seed = 42;   // of drawn weights
  // Drawn weights' matrix types: one model each (the benchmark compares them); a file's are its
  // own.
  std::vector<WeightType> drawn = {WeightType::f32};
  int threads = 0;  // < 1: one per core; at most kMaxThreads
  Compute compute = Compute::f32;
  Shard shard;  // model parallel: this rank's part
};

// The files a spec names, each found the one way: a folder's model.safetensors.index.json or
// model.safetensors; the config named, or config.json beside the weights; the tokenizer named, or
// tokenizer.json beside the config when it exists (empty: none). Weights that are a GGUF or a
// llama2.c checkpoint (by content) are the config too, a GGUF the tokenizer unless one is named;
// a config named beside them is refused naming both files. A config named that is not JSON is
// refused naming what it is.
struct ModelFiles {
  std::filesystem::path weights, config, tokenizer;
};

// What a spec names, opened once (llama.cpp's llama_model_loader): the files found, and the
// weights file opened, its format told from its first bytes; a GGUF parsed there once, so that
// the config, the tokenizer and the tensors all read it without opening it again.
struct OpenedModel {
  ModelFiles files;
  std::shared_ptr<const ModelFile> weights;  // this rank's weights file; null: none named
};
OpenedModel open_model(const ModelSpec& spec);

// The config (or `fallback()` when no file is named or found; without a fallback, InputError
// naming the setting "config") with the overrides and the mask applied, read from the opened
// weights file when it holds it. A Hugging Face config has no model_parallel_size: the number of
// ranks is it.
ModelArgs model_args(const ModelSpec& spec, const OpenedModel& model, ModelArgs (*fallback)());

// The tokenizer the files name (none when no tokenizer.json is named or beside the config), a
// GGUF's own from its parsed metadata.
std::optional<Tokenizer> open_tokenizer(const OpenedModel& model);

// The ends a run that feeds token ids builds of a token model (vocab_size > 0; none without
// one): the embeddings when the layers start at the checkpoint's first, the final norm and
// output head when they end at its last, or after a slice when `head` asks for them (a logit
// lens). A run of hidden states builds none (ModelEnds{}).
ModelEnds token_ends(const ModelArgs& args, bool head = false);

// A model checked before any allocation: the shard, the memory the run needs on this rank
// (one model per drawn type, or the file's), the weights' headers read and nothing mapped.
struct ModelPlan {
  ModelArgs args;
  RunShape shape;  // with the token model's ends the model is built with (shape.ends)
  std::optional<WeightsSource> weights;  // the file's, until load_model maps it
  bool drawn = true;                     // no file: spec.drawn's types
};
ModelPlan plan_model(ModelArgs args, const ModelSpec& spec, const OpenedModel& model,
                     RunShape shape, std::vector<MemoryPart> extra = {});

// The weights (mapped, or drawn in spec.drawn[drawn_index]'s type), the runtime and the model,
// sized for forward calls of up to plan.shape.max_rows rows.
Transformer load_model(ModelPlan& plan, const ModelSpec& spec, std::size_t drawn_index = 0);

}  // namespace attn
