#pragma once
// The activations a run keeps for its dump, under TransformerLens's hook names (model/hook_names):
// which ones a user asks for, what they cost (checked before any work), and the observer that
// copies them out of the forward as it reports them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attn/model/config.hpp"
#include "attn/model/hooks.hpp"
#include "attn/model/input.hpp"
#include "attn/model/observer.hpp"

namespace attn {

// What a run keeps: the sites at each block (site_bit()s, [n_layers]) and the final norm.
struct ActivationNames {
  std::vector<std::uint32_t> sites;  // [n_layers], or empty: none
  bool final_norm = false;           // ln_final.hook_normalized
  bool empty() const;
};

// Reads a comma list: `all` (every site the model reports), full hook names
// (`blocks.1.attn.hook_pattern`, `ln_final.hook_normalized`), or a block's hook alone
// (`hook_resid_post`, `attn.hook_v`): that hook at every block. A name the model does not report
// (resid_mid and mlp_out of block `attention`; ln_final without the output head) is refused
// unless it comes through `all`. Throws InputError (setting dump_activations) naming the name.
// ends: the run's (the final norm only with the head).
ActivationNames parse_activation_names(std::string_view list, const ModelArgs& args,
                                       const ModelEnds& ends);

// Bytes the run keeps for them: per call (the prefill, each decode step) and kept point,
// hook_bytes's (model/hooks.hpp, the one description of the points' shapes). InputError
// (setting dump_activations) past 2^64.
std::uint64_t activations_bytes(const ModelArgs& args, const RunOptions& opts,
                                const ActivationNames& n);

// What the dump's activations may hold: refused past it before any work.
inline constexpr std::int64_t kActivationsLimit = std::int64_t{1} << 30;

// Refuses (InputError, setting dump_activations) activations over kActivationsLimit, and any on
// more than one process (each rank holds only its own heads).
void check_activations(const ModelArgs& args, const RunOptions& opts, const ActivationNames& n,
                       std::int64_t processes);

// One kept tensor, named as the dump writes it: the prefill's under the plain hook name
// (`blocks.0.hook_resid_post`), decode step i's as `decode.{i}.` + it.
struct KeptActivation {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// The tensors of every call, allocated up front (before any work), in forward order: call by
// call, block by block, site by site as computed. Holds an index per (call, block, site) so that
// the observer finds its tensor without a search.
struct KeptActivations {
  std::vector<KeptActivation> tensors;
  std::int64_t n_layers = 0;
  std::vector<std::int64_t> index;  // [calls][n_layers + 1][kSiteCount]: into tensors, or -1
  std::int64_t call = 0;            // the call being run: 0 the prefill, i decode step i

  // The tensor of (call, layer, site); layer n_layers for final_norm. Null if not kept.
  KeptActivation* find(std::int64_t call, std::int64_t layer, Site s);
};

// Allocates every tensor the names ask for, for a run of opts (no prefill tensors when P is 0).
KeptActivations make_kept_activations(const ModelArgs& args, const RunOptions& opts,
                                      const ActivationNames& n);

// The Observer's sites for them.
std::uint32_t kept_sites(const ActivationNames& n);

// Copies a reported tensor into its kept one (if kept; the same buffer, as attn_probs handed
// over through Observer::probs, is left as it is).
void keep_observation(KeptActivations& kept, const Observation& o);

// The dump's activations as a recorder: its observer asks for their sites and keeps each into
// its tensor of kept.call (attn_probs written there in place when no recorder before it hands
// the forward a buffer). kept must outlive it.
class ActivationRecorder {
 public:
  ActivationRecorder(KeptActivations& kept, const ActivationNames& names);
  ActivationRecorder(const ActivationRecorder&) = delete;  // its observer's functions hold `this`
  ActivationRecorder& operator=(const ActivationRecorder&) = delete;
  const Observer& observer() const { return observer_; }

 private:
  KeptActivations& kept_;
  Observer observer_;
};

}  // namespace attn
