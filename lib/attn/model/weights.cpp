#include "attn/model/weights.hpp"

#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/kernels/buffer.hpp"
#include "attn/kernels/kernels.hpp"
#include "attn/kernels/pool.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/arch.hpp"
#include "attn/model/detail/slice.hpp"
#include "attn/model/finite.hpp"
#include "attn/model/rng.hpp"

namespace attn {

namespace {

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void add_attention(const ModelArgs& a, const std::string& p, LayerWeights& w,
                   std::vector<TensorSpec>& s) {
  const std::int64_t q = a.n_heads * a.head_dim(), kv = a.n_kv_heads * a.head_dim();
  s.push_back({p + "attention.wq.weight", {q, a.dim}, &w.wq});
  s.push_back({p + "attention.wk.weight", {kv, a.dim}, &w.wk});
  s.push_back({p + "attention.wv.weight", {kv, a.dim}, &w.wv});
  s.push_back({p + "attention.wo.weight", {a.dim, q}, &w.wo});
  if (a.qk_norm == QkNorm::per_head) {  // one weight for every head: not sliced by rank
    s.push_back({p + "attention.q_norm.weight", {a.head_dim()}, &w.q_norm});
    s.push_back({p + "attention.k_norm.weight", {a.head_dim()}, &w.k_norm});
  } else if (a.qk_norm == QkNorm::whole) {
    s.push_back({p + "attention.q_norm.weight", {q}, &w.q_norm});
    s.push_back({p + "attention.k_norm.weight", {kv}, &w.k_norm});
  }
  if (!a.attention_bias) return;
  // A GGUF's biases are per layer (llama.cpp loads each as not required); other files state
  // them for every layer, and a missing one is refused.
  const bool optional = a.format == ConfigFormat::gguf;
  s.push_back({p + "attention.wq.bias", {q}, &w.bq, {}, 0, 0, optional});
  s.push_back({p + "attention.wk.bias", {kv}, &w.bk, {}, 0, 0, optional});
  s.push_back({p + "attention.wv.bias", {kv}, &w.bv, {}, 0, 0, optional});
  if (a.attention_out_bias)
    s.push_back({p + "attention.wo.bias", {a.dim}, &w.bo, {}, 0, 0, optional});
}

void add_feed_forward(const ModelArgs& a, const std::string& p, LayerWeights& w,
                      std::vector<TensorSpec>& s) {
  const std::int64_t h = a.ffn_hidden();
  if (a.pre_norms) {
    s.push_back({p + "attention_norm.weight", {a.dim}, &w.attention_norm});
    s.push_back({p + "ffn_norm.weight", {a.dim}, &w.ffn_norm});
  }
  if (a.post_norms) {
    s.push_back({p + "post_attention_norm.weight", {a.dim}, &w.post_attention_norm});
    s.push_back({p + "post_ffn_norm.weight", {a.dim}, &w.post_ffn_norm});
  }
  s.push_back({p + "feed_forward.w1.weight", {h, a.dim}, &w.w1});
  s.push_back({p + "feed_forward.w2.weight", {a.dim, h}, &w.w2});
  s.push_back({p + "feed_forward.w3.weight", {h, a.dim}, &w.w3});
}

// Where a spec's tensor is in a checkpoint, by the architecture's names (arch.hpp) under each
// naming: its own tensor, or its rows of a fused one (whose parts' rows the load finds in the
// specs). A checkpoint may hold either naming; messages name a tensor as its checkpoint does
// (Meta's where a naming has none: the encoder's).
struct Stored {
  std::string name;                    // the checkpoint's tensor (Meta's name if it has none)
  const FusedTensor* fused = nullptr;  // name is this fused tensor, holding the spec's rows
  std::string layer = {};              // then: the spec's layer prefix, Meta's ("layers.3.")
};

// A Meta layer tensor's name split after "layers.{l}.": the prefix and the rest; {"", name}
// for the token model's.
std::pair<std::string, std::string> split_layer(const std::string& meta) {
  const std::size_t dot = meta.find('.', 7);  // after "layers."
  if (!meta.starts_with("layers.") || dot == std::string::npos) return {"", meta};
  return {meta.substr(0, dot + 1), meta.substr(dot + 1)};
}

// "layers.3." in a naming: "model.layers.3." (hf), "blk.3." (gguf).
std::string layer_in(const TensorTable& t, const std::string& layer, Naming naming) {
  return t.layer_prefix[int(naming)] + layer.substr(7);
}

// "layers.3.attention.wq.weight" -> "model.layers.3.self_attn.q_proj.weight" (hf) or
// "blk.3.attn_q.weight" (gguf): the tensor's own name in the naming; "" if it has none.
std::string name_in(const TensorTable& t, const std::string& meta, Naming naming) {
  if (naming == Naming::meta) return meta;
  const auto [layer, rest] = split_layer(meta);
  for (const TensorNames& n : layer.empty() ? t.token : t.layer)
    if (rest == n.meta)
      return !n.in(naming)   ? ""
             : layer.empty() ? n.in(naming)
                             : layer_in(t, layer, naming) + n.in(naming);
  return "";
}

// The fused tensor holding a layer tensor in the naming, and its name there ("" and null: none).
std::pair<std::string, const FusedTensor*> fused_in(const TensorTable& t, const std::string& meta,
                                                    Naming naming) {
  const auto [layer, rest] = split_layer(meta);
  if (layer.empty()) return {"", nullptr};
  for (const FusedTensor& f : t.fused)
    for (const char* part : f.parts)
      if (rest == part && f.names.in(naming))
        return {(naming == Naming::meta ? layer : layer_in(t, layer, naming)) + f.names.in(naming),
                &f};
  return {"", nullptr};
}

constexpr Naming kNamings[] = {Naming::meta, Naming::hf, Naming::gguf};

// The checkpoint's tensor for a spec: its own under Meta's name, else Hugging Face's, else
// llama.cpp's; else a fused one holding it, in the same order.
Stored locate(const TensorTable& t, const TensorSource& c, const std::string& meta) {
  for (const Naming naming : kNamings) {
    const std::string name = name_in(t, meta, naming);
    if (!name.empty() && c.contains(name)) return {name};
  }
  for (const Naming naming : kNamings) {
    const auto [name, fused] = fused_in(t, meta, naming);
    if (fused && c.contains(name)) return {name, fused, split_layer(meta).first};
  }
  return {meta};
}

// How a checkpoint names its layers' tensors: it is told about them in those names.
Naming naming_of(const TensorTable& t, const TensorSource& c) {
  const std::vector<std::string> names = c.names();
  for (const Naming naming : {Naming::hf, Naming::gguf}) {
    const char* prefix = t.layer_prefix[int(naming)];
    const auto it = std::lower_bound(names.begin(), names.end(), prefix);
    if (it != names.end() && it->starts_with(prefix)) return naming;
  }
  return Naming::meta;
}

[[noreturn]] void missing_tensor(const TensorTable& t, const TensorSource& c,
                                 const std::string& meta, const std::vector<std::int64_t>& shape,
                                 const ModelArgs& args) {
  const Naming naming = naming_of(t, c);
  std::string name = name_in(t, meta, naming);
  if (name.empty()) name = fused_in(t, meta, naming).first;
  if (name.empty()) name = meta;
  throw InputError(c.source() + ": tensor " + attn::quoted(name) + " is missing (expected shape " +
                   shape_text(shape) + "; " + args.source + " has " +
                   std::to_string(args.first_layer + args.n_layers) + " layers)");
}

// The last layer's tensors are looked up first: a config with 2^24 layers beside a 2-layer file
// is refused before every layer's specs are built.
void check_last_layer(const ModelArgs& args, const TensorTable& t, const TensorSource& c) {
  LayerWeights unused;
  for (const TensorSpec& s : layer_tensor_specs(args, unused, args.n_layers - 1))
    if (!s.optional && !c.contains(locate(t, c, s.name).name))
      missing_tensor(t, c, s.name, s.shape, args);
}

// torch's TransformerEncoderLayer: norm1, norm2, linear1, linear2 (CONTRACT section 2).
void add_encoder(const ModelArgs& a, const std::string& p, LayerWeights& w,
                 std::vector<TensorSpec>& s) {
  const std::int64_t h = a.ffn_hidden();
  s.push_back({p + "attention_norm.weight", {a.dim}, &w.attention_norm});
  s.push_back({p + "attention_norm.bias", {a.dim}, &w.attention_norm_bias});
  s.push_back({p + "ffn_norm.weight", {a.dim}, &w.ffn_norm});
  s.push_back({p + "ffn_norm.bias", {a.dim}, &w.ffn_norm_bias});
  s.push_back({p + "feed_forward.w1.weight", {h, a.dim}, &w.w1});
  s.push_back({p + "feed_forward.w1.bias", {h}, &w.b1});
  s.push_back({p + "feed_forward.w2.weight", {a.dim, h}, &w.w2});
  s.push_back({p + "feed_forward.w2.bias", {a.dim}, &w.b2});
}

// The whole pages of [p, p + bytes) mapped in one system call rather than a page fault each (a
// notebook config's weights are a few hundred pages, which the load writes at once; issue 52).
// Where the kernel has no MADV_POPULATE_WRITE (before 5.14) the faults happen as before. Not for
// large buffers: a team of threads draws them, and each thread's first touch places its pages
// on its own NUMA node.
void populate_pages(void* p, std::size_t bytes) noexcept {
#ifdef MADV_POPULATE_WRITE
  if (bytes > (std::size_t(16) << 20)) return;
  const std::uintptr_t page = 4096, first = (std::uintptr_t(p) + page - 1) / page * page,
                       end = (std::uintptr_t(p) + bytes) / page * page;
  if (end > first) madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

// A new buffer of n elements at the end of `owned` (zeros), on huge pages where the kernel gives
// them (advise_huge_pages): asked for before the elements are first written.
template <class T>
std::vector<T>& weight_storage(std::vector<std::vector<T>>& owned, std::size_t n) {
  std::vector<T>& v = owned.emplace_back();
  v.reserve(n);
  advise_huge_pages(v.data(), n * sizeof(T));
  populate_pages(v.data(), n * sizeof(T));
  v.resize(n);
  return v;
}

// A vector, or a rank's slice of any tensor, as F32 (a view or converted into w.owned).
const float* f32_view(const SourceTensor& t, const std::string& name, const TensorSpec& s,
                      TransformerWeights& w) {
  std::vector<float> storage;
  const float* p =
      s.full.empty() ? tensor_as_f32(t, name, storage) : slice_as_f32(t, name, s, storage);
  if (!storage.empty()) w.owned.push_back(std::move(storage));
  return p;
}

// A matrix's rows must be whole blocks of its type, and a rank's columns start on one.
void check_blocks(const std::string& source, const std::string& name, const TensorSpec& s,
                  WeightType type) {
  const WeightTypeTraits& t = traits(type);
  const std::int64_t cols = s.shape[1];
  if (cols % t.block == 0 && s.col0 % t.block == 0) return;
  throw InputError(source + ": tensor " + attn::quoted(name) + ": " + t.name +
                   " rows are blocks of " + std::to_string(t.block) + " weights, but " +
                   (cols % t.block ? "the rows hold " + std::to_string(cols)
                                   : "this rank's columns start at " + std::to_string(s.col0)));
}

// A matrix (or a rank's block of one, spec.full) as the file stores it: a view of the mapping,
// a rank's columns strided (ld: the whole row). Misaligned, a matrix of a type other than F32
// (or the rank's block of it, dense) is copied once as it is, in the bytes the memory estimate
// counts; anything else goes through f32_view (which also refuses dtypes no weight type reads,
// naming file and tensor).
Matrix matrix_view(const SourceTensor& t, const std::string& name, const TensorSpec& s,
                   TransformerWeights& w) {
  const std::uint8_t* src = t.data;
  const std::optional<WeightType> type = t.type;
  if (type) check_blocks(t.file, name, s, *type);
  if (type && reinterpret_cast<std::uintptr_t>(src) % weight_alignment(*type) == 0) {
    if (s.full.empty()) return {src, *type};
    const Matrix block = Matrix{src, *type}.at(index_in_full(s, 0, 0));
    return {block.data, *type, s.full[1] != s.shape[1] ? s.full[1] : 0};
  }
  if (!type || *type == WeightType::f32) return {f32_view(t, name, s, w), WeightType::f32};
  const std::int64_t rows = s.shape[0], cols = s.shape[1];  // [rows, cols]: the rank's block
  const std::int64_t row_bytes = std::int64_t(weight_bytes(*type, cols, t.file));
  std::vector<std::uint8_t>& copy = weight_storage(w.owned_blocks, std::size_t(rows * row_bytes));
  const Matrix whole{src, *type};
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t first = s.full.empty() ? r * cols : index_in_full(s, r, 0);
    std::memcpy(copy.data() + r * row_bytes, whole.at(first).data, std::size_t(row_bytes));
  }
  return {copy.data(), *type};
}

bool is_token_tensor(const TensorTable& t, const std::string& name) {
  for (const TensorNames& n : t.token)
    for (const Naming naming : kNamings)
      if (n.in(naming) && name == n.in(naming)) return true;
  return false;
}

bool is_norm_bias(const TensorSpec& s) {
  return s.name.ends_with("norm.bias");
}

bool is_norm(const TensorSpec& s) {
  return s.name.ends_with("norm.weight");
}

// A norm weight as the model multiplies by it: the stored one plus the config's offset (Hugging
// Face's Gemma stores w for 1 + w), in a copy of its own.
const float* offset_norm(const float* stored, const TensorSpec& s, float offset,
                         TransformerWeights& w) {
  std::vector<float>& t = w.owned.emplace_back(stored, stored + s.shape[0]);
  for (float& v : t) v += offset;
  return t.data();
}

}  // namespace

std::vector<TensorSpec> layer_tensor_specs(const ModelArgs& args, LayerWeights& layer,
                                           std::int64_t l) {
  std::vector<TensorSpec> specs;
  const std::string prefix = "layers." + std::to_string(args.first_layer + l) + ".";
  add_attention(args, prefix, layer, specs);
  switch (args.block) {  // every block kind of the architecture table (arch.hpp)
    case Block::llama:
      add_feed_forward(args, prefix, layer, specs);
      break;
    case Block::encoder:
      add_encoder(args, prefix, layer, specs);
      break;
    case Block::attention:
      break;
  }
  return specs;
}

std::vector<TensorSpec> token_tensor_specs(const ModelArgs& a, const ModelEnds& ends,
                                           TokenWeights& t) {
  std::vector<TensorSpec> specs;
  if (ends.tokens_in)
    specs.push_back({"tok_embeddings.weight", {a.vocab_size, a.dim}, &t.tok_embeddings});
  if (!ends.logits_out) return specs;
  specs.push_back({"norm.weight", {a.dim}, &t.norm});
  if (!a.tie_word_embeddings)
    specs.push_back({"output.weight", {a.vocab_size, a.dim}, &t.output});
  else if (!ends.tokens_in)
    specs.push_back({"tok_embeddings.weight", {a.vocab_size, a.dim}, &t.output});
  return specs;
}

namespace {

// Every spec a run reads: the layers' (this rank's slices) and the token model's.
std::vector<TensorSpec> all_specs(const ModelArgs& args, TransformerWeights& w,
                                  const Shard& shard) {
  std::vector<TensorSpec> specs = tensor_specs(args, w.layers, shard);
  std::vector<TensorSpec> tokens = token_tensor_specs(args, w.ends, w.tokens);
  specs.insert(specs.end(), std::make_move_iterator(tokens.begin()),
               std::make_move_iterator(tokens.end()));
  return specs;
}

// Tied: the head reads the embeddings' view.
void tie(const ModelArgs& a, TransformerWeights& w) {
  if (w.ends.logits_out && a.tie_word_embeddings && w.ends.tokens_in)
    w.tokens.output = w.tokens.tok_embeddings;
}

}  // namespace

std::vector<TensorSpec> tensor_specs(const ModelArgs& whole, std::vector<LayerWeights>& layers,
                                     const Shard& shard) {
  const ModelArgs args = local_args(whole, shard);
  layers.assign(std::size_t(args.n_layers), LayerWeights{});
  std::vector<TensorSpec> specs;
  for (std::int64_t l = 0; l < args.n_layers; ++l) {
    std::vector<TensorSpec> layer = layer_tensor_specs(args, layers[std::size_t(l)], l);
    specs.insert(specs.end(), std::make_move_iterator(layer.begin()),
                 std::make_move_iterator(layer.end()));
  }
  shard_specs(specs, shard);
  return specs;
}

WeightsSource open_weights(const std::filesystem::path& path, const Shard& shard) {
  return {open_tensor_source(rank_path(path.string(), shard.rank)),
          is_per_rank_path(path.string())};
}

std::vector<WeightType> matrix_types(const ModelArgs& args, WeightsSource& source,
                                     const ModelEnds& ends) {
  const TensorTable& names = *architecture_of(args).tensors;
  TensorSource& c = *source.tensors;
  TransformerWeights w;
  w.ends = ends;
  std::vector<WeightType> types;
  check_last_layer(args, names, c);
  for (const TensorSpec& s : all_specs(args, w, {})) {  // a rank's names are the same
    const std::string name = locate(names, c, s.name).name;
    if (!s.slot.matrix || !c.contains(name)) continue;
    const WeightType t = c.describe(name).type.value_or(WeightType::f32);
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
  }
  return types;
}

TransformerWeights load_weights(const ModelArgs& args, const std::filesystem::path& path,
                                const Shard& shard, const ModelEnds& ends) {
  return load_weights(args, open_weights(path, shard), shard, ends);
}

TransformerWeights load_weights(const ModelArgs& args, WeightsSource source, const Shard& shard,
                                const ModelEnds& ends) {
  return load_weights(args, std::move(source), shard, architecture_of(args), ends);
}

namespace {

// The spec's rows of the fused tensor t: its parts stacked in their order, each with the rows
// its own spec is stored with (`rows`, by Meta name), checked whole against them first.
SourceTensor fused_part(const SourceTensor& t, const Stored& at, const TensorSpec& s,
                        const std::vector<std::int64_t>& shape,
                        const std::map<std::string, std::int64_t>& rows,
                        const std::string& source) {
  std::int64_t begin = 0, total = 0;
  std::string parts;
  for (const char* part : at.fused->parts) {
    const std::string name = at.layer + part;
    const auto it = rows.find(name);
    if (it == rows.end())
      throw InputError(source + ": tensor " + attn::quoted(at.name) + " holds " +
                       attn::quoted(name) + ", which this config has no use for beside " +
                       attn::quoted(s.name));
    if (name == s.name) begin = total;
    total += it->second;
    parts += (parts.empty() ? "" : " + ") + std::string(part);
  }
  std::vector<std::int64_t> whole = shape;
  whole[0] = total;
  if (t.shape != whole)
    throw InputError(source + ": tensor " + attn::quoted(at.name) + ": expected shape " +
                     shape_text(whole) + " (" + parts + "), got " + shape_text(t.shape));
  return tensor_rows(t, at.name, begin, begin + shape[0]);
}

}  // namespace

TransformerWeights load_weights(const ModelArgs& args, WeightsSource source, const Shard& shard,
                                const Architecture& arch, const ModelEnds& ends) {
  const TensorTable& names = *arch.tensors;
  TransformerWeights w;
  w.ends = ends;
  const bool per_rank = source.per_rank;
  w.tensors = std::move(source.tensors);
  TensorSource& c = *w.tensors;
  std::set<std::string> used;
  check_last_layer(args, names, c);
  std::vector<TensorSpec> specs = all_specs(args, w, shard);
  // A per-rank file holds the rank's slice as it is; a whole file, the whole tensor.
  if (per_rank)
    for (TensorSpec& s : specs) s.full.clear();
  std::map<std::string, std::int64_t> rows;  // as stored, by Meta name: fused parts' sizes
  if (!names.fused.empty())
    for (const TensorSpec& s : specs) rows[s.name] = (s.full.empty() ? s.shape : s.full)[0];
  for (TensorSpec& s : specs) {
    const std::vector<std::int64_t>& stored = s.full.empty() ? s.shape : s.full;
    const Stored at = locate(names, c, s.name);
    const std::string& name = at.name;
    if (s.optional && !c.contains(name)) continue;  // this layer has none: the slot stays null
    if (!c.contains(name)) missing_tensor(names, c, s.name, stored, args);
    SourceTensor t = c.tensor(name);
    if (at.fused) t = fused_part(t, at, s, stored, rows, c.source());
    if (t.shape != stored)
      throw InputError(
          c.source() + ": tensor '" + name + "': expected shape " + shape_text(stored) +
          (per_rank && shard.size > 1 ? " (rank " + std::to_string(shard.rank) + "'s slice of " +
                                            std::to_string(shard.size) + ")"
                                      : "") +
          ", got " + shape_text(t.shape));
    const Matrix m = s.slot.matrix ? matrix_view(t, name, s, w)
                                   : Matrix{f32_view(t, name, s, w), WeightType::f32};
    const std::int64_t cols = s.shape.size() == 2 ? s.shape[1] : 1;
    check_finite(m, s.shape[0], cols, c.source(), name);
    if (s.slot.matrix) *s.slot.matrix = m;
    if (s.slot.vector)
      *s.slot.vector =
          args.norm_weight_offset != 0 && is_norm(s)
              ? offset_norm(static_cast<const float*>(m.data), s, args.norm_weight_offset, w)
              : static_cast<const float*>(m.data);
    w.bytes += std::uint64_t(s.shape[0]) * weight_bytes(m.type, cols, c.source());
    w.halves |= m.type != WeightType::f32;
    w.blocks |= traits(m.type).block > 1;
    used.insert(name);
  }
  tie(args, w);
  std::vector<std::string> unused;  // one summary line, not one warning per tensor
  for (const std::string& name :
       c.names())  // the token model's are expected unless a run uses them
    if (!used.count(name) && !is_token_tensor(names, name)) unused.push_back(name);
  if (!unused.empty())
    spdlog::warn("{}: {} not used by this config, ignored", c.source(),
                 summarise(unused, unused.size() == 1 ? "tensor" : "tensors"));
  return w;
}

namespace {

// A small config's tensors are drawn quickly on one thread; a team of threads, which then
// spin-wait for more work, would cost a notebook run more than that (docs/perf/startup.md).
// Larger ones on the draw's own pool (DrawPool), started at the first such tensor.
constexpr std::int64_t kParallelDraw = std::int64_t(1) << 22;
// A contiguous tensor is drawn in runs of this many values (the threads' unit of work).
constexpr std::int64_t kDrawRun = std::int64_t(1) << 16;

// bound * uniform_pm1_keyed(key, first + i) for i < n, with the same bits in float arithmetic:
// for the top 24 bits k, k - 2^23 and its product by 2^-23 are exact in float as k * 2^-23 - 1
// is in double. So the loop needs no double and vectorizes (its 64-bit products are single
// instructions with AVX-512DQ): drawing a notebook config's weights was half of its start-up
// (issue 52, docs/perf/startup.md).
[[gnu::always_inline]] inline void uniform_run(float* out, std::int64_t n, std::uint64_t key,
                                               std::uint64_t first, float bound) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t bits = splitmix64(key + first + std::uint64_t(i));
    out[i] = bound * (float(std::int32_t(bits >> 40) - (1 << 23)) * 0x1p-23f);
  }
}

