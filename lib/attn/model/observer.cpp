#include "attn/model/observer.hpp"

#include <algorithm>
#include <string>

#include "attn/error.hpp"

namespace attn {

Site parse_site(std::string_view name) {
  std::string valid;
  for (std::size_t i = 0; i < kSiteCount; ++i) {
    if (kSiteNames[i] == name) return Site(i);
    valid += (i ? ", " : "") + std::string(kSiteNames[i]);
  }
  throw InputError("unknown site '" + std::string(name) + "': the sites are " + valid);
}

Observer merge_observers(const std::vector<const Observer*>& observers, std::int64_t n_layers) {
  Observer m;
  if (observers.size() == 1) return *observers[0];
  // Per block: what any of them reports there (final_norm is no block's: in sites/patch only).
  m.layer_sites.assign(std::size_t(std::max<std::int64_t>(n_layers, 0)), 0);
  for (const Observer* o : observers) {
    m.sites |= o->sites;
    m.patch |= o->patch;
    for (std::int64_t l = 0; l < n_layers; ++l)
      m.layer_sites[std::size_t(l)] |= o->at_layer(o->sites | o->patch, l);
  }
  m.on_tensor = [observers](const Observation& ob) {
    for (const Observer* o : observers)
      if (o->on_tensor && o->wants(ob.site, ob.layer)) o->on_tensor(ob);
  };
  m.probs = [observers](std::int64_t layer, std::int64_t bsz, std::int64_t n_heads,
                        std::int64_t seqlen, std::int64_t keys) -> float* {
    for (const Observer* o : observers)
      if (o->probs && o->wants(Site::attn_probs, layer))
        if (float* p = o->probs(layer, bsz, n_heads, seqlen, keys)) return p;
    return nullptr;
  };
  return m;
}

}  // namespace attn
