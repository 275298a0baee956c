#pragma once
// The FMA peak for the standalone GEMM benches (gemm_candidates.cpp, gemm_blocked.cpp): 12
// independent FMA chains per thread in registers, zmm or ymm, best of several tries.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

// The FMA and the broadcast of one vector width.
struct Ymm {
  using V = __m256;
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V set1(float f) { return _mm256_set1_ps(f); }
};
#if defined(__AVX512F__)
struct Zmm {
  using V = __m512;
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V set1(float f) { return _mm512_set1_ps(f); }
};
#endif

// 12 independent FMA chains (> latency 4 x throughput 2 for ymm; x1 for zmm), held in registers
// once the loop over them is unrolled (an asm barrier on the array's elements put it in memory).
template <typename I>
double fma_chains(long iters) {
  using V = typename I::V;
  const V a = I::set1(0.999999f), b = I::set1(1e-7f);
  V c[12];
  for (int i = 0; i < 12; ++i) c[i] = I::set1(1.0f + 0.01f * float(i));
  for (long n = 0; n < iters; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) c[i] = I::fma(c[i], a, b);
  }
  float lanes[sizeof(V) / sizeof(float)];
  double sum = 0;
  for (int i = 0; i < 12; ++i) {
    __builtin_memcpy(lanes, &c[i], sizeof lanes);
    sum += lanes[0];
  }
  return sum;
}

template <bool Avx512>
double fma_loop(long iters) {
#if defined(__AVX512F__)
  if constexpr (Avx512) return fma_chains<Zmm>(iters);
#else
  if constexpr (Avx512) return 0;  // built without AVX-512
#endif
  return fma_chains<Ymm>(iters);
}

// Returns GFLOP/s (2 flops per lane per FMA) summed over `threads` threads, best of reps.
template <bool Avx512>
double fma_peak(int threads, int reps = 15, long iters = 10'000'000) {
  // ~20-40 ms per try at 10M iterations; best of many tries (shared machine)
  const double lanes = Avx512 ? 16 : 8;
  double best = 0, sink = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += fma_loop<Avx512>(iters);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, threads * iters * 12.0 * lanes * 2.0 / t * 1e-9);
  }
  if (sink == 12345.0) std::puts("");
  return best;
}
