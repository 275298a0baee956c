#include "attn/model/model.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "attn/error.hpp"
#include "attn/kernels/attention.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/finite.hpp"

namespace attn {

namespace {

std::vector<float> buffer(std::int64_t floats) {
  return std::vector<float>(std::size_t(floats));
}

// Where a block runs: its layer, the call's shape, and the observer if it asks for anything at
// this layer (null otherwise, so an unobserved site costs a test of a null pointer).
struct At {
  std::int64_t layer, bsz, seqlen, start_pos;
  const Observer* observer;
  bool wants(Site s) const { return observer && observer->wants(s, layer); }
  bool patches(Site s) const { return observer && observer->patches(s, layer); }
};

// Hands the observer a site's tensor; where it patches the site, data is edited in place.
void report(const At& at, Site s, float* data, std::initializer_list<std::int64_t> shape) {
  if (!at.wants(s) || !at.observer->on_tensor) return;
  Observation o{s, at.layer, at.start_pos, data, {}, int(shape.size())};
  std::copy(shape.begin(), shape.end(), o.shape);
  if (at.patches(s)) o.edit = data;
  at.observer->on_tensor(o);
}

// Scratch of `floats` for a site computed apart (observer.hpp), grown only for an observer that
// asks for one: an unobserved run allocates nothing, an observed one at a larger call only.
float* hook_scratch(Transformer& m, std::int64_t floats) {
  std::vector<float>& v = m.act.hooked;
  if (std::int64_t(v.size()) < floats) v.resize(std::size_t(floats));
  return v.data();
}

// The RMSNorm's scale of x [rows, dim], sqrt(mean(x^2) + eps) per row in double (TransformerLens's
// hook_scale: the norm divides by it), reported as [bsz, seqlen, 1].
void report_scale(Transformer& m, const At& at, Site s, const float* x, double eps) {
  if (!at.wants(s)) return;
  const std::int64_t rows = at.bsz * at.seqlen, dim = m.args.dim;
  float* out = hook_scratch(m, rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (std::int64_t i = 0; i < dim; ++i) sum += double(x[r * dim + i]) * x[r * dim + i];
    out[r] = float(std::sqrt(sum / double(dim) + eps));
  }
  report(at, s, out, {at.bsz, at.seqlen, 1});
}

// attn_scores [bsz, n_heads, seqlen, keys]: q k^T / sqrt(head_dim) over every key of the cache
// up to the call's last, no mask, from q (RoPE'd, Granite's scale in it) and the layer's cache.
void report_scores(Transformer& m, const At& at, const float* q) {
  if (!at.wants(Site::attn_scores)) return;
  const ModelArgs& a = m.local;
  const std::int64_t hd = a.head_dim(), H = a.n_heads, n_rep = a.n_heads / a.n_kv_heads,
                     keys = at.start_pos + at.seqlen;
  float* out = hook_scratch(m, at.bsz * H * at.seqlen * keys);
  const float scale = 1.0f / std::sqrt(float(hd));  // the attention kernel's
  for (std::int64_t b = 0; b < at.bsz; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < at.seqlen; ++i) {
        const float* qi = q + ((b * at.seqlen + i) * H + h) * hd;
        float* row = out + ((b * H + h) * at.seqlen + i) * keys;
        for (std::int64_t j = 0; j < keys; ++j) {
          const float* kj = m.cache.k(at.layer, b, h / n_rep, j);
          float dot = 0;
          for (std::int64_t d = 0; d < hd; ++d) dot += qi[d] * kj[d];
          row[j] = dot * scale;
        }
      }
  report(at, Site::attn_scores, out, {at.bsz, H, at.seqlen, keys});
}

// result [bsz, seqlen, n_heads, dim]: each head's z [rows, n_heads, head_dim] through its columns
// of wo (no bias), wo widened a row at a time (any weight type).
void report_result(Transformer& m, const LayerWeights& w, const At& at, const float* z) {
  if (!at.wants(Site::result)) return;
  const ModelArgs& a = m.local;
  const std::int64_t rows = at.bsz * at.seqlen, hd = a.head_dim(), H = a.n_heads, D = a.dim,
                     width = H * hd;
  float* out = hook_scratch(m, rows * H * D + width);
  float* wo_row = out + rows * H * D;
  for (std::int64_t i = 0; i < D; ++i) {
    widen_to_f32(m.rt, w.wo.row(i, width), 1, width, wo_row);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t h = 0; h < H; ++h) {
        const float* zh = z + (r * H + h) * hd;
        float sum = 0;
        for (std::int64_t d = 0; d < hd; ++d) sum += wo_row[h * hd + d] * zh[d];
        out[(r * H + h) * D + i] = sum;
      }
  }
  report(at, Site::result, out, {at.bsz, at.seqlen, H, D});
}

// x[n] *= s: Granite's multipliers.
void scale_in_place(float* x, std::int64_t n, float s) {
  for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
}

// h[n] += x[n]: a patched attn_out or mlp_out joining the residual.
void add_into(float* h, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) h[i] += x[i];
}

