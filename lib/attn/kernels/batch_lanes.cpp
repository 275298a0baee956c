#include "attn/kernels/detail/batch_lanes.hpp"

#include <algorithm>
#include <stdexcept>

#include "attn/kernels/detail/gemm.hpp"
#include "attn/kernels/detail/lanes.hpp"
#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/detail/transpose.hpp"

namespace attn {

#if defined(__x86_64__)

namespace {

#define ATTN_AVX512 __attribute__((target("avx512f")))

constexpr std::int64_t kKC = kGemmKC;
// Columns of the weight rows widened at a time: a whole chunk (kGemmKC, 256 columns: 28 KB for
// 28 rows) does not fit L1 beside x (docs/perf/batched-decode.md). The accumulators run on across
// a chunk's pieces, so the sums are still the GEMM's.
constexpr std::int64_t kPiece = 128;
static_assert(kKC % kPiece == 0);
// Pieces ahead of the one being multiplied that the weight rows are asked for into L1: one piece
// ahead leaves too little time for memory, and more than two gains nothing while taking more of
// L1 (docs/perf/batched-decode.md).
constexpr std::int64_t kAheadPieces = 2;

// NR weight rows' columns 0..kp widened into buf [NR, kPiece].
template <int NR, typename T>
ATTN_AVX512 void widen_piece(const T* w, std::int64_t ldw, std::int64_t kp, float* buf) {
  for (int r = 0; r < NR; ++r) {
    const T* row = w + r * ldw;
    std::int64_t k = 0;
    for (; k + 16 <= kp; k += 16) {
      __m512 v;
      widen16(v, row + k);
      // Through a register as written: GCC turned the F32 copy into a call of memcpy per row,
      // a fifth of the kernel's time fed from cache (perf).
      asm("" : "+v"(v));
      _mm512_storeu_ps(buf + r * kPiece + k, v);
    }
    for (; k < kp; ++k) buf[r * kPiece + k] = to_f32(row[k]);
  }
}

// The lines of NR weight rows' piece kAheadPieces on, asked for into L1 a few per column while
// the FMAs run (kPerColumn at column k): all at once as each piece was widened, the requests
// queued behind each other for the line fill buffers and held the widening up; spread out,
// memory and the FMAs overlap (docs/perf/batched-decode.md).
template <int NR, typename T>
struct AheadLines {
  static constexpr std::int64_t kPerRow = kPiece * std::int64_t(sizeof(T)) / 64;
  static constexpr std::int64_t kPerColumn = (NR * kPerRow + kPiece - 1) / kPiece;
  static constexpr std::int64_t kLine = 64 / std::int64_t(sizeof(T));

