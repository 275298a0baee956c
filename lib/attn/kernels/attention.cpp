#include "attn/kernels/attention.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "attn/kernels/matmul.hpp"
#include "attn/kernels/ops.hpp"

namespace attn {

std::int64_t attention_scratch_floats(std::int64_t max_seq_len, int threads, std::int64_t,
                                      std::int64_t, std::int64_t) {
  return std::int64_t(threads) * kAttentionChunk * max_seq_len;
}

namespace {

struct Task {
  std::int64_t b, g, r0;  // batch, KV head, first query row
};

// The rows a task computes: `rows` queries from absolute position first_pos, scored against
// keys 0 .. keys-1 (under the causal mask the chunk's last row needs no more).
struct Rows {
  std::int64_t rows, first_pos, keys;
  bool causal;
  const std::uint8_t* keep;  // this batch row's padding mask, or null
  std::int64_t window = 0;   // AttentionMask's
  float softcap = 0;
};

// Soft-caps the scores s[0:n] of keys first_key.. for the query at position pos, then hides
// those outside the sliding window (AttentionMask's window and softcap; -FLT_MAX as padding).
void cap_and_window(float* s, std::int64_t n, std::int64_t first_key, std::int64_t pos,
                    std::int64_t window, float cap) {
  if (cap > 0) softcap(s, n, cap);
  if (window <= 0) return;
  const std::int64_t end = std::min(n, pos - window + 1 - first_key);  // keys j < pos - window + 1
  for (std::int64_t j = 0; j < end; ++j) s[j] = -FLT_MAX;
}

// Masked softmax of score row i: visible keys, minus padded ones.
void softmax_row(const Runtime& rt, float* s, const Rows& r, std::int64_t i) {
  const std::int64_t visible = r.causal ? r.first_pos + i + 1 : r.keys;
  if (r.softcap > 0 || r.window > 0)
    cap_and_window(s, visible, 0, r.first_pos + i, r.window, r.softcap);
  if (r.keep)
    for (std::int64_t j = 0; j < visible; ++j)
      if (!r.keep[j]) s[j] = -FLT_MAX;
  softmax_masked(rt, s, visible, r.keys);
}

// One query head over its rows (2 or more; one row goes to group_attention): scores = q K^T *
// scale, masked softmax, out = scores V, row by row on the decode kernels, so that a position's
// scores, probabilities and output have the bits of its decode step (docs/design.md, "One order
// per output"): OpenBLAS's sgemm summed them in an order of its own blocking.
void head_attention(const Runtime& rt, float* out, const float* q, const float* k, const float* v,
                    std::int64_t ld, std::int64_t hd, const Rows& r, float* s) {
  const float scale = 1.0f / std::sqrt(float(hd));
  for (std::int64_t i = 0; i < r.rows; ++i) {
    float* si = s + i * r.keys;
    const std::int64_t keys = r.causal ? r.first_pos + i + 1 : r.keys;  // the row's own keys
    group_scores(rt, q + i * ld, 1, k, keys, hd, scale, si);
    softmax_row(rt, si, r, i);
    group_mix(rt, si, 1, v, keys, hd, out + i * ld);
  }
}

// One query position of n heads that share a KV head (q, out: [n, hd]): their scores in s
// [n, keys], each key and value row read once for all n (the own kernels, matmul.hpp).
void group_attention(const Runtime& rt, float* out, const float* q, std::int64_t n, const float* k,
                     const float* v, std::int64_t hd, const Rows& r, float* s) {
  group_scores(rt, q, n, k, r.keys, hd, 1.0f / std::sqrt(float(hd)), s);
  for (std::int64_t h = 0; h < n; ++h) softmax_row(rt, s + h * r.keys, r, 0);
  group_mix(rt, s, n, v, r.keys, hd, out);
}

// Copies the task's probability rows [rows, keys] into probs rows of `total` keys, zero-filled.
void store_probs(float* probs, const float* s, std::int64_t rows, std::int64_t keys,
                 std::int64_t total) {
  for (std::int64_t i = 0; i < rows; ++i) {
    std::memcpy(probs + i * total, s + i * keys, std::size_t(keys) * sizeof(float));
    std::fill(probs + i * total + keys, probs + (i + 1) * total, 0.0f);
  }
}

}  // namespace

void attention(const Runtime& rt, float* out, const float* xq, const KVView& cache,
               std::int64_t n_heads, std::int64_t bsz, std::int64_t seqlen, std::int64_t start_pos,
               float* scratch, const AttentionMask& mask, float* probs) {
  const std::int64_t hd = cache.head_dim, n_rep = n_heads / cache.n_kv_heads;
  const std::int64_t ld = n_heads * hd;  // row stride of xq and out
  const std::int64_t total = start_pos + seqlen;
  const bool causal = mask.kind == Mask::causal;
  const std::int64_t chunks = (seqlen + kAttentionChunk - 1) / kAttentionChunk;
  const std::int64_t n_tasks = bsz * cache.n_kv_heads * chunks;
  const std::int64_t flops = 4 * bsz * seqlen * total * n_heads * hd;
  // One item per task, claimed as threads finish: later chunks see more keys, and taking tasks
  // dynamically evens out the triangle. The scores go to the slot's own rows of the scratch.
  rt.run(n_tasks, rt.worth_parallel(flops), [&](std::int64_t i, int slot) {
    float* s = scratch + slot * kAttentionChunk * cache.max_seq_len;
    const Task t{i / (cache.n_kv_heads * chunks), (i / chunks) % cache.n_kv_heads,
                 (i % chunks) * kAttentionChunk};
    const std::int64_t rows = std::min(seqlen, t.r0 + kAttentionChunk) - t.r0;
    const std::int64_t first_pos = start_pos + t.r0;
    const Rows r{rows,
                 first_pos,
                 causal ? first_pos + rows : total,
                 causal,
                 mask.keep ? mask.keep + t.b * mask.ld : nullptr,
                 mask.window,
                 mask.softcap};
    const float* k = cache.k + cache.offset(t.b, t.g);
    const float* v = cache.v + cache.offset(t.b, t.g);
    if (rows == 1) {  // decode: the group's heads together, each key read once
      for (std::int64_t h0 = t.g * n_rep; h0 < (t.g + 1) * n_rep; h0 += kAttentionChunk) {
        const std::int64_t n = std::min(kAttentionChunk, (t.g + 1) * n_rep - h0);
        const std::int64_t row0 = (t.b * seqlen + t.r0) * ld + h0 * hd;
        group_attention(rt, out + row0, xq + row0, n, k, v, hd, r, s);
        if (probs)
          for (std::int64_t h = h0; h < h0 + n; ++h)
            store_probs(probs + ((t.b * n_heads + h) * seqlen + t.r0) * total,
                        s + (h - h0) * r.keys, 1, r.keys, total);
      }
      return;
    }
    for (std::int64_t h = t.g * n_rep; h < (t.g + 1) * n_rep; ++h) {
      const std::int64_t row0 = (t.b * seqlen + t.r0) * ld + h * hd;
      head_attention(rt, out + row0, xq + row0, k, v, ld, hd, r, s);
      if (probs)
        store_probs(probs + ((t.b * n_heads + h) * seqlen + t.r0) * total, s, rows, r.keys, total);
    }
  });
}

void mix_probs(const Runtime& rt, float* out, const float* probs, const KVView& cache,
               std::int64_t n_heads, std::int64_t bsz, std::int64_t seqlen,
               std::int64_t start_pos) {
  const std::int64_t hd = cache.head_dim, n_rep = n_heads / cache.n_kv_heads;
  const std::int64_t total = start_pos + seqlen, ld = n_heads * hd;
  const std::int64_t n_rows = bsz * n_heads * seqlen;
  // One item per (batch, head, position) row: each output row is one thread's.
  rt.run(n_rows, rt.worth_parallel(2 * n_rows * total * hd), [&](std::int64_t row, int) {
    const std::int64_t b = row / (n_heads * seqlen), h = (row / seqlen) % n_heads, i = row % seqlen;
    const float* p = probs + row * total;                   // [total]
    const float* v = cache.v + cache.offset(b, h / n_rep);  // [total, hd]
    float* o = out + (b * seqlen + i) * ld + h * hd;        // [hd]
    std::fill(o, o + hd, 0.0f);
    for (std::int64_t j = 0; j < total; ++j)
      for (std::int64_t d = 0; d < hd; ++d) o[d] += p[j] * v[j * hd + d];
  });
}

}  // namespace attn
