#include "attn/weights.hpp"

#include <spdlog/spdlog.h>
#include <set>

#include "attn/error.hpp"
#include "attn/finite.hpp"
#include "attn/rng.hpp"
#include "attn/text.hpp"

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
  if (!a.attention_bias) return;
  s.push_back({p + "attention.wq.bias", {q}, &w.bq});
  s.push_back({p + "attention.wk.bias", {kv}, &w.bk});
  s.push_back({p + "attention.wv.bias", {kv}, &w.bv});
  s.push_back({p + "attention.wo.bias", {a.dim}, &w.bo});
}

void add_feed_forward(const ModelArgs& a, const std::string& p, LayerWeights& w,
                      std::vector<TensorSpec>& s) {
  const std::int64_t h = a.ffn_hidden();
  s.push_back({p + "attention_norm.weight", {a.dim}, &w.attention_norm});
  s.push_back({p + "ffn_norm.weight", {a.dim}, &w.ffn_norm});
  s.push_back({p + "feed_forward.w1.weight", {h, a.dim}, &w.w1});
  s.push_back({p + "feed_forward.w2.weight", {a.dim, h}, &w.w2});
  s.push_back({p + "feed_forward.w3.weight", {h, a.dim}, &w.w3});
}

bool is_norm(const TensorSpec& s) {
  return s.name.ends_with("norm.weight");
}

}  // namespace

std::vector<TensorSpec> tensor_specs(const ModelArgs& args, std::vector<LayerWeights>& layers) {
  layers.assign(std::size_t(args.n_layers), LayerWeights{});
  std::vector<TensorSpec> specs;
  for (std::int64_t l = 0; l < args.n_layers; ++l) {
    const std::string prefix = "layers." + std::to_string(l) + ".";
    add_attention(args, prefix, layers[std::size_t(l)], specs);
    if (args.block == Block::llama) add_feed_forward(args, prefix, layers[std::size_t(l)], specs);
  }
  return specs;
}

TransformerWeights load_weights(const ModelArgs& args, const std::filesystem::path& path) {
  TransformerWeights w;
  w.file = open_safetensors(path);
  const std::string src = w.file.path;  // escaped
  std::set<std::string> used;
  for (const TensorSpec& s : tensor_specs(args, w.layers)) {
    if (!w.file.header.tensors.count(s.name))
      throw InputError(src + ": tensor '" + s.name + "' is missing (expected shape " +
                       shape_text(s.shape) + ")");
    const TensorInfo& t = w.file.info(s.name);
    if (t.shape != s.shape)
      throw InputError(src + ": tensor '" + s.name + "': expected shape " + shape_text(s.shape) +
                       ", got " + shape_text(t.shape));
    std::vector<float> storage;
    *s.slot = tensor_as_f32(w.file, s.name, storage);
    check_finite(*s.slot, numel(s.shape), src, s.name);
    if (!storage.empty()) w.owned.push_back(std::move(storage));
    w.bytes += std::uint64_t(numel(s.shape)) * 4;
    used.insert(s.name);
  }
  std::vector<std::string> unused;  // one summary line, not one warning per tensor
  for (auto& [name, info] : w.file.header.tensors)
    if (!used.count(name)) unused.push_back(name);
  if (!unused.empty())
    spdlog::warn("{}: {} not used by this config, ignored", src,
                 summarise(unused, unused.size() == 1 ? "tensor" : "tensors"));
  return w;
}

TransformerWeights seeded_weights(const ModelArgs& args, std::uint64_t seed) {
  TransformerWeights w;
  std::uint64_t stream = 0;
  for (const TensorSpec& s : tensor_specs(args, w.layers)) {
    const std::int64_t n = numel(s.shape);
    std::vector<float>& t = w.owned.emplace_back(std::size_t(n));
    // Biases take the bound of their matrix, whose in_features is the last dim of its weight.
    const std::int64_t fan_in = s.shape.size() == 2 ? s.shape[1] : args.dim;
    const float bound = 1.0f / std::sqrt(float(fan_in));
    const bool norm = is_norm(s);
    ++stream;
#pragma omp parallel for if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i)
      t[std::size_t(i)] = norm ? 1.0f : bound * uniform_pm1(seed, stream, std::uint64_t(i));
    *s.slot = t.data();
    w.bytes += std::uint64_t(n) * 4;
  }
  return w;
}

}  // namespace attn