#if defined(__x86_64__)
[[gnu::target("avx512f,avx512dq")]] void uniform_run_avx512dq(float* out, std::int64_t n,
                                                              std::uint64_t key,
                                                              std::uint64_t first, float bound) {
  uniform_run(out, n, key, first, bound);
}
[[gnu::target("avx512f")]] void uniform_run_avx512(float* out, std::int64_t n, std::uint64_t key,
                                                   std::uint64_t first, float bound) {
  uniform_run(out, n, key, first, bound);
}
[[gnu::target("avx2")]] void uniform_run_avx2(float* out, std::int64_t n, std::uint64_t key,
                                              std::uint64_t first, float bound) {
  uniform_run(out, n, key, first, bound);
}

// The draw's function for the kernel set the CPU runs (whose probe this shares), with
// AVX-512DQ's 64-bit products where there are (1.7 times as fast).
using UniformRun = void (*)(float*, std::int64_t, std::uint64_t, std::uint64_t, float);
UniformRun uniform_run_here() {
  const std::string_view set = best_kernels().name;
  if (set == "avx512") return cpu_features().avx512dq ? uniform_run_avx512dq : uniform_run_avx512;
  if (set == "avx2") return uniform_run_avx2;
  return [](float* out, std::int64_t n, std::uint64_t key, std::uint64_t first, float bound) {
    uniform_run(out, n, key, first, bound);
  };
}
#endif

