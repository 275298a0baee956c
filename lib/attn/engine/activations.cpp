#include "attn/engine/activations.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/model/hook_names.hpp"

namespace attn {

namespace {

constexpr const char* kSetting = "dump_activations";

// The sites a block of this type reports (observer.hpp): block `attention` has no MLP.
std::uint32_t block_sites(const ModelArgs& a) {
  std::uint32_t bits = kAllSites & ~site_bit(Site::final_norm);
  if (a.block == Block::attention) bits &= ~(site_bit(Site::resid_mid) | site_bit(Site::mlp_out));
  return bits;
}

[[noreturn]] void refuse(std::string_view name, const std::string& why) {
  throw InputError("activation " + quoted(name) + ": " + why, kSetting);
}

// A block's hook alone ("hook_resid_post", "attn.hook_v"): its site, or none.
bool block_hook(std::string_view hook, Site& site) {
  for (const Site s : kForwardSites)
    if (kHookNames[std::size_t(s)] == hook) return site = s, true;
  return false;
}

void add_name(std::string_view name, const ModelArgs& a, ActivationNames& n) {
  const std::uint32_t reported = block_sites(a);
  if (name == "all") {
    for (std::uint32_t& s : n.sites) s |= reported;
    n.final_norm = n.final_norm || a.logits_out;
    return;
  }
  if (name == kHookNames[std::size_t(Site::final_norm)]) {
    if (!a.logits_out)
      refuse(name, "the final norm is computed only by a token run with the output head");
    n.final_norm = true;
    return;
  }
  Site site{};
  std::int64_t layer = -1;  // -1: every block
  if (name.starts_with("blocks.")) {
    try {
      const HookPoint p = parse_hook_name(name, a.n_layers);
      site = p.site, layer = p.layer;
    } catch (const InputError& e) {
      throw InputError(e.what(), kSetting);
    }
  } else if (!block_hook(name, site)) {
    refuse(name,
           "expected all, a hook name (blocks.0.hook_resid_post, ln_final.hook_normalized) or a "
           "block's hook for every block (hook_resid_post, attn.hook_pattern)");
  }
  if ((reported & site_bit(site)) == 0)
    refuse(name, "a block of type attention has no MLP: it reports no " +
                     std::string(kHookNames[std::size_t(site)]));
  for (std::int64_t l = 0; l < a.n_layers; ++l)
    if (layer < 0 || layer == l) n.sites[std::size_t(l)] |= site_bit(site);
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Floats of one site's tensor per batch row, for a call of seqlen positions over S keys.
double site_floats(const ModelArgs& a, Site s, double seqlen, double S) {
  const double hd = double(a.head_dim());
  switch (s) {
    case Site::q_in:
    case Site::q:
      return seqlen * double(a.n_heads) * hd;
    case Site::k_in:
    case Site::k:
    case Site::v:
      return seqlen * double(a.n_kv_heads) * hd;
    case Site::attn_probs:
      return double(a.n_heads) * seqlen * S;
    default:
      return seqlen * double(a.dim);
  }
}

// The shape of a site's tensor in a call of seqlen positions over S keys.
std::vector<std::int64_t> site_shape(const ModelArgs& a, Site s, std::int64_t B,
                                     std::int64_t seqlen, std::int64_t S) {
  switch (s) {
    case Site::q_in:
    case Site::q:
      return {B, seqlen, a.n_heads, a.head_dim()};
    case Site::k_in:
    case Site::k:
    case Site::v:
      return {B, seqlen, a.n_kv_heads, a.head_dim()};
    case Site::attn_probs:
      return {B, a.n_heads, seqlen, S};
    default:
      return {B, seqlen, a.dim};
  }
}

}  // namespace

bool ActivationNames::empty() const {
  return !final_norm &&
         std::all_of(sites.begin(), sites.end(), [](std::uint32_t s) { return s == 0; });
}

ActivationNames parse_activation_names(std::string_view list, const ModelArgs& a) {
  ActivationNames n;
  n.sites.assign(std::size_t(std::max<std::int64_t>(a.n_layers, 0)), 0);
  if (trimmed(list).empty()) refuse(list, "expected all or a comma list of hook names");
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view name = trimmed(list.substr(0, comma));
    if (name.empty()) refuse(list, "an empty name in the list");
    add_name(name, a, n);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return n;
}

double activations_bytes(const ModelArgs& a, const RunOptions& o, const ActivationNames& n) {
  const double P = double(o.prefill), N = double(o.steps);
  double per_row = 0;  // floats per batch row over every call
  for (std::uint32_t sites : n.sites)
    for (const Site s : kForwardSites) {
      if ((sites & site_bit(s)) == 0) continue;
      per_row += site_floats(a, s, P, P);  // the prefill (none when P is 0)
      // The decode steps: S = P + i keys for the pattern, one position each otherwise.
      per_row += s == Site::attn_probs ? double(a.n_heads) * (N * P + N * (N + 1) / 2)
                                       : N * site_floats(a, s, 1, 1);
    }
  if (n.final_norm) per_row += (P + N) * double(a.dim);
  return 4 * double(o.batch) * per_row;
}

void check_activations(const ModelArgs& a, const RunOptions& o, const ActivationNames& n,
                       std::int64_t processes) {
  if (n.empty()) return;
  if (processes > 1)
    throw InputError(
        "activations kept for the dump need one process (model_parallel_size 1): each rank "
        "holds only its own heads",
        kSetting);
  const double bytes = activations_bytes(a, o, n);
  if (bytes > double(kActivationsLimit))
    throw InputError("the activations would keep " +
                         std::to_string(std::int64_t(bytes / (1 << 20))) +
                         " MiB, over the limit of 1 GiB: ask for fewer hook names, or use fewer "
                         "positions, layers or a smaller batch",
                     kSetting);
}

KeptActivation* KeptActivations::find(std::int64_t c, std::int64_t layer, Site s) {
  const std::size_t at =
      std::size_t((c * (n_layers + 1) + layer) * std::int64_t(kSiteCount)) + std::size_t(s);
  if (c < 0 || layer < 0 || layer > n_layers || at >= index.size() || index[at] < 0) return nullptr;
  return &tensors[std::size_t(index[at])];
}

KeptActivations make_kept_activations(const ModelArgs& a, const RunOptions& o,
                                      const ActivationNames& n) {
  KeptActivations k;
  k.n_layers = a.n_layers;
  const std::int64_t B = o.batch, P = o.prefill, N = o.steps, L = a.n_layers;
  const std::int64_t stride = (L + 1) * std::int64_t(kSiteCount);
  k.index.assign(std::size_t((N + 1) * stride), -1);
  if (n.empty()) return k;
  auto add = [&](std::int64_t c, std::int64_t layer, Site s, std::string name,
                 std::vector<std::int64_t> shape) {
    std::int64_t numel = 1;
    for (std::int64_t d : shape) numel *= d;
    k.index[std::size_t(c * stride + layer * std::int64_t(kSiteCount)) + std::size_t(s)] =
        std::int64_t(k.tensors.size());
    k.tensors.push_back(
        {std::move(name), std::move(shape), std::vector<float>(std::size_t(numel))});
  };
  for (std::int64_t c = P > 0 ? 0 : 1; c <= N; ++c) {
    const std::int64_t seqlen = c == 0 ? P : 1, S = c == 0 ? P : P + c;
    const std::string prefix = c == 0 ? "" : "decode." + std::to_string(c) + ".";
    for (std::int64_t l = 0; l < L; ++l)
      for (const Site s : kForwardSites)
        if (n.sites[std::size_t(l)] & site_bit(s))
          add(c, l, s, prefix + hook_name(s, l), site_shape(a, s, B, seqlen, S));
    if (n.final_norm)
      add(c, L, Site::final_norm, prefix + hook_name(Site::final_norm, L), {B, seqlen, a.dim});
  }
  return k;
}

std::uint32_t kept_sites(const ActivationNames& n) {
  std::uint32_t bits = n.final_norm ? site_bit(Site::final_norm) : 0;
  for (std::uint32_t s : n.sites) bits |= s;
  return bits;
}

std::vector<std::uint8_t> kept_layers(const ActivationNames& n) {
  std::vector<std::uint8_t> layers;
  for (std::uint32_t s : n.sites) layers.push_back(s != 0);
  return layers;
}

void keep_observation(KeptActivations& kept, const Observation& o) {
  KeptActivation* t = kept.find(kept.call, o.layer, o.site);
  if (!t || o.data == t->data.data()) return;
  std::int64_t numel = 1;
  for (int i = 0; i < o.ndim; ++i) numel *= o.shape[i];
  // The shape is the one allocated for this call (the forward reports what observer.hpp states).
  if (numel != std::int64_t(t->data.size()))
    throw std::logic_error("activation " + t->name + ": reported " + std::to_string(numel) +
                           " floats, kept " + std::to_string(t->data.size()));
  std::memcpy(t->data.data(), o.data, std::size_t(numel) * sizeof(float));
}

}  // namespace attn
