#include "attn/bench.hpp"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include "attn/matmul.hpp"

namespace attn {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Matrix {
  const float* w;
  std::int64_t n, k;  // [n, k]
};

std::vector<Matrix> weight_matrices(const Transformer& m) {
  const ModelArgs& a = m.local;  // this rank's slice (the whole model on one rank)
  const std::int64_t q = a.n_heads * a.head_dim(), kv = a.n_kv_heads * a.head_dim();
  std::vector<Matrix> out;
  for (const LayerWeights& w : m.weights.layers) {
    out.insert(out.end(),
               {{w.wq, q, a.dim}, {w.wk, kv, a.dim}, {w.wv, kv, a.dim}, {w.wo, a.dim, q}});
    if (a.block == Block::llama)
      out.insert(out.end(), {{w.w1, a.ffn_hidden(), a.dim},
                             {w.w3, a.ffn_hidden(), a.dim},
                             {w.w2, a.dim, a.ffn_hidden()}});
  }
  return out;
}

// Sums n floats with 64 independent lanes, which the compiler keeps in vector registers, so
// the loop is bound by memory, not by an add chain.
float sum_lanes(const float* p, std::int64_t n) {
  float acc[64] = {};
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 64; ++j) acc[j] += p[i + j];
  for (; i < n; ++i) acc[0] += p[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

// Reads every weight once with all threads, the bytes a decode step must stream; GB/s.
double stream_read_gbs(const std::vector<Matrix>& mats) {
  double bytes = 0;
  for (const Matrix& mat : mats) bytes += double(mat.n * mat.k) * 4;
  float total = 0;
  const auto t0 = Clock::now();
#pragma omp parallel reduction(+ : total)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (const Matrix& mat : mats) {
      const std::int64_t n = mat.n * mat.k, i0 = n * t / nt, i1 = n * (t + 1) / nt;
      total += sum_lanes(mat.w + i0, i1 - i0);
    }
  }
  const double t = since(t0);
  if (total == 12345.678f) bytes += 1;  // keeps the sums alive
  return bytes / t / 1e9;
}

// OpenBLAS with its own threads on the prefill's products, best of two passes.
double sgemm_seconds(const std::vector<Matrix>& mats, std::int64_t P) {
  std::int64_t kmax = 0, nmax = 0;
  for (const Matrix& mat : mats) kmax = std::max(kmax, mat.k), nmax = std::max(nmax, mat.n);
  std::vector<float> A(std::size_t(P * kmax), 0.5f), C(std::size_t(P * nmax));
  openblas_set_num_threads(threads());
  double best = 1e30;
  for (int rep = 0; rep < 2; ++rep) {
    const auto t0 = Clock::now();
    for (const Matrix& mat : mats)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(P), blasint(mat.n),
                  blasint(mat.k), 1.0f, A.data(), blasint(mat.k), mat.w, blasint(mat.k), 0.0f,
                  C.data(), blasint(mat.n));
    best = std::min(best, since(t0));
  }
  openblas_set_num_threads(1);
  return best;
}

// Independent FMA chains in registers: 12 accumulators hide the FMA latency.
template <typename V, V (*fma)(V, V, V), V (*set1)(float)>
double fma_loop(std::int64_t iters) {
  V acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = set1(float(i) * 1e-3f);
  const V a = set1(0.999999f), b = set1(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = fma(acc[i], a, b);
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += reinterpret_cast<const float*>(&acc[i])[0];
  return double(sink);
}

#if defined(__AVX512F__)
__m512 fma512(__m512 a, __m512 b, __m512 c) {
  return _mm512_fmadd_ps(a, b, c);
}
__m512 set512(float x) {
  return _mm512_set1_ps(x);
}
#endif
#if defined(__FMA__)
__m256 fma256(__m256 a, __m256 b, __m256 c) {
  return _mm256_fmadd_ps(a, b, c);
}
__m256 set256(float x) {
  return _mm256_set1_ps(x);
}
#endif

double fma_gflops(std::string& isa) {
  const std::int64_t iters = 20'000'000;
  double best = 0;
  auto measure = [&](auto loop, int lanes, const char* name) {
    double sink = 0;
    const auto t0 = Clock::now();
#pragma omp parallel reduction(+ : sink)
    sink += loop(iters);
    const double t = since(t0);
    const double g = double(iters) * 12 * lanes * 2 * threads() / t / 1e9 + sink * 0;
    if (g > best) best = g, isa = name;
  };
#if defined(__AVX512F__)
  measure(fma_loop<__m512, fma512, set512>, 16, "avx512");
#endif
#if defined(__FMA__)
  measure(fma_loop<__m256, fma256, set256>, 8, "avx2");
#endif
  if (best == 0) isa = "scalar";
  return best;
}

}  // namespace

