#include "attn/kernels/detail/gemm.hpp"

#include <algorithm>
#include <stdexcept>

#include "attn/kernels/detail/lanes.hpp"
#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/x86/avx512/detail/transpose.hpp"
#include "attn/kernels/x86/avx512/detail/widen.hpp"

namespace attn {

#if defined(__x86_64__)

namespace {

#define ATTN_AVX512 __attribute__((target("avx512f")))

// A register tile is kMR rows of x by kNR features: 24 accumulators, 3 panel vectors and one
// broadcast of 32 zmm. Per column of the panel: 3 loads, 8 broadcasts, 24 FMAs; the fastest of
// the tiles tried (docs/perf/kernels.md).
constexpr int kMR = int(kGemmMR);
constexpr int kNV = 3;
constexpr std::int64_t kNR = 16 * kNV;
static_assert(kGemmNC % kNR == 0 && kGemmKC % 16 == 0);

// Columns ahead of the 16 x 16 block being packed that its rows are asked for into L2: the
// hardware prefetchers do not follow 16 rows 16 KB apart, and each block's loads waited on
// memory (docs/perf/kernels.md).
constexpr std::int64_t kPackAhead = 48;

// nr <= kNR rows of w (ldw apart), kc columns, widened into panel [kc, kNR]: column k's kNR
// weights side by side, rows past nr zero. Whole 16 x 16 blocks go through registers.
template <typename T>
ATTN_AVX512 void pack_panel(const T* w, std::int64_t ldw, std::int64_t nr, std::int64_t kc,
                            float* panel) {
  std::int64_t k = 0;
  for (; k + 16 <= kc; k += 16)
    for (int g = 0; g < kNV; ++g) {
      const std::int64_t rows = std::clamp<std::int64_t>(nr - 16 * g, 0, 16);
      __m512 r[16];
      for (int i = 0; i < rows; ++i) prefetch_at(w + (16 * g + i) * ldw + k, kPackAhead);
      for (int i = 0; i < 16; ++i) {
        r[i] = _mm512_setzero_ps();
        if (i < rows) widen16(r[i], w + (16 * g + i) * ldw + k);
      }
      transpose16(r);
      for (int c = 0; c < 16; ++c) _mm512_storeu_ps(panel + (k + c) * kNR + 16 * g, r[c]);
    }
  for (; k < kc; ++k)
    for (std::int64_t i = 0; i < kNR; ++i)
      panel[k * kNR + i] = i < nr ? to_f32(w[i * ldw + k]) : 0.0f;
}

// Column k of the panel times x's 8 rows at column k, added to the tile's accumulators.
[[gnu::always_inline]] ATTN_AVX512 inline void tile_column(__m512 (&c)[kMR][kNV], const float* x,
                                                           const float* panel, std::int64_t k) {
  __m512 b[kNV];
  for (int j = 0; j < kNV; ++j) b[j] = _mm512_loadu_ps(panel + k * kNR + 16 * j);
  for (int i = 0; i < kMR; ++i) {
    const __m512 a = _mm512_set1_ps(x[k * kMR + i]);
    for (int j = 0; j < kNV; ++j) c[i][j] = _mm512_fmadd_ps(a, b[j], c[i][j]);
  }
}

// Columns ahead of the one being multiplied that the panel is asked for into L1: x's 8 rows stay
// in L1 while the block's panels stream from L2 (docs/perf/prefill-gemm.md).
constexpr std::int64_t kPanelAhead = 8;

// out[rows, features under mask] (= | +=) x[8, kc] · panel[kc, kNR], x one 8-row panel as
// pack_gemm_rows lays it out. The rows past `rows` are the panel's zeros: summed, not stored.
// The panel is asked for into L1 kPanelAhead columns on (past its end: the next panel), and
// xnext, the next rows' x, half a line a column (a line holds two columns).
ATTN_AVX512 void tile(std::int64_t kc, const float* x, const float* panel, float* out,
                      std::int64_t ldo, int rows, const __mmask16* mask, bool add,
                      const float* xnext) {
  __m512 c[kMR][kNV];
  for (int i = 0; i < kMR; ++i)
    for (int j = 0; j < kNV; ++j) c[i][j] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < kc; ++k) {
    prefetch_l1_at(xnext, k * kMR);
    for (int q = 0; q < kNV; ++q) prefetch_l1_at(panel, (k + kPanelAhead) * kNR + 16 * q);
    tile_column(c, x, panel, k);
  }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < kNV; ++j) {
      float* p = out + i * ldo + 16 * j;
      const __m512 v = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask[j], p), c[i][j]) : c[i][j];
      _mm512_mask_storeu_ps(p, mask[j], v);
    }
}