void draw_uniform(float* out, std::int64_t n, std::uint64_t key, std::uint64_t first, float bound) {
#if defined(__x86_64__)
  static const UniformRun run = uniform_run_here();
  run(out, n, key, first, bound);
#else
  uniform_run(out, n, key, first, bound);
#endif
}

// Where row r of the spec's block starts in its stream: a rank draws its block's elements at
// their indices in the whole tensor, a row's columns consecutive.
std::uint64_t row_start(const TensorSpec& s, std::int64_t r, std::int64_t cols) {
  return std::uint64_t(s.full.empty() ? r * cols : index_in_full(s, r, 0));
}

// The threads a seeded model is drawn on (threads < 1: one per core), started for the first
// tensor over kParallelDraw values and stopped when the draw ends. Each value depends only on its
// stream and index, so any split gives the same bits.
class DrawPool {
 public:
  explicit DrawPool(int threads) : threads_(threads < 1 ? cores() : threads) {}
  // The pool for a tensor of `values` values, or null: the caller draws it alone.
  Pool* get(std::int64_t values) {
    if (values <= kParallelDraw || threads_ < 2) return nullptr;
    if (!pool_) pool_.emplace(threads_);
    return &*pool_;
  }

 private:
  int threads_;
  std::optional<Pool> pool_;
};

