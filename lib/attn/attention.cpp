#include "attn/attention.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "attn/matmul.hpp"
#include "attn/ops.hpp"

namespace attn {

std::vector<float> make_attention_scratch(const KVCache& cache, int n_threads) {
  return std::vector<float>(std::size_t(n_threads * kAttentionChunk * cache.max_seq_len));
}

namespace {

struct Task {
  std::int64_t b, g, r0;  // batch, KV head, first query row
};

// One query head over rows [r0, r1): scores = q K^T * scale, masked softmax, out = scores V.
void head_attention(float* out, const float* q, const float* k, const float* v, std::int64_t ld,
                    std::int64_t hd, std::int64_t rows, std::int64_t first_pos, float* s) {
  const std::int64_t keys = first_pos + rows;  // keys visible to the chunk's last row
  const float scale = 1.0f / std::sqrt(float(hd));
  if (rows == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, blasint(keys), blasint(hd), scale, k, blasint(hd), q,
                1, 0.0f, s, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(rows), blasint(keys), blasint(hd),
                scale, q, blasint(ld), k, blasint(hd), 0.0f, s, blasint(keys));
  }
  // Row i sits at absolute position first_pos + i and sees keys 0 ..= first_pos + i.
  for (std::int64_t i = 0; i < rows; ++i) softmax_masked(s + i * keys, first_pos + i + 1, keys);
  if (rows == 1) {
    cblas_sgemv(CblasRowMajor, CblasTrans, blasint(keys), blasint(hd), 1.0f, v, blasint(hd), s, 1,
                0.0f, out, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(rows), blasint(hd),
                blasint(keys), 1.0f, s, blasint(keys), v, blasint(hd), 0.0f, out, blasint(ld));
  }
}

}  // namespace

void attention(float* out, const float* xq, const KVCache& cache, std::int64_t layer,
               std::int64_t n_heads, std::int64_t bsz, std::int64_t seqlen, std::int64_t start_pos,
               std::vector<float>& scratch) {
  const std::int64_t hd = cache.head_dim, n_rep = n_heads / cache.n_kv_heads;
  const std::int64_t ld = n_heads * hd;  // row stride of xq and out
  const std::int64_t chunks = (seqlen + kAttentionChunk - 1) / kAttentionChunk;
  const std::int64_t n_tasks = bsz * cache.n_kv_heads * chunks;
  const std::int64_t flops = 4 * bsz * seqlen * (start_pos + seqlen) * n_heads * hd;
#pragma omp parallel if (worth_parallel(flops))
  {
    float* s = scratch.data() + omp_get_thread_num() * kAttentionChunk * cache.max_seq_len;
    // Later chunks see more keys: dynamic scheduling evens out the triangle.
#pragma omp for schedule(dynamic)
    for (std::int64_t i = 0; i < n_tasks; ++i) {
      const Task t{i / (cache.n_kv_heads * chunks), (i / chunks) % cache.n_kv_heads,
                   (i % chunks) * kAttentionChunk};
      const std::int64_t r1 = std::min(seqlen, t.r0 + kAttentionChunk);
      const float* k = cache.k(layer, t.b, t.g);
      const float* v = cache.v(layer, t.b, t.g);
      for (std::int64_t h = t.g * n_rep; h < (t.g + 1) * n_rep; ++h) {
        const std::int64_t row0 = (t.b * seqlen + t.r0) * ld + h * hd;
        head_attention(out + row0, xq + row0, k, v, ld, hd, r1 - t.r0, start_pos + t.r0, s);
      }
    }
  }
}

}  // namespace attn
