#include "workloads/bench.hpp"

#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <span>

#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/matmul.hpp"

namespace attn {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <int W>
struct Vec {
  typedef float type __attribute__((vector_size(W * sizeof(float))));
};

// A weight matrix's bytes as n rows of k floats: the streaming read's view of it, whatever its
// type (a BF16 row of 4096 weights is read as 2048 floats).
struct WeightBytes {
  const float* w;
  std::int64_t n, k;  // [n, k]
};

// The weight matrices a step reads, from the layers' tensor list.
std::vector<WeightBytes> weight_matrices(const Transformer& m) {
  std::vector<WeightBytes> out;
  for (std::size_t l = 0; l < m.weights.layers.size(); ++l) {
    LayerWeights views = m.weights.layers[l];  // the specs' slots point into this copy
    for (const TensorSpec& s : layer_tensor_specs(m.local, views, std::int64_t(l)))
      if (s.slot.matrix) {
        const Matrix& w = *s.slot.matrix;
        out.push_back({static_cast<const float*>(w.data), s.shape[0],
                       s.shape[1] * weight_type_bytes(w.type) / 4});
      }
  }
  return out;
}

// Sums n floats with 64 independent lanes, which the compiler keeps in vector registers, so
// the loop is bound by memory, not by an add chain.
[[gnu::always_inline]] inline float sum_lanes(const float* p, std::int64_t n) {
  float acc[64] = {};
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 64; ++j) acc[j] += p[i + j];
  for (; i < n; ++i) acc[0] += p[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

// Sums R rows of k floats (ld apart) side by side, as the decode kernels read them.
template <int R>
[[gnu::always_inline]] inline float sum_rows(const float* p, std::int64_t ld, std::int64_t k) {
  float s[R] = {};
#pragma omp simd reduction(+ : s)
  for (std::int64_t j = 0; j < k; ++j)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) s[r] += p[r * ld + j];
  float t = 0;
  for (float v : s) t += v;
  return t;
}

// sum_rows, asking for the rows ahead as the decode kernels do (attn/prefetch.hpp).
template <int R>
[[gnu::always_inline]] inline float sum_rows_prefetched(const float* p, std::int64_t ld,
                                                        std::int64_t k) {
  constexpr std::int64_t line = 16;
  const Stream stream{0, k, R};
  float s[R][line] = {};
  std::int64_t j = 0;
  for (; j + line <= k; j += line) {
    const std::int64_t ahead = stream.ahead<float>(j, ld);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      prefetch_at(p + r * ld + j, ahead);
#pragma omp simd
      for (int l = 0; l < line; ++l) s[r][l] += p[r * ld + j + l];
    }
  }
  float t = 0;
  for (; j < k; ++j)
    for (int r = 0; r < R; ++r) t += p[r * ld + j];
  for (const auto& row : s)
    for (float v : row) t += v;
  return t;
}

// The read kernels, compiled for each ISA and chosen at run time like the decode kernels.
__attribute__((target_clones("avx512f", "avx2", "default"))) float read_contiguous(const float* p,
                                                                                   std::int64_t n) {
  return sum_lanes(p, n);
}

// rows x k floats, `interleave` rows at a time; kPrefetched: 8, asking ahead as gemv does.
constexpr int kPrefetched = 9;
__attribute__((target_clones("avx512f", "avx2", "default"))) float read_rows(const float* p,
                                                                             std::int64_t rows,
                                                                             std::int64_t k,
                                                                             int interleave) {
  float t = 0;
  std::int64_t r = 0;
  if (interleave == kPrefetched)
    for (; r + 8 <= rows; r += 8) t += sum_rows_prefetched<8>(p + r * k, k, k);
  if (interleave == 8)
    for (; r + 8 <= rows; r += 8) t += sum_rows<8>(p + r * k, k, k);
  if (interleave >= 4)
    for (; r + 4 <= rows; r += 4) t += sum_rows<4>(p + r * k, k, k);
  for (; r < rows; ++r) t += sum_lanes(p + r * k, k);
  return t;
}

// How a streaming read walks the weights: each thread a contiguous share of every matrix, or
// blocks of 64 rows taken dynamically (as the decode kernels take them), `interleave` rows at
// a time (1: one row after another).
struct ReadPattern {
  const char* name;
  int interleave;  // 0: contiguous shares
};
constexpr ReadPattern kReadPatterns[] = {
    {"contiguous halves per thread", 0},
    {"64-row blocks taken dynamically, 1 row at a time", 1},
    {"64-row blocks taken dynamically, 4 rows interleaved", 4},
    {"64-row blocks taken dynamically, 8 rows interleaved", 8},
    {"64-row blocks taken dynamically, 8 rows interleaved, prefetched ahead as gemv", kPrefetched},
};
constexpr std::size_t kNumReadPatterns = std::size(kReadPatterns);
constexpr std::int64_t kReadBlockRows = 64;