// f(k): run k of `runs`, on the pool's threads when there is one.
template <typename F>
void draw_runs(Pool* pool, std::int64_t runs, const F& f) {
  if (!pool) {
    for (std::int64_t k = 0; k < runs; ++k) f(k);
    return;
  }
  pool->run(runs, [&](std::int64_t k, int) { f(k); });
}

// f(r, row) for each of `rows` rows of `cols` values, row: the thread's buffer of cols floats.
template <typename F>
void draw_rows(Pool* pool, std::int64_t rows, std::int64_t cols, const F& f) {
  std::vector<std::vector<float>> row(std::size_t(pool ? pool->slots() : 1),
                                      std::vector<float>(std::size_t(cols)));
  if (!pool) {
    for (std::int64_t r = 0; r < rows; ++r) f(r, row[0].data());
    return;
  }
  pool->run(rows, [&](std::int64_t r, int slot) { f(r, row[std::size_t(slot)].data()); });
}

// The spec's n values into t: ones for a norm's weight, zeros for its bias (as torch), else
// uniform in [-bound, bound) from the stream `key`; in runs of kDrawRun values when the block is
// contiguous in the whole tensor (all of it, or a vector), else a run per row.
void draw_f32(Pool* pool, float* t, const TensorSpec& s, std::int64_t n, std::int64_t cols,
              std::uint64_t key, float bound) {
  if (is_norm(s) || is_norm_bias(s)) return std::fill(t, t + n, is_norm(s) ? 1.0f : 0.0f);
  const bool contiguous = s.full.size() < 2;
  const std::int64_t len = contiguous ? kDrawRun : cols;
  draw_runs(pool, (n + len - 1) / len, [&](std::int64_t k) {
    const std::uint64_t first =
        contiguous ? row_start(s, 0, cols) + std::uint64_t(k * len) : row_start(s, k, cols);
    draw_uniform(t + k * len, std::min(len, n - k * len), key, first, bound);
  });
}

}  // namespace

