#include "attn/model/hooks.hpp"

#include <cstring>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/model/memory.hpp"

namespace attn {

bool patchable(Site s) {
  switch (s) {
    case Site::attn_scores:
    case Site::result:
    case Site::mlp_pre:
    case Site::mlp_post:
    case Site::ln1_scale:
    case Site::ln2_scale:
    case Site::final_scale:
      return false;
    default:
      return true;
  }
}

namespace {

// Why a model has no such point ("" when it has it).
std::string missing(const ModelArgs& a, const ModelEnds& ends, Site s) {
  if (s == Site::embed) return ends.tokens_in ? "" : "it takes no tokens";
  if (model_site(s)) return ends.logits_out ? "" : "it has no output head";
  const bool pre_norms = a.block == Block::llama && !a.post_norms;
  switch (s) {
    case Site::resid_mid:
    case Site::mlp_out:
      return a.block != Block::attention ? "" : "its blocks have no MLP";
    case Site::mlp_pre:
    case Site::mlp_post:
    case Site::ln1_scale:
    case Site::ln2_scale:
      return pre_norms ? "" : "only llama blocks with their norms before attention and MLP have it";
    default:
      return "";
  }
}

}  // namespace

bool block_reports(const ModelArgs& a, Site s) {
  return !model_site(s) && missing(a, ModelEnds{}, s).empty();
}

std::vector<HookPoint> hook_points(const ModelArgs& a, const ModelEnds& ends) {
  std::vector<HookPoint> points;
  if (ends.tokens_in) points.push_back({Site::embed, -1});
  for (std::int64_t l = 0; l < a.n_layers; ++l)
    for (Site s : kHookSites)
      if (block_reports(a, s)) points.push_back({s, l});
  if (ends.logits_out) {
    points.push_back({Site::final_scale, -1});
    points.push_back({Site::final_norm, -1});
  }
  return points;
}

HookPoint model_hook_point(const ModelArgs& a, const ModelEnds& ends, std::string_view name) {
  const HookPoint p = parse_hook_name(name, a.n_layers);
  const std::string why = missing(a, ends, p.site);
  if (!why.empty())
    throw InputError("hook name " + quoted(name) + ": this model has no such point (" + why + ")");
  return p;
}

std::vector<std::int64_t> hook_shape(const ModelArgs& a, Site s, const HookCall& c) {
  const std::int64_t hd = a.head_dim();
  switch (s) {
    case Site::q:
    case Site::q_in:
      return {c.bsz, c.seqlen, a.n_heads, hd};
    case Site::k:
    case Site::k_in:
    case Site::v:
      return {c.bsz, c.seqlen, a.n_kv_heads, hd};
    case Site::attn_probs:
    case Site::attn_scores:
      return {c.bsz, a.n_heads, c.seqlen, c.start_pos + c.seqlen};
    case Site::z:
      return {c.bsz, c.seqlen, a.n_heads, hd};
    case Site::result:
      return {c.bsz, c.seqlen, a.n_heads, a.dim};
    case Site::mlp_pre:
    case Site::mlp_post:
      return {c.bsz, c.seqlen, a.ffn_hidden()};
    case Site::ln1_scale:
    case Site::ln2_scale:
    case Site::final_scale:
      return {c.bsz, c.seqlen, 1};
    default:
      return {c.bsz, c.seqlen, a.dim};
  }
}

std::uint64_t hook_bytes(const ModelArgs& a, const std::vector<HookPoint>& points,
                         const HookCall& c, const std::string& what) {
  std::uint64_t total = 0;
  for (const HookPoint& p : points) {
    const std::vector<std::int64_t> shape = hook_shape(a, p.site, c);
    const std::uint64_t n =
        checked_product({shape[0], shape[1], shape[2], shape.size() > 3 ? shape[3] : 1, 4}, what);
    if (__builtin_add_overflow(total, n, &total))
      throw InputError("the " + what + " would need more than 2^64 bytes: lower the sizes");
  }
  return total;
}

void check_hook_bytes(std::uint64_t bytes, std::uint64_t limit, const std::string& limit_name,
                      const std::string& what) {
  if (bytes <= limit) return;
  throw MemoryLimitError(what + ": the activations asked for need " + bytes_text(bytes) +
                             " in this call, past the " + bytes_text(limit) + " of " + limit_name +
                             "; ask for fewer names, layers or positions",
                         what);
}

Hooks::Hooks(std::int64_t n_layers)
    : n_layers_(n_layers),
      kept_(kSiteCount * std::size_t(n_layers + 1)),
      probs_(n_layers),
      edits_(kept_.size()) {
  observer_.layer_sites.assign(std::size_t(n_layers), 0);
  observer_.on_tensor = [this](const Observation& o) { report(o); };
  observer_.probs = probs_.observer().probs;
}

std::size_t Hooks::slot(HookPoint p) const {
  const std::int64_t layer = model_site(p.site) ? n_layers_ : p.layer;
  return std::size_t(p.site) * std::size_t(n_layers_ + 1) + std::size_t(layer);
}

void Hooks::add_layer(HookPoint p) {
  if (!model_site(p.site)) observer_.layer_sites[std::size_t(p.layer)] |= site_bit(p.site);
}

void Hooks::keep(HookPoint p, float* dest) {
  kept_[slot(p)] = dest;
  if (p.site == Site::attn_probs) probs_.set(p.layer, dest);
  observer_.sites |= site_bit(p.site);
  add_layer(p);
}

void Hooks::patch(HookPoint p, Edit edit, float* probs) {
  edits_[slot(p)] = std::move(edit);
  if (p.site == Site::attn_probs && !probs_.buffer(p.layer, 0)) probs_.set(p.layer, probs);
  // A point computed apart only to be read is reported to the edit with no Observation::edit.
  (patchable(p.site) ? observer_.patch : observer_.sites) |= site_bit(p.site);
  add_layer(p);
}

void Hooks::report(const Observation& o) const {
  const std::size_t at = slot({o.site, o.layer});
  if (edits_[at]) edits_[at](o);
  float* dest = kept_[at];
  if (!dest || dest == o.data) return;  // attn_probs: written in place
  std::int64_t n = 1;
  for (int i = 0; i < o.ndim; ++i) n *= o.shape[i];
  std::memcpy(dest, o.data, std::size_t(n) * sizeof(float));
}

}  // namespace attn