// Model parallel: h[rows, dim] += the sum over ranks of partial (+ bias, once); apart, if not
// null, receives that sum [rows, dim] too.
void reduce_into(Transformer& m, float* h, const float* bias, std::int64_t rows,
                 float* apart = nullptr) {
  const std::int64_t dim = m.args.dim;
  float* p = m.act.partial.data();
  const auto t0 = std::chrono::steady_clock::now();
  allreduce_sum(m.shard, p, rows * dim);
  m.allreduce_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < dim; ++i) {
      const float sum = p[r * dim + i] + (bias ? bias[i] : 0);
      if (apart) apart[r * dim + i] = sum;
      h[r * dim + i] += sum;
    }
}

// h += wo(attention(rope(wq x), rope(wk x), wv x)), x = h or its norm.
void attention_block(Transformer& m, const LayerWeights& w, const At& at, const float* x,
                     float* h) {
  const ModelArgs& a = m.local;
  Activations& act = m.act;
  const std::int64_t layer = at.layer, bsz = at.bsz, seqlen = at.seqlen, start_pos = at.start_pos;
  const std::int64_t rows = bsz * seqlen, hd = a.head_dim(), keys = start_pos + seqlen;
  const std::array<Projection, 3> qkv = {Projection{act.xq(), w.wq, w.bq, a.n_heads * hd},
                                         Projection{act.xk(), w.wk, w.bk, a.n_kv_heads * hd},
                                         Projection{act.xv(), w.wv, w.bv, a.n_kv_heads * hd}};
  linear(m.rt, qkv, x, rows, a.dim, act.pack.data());
  report(at, Site::q_in, act.xq(), {bsz, seqlen, a.n_heads, hd});
  report(at, Site::k_in, act.xk(), {bsz, seqlen, a.n_kv_heads, hd});
  if (a.qk_norm == QkNorm::per_head) {  // each head's RMSNorm, in place, before RoPE
    rmsnorm(m.rt, act.xq(), act.xq(), w.q_norm, rows * a.n_heads, hd, float(a.norm_eps));
    rmsnorm(m.rt, act.xk(), act.xk(), w.k_norm, rows * a.n_kv_heads, hd, float(a.norm_eps));
  } else if (a.qk_norm == QkNorm::whole) {  // OLMo 2: all heads' q (k) as one vector
    rmsnorm(m.rt, act.xq(), act.xq(), w.q_norm, rows, a.n_heads * hd, float(a.norm_eps));
    rmsnorm(m.rt, act.xk(), act.xk(), w.k_norm, rows, a.n_kv_heads * hd, float(a.norm_eps));
  }
  const bool slides = a.slides(layer);
  const RopeTable& rope = slides ? m.rope_swa : m.rope;
  apply_rope(m.rt, rope, act.xq(), bsz, seqlen, a.n_heads, start_pos);
  apply_rope(m.rt, rope, act.xk(), bsz, seqlen, a.n_kv_heads, start_pos);
  report(at, Site::q, act.xq(), {bsz, seqlen, a.n_heads, hd});  // attention overwrites it
  report(at, Site::k, act.xk(), {bsz, seqlen, a.n_kv_heads, hd});
  report(at, Site::v, act.xv(), {bsz, seqlen, a.n_kv_heads, hd});
  // Granite's attention.scale replaces the kernel's 1/sqrt(head_dim): q is scaled by their ratio
  // after its report (the probabilities are then softmax(scale q k^T + mask)).
  if (a.attention_scale > 0)
    scale_in_place(act.xq(), rows * a.n_heads * hd,
                   float(a.attention_scale * std::sqrt(double(hd))));
  store_kv(m.cache, layer, act.xk(), act.xv(), bsz, seqlen, start_pos);
  report_scores(m, at, act.xq());
  // [bsz, n_heads, seqlen, keys], in the observer's buffer: the fused kernel keeps none.
  float* probs = at.wants(Site::attn_probs) && at.observer->probs
                     ? at.observer->probs(layer, bsz, a.n_heads, seqlen, keys)
                     : nullptr;
  AttentionMask mask = m.mask;  // Gemma's: the layer's window over the whole cache, soft-capping
  mask.window = slides ? a.sliding_window : 0;
  mask.softcap = float(a.attn_softcap);
  attention(m.rt, act.xq(), act.xq(), m.cache.layer(layer), a.n_heads, bsz, seqlen, start_pos,
            act.scores.data(), mask, probs);
  if (at.patches(Site::attn_probs) && !probs)
    throw InputError("an observer patching attn_probs must hand over their buffer (probs)");
  if (probs) report(at, Site::attn_probs, probs, {bsz, a.n_heads, seqlen, keys});
  // Edited probabilities: each head's output anew from them, over the cache's values.
  if (at.patches(Site::attn_probs))
    mix_probs(m.rt, act.xq(), probs, m.cache.layer(layer), a.n_heads, bsz, seqlen, start_pos);
  report(at, Site::z, act.xq(), {bsz, seqlen, a.n_heads, hd});  // before wo
  // Granite's residual_scale on the heads' output: wo (no bias in granite) is linear, so attn_out
  // is the scaled contribution the residual receives.
  if (a.residual_scale != 1)
    scale_in_place(act.xq(), rows * a.n_heads * hd, float(a.residual_scale));
  report_result(m, w, at, act.xq());
  // attn_out goes to xb [rows, dim], free once q, k, v are made.
  float* attn_out = at.wants(Site::attn_out) ? act.xb.data() : nullptr;
  if (m.shard.size > 1) {  // wo's columns of this rank's heads, summed over the ranks
    const std::array<Projection, 1> wo = {Projection{act.partial.data(), w.wo, nullptr, a.dim}};
    linear(m.rt, wo, act.xq(), rows, a.n_heads * hd, act.pack.data());
    reduce_into(m, h, w.bo, rows, attn_out);
    if (attn_out) report(at, Site::attn_out, attn_out, {bsz, seqlen, a.dim});
    return;
  }
  if (attn_out) {  // a product of its own: the residual below keeps its rounding
    const std::array<Projection, 1> wo = {Projection{attn_out, w.wo, w.bo, a.dim}};
    linear(m.rt, wo, act.xq(), rows, a.n_heads * hd, act.pack.data());
    report(at, Site::attn_out, attn_out, {bsz, seqlen, a.dim});
    if (at.patches(Site::attn_out)) return add_into(h, attn_out, rows * a.dim);
  }
  const std::array<Projection, 1> wo = {Projection{h, w.wo, w.bo, a.dim}};
  linear(m.rt, wo, act.xq(), rows, a.n_heads * hd, act.pack.data(), /*accumulate=*/true);
}