  [[gnu::always_inline]] static void ask(const T* w, std::int64_t ldw, std::int64_t p0,
                                         std::int64_t k) {
    for (std::int64_t q = 0; q < kPerColumn; ++q) {
      const std::int64_t i = k * kPerColumn + q;
      if (i < NR * kPerRow)
        prefetch_l1_at(w + (i / kPerRow) * ldw, p0 + kAheadPieces * kPiece + (i % kPerRow) * kLine);
    }
  }
};

// NR weight rows against L vectors of 16 rows of x: NR x L accumulators over a chunk (its pieces
// in turn), then added to the sums of the chunks before (in memory, as gemm_avx512's tiles add
// to out).
template <int L, int NR, typename T>
ATTN_AVX512 void lanes_block(const T* w, std::int64_t ldw, const float* xl, std::int64_t M,
                             std::int64_t K, float* y, std::int64_t ldy, bool accumulate) {
  alignas(64) float buf[NR * kPiece];  // [NR, kPiece]: a piece of the chunk's weights, widened
  alignas(64) float sums[NR][L * 16];  // [NR, rows]: the chunks' sums so far
  for (int r = 0; r < NR; ++r)
    for (int m = 0; m < L * 16; ++m) sums[r][m] = accumulate && m < M ? y[m * ldy + r] : 0.0f;
  for (std::int64_t k0 = 0; k0 < K; k0 += kKC) {
    const std::int64_t k1 = std::min(k0 + kKC, K);
    __m512 acc[NR][L];
    for (int r = 0; r < NR; ++r)
      for (int l = 0; l < L; ++l) acc[r][l] = _mm512_setzero_ps();
    for (std::int64_t p0 = k0; p0 < k1; p0 += kPiece) {
      const std::int64_t kp = std::min(kPiece, k1 - p0);
      widen_piece<NR>(w + p0, ldw, kp, buf);
      const float* xk = xl + p0 * L * 16;
      for (std::int64_t k = 0; k < kp; ++k) {
        AheadLines<NR, T>::ask(w, ldw, p0, k);
        __m512 xv[L];
        for (int l = 0; l < L; ++l) xv[l] = _mm512_loadu_ps(xk + (k * L + l) * 16);
#pragma GCC unroll 32
        for (int r = 0; r < NR; ++r) {
          const __m512 b = _mm512_set1_ps(buf[r * kPiece + k]);
          for (int l = 0; l < L; ++l) acc[r][l] = _mm512_fmadd_ps(xv[l], b, acc[r][l]);
        }
      }
    }
    // The first chunk's sums as they are, not 0 + sums: -0 stays -0, as in the GEMM.
    const bool first = k0 == 0 && !accumulate;
    for (int r = 0; r < NR; ++r)
      for (int l = 0; l < L; ++l)
        _mm512_storeu_ps(
            sums[r] + 16 * l,
            first ? acc[r][l] : _mm512_add_ps(_mm512_loadu_ps(sums[r] + 16 * l), acc[r][l]));
  }
  for (std::int64_t m = 0; m < M; ++m)
    for (int r = 0; r < NR; ++r) y[m * ldy + r] = sums[r][m];
}

// n rows of w in blocks of NR (28 rows of one vector of x, 14 of two: with the accumulators,
// x's vectors and a broadcast, 30 of the 32 registers), then 8, 4 and 1.
template <int L, typename T>
void lanes_rows(const T* w, std::int64_t ldw, const float* xl, std::int64_t M, std::int64_t K,
                float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
  constexpr int NR = L == 1 ? 28 : 14;
  std::int64_t j = 0;
  for (; j + NR <= n; j += NR)
    lanes_block<L, NR>(w + j * ldw, ldw, xl, M, K, y + j, ldy, accumulate);
  for (; j + 8 <= n; j += 8) lanes_block<L, 8>(w + j * ldw, ldw, xl, M, K, y + j, ldy, accumulate);
  for (; j + 4 <= n; j += 4) lanes_block<L, 4>(w + j * ldw, ldw, xl, M, K, y + j, ldy, accumulate);
  for (; j < n; ++j) lanes_block<L, 1>(w + j * ldw, ldw, xl, M, K, y + j, ldy, accumulate);
}

template <typename T>
void lanes_typed(const T* w, std::int64_t ldw, const float* xl, std::int64_t M, std::int64_t K,
                 float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
  if (M <= kLanes) return lanes_rows<1>(w, ldw, xl, M, K, y, ldy, n, accumulate);
  lanes_rows<2>(w, ldw, xl, M, K, y, ldy, n, accumulate);
}

#undef ATTN_AVX512

}  // namespace

void pack_lanes(const float* x, std::int64_t M, std::int64_t K, float* xl) {
  const std::int64_t width = M <= kLanes ? kLanes : kLanesMaxRows;
  for (std::int64_t m0 = 0; m0 < width; m0 += kLanes)
    rows_to_columns(x, M, K, m0, int(kLanes), width, xl + m0);
}

void batch_lanes(const Matrix& w, std::int64_t ldw, const float* xl, std::int64_t M, std::int64_t K,
                 float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
  if (M < 1 || M > kLanesMaxRows) throw std::logic_error("batch_lanes: M outside 1..32");
  with_storage(w.type, w.data, [&](const auto* typed) {
    lanes_typed(typed, ldw, xl, M, K, y, ldy, n, accumulate);
  });
}

#else

void pack_lanes(const float*, std::int64_t, std::int64_t, float*) {
  throw std::logic_error("pack_lanes called on a CPU without AVX-512");
}
void batch_lanes(const Matrix&, std::int64_t, const float*, std::int64_t, std::int64_t, float*,
                 std::int64_t, std::int64_t, bool) {
  throw std::logic_error("batch_lanes called on a CPU without AVX-512");
}

#endif

}  // namespace attn
