#pragma once
// Hook points kept and patched in one forward call, as TransformerLens's run_with_cache and
// run_with_hooks do: which points a model has, the shape and bytes of each in a call (checked
// before the run), and the one Observer that copies every kept point into the caller's buffer
// and hands every patched point to the caller's edit. A front (Python) names the points and
// owns the buffers; the model's own observer does the rest.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attn/model/config.hpp"
#include "attn/model/hook_names.hpp"
#include "attn/model/kept_probabilities.hpp"
#include "attn/model/observer.hpp"

namespace attn {

// A forward call's shape: bsz sequences of seqlen positions from start_pos.
struct HookCall {
  std::int64_t bsz = 1, seqlen = 1, start_pos = 0;
};

// A block's sites in the order the forward computes them (Site's own order keeps q_in and k_in
// last for the bits of older files), as TransformerLens lists a Llama block's hooks;
// final_norm follows the last block.
inline constexpr Site kForwardSites[] = {
    Site::resid_pre,  Site::q_in,     Site::k_in,      Site::q,       Site::k,         Site::v,
    Site::attn_probs, Site::attn_out, Site::resid_mid, Site::mlp_out, Site::resid_post};

// Every block site a front can hook, in the order the forward computes them (TransformerLens's
// order for a Llama block): kForwardSites stays the dump's list (engine/activations.hpp), so
// that its files did not change when issue 51's sites came.
inline constexpr Site kHookSites[] = {
    Site::resid_pre, Site::ln1_scale, Site::q_in,        Site::k_in,       Site::q,
    Site::k,         Site::v,         Site::attn_scores, Site::attn_probs, Site::z,
    Site::result,    Site::attn_out,  Site::resid_mid,   Site::ln2_scale,  Site::mlp_pre,
    Site::mlp_post,  Site::mlp_out,   Site::resid_post};

// Whether a point can be patched: the sites computed apart only to be read (attn_scores,
// result, mlp_pre, mlp_post and the norms' scales) cannot.
bool patchable(Site s);

// Whether a block of `a` reports the site (observer.hpp): a block of type attention has no MLP
// (no resid_mid, no mlp_out); only llama blocks with pre-norms (not encoder, not OLMo 2's
// post-norms) report mlp_pre, mlp_post, ln1_scale and ln2_scale; a model_site is no block's.
bool block_reports(const ModelArgs& a, Site s);

// The points a model of `a` built with `ends` reports, in forward order: hook_embed when it
// takes tokens (ends.tokens_in), each block's sites (kHookSites, those block_reports), then
// ln_final.hook_scale and ln_final.hook_normalized when it has the head (ends.logits_out).
std::vector<HookPoint> hook_points(const ModelArgs& a, const ModelEnds& ends);

// parse_hook_name, also refusing a point this model does not report (InputError naming it).
HookPoint model_hook_point(const ModelArgs& a, const ModelEnds& ends, std::string_view name);

// The point's tensor in a call, as observer.hpp states the sites' shapes (the whole model's
// heads): [bsz, seqlen, dim], [bsz, seqlen, heads, head_dim], [bsz, n_heads, seqlen, keys],
// [bsz, seqlen, n_heads, dim], [bsz, seqlen, ffn_hidden] or [bsz, seqlen, 1].
std::vector<std::int64_t> hook_shape(const ModelArgs& a, Site s, const HookCall& c);

// The float32 bytes of all the points' tensors in a call; InputError naming `what` past 2^64.
std::uint64_t hook_bytes(const ModelArgs& a, const std::vector<HookPoint>& points,
                         const HookCall& c, const std::string& what);

// Refuses (MemoryLimitError naming the setting `what`) keeping `bytes` of activations when
// they are more than `limit` (`limit_name` says which limit it is, e.g. "MemAvailable").
void check_hook_bytes(std::uint64_t bytes, std::uint64_t limit, const std::string& limit_name,
                      const std::string& what);

// The observer of one call's kept and patched points. Keep and patch, then set observer() on
// the model with observe(); the buffers and edits must outlive the call.
class Hooks {
 public:
  // Called on the forward's thread with the point's tensor; it may write o.edit (the same
  // floats as o.data). An exception it throws ends the forward call.
  using Edit = std::function<void(const Observation& o)>;

  explicit Hooks(std::int64_t n_layers);
  Hooks(const Hooks&) = delete;  // its observer's functions hold `this`
  Hooks& operator=(const Hooks&) = delete;

  // Copies the point's tensor (after any edit) into dest, hook_shape's floats. attn_probs are
  // written there by the attention kernel itself.
  void keep(HookPoint p, float* dest);
  // Hands the point's tensor to edit. Patched attn_probs not kept need `probs`, a buffer of
  // hook_shape's floats for the kernel to write them into. A point not patchable is handed over
  // to be read only (Observation::edit null).
  void patch(HookPoint p, Edit edit, float* probs = nullptr);

  const Observer& observer() const { return observer_; }

 private:
  std::size_t slot(HookPoint p) const;
  void add_layer(HookPoint p);
  void report(const Observation& o) const;

  std::int64_t n_layers_;
  std::vector<float*> kept_;  // [kSiteCount * (n_layers + 1)]: by slot(), null: not kept
  KeptProbabilities probs_;   // where a layer's probabilities go
  std::vector<Edit> edits_;   // by slot(), empty: not patched
  Observer observer_;
};

}  // namespace attn
