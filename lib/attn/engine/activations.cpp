#include "attn/engine/activations.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/model/hook_names.hpp"

namespace attn {

namespace {

constexpr const char* kSetting = "dump_activations";

// The sites a block of this type reports, as site_bit()s.
std::uint32_t block_sites(const ModelArgs& a) {
  std::uint32_t bits = 0;
  for (const Site s : kForwardSites)
    if (block_reports(a, s)) bits |= site_bit(s);
  return bits;
}

[[noreturn]] void refuse(std::string_view name, const std::string& why) {
  throw InputError("activation " + quoted(name) + ": " + why, kSetting);
}

// A block's hook alone ("hook_resid_post", "attn.hook_v", "attn.hook_z"): its site, or none.
bool block_hook(std::string_view hook, Site& site) {
  for (const Site s : kHookSites)
    if (kHookNames[std::size_t(s)] == hook) return site = s, true;
  return false;
}

void add_name(std::string_view name, const ModelArgs& a, const ModelEnds& ends,
              ActivationNames& n) {
  if (name == "all") {  // issue 38's points (kForwardSites): issue 51's are asked by name
    for (std::uint32_t& s : n.sites) s |= block_sites(a);
    n.final_norm = n.final_norm || ends.logits_out;
    return;
  }
  if (name == kHookNames[std::size_t(Site::final_norm)]) {
    if (!ends.logits_out)
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
  if (!block_reports(a, site))
    refuse(name,
           std::string(a.block == Block::attention
                           ? "a block of type attention has no MLP and no norm"
                           : "only llama blocks with norms before attention and MLP have it") +
               ": it reports no " + std::string(kHookNames[std::size_t(site)]));
  for (std::int64_t l = 0; l < a.n_layers; ++l)
    if (layer < 0 || layer == l) n.sites[std::size_t(l)] |= site_bit(site);
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The points kept, in forward order: block by block, site by site as computed, then the final
// norm (layer -1, as hook_points lists it).
std::vector<HookPoint> kept_points(const ActivationNames& n) {
  std::vector<HookPoint> points;
  for (std::size_t l = 0; l < n.sites.size(); ++l)
    for (const Site s : kHookSites)
      if (n.sites[l] & site_bit(s)) points.push_back({s, std::int64_t(l)});
  if (n.final_norm) points.push_back({Site::final_norm, -1});
  return points;
}

// Call c's shape: the prefill (c 0) of P positions, or decode step c, one position after P+c-1.
HookCall call_shape(const RunOptions& o, std::int64_t c) {
  return c == 0 ? HookCall{o.batch, o.prefill, 0} : HookCall{o.batch, 1, o.prefill + c - 1};
}

}  // namespace

bool ActivationNames::empty() const {
  return !final_norm &&
         std::all_of(sites.begin(), sites.end(), [](std::uint32_t s) { return s == 0; });
}

ActivationNames parse_activation_names(std::string_view list, const ModelArgs& a,
                                       const ModelEnds& ends) {
  ActivationNames n;
  n.sites.assign(std::size_t(std::max<std::int64_t>(a.n_layers, 0)), 0);
  if (trimmed(list).empty()) refuse(list, "expected all or a comma list of hook names");
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view name = trimmed(list.substr(0, comma));
    if (name.empty()) refuse(list, "an empty name in the list");
    add_name(name, a, ends, n);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return n;
}

std::uint64_t activations_bytes(const ModelArgs& a, const RunOptions& o, const ActivationNames& n) {
  const std::string what = "activations kept for the dump";
  const std::vector<HookPoint> points = kept_points(n);
  if (points.empty() || o.steps < 0) return 0;
  try {
    const std::uint64_t prefill = o.prefill > 0 ? hook_bytes(a, points, call_shape(o, 0), what) : 0;
    if (o.steps == 0) return prefill;
    // A decode step's bytes grow by the same amount with each key (attn_probs; the rest stay):
    // the N steps hold N times the mean of the first and the last.
    const std::uint64_t first = hook_bytes(a, points, call_shape(o, 1), what);
    const std::uint64_t last = hook_bytes(a, points, call_shape(o, o.steps), what);
    const unsigned __int128 decode =
        (static_cast<unsigned __int128>(first) + last) * std::uint64_t(o.steps) / 2;
    const unsigned __int128 total = decode + prefill;
    if (total > std::numeric_limits<std::uint64_t>::max())
      throw InputError("the " + what + " would need more than 2^64 bytes: lower the sizes");
    return std::uint64_t(total);
  } catch (const InputError& e) {
    throw InputError(e.what(), kSetting);
  }
}

void check_activations(const ModelArgs& a, const RunOptions& o, const ActivationNames& n,
                       std::int64_t processes) {
  if (n.empty()) return;
  if (processes > 1)
    throw InputError(
        "activations kept for the dump need one process (model_parallel_size 1): each rank "
        "holds only its own heads",
        kSetting);
  const std::uint64_t bytes = activations_bytes(a, o, n);
  if (bytes > std::uint64_t(kActivationsLimit))
    throw InputError("the activations would keep " + std::to_string(bytes >> 20) +
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
  const std::int64_t P = o.prefill, N = o.steps, L = a.n_layers;
  const std::int64_t stride = (L + 1) * std::int64_t(kSiteCount);
  k.index.assign(std::size_t((N + 1) * stride), -1);
  const std::vector<HookPoint> points = kept_points(n);
  for (std::int64_t c = P > 0 ? 0 : 1; c <= N && !points.empty(); ++c) {
    const std::string prefix = c == 0 ? "" : "decode." + std::to_string(c) + ".";
    for (const HookPoint& p : points) {
      const std::int64_t layer = p.site == Site::final_norm ? L : p.layer;
      std::vector<std::int64_t> shape = hook_shape(a, p.site, call_shape(o, c));
      std::int64_t numel = 1;
      for (std::int64_t d : shape) numel *= d;
      k.index[std::size_t(c * stride + layer * std::int64_t(kSiteCount)) + std::size_t(p.site)] =
          std::int64_t(k.tensors.size());
      k.tensors.push_back({prefix + hook_name(p.site, layer), std::move(shape),
                           std::vector<float>(std::size_t(numel))});
    }
  }
  return k;
}

std::uint32_t kept_sites(const ActivationNames& n) {
  std::uint32_t bits = n.final_norm ? site_bit(Site::final_norm) : 0;
  for (std::uint32_t s : n.sites) bits |= s;
  return bits;
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

namespace attn {

ActivationRecorder::ActivationRecorder(KeptActivations& kept, const ActivationNames& names)
    : kept_(kept) {
  observer_.sites = kept_sites(names);
  // Their kept tensor, written in place, when it is the call's size.
  observer_.probs = [this](std::int64_t layer, std::int64_t bsz, std::int64_t n_heads,
                           std::int64_t seqlen, std::int64_t keys) -> float* {
    KeptActivation* t = kept_.find(kept_.call, layer, Site::attn_probs);
    return t && std::int64_t(t->data.size()) == bsz * n_heads * seqlen * keys ? t->data.data()
                                                                              : nullptr;
  };
  observer_.on_tensor = [this](const Observation& o) { keep_observation(kept_, o); };
}

}  // namespace attn