// Where mlp_out is summed apart from the residual [rows, dim], for an observer that asks for it.
float* mlp_out_buffer(Transformer& m, std::int64_t rows) {
  if (std::int64_t(m.act.observed.size()) < rows * m.args.dim)
    throw InputError(
        "an observer asking for mlp_out must be set with observe(), which sizes "
        "its buffer");
  return m.act.observed.data();
}

// h += w2(silu(w1 x) * w3 x) with x = ffn_norm(h). The rows go in passes of at most ffn_rows
// (h1 and h3 [rows, ffn_hidden] stay that small), each pass with every hidden unit at once: each
// output of w2 is one product over the whole hidden width, in the canonical order, so a row's
// bits do not depend on the rows computed with it (docs/design.md, "One order per output").
void feed_forward(Transformer& m, const LayerWeights& w, const At& at, const float* x, float* h) {
  const ModelArgs& a = m.local;
  const std::int64_t rows = at.bsz * at.seqlen;
  const bool split = m.shard.size > 1;  // w2 sums into partial, then over the ranks
  // Observed on one rank: w2 a second time into a sum of its own, the residual keeping its
  // rounding (over ranks the allreduced partial is that sum).
  float* apart = !split && at.wants(Site::mlp_out) ? mlp_out_buffer(m, rows) : nullptr;
  const bool patched = at.patches(Site::mlp_out);  // apart only, added after the edit
  Activations& act = m.act;
  const std::int64_t hidden = a.ffn_hidden();
  if (w.ffn_norm) {
    report_scale(m, at, Site::ln2_scale, x, a.norm_eps);
    rmsnorm(m.rt, act.xb.data(), x, w.ffn_norm, rows, a.dim, float(a.norm_eps));
  } else {  // OLMo 2: no norm before the FFN
    std::memcpy(act.xb.data(), x, std::size_t(rows * a.dim) * sizeof(float));
  }
  // mlp_pre and mlp_post [rows, hidden], copied from each pass's h1.
  const bool units = at.wants(Site::mlp_pre) || at.wants(Site::mlp_post);
  float* pre = units ? hook_scratch(m, 2 * rows * hidden) : nullptr;
  float* post = units ? pre + rows * hidden : nullptr;
  const auto keep = [&](float* dest, std::int64_t r0, std::int64_t n) {
    std::memcpy(dest + r0 * hidden, act.h1(), std::size_t(n * hidden) * sizeof(float));
  };
  const std::array<Projection, 2> w13 = {Projection{act.h1(), w.w1, nullptr, hidden},
                                         Projection{act.h3(), w.w3, nullptr, hidden}};
  for (std::int64_t r0 = 0; r0 < rows; r0 += act.ffn_rows) {
    const std::int64_t n = std::min(act.ffn_rows, rows - r0);
    linear(m.rt, w13, act.xb.data() + r0 * a.dim, n, a.dim, act.pack.data());  // [n, hidden]
    if (units) keep(pre, r0, n);
    if (a.geglu)
      geglu(m.rt, act.h1(), act.h3(), n * hidden);
    else
      swiglu(m.rt, act.h1(), act.h3(), n * hidden);
    if (units) keep(post, r0, n);
    if (a.residual_scale != 1) scale_in_place(act.h1(), n * hidden, float(a.residual_scale));
    if (apart) {
      const std::array<Projection, 1> w2 = {Projection{apart + r0 * a.dim, w.w2, nullptr, a.dim}};
      linear(m.rt, w2, act.h1(), n, hidden, act.pack.data());
      if (patched) continue;
    }
    float* out = (split ? act.partial.data() : h) + r0 * a.dim;
    const std::array<Projection, 1> w2 = {Projection{out, w.w2, nullptr, a.dim}};
    linear(m.rt, w2, act.h1(), n, hidden, act.pack.data(), /*accumulate=*/!split);
  }
  if (units) {
    report(at, Site::mlp_pre, pre, {at.bsz, at.seqlen, hidden});
    report(at, Site::mlp_post, post, {at.bsz, at.seqlen, hidden});
  }
  if (split) {
    reduce_into(m, h, nullptr, rows);
    report(at, Site::mlp_out, act.partial.data(), {at.bsz, at.seqlen, a.dim});
  } else if (apart) {
    report(at, Site::mlp_out, apart, {at.bsz, at.seqlen, a.dim});
    if (patched) add_into(h, apart, rows * a.dim);
  }
}