float read_pattern(const std::vector<WeightBytes>& mats, const ReadPattern& pattern, int threads) {
  float total = 0;
  if (pattern.interleave == 0) {
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      for (const WeightBytes& mat : mats) {
        const std::int64_t n = mat.n * mat.k, i0 = n * t / nt, i1 = n * (t + 1) / nt;
        total += read_contiguous(mat.w + i0, i1 - i0);
      }
    }
    return total;
  }
  std::int64_t blocks = 0;
  for (const WeightBytes& mat : mats) blocks += (mat.n + kReadBlockRows - 1) / kReadBlockRows;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(+ : total)
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::int64_t i = b;
    for (const WeightBytes& mat : mats) {
      const std::int64_t nb = (mat.n + kReadBlockRows - 1) / kReadBlockRows;
      if (i < nb) {
        const std::int64_t r0 = i * kReadBlockRows, r1 = std::min(mat.n, r0 + kReadBlockRows);
        total += read_rows(mat.w + r0 * mat.k, r1 - r0, mat.k, pattern.interleave);
        break;
      }
      i -= nb;
    }
  }
  return total;
}

// Reads every weight once with all threads, the bytes a decode step must stream; GB/s.
double stream_read_gbs(const std::vector<WeightBytes>& mats, const ReadPattern& pattern,
                       int threads) {
  double bytes = 0;
  for (const WeightBytes& mat : mats) bytes += double(mat.n * mat.k) * 4;
  const auto t0 = Clock::now();
  const float total = read_pattern(mats, pattern, threads);
  const double t = since(t0);
  if (total == 12345.678f) bytes += 1;  // keeps the sums alive
  return bytes / t / 1e9;
}

// The value a fraction q of the samples lie at or below (0.9: the 90th percentile).
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::size_t(q * double(v.size() - 1) + 0.5)];
}

// OpenBLAS with its own threads on the prefill's products, best of two passes.
double sgemm_seconds(const std::vector<WeightBytes>& mats, std::int64_t P, int threads) {
  std::int64_t kmax = 0, nmax = 0;
  for (const WeightBytes& mat : mats) kmax = std::max(kmax, mat.k), nmax = std::max(nmax, mat.n);
  std::vector<float> A(std::size_t(P * kmax), 0.5f), C(std::size_t(P * nmax));
  openblas_set_num_threads(threads);
  double best = 1e30;
  for (int rep = 0; rep < 2; ++rep) {
    const auto t0 = Clock::now();
    for (const WeightBytes& mat : mats)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(P), blasint(mat.n),
                  blasint(mat.k), 1.0f, A.data(), blasint(mat.k), mat.w, blasint(mat.k), 0.0f,
                  C.data(), blasint(mat.n));
    best = std::min(best, since(t0));
  }
  openblas_set_num_threads(1);
  return best;
}

// Independent FMA chains in registers: 12 accumulators hide the FMA latency. One loop per ISA,
// compiled for it and run if the CPU has it, whatever the build's -march.
template <typename V>
[[gnu::always_inline]] inline double fma_chains(std::int64_t iters, const V& a, const V& b,
                                                const V& init) {
  V acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = init * float(i + 1);
  for (std::int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = acc[i] * a + b;  // one FMA (-ffp-contract=fast)
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += acc[i][0];
  return double(sink);
}

template <int W>
using FloatVec = typename Vec<W>::type;

#define ATTN_FMA_LOOP(name, target, W)                                           \
  target double fma_loop_##name(std::int64_t iters) {                            \
    FloatVec<W> a, b, init;                                                      \
    for (int i = 0; i < W; ++i) a[i] = 0.999999f, b[i] = 1e-7f, init[i] = 1e-3f; \
    return fma_chains(iters, a, b, init);                                        \
  }
ATTN_FMA_LOOP(generic, , 4)
#if defined(__x86_64__)
ATTN_FMA_LOOP(avx2, __attribute__((target("avx2,fma"))), 8)
ATTN_FMA_LOOP(avx512, __attribute__((target("avx512f"))), 16)
#endif
#undef ATTN_FMA_LOOP