// Blocks of kGemmNC features; in each, chunks of kGemmKC columns: the chunk's panels are packed
// once (into L2), then each 8-row panel of x in turn stays in L1 while the block's panels pass
// over it, adding the chunk's sums to out. x's panel, not the weights', is the one kept in L1: a
// 24 KB weight panel and x's lines streaming past it do not fit a 32 KB L1 together
// (docs/perf/prefill-gemm.md).
template <typename T>
ATTN_AVX512 void gemm_typed(const T* w, std::int64_t ldw, const float* xg, std::int64_t M,
                            std::int64_t K, float* out, std::int64_t ldo, std::int64_t n,
                            bool accumulate, float* panel) {
  const std::int64_t row_panels = (M + kMR - 1) / kMR;
  for (std::int64_t n0 = 0; n0 < n; n0 += kGemmNC) {
    const std::int64_t nc = std::min(kGemmNC, n - n0);
    __mmask16 masks[kGemmNC / kNR][kNV];  // [panel, vector]: the block's live features
    for (std::int64_t j = 0; j < nc; j += kNR)
      for (int v = 0; v < kNV; ++v) {
        const std::int64_t live = std::clamp<std::int64_t>(nc - j - 16 * v, 0, 16);
        masks[j / kNR][v] = __mmask16((1u << live) - 1);
      }
    for (std::int64_t k0 = 0; k0 < K; k0 += kGemmKC) {
      const std::int64_t kc = std::min(kGemmKC, K - k0);
      for (std::int64_t j = 0; j < nc; j += kNR)
        pack_panel(w + (n0 + j) * ldw + k0, ldw, std::min(kNR, nc - j), kc, panel + j * kc);
      const bool last_k = k0 + kGemmKC >= K;
      const std::int64_t n_next = last_k ? n0 + kGemmNC : n0, k_next = last_k ? 0 : k0 + kGemmKC;
      ChunkPrefetch<T> ahead(w, ldw, n_next, k_next,
                             std::clamp<std::int64_t>(n - n_next, 0, kGemmNC),
                             std::min(kGemmKC, K - k_next), row_panels * ((nc + kNR - 1) / kNR));
      for (std::int64_t r = 0; r < row_panels; ++r) {
        const float* x = xg + r * kMR * K + k0 * kMR;
        const std::int64_t next = r + 1 < row_panels ? r + 1 : 0;
        for (std::int64_t j = 0; j < nc; j += kNR) {
          ahead.step();
          tile(kc, x, panel + j * kc, out + r * kMR * ldo + n0 + j, ldo,
               int(std::min<std::int64_t>(kMR, M - r * kMR)), masks[j / kNR], accumulate || k0 > 0,
               xg + next * kMR * K + k0 * kMR);
        }
      }
    }
  }
}

#undef ATTN_AVX512

}  // namespace

void pack_gemm_panels(const float* x, std::int64_t M, std::int64_t K, std::int64_t p0,
                      std::int64_t p1, float* xg) {
  for (std::int64_t m0 = p0 * kMR; m0 < std::min(M, p1 * kMR); m0 += kMR)
    rows_to_columns(x, M, K, m0, kMR, kMR, xg + m0 * K);
}

void pack_gemm_rows(const float* x, std::int64_t M, std::int64_t K, float* xg) {
  pack_gemm_panels(x, M, K, 0, (M + kMR - 1) / kMR, xg);
}

void gemm_avx512(const Matrix& w, std::int64_t ldw, const float* x, std::int64_t M, std::int64_t K,
                 float* out, std::int64_t ldo, std::int64_t n, bool accumulate, float* panel) {
  if (K == 0 && !accumulate)
    for (std::int64_t m = 0; m < M; ++m) std::fill(out + m * ldo, out + m * ldo + n, 0.0f);
  with_storage(w.type, w.data, [&](const auto* typed) {
    gemm_typed(typed, ldw, x, M, K, out, ldo, n, accumulate, panel);
  });
}

#else

void pack_gemm_panels(const float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                      float*) {
  throw std::logic_error("pack_gemm_panels called on a CPU without AVX-512");
}
void pack_gemm_rows(const float*, std::int64_t, std::int64_t, float*) {
  throw std::logic_error("pack_gemm_rows called on a CPU without AVX-512");
}
void gemm_avx512(const Matrix&, std::int64_t, const float*, std::int64_t, std::int64_t, float*,
                 std::int64_t, std::int64_t, bool, float*) {
  throw std::logic_error("gemm_avx512 called on a CPU without AVX-512");
}

#endif

}  // namespace attn