// OLMo 2's block: h += norm(attention(h)), then h += norm(ffn(h)), each output summed apart in
// `partial` (its attn_out and mlp_out sites are the outputs before their norms). Gemma's keeps
// the norms before attention and the FFN too (pre_norms: the layer's attention_norm and ffn_norm).
void post_norm_block(Transformer& m, const LayerWeights& w, const At& at, float* h) {
  const ModelArgs& a = m.local;
  if (m.shard.size > 1)
    throw InputError(a.arch + "'s post-norms are not supported under model parallel",
                     "model_parallel_size");
  const std::int64_t rows = at.bsz * at.seqlen, n = rows * a.dim;
  float* apart = m.act.partial.data();
  std::fill(apart, apart + n, 0.0f);
  const float* x = h;
  if (w.attention_norm) {  // into xb, which attention_block reuses only once q, k, v are made
    rmsnorm(m.rt, m.act.xb.data(), h, w.attention_norm, rows, a.dim, float(a.norm_eps));
    x = m.act.xb.data();
  }
  attention_block(m, w, at, x, apart);
  rmsnorm(m.rt, apart, apart, w.post_attention_norm, rows, a.dim, float(a.norm_eps));
  add_into(h, apart, n);
  report(at, Site::resid_mid, h, {at.bsz, at.seqlen, a.dim});
  std::fill(apart, apart + n, 0.0f);
  feed_forward(m, w, at, h, apart);
  rmsnorm(m.rt, apart, apart, w.post_ffn_norm, rows, a.dim, float(a.norm_eps));
  add_into(h, apart, n);
}

