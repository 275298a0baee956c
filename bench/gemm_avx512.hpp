// gemm_avx512.hpp -- header-only packed fp32 GEMM for the nn.Linear layout.
//
//   C[M,N] = A[M,K] * B^T      A row-major (lda), B = weights [N,K] row-major (ldb),
//                              C row-major (ldc); C is overwritten (or accumulated).
//
// Goto/BLIS-style blocking: A is packed once per call into MR-row micro-panels per
// KC block; N in NC blocks, K in KC blocks, B block (kc x nc) packed into NR-wide
// micro-panels (~L2). One A micro-panel (kc*MR floats) stays in L1 while the inner
// loop streams the packed B block. KC/NC can be overridden with -DGEMM_AVX512_KC/NC.
// Micro-kernels (template parameter Kern, default = best compiled in):
//   detail::Avx512Kernel  14 x 32, 28 zmm accumulators, _mm512_fmadd_ps   (__AVX512F__)
//   detail::Avx2Kernel     6 x 16, 12 ymm accumulators, _mm256_fmadd_ps   (__AVX2__ && __FMA__)
//   detail::GenericKernel  6 x 16, GCC/Clang vector extensions or plain C++ (portable
//                          fallback: correct everywhere, slow; only a last resort)
//
// Single-threaded entry: sgemm_nt(). OpenMP entry: sgemm_nt_omp() splits N into one
// contiguous NR-aligned range per thread, each thread running sgemm_nt() on it
// (the engine's "OpenMP threads split N, single-threaded kernel" model).
// Thread-safe: packing buffers are thread_local.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gemm_avx512 {

#ifndef GEMM_AVX512_KC
#define GEMM_AVX512_KC 512  // A micro-panel 14*512*4 = 28 KiB (L1d 32 KiB); tuned on Zen4
#endif
#ifndef GEMM_AVX512_NC
#define GEMM_AVX512_NC 512  // B block 512*512*4 = 1 MiB (L2 1 MiB); multiple of NR
#endif
inline constexpr int KC = GEMM_AVX512_KC;
inline constexpr int NC = GEMM_AVX512_NC;

namespace detail {

struct FreeDeleter {
  void operator()(float* p) const noexcept { std::free(p); }
};

struct Buffer {
  std::unique_ptr<float, FreeDeleter> p;
  std::size_t cap = 0;
  float* get(std::size_t n) {
    if (n > cap) {
      std::size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
      p.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
      cap = n;
    }
    return p.get();
  }
};

// Pack rows [0,mc) x cols [0,kc) of A (row-major, lda) into MR-row micro-panels:
// panel p, step k holds A[p*MR + i][k] for i in [0,MR), zero padded.
template <int MR>
void pack_a(int mc, int kc, const float* a, std::ptrdiff_t lda, float* ap) {
  for (int i0 = 0; i0 < mc; i0 += MR) {
    const int mr = std::min(MR, mc - i0);
    for (int i = 0; i < mr; ++i) {
      const float* src = a + (i0 + i) * lda;
      for (int k = 0; k < kc; ++k) ap[k * MR + i] = src[k];
    }
    for (int i = mr; i < MR; ++i)
      for (int k = 0; k < kc; ++k) ap[k * MR + i] = 0.0f;
    ap += static_cast<std::ptrdiff_t>(kc) * MR;
  }
}

// Pack B^T block: rows [0,nc) of B (= columns of B^T), cols [0,kc) into NR-wide
// micro-panels: panel p, step k holds B[p*NR + j][k] for j in [0,NR), zero padded.
template <int NR>
void pack_b(int nc, int kc, const float* b, std::ptrdiff_t ldb, float* bp) {
  for (int j0 = 0; j0 < nc; j0 += NR) {
    const int nr = std::min(NR, nc - j0);
    for (int j = 0; j < nr; ++j) {
      const float* src = b + (j0 + j) * ldb;
      for (int k = 0; k < kc; ++k) bp[k * NR + j] = src[k];
    }
    for (int j = nr; j < NR; ++j)
      for (int k = 0; k < kc; ++k) bp[k * NR + j] = 0.0f;
    bp += static_cast<std::ptrdiff_t>(kc) * NR;
  }
}

// Store/accumulate an MR x NR tile held in tmp (row stride NR) into C (edge path).
template <int NR>
void store_tile(const float* tmp, int mr, int nr, float* c, std::ptrdiff_t ldc, bool accumulate) {
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      float v = tmp[i * NR + j];
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + v : v;
    }
}

