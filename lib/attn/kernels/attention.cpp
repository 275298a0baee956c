#include "attn/kernels/attention.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "attn/kernels/detail/blas.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/kernels/ops.hpp"

namespace attn {

std::int64_t key_chunk(std::int64_t rows, std::int64_t keys) {
  if (rows > kSplitRows || keys < kSplitFrom) return 0;
  std::int64_t chunk = kKeyChunk;
  while (chunk * kMaxKeyChunks < keys) chunk *= 2;
  return chunk;
}

namespace {

// Chunks of a row over `keys` keys: at most kMaxKeyChunks.
std::int64_t key_chunks(std::int64_t rows, std::int64_t keys) {
  const std::int64_t chunk = key_chunk(rows, keys);
  return chunk ? (keys + chunk - 1) / chunk : 0;
}

// Floats of one partial: exps x V [head_dim], then the max and the sum of the exps.
std::int64_t partial_floats(std::int64_t head_dim) {
  return head_dim + 2;
}

}  // namespace

std::int64_t attention_scratch_floats(std::int64_t max_seq_len, int threads, std::int64_t max_batch,
                                      std::int64_t n_heads, std::int64_t head_dim) {
  const std::int64_t chunks = max_seq_len < kSplitFrom ? 0 : kMaxKeyChunks;
  return std::int64_t(threads) * kAttentionChunk * max_seq_len +
         max_batch * kSplitRows * chunks * n_heads * partial_floats(head_dim);
}

bool attention_on_blas(std::int64_t rows, std::int64_t keys, std::int64_t head_dim) {
  // Below this many multiply-adds per product a head's rows go through the own decode kernels
  // one row at a time: a notebook's prefill of a few positions then never opens OpenBLAS, whose
  // loading and initialisation would cost more than the run (docs/perf/startup.md).
  constexpr std::int64_t kOwnAttention = std::int64_t(1) << 18;
  return rows * keys * head_dim > kOwnAttention;
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
// scale, masked softmax, out = scores V.
void head_attention(const Runtime& rt, float* out, const float* q, const float* k, const float* v,
                    std::int64_t ld, std::int64_t hd, const Rows& r, float* s) {
  const std::int64_t rows = r.rows, keys = r.keys;
  const float scale = 1.0f / std::sqrt(float(hd));
  if (!attention_on_blas(rows, keys, hd)) {
    for (std::int64_t i = 0; i < rows; ++i) {
      float* si = s + i * keys;
      group_scores(rt, q + i * ld, 1, k, keys, hd, scale, si);
      softmax_row(rt, si, r, i);
      group_mix(rt, si, 1, v, keys, hd, out + i * ld);
    }
    return;
  }
  const blas::Api& blas = blas::api();
  blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(rows), blasint(keys), blasint(hd),
             scale, q, blasint(ld), k, blasint(hd), 0.0f, s, blasint(keys));
  for (std::int64_t i = 0; i < rows; ++i) softmax_row(rt, s + i * keys, r, i);
  blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(rows), blasint(hd), blasint(keys),
             1.0f, s, blasint(keys), v, blasint(hd), 0.0f, out, blasint(ld));
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

// Split attention's shape: `chunks` chunks of `chunk` keys over the `total` keys of every row.
// The partials of row (b, i) and chunk c are a block of n_heads * (hd + 2) floats: each head's
// sum over the chunk's keys of exp(s - m) v [n_heads, hd], then its m and sum of exp(s - m)
// [n_heads, 2].
struct Split {
  std::int64_t chunk, chunks, total, start_pos, n_heads, hd;
  bool causal;
  // Keys of chunk c that row i sees (0 for a chunk past its causal end).
  std::int64_t visible(std::int64_t c, std::int64_t i) const {
    const std::int64_t end = causal ? start_pos + i + 1 : total;
    return std::clamp(end - c * chunk, std::int64_t(0), chunk);
  }
  std::int64_t block_floats() const { return n_heads * (hd + 2); }
  std::int64_t block(std::int64_t b, std::int64_t seqlen, std::int64_t i, std::int64_t c) const {
    return ((b * seqlen + i) * chunks + c) * block_floats();
  }
};

// Item (b, g, c): chunk c of the keys of sequence b's KV head g, for every row and the group's
// query heads, each key and value row read once for the group; probs, if not null, gets the
// exps in place of the probabilities.
void split_item(const Runtime& rt, const Split& sp, float* partials, const float* xq,
                const KVView& cache, std::int64_t b, std::int64_t g, std::int64_t c,
                std::int64_t seqlen, const AttentionMask& mask, float* s, float* probs) {
  const std::int64_t hd = sp.hd, n_rep = sp.n_heads / cache.n_kv_heads, j0 = c * sp.chunk;
  const float scale = 1.0f / std::sqrt(float(hd));
  const float* k = cache.k + cache.offset(b, g) + j0 * hd;  // [chunk, hd]
  const float* v = cache.v + cache.offset(b, g) + j0 * hd;
  const std::uint8_t* keep = mask.keep ? mask.keep + b * mask.ld + j0 : nullptr;
  for (std::int64_t i = 0; i < seqlen; ++i) {
    const std::int64_t keys = sp.visible(c, i);
    float* o = partials + sp.block(b, seqlen, i, c);  // [n_heads, hd]
    float* ms = o + sp.n_heads * hd;                  // [n_heads, 2]
    for (std::int64_t h0 = g * n_rep; keys > 0 && h0 < (g + 1) * n_rep; h0 += kAttentionChunk) {
      const std::int64_t n = std::min(kAttentionChunk, (g + 1) * n_rep - h0);
      const float* q = xq + (b * seqlen + i) * sp.n_heads * hd + h0 * hd;  // [n, hd]
      group_scores(rt, q, n, k, keys, hd, scale, s);                       // s [n, keys]
      for (std::int64_t h = 0; h < n; ++h) {
        float* sh = s + h * keys;
        if (mask.softcap > 0 || mask.window > 0)
          cap_and_window(sh, keys, j0, sp.start_pos + i, mask.window, mask.softcap);
        if (keep)
          for (std::int64_t j = 0; j < keys; ++j)
            if (!keep[j]) sh[j] = -FLT_MAX;
        ms[(h0 + h) * 2] = rt.kernels->exp_row(sh, keys, &ms[(h0 + h) * 2 + 1]);
        if (probs)
          std::memcpy(probs + ((b * sp.n_heads + h0 + h) * seqlen + i) * sp.total + j0, sh,
                      std::size_t(keys) * sizeof(float));
      }
      group_mix(rt, s, n, v, keys, hd, o + h0 * hd);
    }
  }
}

// Head h of row (b, i): its chunks' partials merged in chunk order into out [hd]; the row's
// probabilities, if not null [total], rescaled from each chunk's exps and zero past its end.
void merge_row(const Split& sp, const float* partials, std::int64_t b, std::int64_t seqlen,
               std::int64_t i, std::int64_t h, float* out, float* probs) {
  const std::int64_t hd = sp.hd;
  // The chunk's o [hd] and (m, sum) of head h
  const auto o = [&](std::int64_t c) { return partials + sp.block(b, seqlen, i, c) + h * hd; };
  const auto ms = [&](std::int64_t c) {
    return partials + sp.block(b, seqlen, i, c) + sp.n_heads * hd + h * 2;
  };
  float mx = -FLT_MAX;
  for (std::int64_t c = 0; c < sp.chunks && sp.visible(c, i) > 0; ++c) mx = std::max(mx, ms(c)[0]);
  float sum = 0;
  std::fill(out, out + hd, 0.0f);
  for (std::int64_t c = 0; c < sp.chunks && sp.visible(c, i) > 0; ++c) {
    const float w = exp_lanes(ms(c)[0] - mx);  // the chunk's exps against the row's max
    sum += w * ms(c)[1];
    for (std::int64_t d = 0; d < hd; ++d) out[d] += w * o(c)[d];
  }
  const float inv = 1.0f / sum;
  for (std::int64_t d = 0; d < hd; ++d) out[d] *= inv;
  if (!probs) return;
  std::int64_t end = 0;
  for (std::int64_t c = 0; c < sp.chunks && sp.visible(c, i) > 0; ++c) {
    const float w = exp_lanes(ms(c)[0] - mx) * inv;
    end = c * sp.chunk + sp.visible(c, i);
    for (std::int64_t j = c * sp.chunk; j < end; ++j) probs[j] *= w;
  }
  std::fill(probs + end, probs + sp.total, 0.0f);
}

// Attention with each (sequence, KV head)'s keys split (key_chunk): the chunks' partials on the
// pool, then their merge per (sequence, row, head), each in a fixed order.
void split_attention(const Runtime& rt, float* out, const float* xq, const KVView& cache,
                     std::int64_t n_heads, std::int64_t bsz, std::int64_t seqlen,
                     std::int64_t start_pos, float* scratch, const AttentionMask& mask,
                     float* probs) {
  const std::int64_t hd = cache.head_dim, total = start_pos + seqlen;
  const Split sp{key_chunk(seqlen, total), key_chunks(seqlen, total), total, start_pos, n_heads, hd,
                 mask.kind == Mask::causal};
  // [bsz, seqlen, chunks] blocks (Split), after the threads' score rows
  float* partials = scratch + std::int64_t(rt.threads) * kAttentionChunk * cache.max_seq_len;
  const std::int64_t n_items = bsz * cache.n_kv_heads * sp.chunks;
  const std::int64_t flops = 4 * bsz * seqlen * total * n_heads * hd;
  rt.run(n_items, rt.worth_parallel(flops), [&](std::int64_t item, int slot) {
    const std::int64_t b = item / (cache.n_kv_heads * sp.chunks),
                       g = (item / sp.chunks) % cache.n_kv_heads, c = item % sp.chunks;
    split_item(rt, sp, partials, xq, cache, b, g, c, seqlen, mask,
               scratch + slot * kAttentionChunk * cache.max_seq_len, probs);
  });
  const std::int64_t n_rows = bsz * seqlen * n_heads;
  const std::int64_t merge_flops = 2 * n_rows * (sp.chunks * hd + (probs ? total : 0));
  rt.run(n_rows, rt.worth_parallel(merge_flops), [&](std::int64_t r, int) {
    const std::int64_t b = r / (seqlen * n_heads), i = (r / n_heads) % seqlen, h = r % n_heads;
    merge_row(sp, partials, b, seqlen, i, h, out + ((b * seqlen + i) * n_heads + h) * hd,
              probs ? probs + ((b * n_heads + h) * seqlen + i) * total : nullptr);
  });
}

}  // namespace

void attention(const Runtime& rt, float* out, const float* xq, const KVView& cache,
               std::int64_t n_heads, std::int64_t bsz, std::int64_t seqlen, std::int64_t start_pos,
               float* scratch, const AttentionMask& mask, float* probs) {
  if (key_chunk(seqlen, start_pos + seqlen) > 0)
    return split_attention(rt, out, xq, cache, n_heads, bsz, seqlen, start_pos, scratch, mask,
                           probs);
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