// h[rows, dim] += v[dim] in each row: a control vector's layer (Transformer::steering), added in
// float as ggml_add does.
void add_rows(const float* v, float* h, std::int64_t rows, std::int64_t dim) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < dim; ++i) h[r * dim + i] += v[i];
}

// Finite inputs and weights can still overflow (huge weights, a huge norm_eps): say where the
// first NaN or Inf appeared rather than let it reach every output. One read of the residual.
void check_residual(const float* h, std::int64_t rows, std::int64_t dim, std::int64_t layer,
                    std::int64_t seqlen, std::int64_t start_pos) {
  const std::int64_t i = first_non_finite(h, rows * dim);
  if (i < 0) return;
  const std::int64_t row = i / dim, pos = start_pos + row % seqlen;
  throw NonFiniteError("a non-finite value appeared in the output of layer " +
                       std::to_string(layer) + " at position " + std::to_string(pos) +
                       " (batch row " + std::to_string(row / seqlen) + ", feature " +
                       std::to_string(i % dim) + ")");
}

// torch's encoder FFN: h += w2(act(w1 x + b1)) + b2, in passes of rows as above.
void encoder_feed_forward(Transformer& m, const LayerWeights& w, const At& at, const float* x,
                          float* h) {
  const ModelArgs& a = m.args;
  const std::int64_t rows = at.bsz * at.seqlen;
  float* apart = at.wants(Site::mlp_out) ? mlp_out_buffer(m, rows) : nullptr;  // as feed_forward
  const bool patched = at.patches(Site::mlp_out);
  const std::int64_t hidden = a.ffn_hidden();
  float* h1 = m.act.h1();
  const std::array<Projection, 1> w1 = {Projection{h1, w.w1, w.b1, hidden}};
  for (std::int64_t r0 = 0; r0 < rows; r0 += m.act.ffn_rows) {
    const std::int64_t n = std::min(m.act.ffn_rows, rows - r0);
    linear(m.rt, w1, x + r0 * a.dim, n, a.dim, m.act.pack.data());  // h1: [n, hidden]
    activate(m.rt, a.activation, h1, n * hidden);
    if (apart) {
      const std::array<Projection, 1> w2 = {Projection{apart + r0 * a.dim, w.w2, w.b2, a.dim}};
      linear(m.rt, w2, h1, n, hidden, m.act.pack.data());
      if (patched) continue;
    }
    const std::array<Projection, 1> w2 = {Projection{h + r0 * a.dim, w.w2, w.b2, a.dim}};
    linear(m.rt, w2, h1, n, hidden, m.act.pack.data(), /*accumulate=*/true);
  }
  if (!apart) return;
  report(at, Site::mlp_out, apart, {at.bsz, at.seqlen, a.dim});
  if (patched) add_into(h, apart, rows * a.dim);
}

