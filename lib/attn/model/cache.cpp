#include "attn/model/cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "attn/error.hpp"
#include "attn/model/buffers.hpp"

namespace attn {

namespace {

std::string gib(double bytes) {
  return std::to_string(bytes / double(1 << 30)).substr(0, 5);
}

std::vector<float> filled(const KVCache& c, const FloatBuffer& buf, std::int64_t layer,
                          std::int64_t bsz, std::int64_t n) {
  std::vector<float> out(std::size_t(bsz * c.n_kv_heads * n * c.head_dim));  // [bsz, H, n, D]
  float* o = out.data();
  for (std::int64_t b = 0; b < bsz; ++b)
    for (std::int64_t h = 0; h < c.n_kv_heads; ++h) {
      const float* src = buf.data() + c.offset(layer, b, h, 0);
      o = std::copy(src, src + n * c.head_dim, o);
    }
  return out;
}

}  // namespace

KVCache make_kv_cache(const ModelArgs& a) {
  KVCache c{a.n_layers, a.max_batch_size, a.n_kv_heads, a.max_seq_len, a.head_dim(), {}, {}};
  const std::int64_t n = kv_cache_floats(a);
  const double bytes = 2.0 * double(n) * sizeof(float);
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (bytes > memory)
    throw InputError("the KV cache needs " + gib(bytes) + " GiB, more than this machine's " +
                     gib(memory) + " GiB: lower max_batch_size or max_seq_len");
  c.cache_k = FloatBuffer(std::size_t(n));
  c.cache_v = FloatBuffer(std::size_t(n));
  return c;
}

void store_kv(KVCache& c, std::int64_t layer, const float* xk, const float* xv, std::int64_t bsz,
              std::int64_t seqlen, std::int64_t start_pos) {
  const std::int64_t hd = c.head_dim;
  for (std::int64_t b = 0; b < bsz; ++b)
    for (std::int64_t t = 0; t < seqlen; ++t) {
      const std::int64_t row = (b * seqlen + t) * c.n_kv_heads * hd;
      for (std::int64_t h = 0; h < c.n_kv_heads; ++h) {
        std::memcpy(c.k(layer, b, h, start_pos + t), xk + row + h * hd, std::size_t(hd) * 4);
        std::memcpy(c.v(layer, b, h, start_pos + t), xv + row + h * hd, std::size_t(hd) * 4);
      }
    }
}

std::vector<float> filled_k(const KVCache& c, std::int64_t layer, std::int64_t bsz,
                            std::int64_t n) {
  return filled(c, c.cache_k, layer, bsz, n);
}

std::vector<float> filled_v(const KVCache& c, std::int64_t layer, std::int64_t bsz,
                            std::int64_t n) {
  return filled(c, c.cache_v, layer, bsz, n);
}

}  // namespace attn