double prefill_flops(const ModelArgs& a, std::int64_t bsz, std::int64_t P, bool matmul_only) {
  const double hd = double(a.head_dim()), q = double(a.n_heads) * hd;
  const double kv = double(a.n_kv_heads) * hd, dim = double(a.dim);
  double params = dim * (2 * q + 2 * kv);
  if (a.block == Block::llama) params += 3 * dim * double(a.ffn_hidden());
  const double matmul = 2 * double(bsz * P) * params * double(a.n_layers);
  // Query row i sees i + 1 keys: q.k and p.v each cost 2 * head_dim flops per key and head.
  const double keys = double(P) * double(P + 1) / 2;
  const double attention = 4 * double(bsz) * keys * q * double(a.n_layers);
  return matmul_only ? matmul : matmul + attention;
}

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

BenchResult bench_workload(Transformer& m, const std::vector<float>& x, std::int64_t P,
                           std::int64_t N) {
  const std::int64_t dim = m.args.dim;
  std::vector<float> out(std::size_t(std::max<std::int64_t>(P, 1) * dim));
  // Warm-up: pages in every weight and OpenBLAS's buffers; the cache is overwritten below.
  forward(m, x.data(), 1, std::min<std::int64_t>(P, 32), 0, out.data());
  for (int i = 0; i < 3; ++i) forward(m, x.data(), 1, 1, i, out.data());

  BenchResult r;
  r.prefill = P;
  r.steps = N;
  r.step_ms.reserve(std::size_t(N));
  auto t0 = Clock::now();
  double reduced = m.allreduce_seconds;
  forward(m, x.data(), 1, P, 0, out.data());
  r.prefill_seconds = since(t0);
  r.prefill_allreduce_seconds = m.allreduce_seconds - reduced;
  reduced = m.allreduce_seconds;
  // Each step is followed by a streaming read of the same bytes, so that the two are compared
  // in the same moments: the machine's bandwidth drifts by tens of percent over minutes.
  const std::vector<Matrix> mats = weight_matrices(m);
  std::vector<double> stream(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i) {
    t0 = Clock::now();
    forward(m, x.data() + (P + i) * dim, 1, 1, P + i, out.data());
    r.step_ms.push_back(since(t0) * 1e3);
    stream[std::size_t(i)] = stream_read_gbs(mats);
  }
  r.decode_allreduce_seconds = m.allreduce_seconds - reduced;
  std::sort(stream.begin(), stream.end());
  r.limits.stream_gbs = stream[stream.size() / 2];
  std::sort(r.step_ms.begin(), r.step_ms.end());
  r.prefill_gflop = prefill_flops(m.local, 1, P, false) / 1e9;
  r.prefill_matmul_gflop = prefill_flops(m.local, 1, P, true) / 1e9;
  r.weight_bytes = double(m.weights.bytes);
  r.peak_rss_kb = peak_rss_kb();
  return r;
}

void measure_limits(const Transformer& m, std::int64_t P, MachineLimits& l) {
  const std::vector<Matrix> mats = weight_matrices(m);
  l.sgemm_seconds = sgemm_seconds(mats, P);
  l.sgemm_gflops = prefill_flops(m.local, 1, P, true) / l.sgemm_seconds / 1e9;
  l.fma_gflops = fma_gflops(l.fma_isa);
}

}  // namespace attn