double fma_gflops(std::string& isa, int threads) {
  const std::int64_t iters = 20'000'000;
  double best = 0;
  auto measure = [&](double (*loop)(std::int64_t), int lanes, const char* name) {
    double sink = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += loop(iters);
    const double t = since(t0);
    const double g = double(iters) * 12 * lanes * 2 * threads / t / 1e9 + sink * 0;
    if (g > best) best = g, isa = name;
  };
#if defined(__x86_64__)
  __builtin_cpu_init();
#endif
  // The best of a few rounds (a tenth of a second each): measured once, a busy moment on the
  // shared machine gave a peak the prefill then ran at 103% of.
  for (int round = 0; round < 5; ++round) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) measure(fma_loop_avx512, 16, "avx512");
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      measure(fma_loop_avx2, 8, "avx2");
#endif
    if (best == 0 || isa == "generic") measure(fma_loop_generic, 4, "generic");
  }
  return best;
}

}  // namespace

double prefill_flops(const ModelArgs& a, std::int64_t bsz, std::int64_t P, bool matmul_only) {
  double params = 0;  // one layer's matrix weights: each costs 2 flops per row of x
  LayerWeights layer;
  for (const TensorSpec& s : layer_tensor_specs(a, layer))
    if (s.shape.size() == 2) params += double(s.shape[0]) * double(s.shape[1]);
  const double matmul = 2 * double(bsz * P) * params * double(a.n_layers);
  // Query row i sees i + 1 keys: q.k and p.v each cost 2 * head_dim flops per key and head.
  const double q = double(a.n_heads) * double(a.head_dim());
  const double keys = double(P) * double(P + 1) / 2;
  const double attention = 4 * double(bsz) * keys * q * double(a.n_layers);
  return matmul_only ? matmul : matmul + attention;
}

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

namespace {

constexpr int kPrefillPasses = 3;

// Pages in every weight and OpenBLAS's buffers; the cache is overwritten by the prefill.
void warm_up(Transformer& m, const std::vector<float>& x, std::int64_t P, std::int64_t T,
             std::vector<float>& out) {
  forward(m, x.data(), 1, std::min<std::int64_t>(P, 32), 0, out.data());
  for (std::int64_t i = 0; i < 3; ++i) forward(m, x.data(), 1, 1, std::min(i, T - 1), out.data());
}

// One decode round of one model: a step at batch 1, a streaming read of its weights' bytes in
// pattern `pattern`, then a step at each batch size, at the same position.
void decode_round(Transformer& m, const std::vector<float>& x, const std::vector<float>& xb,
                  const std::vector<WeightBytes>& mats, std::int64_t pos, std::size_t pattern,
                  BenchResult& r, std::vector<double>* stream, std::vector<float>& out) {
  const std::int64_t dim = m.args.dim;
  auto t0 = Clock::now();
  const double reduced = m.allreduce_seconds;
  forward(m, x.data() + pos * dim, 1, 1, pos, out.data());
  r.step_ms.push_back(since(t0) * 1e3);
  r.decode_allreduce_seconds += m.allreduce_seconds - reduced;
  stream[pattern].push_back(stream_read_gbs(mats, kReadPatterns[pattern], m.rt.threads));
  for (BatchedDecode& d : r.batched) {
    if (d.batch == 1) continue;  // the step above
    t0 = Clock::now();
    forward(m, xb.data(), d.batch, 1, pos, out.data());
    d.step_ms.push_back(since(t0) * 1e3);
  }
}

// Medians and the rest, once the rounds are done.
void finish(const Transformer& m, std::int64_t P, std::vector<double>* stream, BenchResult& r) {
  // The limit is the best read the machine gave: the pattern with the highest 90th percentile.
  // Against its median, a median step in a noisy run came out at 101-105%: the step and the read
  // take turns, and each is slowed in its own moments.
  for (std::size_t p = 0; p < kNumReadPatterns; ++p)
    if (quantile(stream[p], 0.9) > r.limits.stream_gbs) {
      r.limits.stream_gbs = quantile(stream[p], 0.9);
      r.limits.stream_pattern = kReadPatterns[p].name;
    }
  std::sort(r.step_ms.begin(), r.step_ms.end());
  for (BatchedDecode& d : r.batched) {
    std::sort(d.step_ms.begin(), d.step_ms.end());
    if (d.batch == 1) d.step_ms = r.step_ms;
  }
  r.prefill_gflop = prefill_flops(m.local, 1, P, false) / 1e9;
  r.prefill_matmul_gflop = prefill_flops(m.local, 1, P, true) / 1e9;
  r.weight_bytes = double(m.weights.bytes);
  r.kv_cache_bytes = double(m.cache.cache_k.size() + m.cache.cache_v.size()) * sizeof(float);
  r.peak_rss_kb = peak_rss_kb();
}

}  // namespace

