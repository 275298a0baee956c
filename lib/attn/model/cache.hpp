#pragma once
// The KV cache: per layer, one preallocated buffer each for keys and values, in the notebooks'
// layout [max_batch_size, n_kv_heads, max_seq_len, head_dim]. Each head's keys are contiguous
// rows, so attention reads them as one matrix, in place.
#include <cstdint>
#include <vector>

#include "attn/kernels/buffer.hpp"

#include "attn/model/config.hpp"

namespace attn {

struct KVCache {
  std::int64_t n_layers = 0, max_batch_size = 0, n_kv_heads = 0, max_seq_len = 0, head_dim = 0;
  FloatBuffer cache_k;  // [n_layers, max_batch_size, n_kv_heads, max_seq_len, head_dim]
  FloatBuffer cache_v;  // same; pages cost memory once written

  std::int64_t offset(std::int64_t layer, std::int64_t b, std::int64_t h, std::int64_t pos) const {
    return (((layer * max_batch_size + b) * n_kv_heads + h) * max_seq_len + pos) * head_dim;
  }
  float* k(std::int64_t layer, std::int64_t b, std::int64_t h, std::int64_t pos = 0) {
    return cache_k.data() + offset(layer, b, h, pos);
  }
  float* v(std::int64_t layer, std::int64_t b, std::int64_t h, std::int64_t pos = 0) {
    return cache_v.data() + offset(layer, b, h, pos);
  }
  const float* k(std::int64_t layer, std::int64_t b, std::int64_t h, std::int64_t pos = 0) const {
    return cache_k.data() + offset(layer, b, h, pos);
  }
  const float* v(std::int64_t layer, std::int64_t b, std::int64_t h, std::int64_t pos = 0) const {
    return cache_v.data() + offset(layer, b, h, pos);
  }
  KVView layer(std::int64_t l) const {
    return {k(l, 0, 0), v(l, 0, 0), n_kv_heads, max_seq_len, head_dim};
  }
};

// Allocates the whole cache up front; refuses (InputError) one larger than this machine's memory.
KVCache make_kv_cache(const ModelArgs& args);

// Writes xk, xv: [bsz, seqlen, n_kv_heads, head_dim] at positions start_pos.. of layer's cache.
void store_kv(KVCache& cache, std::int64_t layer, const float* xk, const float* xv,
              std::int64_t bsz, std::int64_t seqlen, std::int64_t start_pos);

// The filled part of one layer's cache, [bsz, n_kv_heads, filled, head_dim], copied out for
// the dump.
std::vector<float> filled_k(const KVCache& cache, std::int64_t layer, std::int64_t bsz,
                            std::int64_t filled);
std::vector<float> filled_v(const KVCache& cache, std::int64_t layer, std::int64_t bsz,
                            std::int64_t filled);

}  // namespace attn
