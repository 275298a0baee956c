// Decode attention of one Llama-3-8B layer (32 query heads, 8 KV heads, head_dim 128): one step
// of B sequences at about P positions through attn::attention (a KV head's query heads together
// on the own kernels) against one OpenBLAS sgemv pair per query head (attention's decode path
// before), in the same OpenMP split over (sequence, KV head), alternating, median and best of
// 2000 calls each.
// Built with -DATTN_BENCH=ON: build/bench/bench_decode_attention
// Arguments: threads, positions, then batch sizes.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attn/kernels/attention.hpp"
#include "attn/kernels/detail/blas.hpp"
#include "attn/kernels/ops.hpp"

namespace {

constexpr std::int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kExtra = 100;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One sgemv for the scores and one for the output per query head, as attention.cpp did.
void per_head_sgemv(const attn::Runtime& rt, float* out, const float* xq, const attn::KVView& c,
                    std::int64_t bsz, std::int64_t keys, std::vector<float>& scratch) {
  const std::int64_t n_rep = kHeads / kKvHeads, ld = kHeads * kHeadDim;
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
#pragma omp parallel num_threads(rt.threads)
  {
    float* s = scratch.data() + omp_get_thread_num() * c.max_seq_len;
#pragma omp for schedule(dynamic)
    for (std::int64_t i = 0; i < bsz * kKvHeads; ++i) {
      const std::int64_t b = i / kKvHeads, g = i % kKvHeads;
      for (std::int64_t h = g * n_rep; h < (g + 1) * n_rep; ++h) {
        const float* q = xq + b * ld + h * kHeadDim;
        attn::blas::api().sgemv(CblasRowMajor, CblasNoTrans, blasint(keys), blasint(kHeadDim),
                                scale, c.k + c.offset(b, g), blasint(kHeadDim), q, 1, 0.0f, s, 1);
        attn::softmax_masked(rt, s, keys, keys);
        attn::blas::api().sgemv(CblasRowMajor, CblasTrans, blasint(keys), blasint(kHeadDim), 1.0f,
                                c.v + c.offset(b, g), blasint(kHeadDim), s, 1, 0.0f,
                                out + b * ld + h * kHeadDim, 1);
      }
    }
  }
}

void run(const attn::Runtime& rt, std::int64_t P, std::int64_t B) {
  const std::int64_t max_seq_len = P + kExtra;
  std::vector<float> cache_k(std::size_t(B * kKvHeads * max_seq_len * kHeadDim)),
      cache_v(cache_k.size());  // [B, n_kv_heads, max_seq_len, head_dim]
  for (std::size_t i = 0; i < cache_k.size(); ++i) {
    cache_k[i] = 0.001f * float(i % 97);
    cache_v[i] = 0.002f * float(i % 89);
  }
  const attn::KVView c{cache_k.data(), cache_v.data(), kKvHeads, max_seq_len, kHeadDim};
  std::vector<float> scratch(
      std::size_t(attn::attention_scratch_floats(c.max_seq_len, rt.threads, B, kHeads, kHeadDim)));
  std::vector<float> xq(std::size_t(B * kHeads * kHeadDim), 0.01f), out(xq.size());
  std::vector<double> t[2];
  for (int i = 0; i < 2000; ++i)
    for (int v = 0; v < 2; ++v) {
      const std::int64_t pos = P + i % kExtra;  // the step's own position: keys 0..pos
      const double t0 = now();
      if (v == 0)
        attn::attention(rt, out.data(), xq.data(), c, kHeads, B, 1, pos, scratch.data());
      else
        per_head_sgemv(rt, out.data(), xq.data(), c, B, pos + 1, scratch);
      t[v].push_back(now() - t0);
    }
  for (int v = 0; v < 2; ++v) {
    std::sort(t[v].begin(), t[v].end());
    std::printf("B %2lld, %lld-%lld positions, %d threads, %-24s median %8.1f us  best %8.1f us\n",
                static_cast<long long>(B), static_cast<long long>(P),
                static_cast<long long>(P + kExtra), rt.threads,
                v == 0 ? "attn::attention:" : "sgemv per query head:", 1e6 * t[v][t[v].size() / 2],
                1e6 * t[v][0]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s THREADS POSITIONS B [B ...]\n", argv[0]);
    return 2;
  }
  const attn::Runtime rt = attn::make_runtime(std::atoi(argv[1]));
  for (int a = 3; a < argc; ++a) run(rt, std::atoll(argv[2]), std::atoll(argv[a]));
}