// torch.nn.TransformerEncoderLayer in eval mode. Post-norm: h = LN1(x + SA(x)),
// out = LN2(h + FF(h)); norm_first: h = x + SA(LN1(x)), out = h + FF(LN2(h)).
void encoder_block(Transformer& m, const LayerWeights& w, const At& at, float* h) {
  const ModelArgs& a = m.args;
  const std::int64_t rows = at.bsz * at.seqlen;
  const float eps = float(a.norm_eps);
  float* xb = m.act.xb.data();
  if (a.norm_first) {
    layernorm(m.rt, xb, h, w.attention_norm, w.attention_norm_bias, rows, a.dim, eps);
    attention_block(m, w, at, xb, h);
    report(at, Site::resid_mid, h, {at.bsz, at.seqlen, a.dim});
    layernorm(m.rt, xb, h, w.ffn_norm, w.ffn_norm_bias, rows, a.dim, eps);
    encoder_feed_forward(m, w, at, xb, h);
    return;
  }
  attention_block(m, w, at, h, h);
  layernorm(m.rt, h, h, w.attention_norm, w.attention_norm_bias, rows, a.dim, eps);
  report(at, Site::resid_mid, h, {at.bsz, at.seqlen, a.dim});
  std::memcpy(xb, h, std::size_t(rows * a.dim) * sizeof(float));
  encoder_feed_forward(m, w, at, xb, h);
  layernorm(m.rt, h, h, w.ffn_norm, w.ffn_norm_bias, rows, a.dim, eps);
}

// The RoPE table of base theta, every angle times freq_scale (linear scaling), rows filled as
// used.
RopeTable rope_table(const ModelArgs& a, double theta, double freq_scale) {
  RopeTable t = make_rope_table(a.rope, a.head_dim(), a.max_seq_len, theta,
                                a.rope_scaling ? &*a.rope_scaling : nullptr, 0, rope_factors(a),
                                a.rotary_dims(), a.rope_attn_factor);
  for (double& f : t.freq) f *= freq_scale;
  return t;
}

}  // namespace

Transformer make_transformer(const ModelArgs& whole, TransformerWeights weights,
                             std::int64_t max_rows, const Runtime& rt, const Shard& shard) {
  const ModelArgs a = local_args(whole, shard);
  // Sized before anything is allocated: a size past 2^63 bytes is refused here.
  const BufferPlan plan = plan_buffers(a, shard, max_rows, rt);
  const ModelEnds ends = weights.ends;
  Transformer m{whole,
                ends,
                std::move(weights),
                make_kv_cache(a),
                {},
                {},
                {},
                {a.mask, nullptr, 0, 0, 0},
                {},
                {},
                {},
                rt,
                shard,
                a};
  m.rope = rope_table(a, a.rope_theta, a.rope_freq_scale);
  if (!a.sliding_layers.empty())
    m.rope_swa = rope_table(a, a.rope_theta_swa, a.rope_freq_scale_swa);
  Activations& act = m.act;
  act.plan = plan;
  act.xb = buffer(plan.xb);
  act.work = buffer(plan.work);
  act.scores = FloatBuffer(std::size_t(plan.scores));  // touched only up to the keys used
  act.pack = buffer(plan.pack);
  act.partial = buffer(plan.partial);
  if (ends.tokens_in || ends.logits_out) {
    act.hidden_in = buffer(plan.xb);
    act.hidden_out = buffer(plan.xb);
  }
  return m;
}

