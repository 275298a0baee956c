#pragma once
// The observer's sites under TransformerLens's hook names, so that a user's names for a Llama in
// TransformerLens (`run_with_cache`, saved activations) are ours too: the one table of them.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "attn/model/observer.hpp"

namespace attn {

// [kSiteCount], by Site: a block's sites follow "blocks.{l}.", final_norm's is whole. As in
// TransformerLens, hook_q/hook_k are before RoPE and hook_rot_q/hook_rot_k after; hook_k and
// hook_v are per KV head (GQA's keys are not repeated per query head).
inline constexpr std::array<std::string_view, kSiteCount> kHookNames = {
    "hook_resid_pre",     "attn.hook_rot_q",
    "attn.hook_rot_k",    "attn.hook_v",
    "attn.hook_pattern",  "hook_attn_out",
    "hook_resid_mid",     "hook_mlp_out",
    "hook_resid_post",    "ln_final.hook_normalized",
    "attn.hook_q",        "attn.hook_k",
    "hook_embed",         "attn.hook_attn_scores",
    "attn.hook_z",        "attn.hook_result",
    "mlp.hook_pre",       "mlp.hook_post",
    "ln1.hook_scale",     "ln2.hook_scale",
    "ln_final.hook_scale"};

// A site at a layer (a model_site: layer -1, as it has none).
struct HookPoint {
  Site site;
  std::int64_t layer;
  friend bool operator==(const HookPoint&, const HookPoint&) = default;
};

// "blocks.3.attn.hook_pattern" for {attn_probs, 3}; "ln_final.hook_normalized" for final_norm
// (a model_site's name is whole).
std::string hook_name(Site s, std::int64_t layer);

// The inverse, for a model of n_layers blocks: InputError naming the name (escaped) when it is
// not one of the hook names or its layer is outside [0, n_layers).
HookPoint parse_hook_name(std::string_view name, std::int64_t n_layers);

}  // namespace attn