void check_drawable(WeightType matrices) {
  if (!traits(matrices).from_f32)
    throw InputError(std::string("drawn weights cannot be stored in ") +
                         weight_type_name(matrices) +
                         ": it is read from files only (no quantizer for it here)",
                     "weight_types");
}

TransformerWeights seeded_weights(const ModelArgs& args, std::uint64_t seed, const Shard& shard,
                                  WeightType matrices, const ModelEnds& ends, int threads) {
  check_drawable(matrices);
  DrawPool pool(threads);
  TransformerWeights w;
  w.ends = ends;
  std::uint64_t stream = 0;
  for (const TensorSpec& s : all_specs(args, w, shard)) {
    const std::int64_t n = numel(s.shape);
    // Biases take the bound of their matrix, whose in_features is the last dim of its weight.
    const std::vector<std::int64_t>& whole = s.full.empty() ? s.shape : s.full;
    const std::int64_t fan_in = whole.size() == 2 ? whole[1] : args.dim;
    const std::int64_t cols = s.shape.size() == 2 ? s.shape[1] : 1;
    const float bound = 1.0f / std::sqrt(float(fan_in));
    const std::uint64_t key = stream_key(seed, ++stream);
    const WeightType type = s.slot.matrix ? matrices : WeightType::f32;
    if (type == WeightType::f32) {
      std::vector<float>& t = weight_storage(w.owned, std::size_t(n));
      draw_f32(pool.get(n), t.data(), s, n, cols, key, bound);
      if (s.slot.matrix) *s.slot.matrix = {t.data(), WeightType::f32};
      if (s.slot.vector) *s.slot.vector = t.data();
      w.bytes += std::uint64_t(n) * 4;
      continue;
    }
    // Drawn in F32 a row at a time, stored in the type as PyTorch rounds to it (matrices only:
    // no norm among them).
    const std::uint64_t row_bytes = weight_bytes(type, cols, "seeded " + s.name);
    std::vector<std::uint8_t>& t =
        weight_storage(w.owned_blocks, std::size_t(row_bytes) * std::size_t(s.shape[0]));
    const RowFromF32 store = traits(type).from_f32;
    draw_rows(pool.get(n), s.shape[0], cols, [&](std::int64_t r, float* row) {
      draw_uniform(row, cols, key, row_start(s, r, cols), bound);
      store(row, cols, t.data() + std::size_t(r) * row_bytes);
    });
    *s.slot.matrix = {t.data(), type};
    w.halves = true;
    w.blocks |= traits(type).block > 1;
    w.bytes += row_bytes * std::uint64_t(s.shape[0]);
  }
  tie(args, w);
  return w;
}

}  // namespace attn
