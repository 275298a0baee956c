#include "attn/matmul.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

namespace attn {

namespace {

std::int64_t g_parallel_flops = 1 << 20;
constexpr std::int64_t kGemvRows = 64;

// Rows of w for thread t of nt, aligned to 16 so each slice starts on a cache-line multiple.
std::pair<std::int64_t, std::int64_t> slice(std::int64_t n, int t, int nt) {
  const std::int64_t blocks = (n + 15) / 16;
  const std::int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
  return {std::min(n, b0 * 16), std::min(n, b1 * 16)};
}

// y[r] (=|+=) w[r] . x for n rows of length K. Eight rows at a time: eight independent
// accumulators keep the loads streaming while x stays in L1. The simd reduction lets the compiler
// split each dot product into vector lanes (OpenMP permits it; no -ffast-math needed).
void gemv_rows(const float* w, std::int64_t ldw, const float* x, float* y, std::int64_t n,
               std::int64_t K, bool accumulate) {
  std::int64_t r = 0;
  for (; r + 8 <= n; r += 8) {
    const float* w0 = w + r * ldw;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
    for (std::int64_t k = 0; k < K; ++k) {
      const float xk = x[k];
      s0 += w0[k] * xk;
      s1 += w0[ldw + k] * xk;
      s2 += w0[2 * ldw + k] * xk;
      s3 += w0[3 * ldw + k] * xk;
      s4 += w0[4 * ldw + k] * xk;
      s5 += w0[5 * ldw + k] * xk;
      s6 += w0[6 * ldw + k] * xk;
      s7 += w0[7 * ldw + k] * xk;
    }
    const float s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    for (int i = 0; i < 8; ++i) y[r + i] = (accumulate ? y[r + i] : 0.0f) + s[i];
  }
  for (; r < n; ++r) {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t k = 0; k < K; ++k) s += w[r * ldw + k] * x[k];
    y[r] = (accumulate ? y[r] : 0.0f) + s;
  }
}

// One thread's share of one projection.
void product(const Projection& p, const float* x, std::int64_t M, std::int64_t K, std::int64_t n0,
             std::int64_t n1, bool accumulate) {
  const std::int64_t n = n1 - n0;
  if (n <= 0) return;
  const float beta = accumulate ? 1.0f : 0.0f;
  const std::int64_t ldw = p.ldw ? p.ldw : K;
  const float* w = p.w + n0 * ldw;
  // A handful of rows: matrix-vector products stream the weights at full bandwidth, where
  // OpenBLAS's sgemm with tiny M runs several times slower. Our gemv streams 10-15% faster
  // than OpenBLAS 0.3.21's sgemv on the 8B layer's shapes (measured with attn-cli bench).
  if (M < 4) {
    for (std::int64_t m = 0; m < M; ++m)
      gemv_rows(w, ldw, x + m * K, p.out + m * p.n + n0, n, K, accumulate);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(M), blasint(n), blasint(K), 1.0f,
                x, blasint(K), w, blasint(ldw), beta, p.out + n0, blasint(p.n));
  }
  if (p.bias)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t j = n0; j < n1; ++j) p.out[m * p.n + j] += p.bias[j];
}

// Decode: the weights are cut into blocks of kGemvRows rows that threads take as they finish,
// so a thread slowed by the other core's neighbours does not hold up the step at the barrier.
void linear_rows(std::span<const Projection> projections, const float* x, std::int64_t M,
                 std::int64_t K, bool accumulate) {
  std::int64_t blocks = 0;
  for (const Projection& p : projections) blocks += (p.n + kGemvRows - 1) / kGemvRows;
#pragma omp for schedule(dynamic, 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::int64_t i = b;
    for (const Projection& p : projections) {
      const std::int64_t nb = (p.n + kGemvRows - 1) / kGemvRows;
      if (i < nb) {
        product(p, x, M, K, i * kGemvRows, std::min(p.n, (i + 1) * kGemvRows), accumulate);
        break;
      }
      i -= nb;
    }
  }
}

}  // namespace

void linear(std::span<const Projection> projections, const float* x, std::int64_t M, std::int64_t K,
            bool accumulate) {
  std::int64_t flops = 0;
  for (const Projection& p : projections) flops += 2 * M * K * p.n;
    // Waking a second thread costs microseconds, more than a small product takes.
#pragma omp parallel if (worth_parallel(flops))
  {
    if (M < 4) {
      linear_rows(projections, x, M, K, accumulate);
    } else {
      // Prefill: one large sgemm per thread and projection keeps OpenBLAS's packing amortized.
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      for (const Projection& p : projections) {
        auto [n0, n1] = slice(p.n, t, nt);
        product(p, x, M, K, n0, n1, accumulate);
      }
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

void set_parallel_flops(std::int64_t flops) {
  g_parallel_flops = flops;
}

bool worth_parallel(std::int64_t flops) {
  return flops > g_parallel_flops;
}

std::string blas_core() {
  const char* core = openblas_get_corename();
  return core ? core : "unknown";
}

}  // namespace attn

namespace attn {

std::string matmul_path() {
  return "OpenMP threads: single-threaded OpenBLAS sgemm on row halves (M >= 4), own simd gemv "
         "on 64-row blocks taken dynamically (M < 4)";
}

}  // namespace attn
