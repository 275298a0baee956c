#pragma once
// What a caller sees inside a forward call: the model reports, for the sites and layers an
// Observer asks for, each tensor where it is computed (gemma.cpp's activations_observer). One
// forward serves prefill and decode alike; with no observer, or one that asks for nothing at a
// layer, the forward copies nothing and allocates nothing.
#include <array>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace attn {

// The sites, named as TransformerLens's hooks. Shapes per forward call of seqlen positions from
// start_pos (S = start_pos + seqlen keys); model parallel, heads are the rank's own
// (n_heads / K, n_kv_heads / K) and nothing is gathered.
//
//   resid_pre   [bsz, seqlen, dim]                   the block's input
//   q_in        [bsz, seqlen, n_heads, head_dim]     wq x (+ bq) before RoPE
//   k_in        [bsz, seqlen, n_kv_heads, head_dim]  wk x (+ bk) before RoPE
//   q           [bsz, seqlen, n_heads, head_dim]     wq x after RoPE
//   k           [bsz, seqlen, n_kv_heads, head_dim]  wk x after RoPE
//   v           [bsz, seqlen, n_kv_heads, head_dim]  wv x
//   attn_probs  [bsz, n_heads, seqlen, S]            softmax(q k^T / sqrt(head_dim) + mask),
//                                                    masked entries 0, written into the buffer
//                                                    Observer::probs hands over
//   attn_out    [bsz, seqlen, dim]                   wo(attention) (+ bo), before the residual add
//   resid_mid   [bsz, seqlen, dim]                   between attention and MLP: resid_pre +
//                                                    attn_out (llama, encoder norm_first),
//                                                    LN1(resid_pre + attn_out) (encoder post-norm)
//   mlp_out     [bsz, seqlen, dim]                   w2(...) (+ b2), before its residual add
//   resid_post  [bsz, seqlen, dim]                   the block's output
//   final_norm  [bsz, seqlen, dim]                   norm(h) of every position before the output
//                                                    head, layer n_layers
//
// Computed apart, only when observed (issue 51; read-only unless said):
//   embed       [bsz, seqlen, dim]                   the embedded tokens (scaled), forward(tokens)
//                                                    only, layer -1; patchable
//   attn_scores [bsz, n_heads, seqlen, S]            q k^T / sqrt(head_dim) (Granite: its scale),
//                                                    before the mask and the softmax: every key
//                                                    of the call, future ones too
//   z           [bsz, seqlen, n_heads, head_dim]     probs v per head, before wo; patchable
//   result      [bsz, seqlen, n_heads, dim]          each head's z through its columns of wo
//                                                    (no bo): attn_out = their sum + bo
//   mlp_pre     [bsz, seqlen, ffn_hidden]            w1 x, the gate before its activation
//   mlp_post    [bsz, seqlen, ffn_hidden]            silu(w1 x) * w3 x, what w2 reads
//   ln1_scale   [bsz, seqlen, 1]                     sqrt(mean(x^2) + eps) of attention_norm's x
//   ln2_scale   [bsz, seqlen, 1]                     the same of ffn_norm's input
//   final_scale [bsz, seqlen, 1]                     the same of the final norm's, layer n_layers
// mlp_* and ln*_scale come from llama blocks with their pre-norms (not OLMo 2's post-norms, not
// encoder blocks); final_scale and embed from a token model's ends, as final_norm.
//
// Every block type reports resid_pre, q_in, k_in, q, k, v, attn_probs, attn_out and resid_post;
// llama and encoder blocks also resid_mid and mlp_out (the block `attention` has no MLP: they are
// not reported). final_norm comes from forward(tokens) of a model with the head (ModelEnds'
// logits_out) only. attn_out and mlp_out exist apart from the residual only when observed: the
// model then computes them a second time into their own buffer, the residual stream keeping its own
// rounding, so an observed run gives the same outputs bit for bit as an unobserved one.
//
// Patching (Observer::patch): what on_tensor writes through Observation::edit replaces the
// activation for the rest of the pass, as a TransformerLens hook's returned value does. The
// sites held in the model's buffers are edited where they are reported (k and v before the
// cache stores them, q_in and k_in before RoPE); a patched attn_out or mlp_out, computed apart,
// is then added to the residual in place of the product summed into it; patched attn_probs give
// the heads' outputs anew, probs V per head. Not under model parallel (a rank holds some heads).
enum class Site : std::uint8_t {
  resid_pre,
  q,
  k,
  v,
  attn_probs,
  attn_out,
  resid_mid,
  mlp_out,
  resid_post,
  final_norm,
  q_in,  // last, so that the bits of the sites before them did not change
  k_in,
  embed,  // issue 51's, after them for the same reason
  attn_scores,
  z,
  result,
  mlp_pre,
  mlp_post,
  ln1_scale,
  ln2_scale,
  final_scale,
};