std::vector<BenchResult> bench_workload(std::span<Transformer* const> models,
                                        const std::vector<float>& x, std::int64_t P, std::int64_t N,
                                        const std::vector<std::int64_t>& batches) {
  const std::int64_t dim = models.front()->args.dim, T = P + N;
  std::int64_t max_batch = 1;
  for (std::int64_t B : batches) max_batch = std::max(max_batch, B);
  std::vector<float> out(std::size_t(std::max(P, max_batch) * dim));
  // The batched steps' inputs [max_batch, 1, dim]: rows of x, taken cyclically.
  std::vector<float> xb(std::size_t(max_batch * dim));
  for (std::int64_t b = 0; b < max_batch; ++b)
    std::copy_n(x.data() + (P + b) % T * dim, dim, xb.data() + b * dim);

  std::vector<BenchResult> results(models.size());
  std::vector<std::vector<WeightBytes>> mats;
  for (std::size_t k = 0; k < models.size(); ++k) {
    Transformer& m = *models[k];
    BenchResult& r = results[k];
    r.weight_type =
        m.weights.layers.empty() ? "F32" : weight_type_name(m.weights.layers[0].wq.type);
    r.prefill = P;
    r.steps = N;
    r.step_ms.reserve(std::size_t(N));
    for (std::int64_t B : batches) r.batched.push_back({B, {}});
    for (BatchedDecode& d : r.batched) d.step_ms.reserve(std::size_t(N));
    warm_up(m, x, P, T, out);
    mats.push_back(weight_matrices(m));
  }
  // The best of kPrefillPasses prefills per model, the models taking turns: one pass of a second
  // or so on a shared machine varied by 20% between runs. Each pass writes the same cache rows.
  for (int pass = 0; pass < kPrefillPasses; ++pass)
    for (std::size_t k = 0; k < models.size(); ++k) {
      Transformer& m = *models[k];
      BenchResult& r = results[k];
      const auto t0 = Clock::now();
      const double reduced = m.allreduce_seconds;
      forward(m, x.data(), 1, P, 0, out.data());
      const double seconds = since(t0);
      if (pass == 0 || seconds < r.prefill_seconds) {
        r.prefill_seconds = seconds;
        r.prefill_allreduce_seconds = m.allreduce_seconds - reduced;
      }
    }
  // Each round runs every model's round in turn, so all are compared in the same moments: the
  // machine's bandwidth drifts by tens of percent over minutes. The batched steps run at the
  // same position as batch 1's; the other sequences' cache rows before it are zeros, which
  // attention reads all the same.
  std::vector<std::vector<double>> stream(models.size() * kNumReadPatterns);
  for (std::int64_t i = 0; i < N; ++i)
    for (std::size_t k = 0; k < models.size(); ++k)
      decode_round(*models[k], x, xb, mats[k], P + i, std::size_t(i) % kNumReadPatterns, results[k],
                   &stream[k * kNumReadPatterns], out);
  for (std::size_t k = 0; k < models.size(); ++k)
    finish(*models[k], P, &stream[k * kNumReadPatterns], results[k]);
  return results;
}

void measure_limits(const Transformer& m, std::int64_t P, MachineLimits& l) {
  // sgemm on F32 stand-ins of the layers' matrix shapes, whatever the weights' type (it reads
  // F32 only), after the workload so that its peak resident memory is not theirs. One buffer
  // serves every shape: sgemm's speed does not depend on the values.
  std::vector<WeightBytes> mats;
  LayerWeights views;
  for (std::int64_t layer = 0; layer < m.local.n_layers; ++layer)
    for (const TensorSpec& s : layer_tensor_specs(m.local, views))
      if (s.slot.matrix) mats.push_back({nullptr, s.shape[0], s.shape[1]});
  std::int64_t most = 0;
  for (const WeightBytes& mat : mats) most = std::max(most, mat.n * mat.k);
  const std::vector<float> f32(std::size_t(most), 0.01f);
  for (WeightBytes& mat : mats) mat.w = f32.data();
  l.sgemm_seconds = sgemm_seconds(mats, P, m.rt.threads);
  l.sgemm_gflops = prefill_flops(m.local, 1, P, true) / l.sgemm_seconds / 1e9;
  l.fma_gflops = fma_gflops(l.fma_isa, m.rt.threads);
}

}  // namespace attn
