#include "attn/memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "attn/attention.hpp"
#include "attn/error.hpp"
#include "attn/matmul.hpp"
#include "attn/model.hpp"
#include "attn/weights.hpp"

namespace attn {

std::uint64_t checked_product(std::initializer_list<std::int64_t> factors,
                              const std::string& what) {
  std::uint64_t n = 1;
  for (std::int64_t f : factors)
    if (f < 0 || __builtin_mul_overflow(n, std::uint64_t(f), &n))
      throw InputError("the " + what + " would need more than 2^64 bytes: lower the sizes");
  return n;
}

namespace {

constexpr std::int64_t kF32 = 4;

std::uint64_t checked_sum(std::initializer_list<std::uint64_t> terms, const std::string& what) {
  std::uint64_t n = 0;
  for (std::uint64_t t : terms)
    if (__builtin_add_overflow(n, t, &n))
      throw InputError("the " + what + " would need more than 2^64 bytes: lower the sizes");
  return n;
}

// f32 bytes of every tensor the layers list, drawn or converted or mapped: one layer's list
// (shapes are config sizes, each under 2^24), times n_layers.
std::uint64_t weight_bytes(const ModelArgs& a) {
  const std::string w = "weights";
  LayerWeights layer;
  std::uint64_t per_layer = 0;
  for (const TensorSpec& s : layer_tensor_specs(a, layer)) {
    std::uint64_t n = kF32;
    for (std::int64_t d : s.shape) n = checked_product({std::int64_t(n), d}, w);
    per_layer = checked_sum({per_layer, n}, w);
  }
  std::uint64_t n = 0;
  if (__builtin_mul_overflow(per_layer, std::uint64_t(a.n_layers), &n))
    throw InputError("the weights would need more than 2^64 bytes: lower the sizes");
  return n;
}

}  // namespace

std::vector<MemoryPart> memory_parts(const ModelArgs& a, const RunShape& r) {
  const std::int64_t q = a.n_heads * a.head_dim(), kv = a.n_kv_heads * a.head_dim();
  const std::int64_t T = r.prefill + r.steps;  // check_capacity bounds both by max_seq_len
  std::vector<MemoryPart> parts;
  auto add = [&](const std::string& name, std::initializer_list<std::int64_t> factors) {
    parts.push_back({name, checked_product(factors, name)});
  };
  parts.push_back({"weights", weight_bytes(a)});
  add("KV cache",
      {2, a.n_layers, a.max_batch_size, a.n_kv_heads, a.max_seq_len, a.head_dim(), kF32});
  add("RoPE table", {a.rope == Rope::none ? 0 : a.max_seq_len, a.head_dim(), kF32});
  add("activations", {r.max_rows, a.dim, kF32});
  // xq, xk, xv or h1, h3: one buffer, the larger of the two (Activations::work).
  std::uint64_t work = checked_product({r.max_rows, q + 2 * kv, kF32}, "activations");
  if (a.block != Block::attention) {
    // max_rows x ffn_hidden bounds ffn_buffer_floats from above: check it before calling it.
    checked_product({2, r.max_rows, a.ffn_hidden(), kF32}, "FFN activations");
    work = std::max(work, checked_product({2, ffn_buffer_floats(a, kFfnBlock, r.max_rows), kF32},
                                          "FFN activations"));
  }
  parts.push_back({"attention or FFN activations", work});
  add("attention scratch (per thread)", {r.threads, kAttentionChunk, a.max_seq_len, kF32});
  // The weights' type is not known before they are mapped: count BF16/F16 widening buffers.
  const std::int64_t k_max = std::max({a.dim, q, a.block == Block::attention ? 0 : a.ffn_hidden()});
  add("packed rows and widened weight blocks",
      {scratch_floats(r.max_rows, k_max, r.threads, /*halves=*/true), kF32});
  if (r.attention_weights) parts.push_back({"attention weights", r.attention_weights});
  add("input", {r.batch, T, a.dim, kF32});
  add("outputs", {r.batch, T + std::max<std::int64_t>(r.prefill, 1), a.dim, kF32});
  if (r.dump)
    add("dump (cache copies)", {2, a.n_layers, r.batch, a.n_kv_heads, T, a.head_dim(), kF32});
  return parts;
}

std::uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) return kb * 1024;
  }
  return std::uint64_t(sysconf(_SC_AVPHYS_PAGES)) * std::uint64_t(sysconf(_SC_PAGE_SIZE));
}

std::string bytes_text(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

void check_memory(const std::vector<MemoryPart>& parts, std::uint64_t available) {
  std::uint64_t total = 0;
  const MemoryPart* largest = nullptr;
  for (const MemoryPart& p : parts) {
    if (__builtin_add_overflow(total, p.bytes, &total))
      throw InputError("the run would need more than 2^64 bytes of memory: lower the sizes");
    if (!largest || p.bytes > largest->bytes) largest = &p;
  }
  if (total <= available) return;
  std::ostringstream s;
  s << "the run needs " << bytes_text(total) << " of memory but " << bytes_text(available)
    << " are available; the largest part is the " << largest->name << " ("
    << bytes_text(largest->bytes) << "). Parts:";
  for (const MemoryPart& p : parts)
    if (p.bytes > 0) s << " " << p.name << " " << bytes_text(p.bytes) << ";";
  throw InputError(s.str());
}

}  // namespace attn