void forward(Transformer& m, const float* x, std::int64_t bsz, std::int64_t seqlen,
             std::int64_t start_pos, float* out) {
  const ModelArgs& a = m.args;
  if (bsz * seqlen > m.act.plan.max_rows || bsz > a.max_batch_size ||
      start_pos + seqlen > a.max_seq_len)
    throw InputError("forward: " + std::to_string(bsz) + " x " + std::to_string(seqlen) +
                     " positions from " + std::to_string(start_pos) + " exceed the cache capacity");
  const std::int64_t rows = bsz * seqlen;
  if (m.observer && m.observer->patch && m.shard.size > 1)
    throw InputError(
        "patching activations is not supported under model parallel (a rank holds only its "
        "heads)",
        "model_parallel_size");
  extend_rope(m.rope, start_pos + seqlen);
  if (!a.sliding_layers.empty()) extend_rope(m.rope_swa, start_pos + seqlen);
  std::memcpy(out, x, std::size_t(rows * a.dim) * sizeof(float));  // the residual stream
  const Observer* observer = m.observer;
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    if (m.cancel && m.cancel->load(std::memory_order_relaxed))
      throw Interrupted("interrupted before layer " + std::to_string(l));
    const LayerWeights& w = m.weights.layers[std::size_t(l)];
    const At at{l, bsz, seqlen, start_pos,
                observer && observer->wants_layer(l) ? observer : nullptr};
    report(at, Site::resid_pre, out, {bsz, seqlen, a.dim});
    switch (a.block) {  // the architecture row's block (arch.hpp): a new kind is a new case
      case Block::llama:
        if (a.post_norms) {
          post_norm_block(m, w, at, out);
          break;
        }
        report_scale(m, at, Site::ln1_scale, out, a.norm_eps);
        rmsnorm(m.rt, m.act.xb.data(), out, w.attention_norm, rows, a.dim, float(a.norm_eps));
        attention_block(m, w, at, m.act.xb.data(), out);
        report(at, Site::resid_mid, out, {bsz, seqlen, a.dim});
        feed_forward(m, w, at, out, out);
        break;
      case Block::encoder:
        encoder_block(m, w, at, out);
        break;
      case Block::attention:
        attention_block(m, w, at, out, out);
        break;
    }
    if (!m.steering.empty()) add_rows(m.steering.data() + l * a.dim, out, rows, a.dim);
    // Before the check, so that an observer sees the block that made a NaN.
    report(at, Site::resid_post, out, {bsz, seqlen, a.dim});
    check_residual(out, rows, a.dim, l, seqlen, start_pos);
  }
}

void check_token_ids(std::span<const std::int32_t> ids, std::int64_t vocab_size,
                     const std::string& what) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || (vocab_size > 0 && ids[i] >= vocab_size))
      throw InputError(what + ": token " + std::to_string(ids[i]) + " at index " +
                       std::to_string(i) + " is outside the vocabulary [0, " +
                       std::to_string(vocab_size) + ")");
}

void embed(const Transformer& m, const std::int32_t* tokens, std::int64_t rows, float* h) {
  const ModelArgs& a = m.args;
  const Matrix& e = m.weights.tokens.tok_embeddings;
  check_token_ids({tokens, std::size_t(rows)}, a.vocab_size, "tokens");
  for (std::int64_t r = 0; r < rows; ++r)
    widen_to_f32(m.rt, e.row(tokens[r], a.dim), 1, a.dim, h + r * a.dim);
  if (a.embedding_scale != 1) scale_in_place(h, rows * a.dim, float(a.embedding_scale));
}

namespace {

// logits[rows, vocab_size] = output(xn) for xn [rows, dim] already normed.
void head(Transformer& m, const float* xn, std::int64_t rows, float* logits) {
  const ModelArgs& a = m.args;
  const std::array<Projection, 1> out = {
      Projection{logits, m.weights.tokens.output, nullptr, a.vocab_size}};
  linear(m.rt, out, xn, rows, a.dim, m.act.pack.data());
  if (a.logit_scale != 1)  // Granite's logits_scaling divides them
    scale_in_place(logits, rows * a.vocab_size, float(1 / a.logit_scale));
  if (a.final_softcap > 0)  // Gemma's, last: the logit lens reads the head's logits too
    softcap(logits, rows * a.vocab_size, float(a.final_softcap));
}

// Each sequence's last position of h [bsz, seqlen, dim], packed into rows [bsz, dim].
void last_positions(const float* h, std::int64_t bsz, std::int64_t seqlen, std::int64_t dim,
                    float* rows) {
  for (std::int64_t b = 0; b < bsz; ++b)
    std::memmove(rows + b * dim, h + ((b + 1) * seqlen - 1) * dim,
                 std::size_t(dim) * sizeof(float));
}

}  // namespace

