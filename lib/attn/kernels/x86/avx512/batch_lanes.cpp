#include "attn/kernels/detail/batch_lanes.hpp"

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "attn/kernels/detail/gemm.hpp"
#include "attn/kernels/detail/lanes.hpp"
#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/detail/quant_gemv.hpp"
#include "attn/kernels/x86/avx512/detail/transpose.hpp"
#include "attn/kernels/x86/avx512/detail/vec.hpp"

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

// The weight rows as lanes_block reads them: rows of an element type T, ldw apart.
template <typename T>
struct Rows {
  const T* w;
  std::int64_t ldw;

  Rows from(std::int64_t j) const { return {w + j * ldw, ldw}; }

  // NR rows' columns p0..p0 + kp widened into buf [NR, kPiece].
  template <int NR>
  ATTN_AVX512 void widen_piece(std::int64_t p0, std::int64_t kp, float* buf) const {
    for (int r = 0; r < NR; ++r) {
      const T* row = w + r * ldw + p0;
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

  // The lines of NR rows' piece kAheadPieces on from p0, asked for into L1 a few per column while
  // the FMAs run (kPerColumn at column k): all at once as each piece was widened, the requests
  // queued behind each other for the line fill buffers and held the widening up; spread out,
  // memory and the FMAs overlap (docs/perf/batched-decode.md).
  template <int NR>
  [[gnu::always_inline]] void ask(std::int64_t p0, std::int64_t k) const {
    constexpr std::int64_t kPerRow = kPiece * std::int64_t(sizeof(T)) / 64;
    constexpr std::int64_t kPerColumn = (NR * kPerRow + kPiece - 1) / kPiece;
    constexpr std::int64_t kLine = 64 / std::int64_t(sizeof(T));
    for (std::int64_t q = 0; q < kPerColumn; ++q) {
      const std::int64_t i = k * kPerColumn + q;
      if (i < NR * kPerRow)
        prefetch_l1_at(w + (i / kPerRow) * ldw, p0 + kAheadPieces * kPiece + (i % kPerRow) * kLine);
    }
  }
};

// Rows of ggml's blocks B (whole blocks, row_bytes apart): each piece widened as the set's
// widening does (quant_gemv.hpp's widen_row_part, the bits of B::widen), half a K-quant block at
// a time, so the products have the bits of the same rows widened first.
template <typename B>
struct BlockRows {
  static_assert(kPiece % kPart<B> == 0 && B::kBlock % kPart<B> == 0);  // pieces end on parts
  const std::uint8_t* w;
  std::int64_t row_bytes;

  BlockRows from(std::int64_t j) const { return {w + j * row_bytes, row_bytes}; }

  template <int NR>
  ATTN_AVX512 void widen_piece(std::int64_t p0, std::int64_t kp, float* buf) const {
    for (int r = 0; r < NR; ++r)
      widen_row_part<16, B>(w + r * row_bytes, p0, p0 + kp, buf + r * kPiece);
  }

  // As Rows::ask, over the bytes that hold the piece (a K-quant's half block: its scales aside).
  template <int NR>
  [[gnu::always_inline]] void ask(std::int64_t p0, std::int64_t k) const {
    constexpr std::int64_t kPerRow = (kPiece * B::kBytes / B::kBlock + 63) / 64 + 1;
    constexpr std::int64_t kPerColumn = (NR * kPerRow + kPiece - 1) / kPiece;
    const std::int64_t at = (p0 + kAheadPieces * kPiece) * B::kBytes / B::kBlock;
    for (std::int64_t q = 0; q < kPerColumn; ++q) {
      const std::int64_t i = k * kPerColumn + q;
      if (i < NR * kPerRow) prefetch_l1_at(w + (i / kPerRow) * row_bytes, at + (i % kPerRow) * 64);
    }
  }
};

// NR weight rows against L vectors of 16 rows of x: NR x L accumulators over a chunk (its pieces
// in turn), then added to the sums of the chunks before (in memory, as gemm_avx512's tiles add
// to out).
template <int L, int NR, typename S>
ATTN_AVX512 void lanes_block(const S& w, const float* xl, std::int64_t M, std::int64_t K, float* y,
                             std::int64_t ldy, bool accumulate) {
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
      w.template widen_piece<NR>(p0, kp, buf);
      const float* xk = xl + p0 * L * 16;
      for (std::int64_t k = 0; k < kp; ++k) {
        w.template ask<NR>(p0, k);
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
template <int L, typename S>
void lanes_rows(const S& w, const float* xl, std::int64_t M, std::int64_t K, float* y,
                std::int64_t ldy, std::int64_t n, bool accumulate) {
  constexpr int NR = L == 1 ? 28 : 14;
  std::int64_t j = 0;
  for (; j + NR <= n; j += NR) lanes_block<L, NR>(w.from(j), xl, M, K, y + j, ldy, accumulate);
  for (; j + 8 <= n; j += 8) lanes_block<L, 8>(w.from(j), xl, M, K, y + j, ldy, accumulate);
  for (; j + 4 <= n; j += 4) lanes_block<L, 4>(w.from(j), xl, M, K, y + j, ldy, accumulate);
  for (; j < n; ++j) lanes_block<L, 1>(w.from(j), xl, M, K, y + j, ldy, accumulate);
}

template <typename S>
void lanes_typed(const S& w, const float* xl, std::int64_t M, std::int64_t K, float* y,
                 std::int64_t ldy, std::int64_t n, bool accumulate) {
  if (M <= kLanes) return lanes_rows<1>(w, xl, M, K, y, ldy, n, accumulate);
  lanes_rows<2>(w, xl, M, K, y, ldy, n, accumulate);
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
  if (traits(w.type).block == 1)
    return with_storage(w.type, w.data, [&](const auto* typed) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(typed)>>;
      lanes_typed(Rows<T>{typed, ldw}, xl, M, K, y, ldy, n, accumulate);
    });
  std::size_t i = kElementTypeCount;
  const auto* b = static_cast<const std::uint8_t*>(w.data);
#define ATTN_LANES_BLOCK(B, ...)                                                          \
  if (std::size_t(w.type) == i++)                                                         \
    return lanes_typed(BlockRows<B>{b, ldw / B::kBlock * B::kBytes}, xl, M, K, y, ldy, n, \
                       accumulate);
  ATTN_BLOCK_TYPES(ATTN_LANES_BLOCK, )
#undef ATTN_LANES_BLOCK
  throw std::logic_error("batch_lanes: no kernel for this weight type");
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