inline constexpr std::size_t kSiteCount = 21;
inline constexpr std::array<std::string_view, kSiteCount> kSiteNames = {
    "resid_pre", "q",          "k",          "v",        "attn_probs", "attn_out",  "resid_mid",
    "mlp_out",   "resid_post", "final_norm", "q_in",     "k_in",       "embed",     "attn_scores",
    "z",         "result",     "mlp_pre",    "mlp_post", "ln1_scale",  "ln2_scale", "final_scale"};

// A site of the whole model rather than of a block (its hook name has no "blocks.{l}.").
constexpr bool model_site(Site s) {
  return s == Site::final_norm || s == Site::embed || s == Site::final_scale;
}

constexpr std::string_view site_name(Site s) {
  return kSiteNames[std::size_t(s)];
}
constexpr std::uint32_t site_bit(Site s) {
  return std::uint32_t(1) << unsigned(s);
}
inline constexpr std::uint32_t kAllSites = (std::uint32_t(1) << kSiteCount) - 1;

// "resid_pre" -> Site::resid_pre; throws InputError naming the bad name and the valid ones.
Site parse_site(std::string_view name);

// One tensor as the forward reports it: data points into the model's own buffers (or the one
// Observer::probs handed over) and is valid only during the call; copy what is kept. Layer is
// the model's block index, 0 .. n_layers-1 (a model of a slice of a checkpoint's layers counts
// from its first block: add args.first_layer for the checkpoint's); final_norm's is n_layers.
struct Observation {
  Site site;
  std::int64_t layer;
  std::int64_t start_pos;
  const float* data;  // row-major, contiguous
  std::int64_t shape[4];
  int ndim;
  // data itself, writable, when the observer patches this site here (Observer::patch); null
  // otherwise. What on_tensor leaves there is what the rest of the forward reads.
  float* edit = nullptr;
};

// What a caller asks to see. Set with observe() (model.hpp), which sizes mlp_out's buffer; the
// forward reads it from its own thread and never changes it.
struct Observer {
  std::uint32_t sites = 0;  // site_bit() of each site reported
  // site_bit() of each site on_tensor may edit (reported too, with Observation::edit set);
  // attn_probs needs `probs` to hand over its buffer. Refused under model parallel.
  std::uint32_t patch = 0;
  // [layers]: nonzero = report this block's sites; empty: every block. final_norm ignores it.
  std::vector<std::uint8_t> layers;
  // [layers], when not empty: the sites (of sites and patch) each block reports, so that a
  // caller keeping different sites at different blocks makes no block pay for the others'.
  std::vector<std::uint32_t> layer_sites;
  // Called synchronously on the forward's thread, after the tensor is complete and before it
  // changes; may be empty (attn_probs written through `probs` need no call).
  std::function<void(const Observation&)> on_tensor;
  // Where to write layer `layer`'s probabilities [bsz, n_heads, seqlen, keys] (the fused kernel
  // never holds them whole); null, or no function: not kept, not reported.
  std::function<float*(std::int64_t layer, std::int64_t bsz, std::int64_t n_heads,
                       std::int64_t seqlen, std::int64_t keys)>
      probs;

  // Whether the layer filter lets block `layer` through.
  bool keeps_layer(std::int64_t layer) const {
    return layers.empty() ||
           (layer >= 0 && layer < std::int64_t(layers.size()) && layers[std::size_t(layer)] != 0);
  }
  // The sites block `layer` reports, of `mask`.
  std::uint32_t at_layer(std::uint32_t mask, std::int64_t layer) const {
    if (!keeps_layer(layer)) return 0;
    if (layer_sites.empty()) return mask;
    return layer >= 0 && layer < std::int64_t(layer_sites.size())
               ? mask & layer_sites[std::size_t(layer)]
               : 0;
  }
  // Whether any of a block's sites is reported at this layer.
  bool wants_layer(std::int64_t layer) const {
    return at_layer((sites | patch) & ~kModelSites, layer) != 0;
  }
  bool wants(Site s, std::int64_t layer) const {
    return model_site(s) ? ((sites | patch) & site_bit(s)) != 0
                         : at_layer(sites | patch, layer) & site_bit(s);
  }
  bool patches(Site s, std::int64_t layer) const {
    return model_site(s) ? (patch & site_bit(s)) != 0 : at_layer(patch, layer) & site_bit(s);
  }
  static constexpr std::uint32_t kModelSites =
      site_bit(Site::final_norm) | site_bit(Site::embed) | site_bit(Site::final_scale);
};

// One observer reporting to several (the recorders a session holds, engine/session.hpp), as if
// each were the model's alone: a block reports the union of what they ask for at it; on_tensor
// reaches each that asks for the site at that layer, in list order (a patching one edits before
// the ones after it read); attn_probs are written into the first buffer one of them hands over,
// and the others read them from the Observation. Every observer must outlive the result, and
// its sites and layers stay as they were merged (a change needs a new merge: detach, attach).
Observer merge_observers(const std::vector<const Observer*>& observers, std::int64_t n_layers);

}  // namespace attn
