#include "attn/matmul.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

namespace attn {

namespace {

constexpr std::int64_t kParallelFlops = 1 << 20;

// Rows of w for thread t of nt, aligned to 16 so each slice starts on a cache-line multiple.
std::pair<std::int64_t, std::int64_t> slice(std::int64_t n, int t, int nt) {
  const std::int64_t blocks = (n + 15) / 16;
  const std::int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
  return {std::min(n, b0 * 16), std::min(n, b1 * 16)};
}

// One thread's share of one projection.
void product(const Projection& p, const float* x, std::int64_t M, std::int64_t K, std::int64_t n0,
             std::int64_t n1, bool accumulate) {
  const std::int64_t n = n1 - n0;
  if (n <= 0) return;
  const float beta = accumulate ? 1.0f : 0.0f;
  const float* w = p.w + n0 * K;
  // A handful of rows: matrix-vector products stream the weights at full bandwidth, where
  // OpenBLAS's sgemm with tiny M runs several times slower.
  if (M < 4) {
    for (std::int64_t m = 0; m < M; ++m)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, blasint(n), blasint(K), 1.0f, w, blasint(K),
                  x + m * K, 1, beta, p.out + m * p.n + n0, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(M), blasint(n), blasint(K), 1.0f,
                x, blasint(K), w, blasint(K), beta, p.out + n0, blasint(p.n));
  }
  if (p.bias)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t j = n0; j < n1; ++j) p.out[m * p.n + j] += p.bias[j];
}

}  // namespace

void linear(std::span<const Projection> projections, const float* x, std::int64_t M, std::int64_t K,
            bool accumulate) {
  std::int64_t flops = 0;
  for (const Projection& p : projections) flops += 2 * M * K * p.n;
    // Waking a second thread costs microseconds, more than a small product takes.
#pragma omp parallel if (flops > kParallelFlops)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (const Projection& p : projections) {
      auto [n0, n1] = slice(p.n, t, nt);
      product(p, x, M, K, n0, n1, accumulate);
    }
  }
}

void set_threads(int threads) {
  openblas_set_num_threads(1);
  omp_set_num_threads(std::max(1, threads));
}

int threads() {
  return omp_get_max_threads();
}

std::string blas_core() {
  const char* core = openblas_get_corename();
  return core ? core : "unknown";
}

}  // namespace attn

namespace attn {

std::string matmul_path() {
  return "OpenMP row split x single-threaded OpenBLAS (sgemm, sgemv for M < 4)";
}

}  // namespace attn
