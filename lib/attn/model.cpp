#include "attn/model.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>

#include "attn/attention.hpp"
#include "attn/error.hpp"
#include "attn/matmul.hpp"

namespace attn {

namespace {

std::vector<float> buffer(std::int64_t rows, std::int64_t cols) {
  return std::vector<float>(std::size_t(rows * cols));
}

// Model parallel: h[rows, dim] += the sum over ranks of partial (+ bias, once).
void reduce_into(Transformer& m, float* h, const float* bias, std::int64_t rows) {
  const std::int64_t dim = m.args.dim;
  float* p = m.act.partial.data();
  const auto t0 = std::chrono::steady_clock::now();
  allreduce_sum(m.shard, p, rows * dim);
  m.allreduce_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < dim; ++i) h[r * dim + i] += p[r * dim + i] + (bias ? bias[i] : 0);
}

// h += wo(attention(rope(wq x), rope(wk x), wv x)), x = h or its norm.
void attention_block(Transformer& m, const LayerWeights& w, std::int64_t layer, const float* x,
                     float* h, std::int64_t bsz, std::int64_t seqlen, std::int64_t start_pos) {
  const ModelArgs& a = m.local;
  Activations& act = m.act;
  const std::int64_t rows = bsz * seqlen, hd = a.head_dim();
  const std::array<Projection, 3> qkv = {Projection{act.xq.data(), w.wq, w.bq, a.n_heads * hd},
                                         Projection{act.xk.data(), w.wk, w.bk, a.n_kv_heads * hd},
                                         Projection{act.xv.data(), w.wv, w.bv, a.n_kv_heads * hd}};
  linear(qkv, x, rows, a.dim);
  apply_rope(m.rope, act.xq.data(), bsz, seqlen, a.n_heads, start_pos);
  apply_rope(m.rope, act.xk.data(), bsz, seqlen, a.n_kv_heads, start_pos);
  store_kv(m.cache, layer, act.xk.data(), act.xv.data(), bsz, seqlen, start_pos);
  attention(act.xq.data(), act.xq.data(), m.cache, layer, a.n_heads, bsz, seqlen, start_pos,
            act.scores);
  if (m.shard.size > 1) {  // wo's columns of this rank's heads, summed over the ranks
    const std::array<Projection, 1> wo = {Projection{act.partial.data(), w.wo, nullptr, a.dim}};
    linear(wo, act.xq.data(), rows, a.n_heads * hd);
    reduce_into(m, h, w.bo, rows);
    return;
  }
  const std::array<Projection, 1> wo = {Projection{h, w.wo, w.bo, a.dim}};
  linear(wo, act.xq.data(), rows, a.n_heads * hd, /*accumulate=*/true);
}

// Hidden units per FFN block in prefill; a decode step takes all of them at once.
std::int64_t ffn_block(const ModelArgs& a, const Activations& act, std::int64_t rows) {
  return rows < 4 ? a.ffn_hidden() : std::min(act.ffn_block, a.ffn_hidden());
}

// h += w2(silu(w1 x) * w3 x) with x = ffn_norm(h). The hidden units go in blocks: h1 and h3 stay
// small, every weight is read (and packed by sgemm) once, and w2 takes the block's columns.
void feed_forward(Transformer& m, const LayerWeights& w, float* h, std::int64_t rows) {
  const ModelArgs& a = m.local;
  const bool split = m.shard.size > 1;  // w2 sums into partial, then over the ranks
  Activations& act = m.act;
  const std::int64_t hidden = a.ffn_hidden(), block = ffn_block(a, act, rows);
  rmsnorm(act.xb.data(), h, w.ffn_norm, rows, a.dim, float(a.norm_eps));
  for (std::int64_t j0 = 0; j0 < hidden; j0 += block) {
    const std::int64_t n = std::min(block, hidden - j0);
    const std::array<Projection, 2> w13 = {
        Projection{act.h1.data(), w.w1 + j0 * a.dim, nullptr, n},
        Projection{act.h3.data(), w.w3 + j0 * a.dim, nullptr, n}};
    linear(w13, act.xb.data(), rows, a.dim);  // h1, h3: [rows, n]
    swiglu(act.h1.data(), act.h3.data(), rows * n);
    const std::array<Projection, 1> w2 = {
        Projection{split ? act.partial.data() : h, w.w2 + j0, nullptr, a.dim, hidden}};
    linear(w2, act.h1.data(), rows, n, /*accumulate=*/!split || j0 > 0);  // w2[:, j0:j0+n]
  }
  if (split) reduce_into(m, h, nullptr, rows);
}

}  // namespace

Transformer make_transformer(const ModelArgs& whole, TransformerWeights weights,
                             std::int64_t max_rows, const Shard& shard) {
  const ModelArgs a = local_args(whole, shard);
  Transformer m{whole, std::move(weights), make_kv_cache(a), {}, {}, shard, a};
  m.rope = make_rope_table(a.rope, a.head_dim(), a.max_seq_len, a.rope_theta,
                           a.rope_scaling ? &*a.rope_scaling : nullptr);
  const std::int64_t q = a.n_heads * a.head_dim(), kv = a.n_kv_heads * a.head_dim();
  Activations& act = m.act;
  act.max_rows = max_rows;
  act.xb = buffer(max_rows, a.dim);
  act.xq = buffer(max_rows, q);
  act.xk = buffer(max_rows, kv);
  act.xv = buffer(max_rows, kv);
  if (a.block == Block::llama) {
    const std::int64_t n = std::max(max_rows * ffn_block(a, act, max_rows), a.ffn_hidden());
    act.h1 = buffer(n, 1);
    act.h3 = buffer(n, 1);
  }
  act.scores = make_attention_scratch(m.cache, threads());
  if (shard.size > 1) act.partial = buffer(max_rows, a.dim);
  return m;
}

void forward(Transformer& m, const float* x, std::int64_t bsz, std::int64_t seqlen,
             std::int64_t start_pos, float* out) {
  const ModelArgs& a = m.args;
  if (bsz * seqlen > m.act.max_rows || bsz > a.max_batch_size || start_pos + seqlen > a.max_seq_len)
    throw InputError("forward: " + std::to_string(bsz) + " x " + std::to_string(seqlen) +
                     " positions from " + std::to_string(start_pos) + " exceed the cache capacity");
  const std::int64_t rows = bsz * seqlen;
  std::memcpy(out, x, std::size_t(rows * a.dim) * sizeof(float));  // the residual stream
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    const LayerWeights& w = m.weights.layers[std::size_t(l)];
    if (a.block == Block::llama) {
      rmsnorm(m.act.xb.data(), out, w.attention_norm, rows, a.dim, float(a.norm_eps));
      attention_block(m, w, l, m.act.xb.data(), out, bsz, seqlen, start_pos);
      feed_forward(m, w, out, rows);
    } else {
      attention_block(m, w, l, out, out, bsz, seqlen, start_pos);
    }
  }
}

}  // namespace attn
