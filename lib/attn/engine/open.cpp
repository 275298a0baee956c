#include "attn/engine/open.hpp"

#include <stdexcept>
#include <system_error>

#include "attn/error.hpp"
#include "attn/io/format.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/text.hpp"
#include "attn/model/detail/slice.hpp"  // rank_path
#include "attn/text/llama_vocab.hpp"

namespace attn {

namespace fs = std::filesystem;

namespace {

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec) && !fs::is_directory(p, ec);
}

// A folder holds a Hugging Face checkpoint as it is published: the index over shards, or one file.
fs::path weights_in(const fs::path& dir) {
  for (const char* name : {"model.safetensors.index.json", "model.safetensors"})
    if (is_file(dir / name)) return dir / name;
  throw InputError(
      escape(dir.string()) + ": a folder without model.safetensors.index.json or model.safetensors",
      "weights");
}

// A GGUF or a llama2.c checkpoint holds its config (a GGUF its tokenizer too): the file is
// both, and a config named beside it is refused rather than silently preferred or ignored.
bool holds_config(FileFormat f) {
  return f == FileFormat::gguf || f == FileFormat::llama2c_checkpoint;
}

}  // namespace

OpenedModel open_model(const ModelSpec& spec) {
  OpenedModel m;
  ModelFiles& f = m.files;
  std::error_code ec;
  const fs::path mine = rank_path(spec.weights.string(), spec.shard.rank);  // "{rank}": its own
  if (!spec.weights.empty() && !fs::exists(mine, ec))
    throw InputError(escape(mine.string()) + ": no such file or folder", "weights");
  f.weights =
      !spec.weights.empty() && is_dir(spec.weights) ? weights_in(spec.weights) : spec.weights;
  const bool named = !f.weights.empty() && f.weights == spec.weights;  // not a folder's by name
  if (!f.weights.empty())
    m.weights =
        std::make_shared<const ModelFile>(open_model_file(named ? mine : f.weights, "weights"));
  const FileFormat kind = m.weights ? m.weights->format : FileFormat::unknown;
  if (named)  // a tokenizer or a config given as the weights is said so, before "no config"
    expect_format(kind, m.weights->source,
                  {FileFormat::safetensors, FileFormat::safetensors_index, FileFormat::gguf,
                   FileFormat::llama2c_checkpoint},
                  "model weights (safetensors, GGUF or a llama2.c checkpoint)");
  if (holds_config(kind)) {
    if (!spec.config.empty())
      throw InputError(escape(spec.config.string()) + ": no config is read beside " +
                           escape(f.weights.string()) + ", " + format_description(kind) +
                           " that holds its own",
                       "config");
    f.config = f.weights;
    f.tokenizer = spec.tokenizer.empty() && kind == FileFormat::gguf ? f.weights : spec.tokenizer;
    return m;
  }
  if (!spec.config.empty())
    expect_format(spec.config, {FileFormat::json},
                  "a config (a GGUF or a llama2.c checkpoint holds its own: name it as the "
                  "weights)");
  f.config = spec.config;
  if (f.config.empty() && !f.weights.empty()) {
    const fs::path beside = f.weights.parent_path() / "config.json";
    if (is_file(beside)) f.config = beside;
  }
  f.tokenizer = spec.tokenizer;
  if (f.tokenizer.empty() && !f.config.empty()) {
    const fs::path beside = f.config.parent_path() / "tokenizer.json";
    if (is_file(beside)) f.tokenizer = beside;
  }
  return m;
}

namespace {

// Whether `path` is the opened weights file itself (a GGUF or a llama2.c checkpoint is its own
// config, a GGUF its own tokenizer): read from it, not opened again.
bool is_weights(const OpenedModel& m, const fs::path& path) {
  return m.weights && !path.empty() && path == m.files.weights;
}

}  // namespace

ModelArgs model_args(const ModelSpec& spec, const OpenedModel& model, ModelArgs (*fallback)()) {
  const ModelFiles& files = model.files;
  if (files.config.empty() && !fallback)
    throw InputError(
        "no config: name one, or keep config.json beside the weights" +
            (files.weights.empty() ? std::string() : " (" + escape(files.weights.string()) + ")"),
        "config");
  ModelArgs args = files.config.empty()              ? fallback()
                   : is_weights(model, files.config) ? load_config(*model.weights)
                                                     : load_config(files.config);
  ConfigOverrides o = spec.overrides;
  if (args.format != ConfigFormat::meta && o.model_parallel_size == 0 && spec.shard.size > 1)
    o.model_parallel_size = spec.shard.size;
  apply_overrides(args, o);
  if (spec.mask) args.mask = *spec.mask;
  return args;
}

std::optional<Tokenizer> open_tokenizer(const OpenedModel& model) {
  const fs::path& path = model.files.tokenizer;
  if (path.empty()) return std::nullopt;
  if (is_weights(model, path) && model.weights->gguf)
    return tokenizer_from_gguf(*model.weights->gguf);
  return load_tokenizer(path);
}

ModelEnds token_ends(const ModelArgs& a, bool head) {
  return {a.vocab_size > 0 && a.has_first_layer(),
          a.vocab_size > 0 && (a.has_last_layer() || head)};
}

ModelPlan plan_model(ModelArgs args, const ModelSpec& spec, const OpenedModel& model,
                     RunShape shape, std::vector<MemoryPart> extra) {
  check_shard(args, spec.shard);
  if (spec.threads > kMaxThreads)  // each thread's scratch is counted: 10^6 would ask for GBs
    throw InputError("threads must be at most " + std::to_string(kMaxThreads) + ", got " +
                         std::to_string(spec.threads),
                     "threads");
  shape.threads = spec.threads < 1 ? cores() : spec.threads;
  shape.compute = spec.compute;
  std::optional<WeightsSource> source;
  std::vector<MemoryPart> parts = std::move(extra);
  if (model.weights) {
    source = WeightsSource{open_tensor_source(*model.weights),
                           is_per_rank_path(model.files.weights.string())};
    shape.matrices = matrix_types(args, *source, shape.ends);
    for (MemoryPart& p : memory_parts(args, shape, spec.shard)) parts.push_back(std::move(p));
  } else {
    for (const WeightType t : spec.drawn) {  // every drawn model at once, each in its own type
      check_drawable(t);
      RunShape typed = shape;
      typed.matrices = {t};
      const std::string prefix =
          spec.drawn.size() > 1 ? weight_type_name(t) + std::string(" ") : "";
      for (MemoryPart& p : memory_parts(args, typed, spec.shard))
        parts.push_back({prefix + p.name, p.bytes, p.reserved});
    }
  }
  check_memory(parts, available_memory(), args.source);
  const bool drawn = !source;
  return {std::move(args), std::move(shape), std::move(source), drawn};
}

Transformer load_model(ModelPlan& plan, const ModelSpec& spec, std::size_t drawn_index) {
  const ModelArgs& a = plan.args;
  if (!plan.drawn && !plan.weights) throw std::logic_error("load_model: the file is loaded once");
  const ModelEnds& ends = plan.shape.ends;
  TransformerWeights w = plan.drawn
                             ? seeded_weights(a, spec.seed, spec.shard, spec.drawn.at(drawn_index),
                                              ends, plan.shape.threads)
                             : load_weights(a, std::move(*plan.weights), spec.shard, ends);
  plan.weights.reset();
  return make_transformer(a, std::move(w), plan.shape.max_rows,
                          make_runtime(plan.shape.threads, kParallelFlops, "", spec.compute),
                          spec.shard);
}

}  // namespace attn