#if defined(__AVX512F__)
// 14 x 32 micro-kernel. ap: kc*14 floats, bp: kc*32 floats (64-byte aligned).
struct Avx512Kernel {
  static constexpr int MR = 14, NR = 32;
  static constexpr const char* name = "avx512 14x32";
  static void run(int kc, const float* __restrict ap, const float* __restrict bp, float* c,
                  std::ptrdiff_t ldc, int mr, int nr, bool accumulate) {
#define GA_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
    GA_DECL(0)
    GA_DECL(1) GA_DECL(2) GA_DECL(3) GA_DECL(4) GA_DECL(5) GA_DECL(6) GA_DECL(7) GA_DECL(8)
        GA_DECL(9) GA_DECL(10) GA_DECL(11) GA_DECL(12) GA_DECL(13)
#undef GA_DECL
            if (mr == MR)  // bring the C tile towards L2 while the FMAs run
        for (int i = 0; i < MR; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T1);
    }
    for (int k = 0; k < kc; ++k) {
      const __m512 b0 = _mm512_load_ps(bp);
      const __m512 b1 = _mm512_load_ps(bp + 16);
      _mm_prefetch(reinterpret_cast<const char*>(bp + 8 * NR), _MM_HINT_T0);
#define GA_STEP(i)                             \
  {                                            \
    const __m512 a = _mm512_set1_ps(ap[i]);    \
    c##i##0 = _mm512_fmadd_ps(a, b0, c##i##0); \
    c##i##1 = _mm512_fmadd_ps(a, b1, c##i##1); \
  }
      GA_STEP(0)
      GA_STEP(1) GA_STEP(2) GA_STEP(3) GA_STEP(4) GA_STEP(5) GA_STEP(6) GA_STEP(7) GA_STEP(8)
          GA_STEP(9) GA_STEP(10) GA_STEP(11) GA_STEP(12) GA_STEP(13)
#undef GA_STEP
              ap += MR;
      bp += NR;
    }
    if (mr == MR && nr == NR) {
      if (accumulate) {
#define GA_ST(i)                                                                       \
  _mm512_storeu_ps(c + i * ldc, _mm512_add_ps(_mm512_loadu_ps(c + i * ldc), c##i##0)); \
  _mm512_storeu_ps(c + i * ldc + 16, _mm512_add_ps(_mm512_loadu_ps(c + i * ldc + 16), c##i##1));
        GA_ST(0)
        GA_ST(1) GA_ST(2) GA_ST(3) GA_ST(4) GA_ST(5) GA_ST(6) GA_ST(7) GA_ST(8) GA_ST(9) GA_ST(10)
            GA_ST(11) GA_ST(12) GA_ST(13)
#undef GA_ST
      } else {
#define GA_ST(i)                          \
  _mm512_storeu_ps(c + i * ldc, c##i##0); \
  _mm512_storeu_ps(c + i * ldc + 16, c##i##1);
        GA_ST(0)
        GA_ST(1) GA_ST(2) GA_ST(3) GA_ST(4) GA_ST(5) GA_ST(6) GA_ST(7) GA_ST(8) GA_ST(9) GA_ST(10)
            GA_ST(11) GA_ST(12) GA_ST(13)
#undef GA_ST
      }
      return;
    }
    alignas(64) float tmp[MR * NR];
#define GA_TMP(i)                         \
  _mm512_store_ps(tmp + i * NR, c##i##0); \
  _mm512_store_ps(tmp + i * NR + 16, c##i##1);
    GA_TMP(0)
    GA_TMP(1) GA_TMP(2) GA_TMP(3) GA_TMP(4) GA_TMP(5) GA_TMP(6) GA_TMP(7) GA_TMP(8) GA_TMP(9)
        GA_TMP(10) GA_TMP(11) GA_TMP(12) GA_TMP(13)
#undef GA_TMP
            store_tile<NR>(tmp, mr, nr, c, ldc, accumulate);
  }
};
#endif

#if defined(__AVX2__) && defined(__FMA__)
// 6 x 16 AVX2+FMA micro-kernel (12 ymm accumulators).
struct Avx2Kernel {
  static constexpr int MR = 6, NR = 16;
  static constexpr const char* name = "avx2 6x16";
  static void run(int kc, const float* __restrict ap, const float* __restrict bp, float* c,
                  std::ptrdiff_t ldc, int mr, int nr, bool accumulate) {
    alignas(64) float tmp[MR * NR];
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int k = 0; k < kc; ++k) {
      const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
      __m256 a = _mm256_broadcast_ss(ap + 0);
      c00 = _mm256_fmadd_ps(a, b0, c00);
      c01 = _mm256_fmadd_ps(a, b1, c01);
      a = _mm256_broadcast_ss(ap + 1);
      c10 = _mm256_fmadd_ps(a, b0, c10);
      c11 = _mm256_fmadd_ps(a, b1, c11);
      a = _mm256_broadcast_ss(ap + 2);
      c20 = _mm256_fmadd_ps(a, b0, c20);
      c21 = _mm256_fmadd_ps(a, b1, c21);
      a = _mm256_broadcast_ss(ap + 3);
      c30 = _mm256_fmadd_ps(a, b0, c30);
      c31 = _mm256_fmadd_ps(a, b1, c31);
      a = _mm256_broadcast_ss(ap + 4);
      c40 = _mm256_fmadd_ps(a, b0, c40);
      c41 = _mm256_fmadd_ps(a, b1, c41);
      a = _mm256_broadcast_ss(ap + 5);
      c50 = _mm256_fmadd_ps(a, b0, c50);
      c51 = _mm256_fmadd_ps(a, b1, c51);
      ap += MR;
      bp += NR;
    }
    _mm256_store_ps(tmp + 0, c00);
    _mm256_store_ps(tmp + 8, c01);
    _mm256_store_ps(tmp + 16, c10);
    _mm256_store_ps(tmp + 24, c11);
    _mm256_store_ps(tmp + 32, c20);
    _mm256_store_ps(tmp + 40, c21);
    _mm256_store_ps(tmp + 48, c30);
    _mm256_store_ps(tmp + 56, c31);
    _mm256_store_ps(tmp + 64, c40);
    _mm256_store_ps(tmp + 72, c41);
    _mm256_store_ps(tmp + 80, c50);
    _mm256_store_ps(tmp + 88, c51);
    store_tile<NR>(tmp, mr, nr, c, ldc, accumulate);
  }
};
#endif

// Portable 6 x 16 micro-kernel (vector extensions under GCC/Clang, plain C++ else).
struct GenericKernel {
  static constexpr int MR = 6, NR = 16;
  static constexpr const char* name = "generic 6x16";
  static void run(int kc, const float* __restrict ap, const float* __restrict bp, float* c,
                  std::ptrdiff_t ldc, int mr, int nr, bool accumulate) {
    alignas(64) float tmp[MR * NR];
#if defined(__GNUC__)
    typedef float v8 __attribute__((vector_size(32), aligned(4)));
    v8 acc[MR][NR / 8] = {};
    for (int k = 0; k < kc; ++k) {
      v8 b[NR / 8];
      for (int v = 0; v < NR / 8; ++v) std::memcpy(&b[v], bp + 8 * v, sizeof(v8));
      for (int i = 0; i < MR; ++i)
        for (int v = 0; v < NR / 8; ++v) acc[i][v] += ap[i] * b[v];
      ap += MR;
      bp += NR;
    }
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NR / 8; ++v) std::memcpy(tmp + i * NR + 8 * v, &acc[i][v], sizeof(v8));
#else
    for (int i = 0; i < MR * NR; ++i) tmp[i] = 0.0f;
    for (int k = 0; k < kc; ++k) {
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) tmp[i * NR + j] += ap[i] * bp[j];
      ap += MR;
      bp += NR;
    }
#endif
    store_tile<NR>(tmp, mr, nr, c, ldc, accumulate);
  }
};

}  // namespace detail

#if defined(__AVX512F__)
using DefaultKernel = detail::Avx512Kernel;
inline constexpr bool kHaveAvx512 = true;
#elif defined(__AVX2__) && defined(__FMA__)
using DefaultKernel = detail::Avx2Kernel;
inline constexpr bool kHaveAvx512 = false;
#else
using DefaultKernel = detail::GenericKernel;
inline constexpr bool kHaveAvx512 = false;
#endif

// Single-threaded: C[M,N] (=|+=) A[M,K] * B[N,K]^T. All row-major with leading dims.
// Kern: detail::Avx512Kernel / Avx2Kernel (when compiled in) / GenericKernel.
template <class Kern = DefaultKernel>
void sgemm_nt(int M, int N, int K, const float* A, std::ptrdiff_t lda, const float* B,
              std::ptrdiff_t ldb, float* C, std::ptrdiff_t ldc, bool accumulate = false) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (int i = 0; i < M; ++i) std::memset(C + i * ldc, 0, sizeof(float) * N);
    return;
  }
  constexpr int MR = Kern::MR, NR = Kern::NR;
  thread_local detail::Buffer abuf, bbuf;
  // A is packed once per call (all K blocks), then reused for every N block:
  // K block pc occupies mpad*kc floats starting at mpad*pc.
  const int mpad = (M + MR - 1) / MR * MR;
  float* ap = abuf.get(static_cast<std::size_t>(mpad) * K);
  float* bp = bbuf.get(static_cast<std::size_t>(NC) * KC);
  for (int pc = 0; pc < K; pc += KC)
    detail::pack_a<MR>(M, std::min(KC, K - pc), A + pc, lda,
                       ap + static_cast<std::ptrdiff_t>(mpad) * pc);
  for (int jc = 0; jc < N; jc += NC) {
    const int nc = std::min(NC, N - jc);
    for (int pc = 0; pc < K; pc += KC) {
      const int kc = std::min(KC, K - pc);
      const bool acc = accumulate || pc > 0;
      detail::pack_b<NR>(nc, kc, B + jc * ldb + pc, ldb, bp);
      const float* apc = ap + static_cast<std::ptrdiff_t>(mpad) * pc;
      for (int ir = 0; ir < M; ir += MR) {
        const int mr = std::min(MR, M - ir);
        const float* a_panel = apc + static_cast<std::ptrdiff_t>(ir) * kc;
        for (int jr = 0; jr < nc; jr += NR) {
          const int nr = std::min(NR, nc - jr);
          Kern::run(kc, a_panel, bp + static_cast<std::ptrdiff_t>(jr) * kc, C + ir * ldc + jc + jr,
                    ldc, mr, nr, acc);
        }
      }
    }
  }
}

// OpenMP: N split into one NR-aligned contiguous range per thread of the current
// team size (omp_get_max_threads()); each thread calls sgemm_nt on its range.
template <class Kern = DefaultKernel>
void sgemm_nt_omp(int M, int N, int K, const float* A, std::ptrdiff_t lda, const float* B,
                  std::ptrdiff_t ldb, float* C, std::ptrdiff_t ldc, bool accumulate = false) {
#if defined(_OPENMP)
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    constexpr int NR = Kern::NR;
    const int blocks = (N + NR - 1) / NR;
    const int b0 = static_cast<int>(static_cast<long>(blocks) * t / nt);
    const int b1 = static_cast<int>(static_cast<long>(blocks) * (t + 1) / nt);
    const int n0 = std::min(N, b0 * NR), n1 = std::min(N, b1 * NR);
    if (n1 > n0) sgemm_nt<Kern>(M, n1 - n0, K, A, lda, B + n0 * ldb, ldb, C + n0, ldc, accumulate);
  }
#else
  sgemm_nt<Kern>(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
#endif
}

}  // namespace gemm_avx512