void output_logits(Transformer& m, const float* h, std::int64_t rows, float* logits) {
  const ModelArgs& a = m.args;
  float* xb = m.act.xb.data();
  rmsnorm(m.rt, xb, h, m.weights.tokens.norm, rows, a.dim, float(a.norm_eps));
  head(m, xb, rows, logits);
}

namespace {

// Points m.observer at what the attached observers ask for together, and sizes its buffer.
void refresh_observer(Transformer& m) {
  m.merged.reset();
  if (m.observers.size() > 1)
    m.merged = std::make_shared<const Observer>(merge_observers(m.observers, m.args.n_layers));
  m.observer = m.merged ? m.merged.get() : m.observers.empty() ? nullptr : m.observers[0];
  const Observer* observer = m.observer;
  const bool apart = observer && ((observer->sites | observer->patch) & site_bit(Site::mlp_out)) &&
                     m.shard.size == 1;
  if (!apart) {
    m.act.observed = {};
  } else if (m.act.observed.size() != std::size_t(m.act.plan.xb)) {
    m.act.observed.assign(std::size_t(m.act.plan.xb), 0.0f);  // [max_rows, dim]
  }
}

}  // namespace

void observe(Transformer& m, const Observer* observer) {
  m.observers.clear();
  if (observer) m.observers.push_back(observer);
  refresh_observer(m);
}

void attach(Transformer& m, const Observer& observer) {
  m.observers.push_back(&observer);
  refresh_observer(m);
}

void detach(Transformer& m, const Observer& observer) {
  const auto it = std::find(m.observers.begin(), m.observers.end(), &observer);
  if (it == m.observers.end()) return;
  m.observers.erase(it);
  refresh_observer(m);
}

void forward(Transformer& m, const std::int32_t* tokens, std::int64_t bsz, std::int64_t seqlen,
             std::int64_t start_pos, float* out, bool all_positions) {
  const ModelArgs& a = m.args;
  if (!m.ends.tokens_in) throw InputError("forward: this model was built without tok_embeddings");
  const std::int64_t rows = bsz * seqlen;
  if (rows > m.act.plan.max_rows)
    throw InputError("forward: " + std::to_string(rows) + " rows exceed the model's " +
                     std::to_string(m.act.plan.max_rows));
  float* x = m.act.hidden_in.data();  // [rows, dim]
  embed(m, tokens, rows, x);
  report({-1, bsz, seqlen, start_pos, m.observer}, Site::embed, x, {bsz, seqlen, a.dim});
  if (!m.ends.logits_out) {
    forward(m, x, bsz, seqlen, start_pos, out);
    return;
  }
  float* h = m.act.hidden_out.data();  // [rows, dim]
  forward(m, x, bsz, seqlen, start_pos, h);
  report_scale(m, {a.n_layers, bsz, seqlen, start_pos, m.observer}, Site::final_scale, h,
               a.norm_eps);
  if (m.observer && m.observer->wants(Site::final_norm, a.n_layers)) {
    // Every position normed, [bsz, seqlen, dim]; norm works row by row, so the head's rows are
    // the same bits as below.
    float* xb = m.act.xb.data();
    rmsnorm(m.rt, xb, h, m.weights.tokens.norm, rows, a.dim, float(a.norm_eps));
    report({a.n_layers, bsz, seqlen, start_pos, m.observer}, Site::final_norm, xb,
           {bsz, seqlen, a.dim});
    if (all_positions || seqlen == 1) return head(m, xb, rows, out);
    last_positions(xb, bsz, seqlen, a.dim, x);  // [bsz, dim]
    return head(m, x, bsz, out);
  }
  if (all_positions || seqlen == 1) {
    output_logits(m, h, rows, out);
    return;
  }
  last_positions(h, bsz, seqlen, a.dim, x);  // [bsz, dim]
  output_logits(m, x, bsz, out);
}

}  // namespace attn
