#include "attn/model/buffers.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "attn/error.hpp"
#include "attn/kernels/attention.hpp"
#include "attn/kernels/ops.hpp"

namespace attn {

namespace {

// Past this many floats a buffer's bytes would not fit in a signed 64-bit size.
constexpr std::int64_t kMaxFloats = std::int64_t(1) << 61;

std::int64_t floats(std::initializer_list<std::int64_t> factors, const char* what) {
  std::int64_t n = 1;
  for (std::int64_t f : factors)
    if (f < 0 || __builtin_mul_overflow(n, f, &n) || n > kMaxFloats)
      throw InputError(std::string("the ") + what +
                       " would need more than 2^63 bytes: lower the sizes");
  return n;
}

std::int64_t sum(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t n = 0;
  if (__builtin_add_overflow(a, b, &n) || n > kMaxFloats)
    throw InputError(std::string("the ") + what +
                     " would need more than 2^63 bytes: lower the sizes");
  return n;
}

}  // namespace

std::int64_t ffn_buffer_floats(const ModelArgs& a, std::int64_t max_rows) {
  return floats({std::min(max_rows, kFfnRows), a.ffn_hidden()}, "FFN activations");
}

std::int64_t kv_cache_floats(const ModelArgs& a) {
  return floats({a.n_layers, a.max_batch_size, a.n_kv_heads, a.max_seq_len, a.head_dim()},
                "KV cache");
}

std::vector<BufferPlan::Part> BufferPlan::parts(std::int64_t batch, std::int64_t positions) const {
  auto all = [](std::int64_t n) { return std::uint64_t(n) * 4; };
  // Each (layer, sequence, KV head) of cache_k and cache_v is written for `positions` rows.
  const std::uint64_t kv =
      2 * written_bytes(all(cache), std::uint64_t(n_layers * batch * n_kv_heads),
                        all(positions * head_dim));
  return {
      {"KV cache", 2 * cache, std::min(kv, all(2 * cache)), true},
      {"RoPE table", rope, written_bytes(all(rope), 1, all(positions * head_dim)), true},
      {"activations", xb, all(xb)},
      {"attention or FFN activations", work, all(work)},
      {"attention scratch (per thread)", scores,
       written_bytes(all(scores), std::uint64_t(threads), all(kAttentionChunk * positions)), true},
      {"packed rows", pack, all(pack)},
      {"model-parallel partial sums", partial, all(partial)}};
}

BufferPlan plan_buffers(const ModelArgs& a, const Shard& shard, std::int64_t max_rows,
                        const Runtime& rt) {
  BufferPlan p;
  p.max_rows = max_rows;
  p.n_layers = a.n_layers;
  p.n_kv_heads = a.n_kv_heads;
  p.head_dim = a.head_dim();
  p.threads = rt.threads;
  p.cache = kv_cache_floats(a);
  sum(p.cache, p.cache, "KV cache");
  const std::int64_t hd = a.head_dim();
  // Gemma's sliding layers rotate with a second table of their own.
  const std::int64_t tables = a.sliding_layers.empty() ? 1 : 2;
  p.rope = a.rope == Rope::none ? 0 : floats({tables, a.max_seq_len, hd / 2, 2}, "RoPE table");
  p.xb = floats({max_rows, a.dim}, "activations");
  const char* what = "attention activations";
  const std::int64_t q = floats({a.n_heads, hd}, what), kv = floats({a.n_kv_heads, hd}, what);
  p.xk_at = floats({max_rows, q}, what);
  p.xv_at = sum(p.xk_at, floats({max_rows, kv}, what), what);
  p.h3_at = a.block == Block::attention ? 0 : ffn_buffer_floats(a, max_rows);
  p.work = std::max(sum(p.xv_at, floats({max_rows, kv}, what), what),
                    sum(p.h3_at, p.h3_at, "FFN activations"));
  (void)floats({rt.threads, kAttentionChunk, a.max_seq_len}, "attention scratch");  // checked
  p.scores = attention_scratch_floats(a.max_seq_len, rt.threads, a.max_batch_size, a.n_heads, hd);
  // The inputs of the products: x or the attention output for all rows, h1 for a pass's rows.
  const auto scratch = [&](std::int64_t rows, std::int64_t k) {
    floats({rows, k, 16}, "packed rows");
    return scratch_floats(rows, k, rt.threads, rt.compute);
  };
  p.pack = scratch(max_rows, std::max(a.dim, q));
  if (a.block != Block::attention)
    p.pack = std::max(p.pack, scratch(std::min(max_rows, kFfnRows), a.ffn_hidden()));
  // Also OLMo 2's attention and FFN outputs, normed before the residual add.
  p.partial = shard.size > 1 || a.post_norms ? floats({max_rows, a.dim}, "partial sums") : 0;
  return p;
}

}  // namespace attn
