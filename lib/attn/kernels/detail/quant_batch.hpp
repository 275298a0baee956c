#pragma once
// Batched decode over ggml's quantized rows (2 <= M <= kBatchRows, the dot-product kernels): each
// step of kStepCols columns of R weight rows widened into a buffer in L1 (widen_row_part, the
// widening's bits), then every group of x's rows multiplied with it by vectors.hpp's dot_block,
// as rows_block multiplies a step of F32 rows. Every sum runs in batch_rows' order (its chunks,
// lanes and final sums), so the result has the bits of the same set's F32 batched kernel over the
// dequantized rows; each weight is read from memory once, in its own bytes, and never stored as
// a float outside L1, where a widened tile written to L2 and read back cost a B = 4 step three
// times the gemv's B = 1 step (docs/perf/quant.md). With AVX-512, Q8_0, Q4_K and Q6_K take the
// register paths below instead (block_rows_groups to kRegMaxRows rows, then block_rows_first),
// the same bits. In an unnamed namespace, as vectors.hpp: each set's file compiles its own copy
// (define_kernels.hpp).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/detail/quant_gemv.hpp"
#include "attn/kernels/detail/vectors.hpp"
#include "attn/kernels/matmul.hpp"

namespace attn {
namespace {

// rows_block over R rows of blocks B (row_bytes apart) for the columns k0..k1: their chains
// acc [R, M, kChains] +=.
template <int W, int R, int C, bool Exact, typename B>
[[gnu::always_inline]] inline void block_rows_block(const std::uint8_t* w, std::int64_t row_bytes,
                                                    const float* xp, std::int64_t M,
                                                    std::int64_t k0, std::int64_t k1, float* acc) {
  static_assert(R <= kMaxBlockRows && kStepCols % B::kBlock == 0 && kStepCols % kPart<B> == 0);
  alignas(64) float buf[R * kStepCols];  // [R, kStepCols]: a step, widened
  constexpr int N = kChains<W>;
  const std::int64_t groups = (M + C - 1) / C;
  // In bytes: after these columns, the stream goes on with the next R rows.
  const Stream stream{k0 / B::kBlock * B::kBytes, k1 / B::kBlock * B::kBytes, R};
  for (std::int64_t s0 = k0; s0 < k1; s0 += kStepCols) {
    const std::int64_t s1 = std::min(k1, s0 + kStepCols);
    const std::int64_t b0 = s0 / B::kBlock * B::kBytes, b1 = s1 / B::kBlock * B::kBytes;
    const std::int64_t ahead = stream.ahead<std::uint8_t>(b0, row_bytes);
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* row = w + r * row_bytes;
      for (std::int64_t j = b0; j < b1; j += 64) prefetch_at(row + j, ahead);
      widen_row_part<W, B>(row, s0, s1, buf + r * kStepCols);
    }
    const float* xs = xp + s0 * M;  // x packed from column s0 on
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t m0 = M * g / groups, m1 = M * (g + 1) / groups;
      if constexpr (Exact)
        dot_block<W, R, C, false, float, true>(buf, kStepCols, xs, M, 0, s1 - s0, acc,
                                               Stream{0, 0, 0});
      else
        dot_block_upto<W, R, C, false, float, true>(int(m1 - m0), buf, kStepCols, xs + m0 * kPack,
                                                    M, 0, s1 - s0, acc + m0 * N, Stream{0, 0, 0});
    }
  }
}

// The register path (M <= kRegMaxRows, block_rows_groups): each weight widened in vector
// registers and multiplied at once with all C rows of x, as the gemv does with one, never stored;
// where the buffer's path widens a step, stores it and reads it back, and the widening (integer and
// shuffle pipes) and the FMAs run in separate phases, here they overlap. For blocks whose
// widening is lane-wise (block_chunks) or the set's own (Q4_K, Q6_K with AVX-512), one
// accumulator per output (W = 16: kChains<16> = 16 chains in one vector).
template <int W, typename B>
inline constexpr bool kRegBlocks = W == 16 && (Isa<W>::template kQuantRows<B> ||
                                               std::is_same_v<B, quant::Q8_0>);
inline constexpr std::int64_t kRegMaxRows = 8;

// Weight rows per register block: 4 x 4 accumulators, x's chunks of a block or sub-block (8) and
// the widening's few registers within 32 zmm. 8 and 6 rows for 2 and 3 rows of x ran no faster
// and compiled each block's widening twice more (the sanitized build's time).
inline constexpr int kRegRows = 4;

// R rows of blocks B (row_bytes apart) against C rows of packed x (M rows in all) over k0..k1
// (whole blocks): their chains acc [R, M, kChains] +=, in k order, so the bits of
// block_rows_block's. Store: the widened rows also into buf [R, kStepCols] from column k0 on.
template <int W, int R, int C, typename B, bool Store = false>
[[gnu::always_inline]] inline void block_rows_regs(const std::uint8_t* w, std::int64_t row_bytes,
                                                   const float* xp, std::int64_t M, std::int64_t k0,
                                                   std::int64_t k1, float* acc,
                                                   const Stream& stream, float* buf = nullptr) {
  using V = typename Vec<W>::type;
  constexpr int N = kChains<W>;
  static_assert(N == W && R <= kMaxBlockRows);
  V a[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) load<W>(a[r][c], acc + (r * M + c) * N);
  for (std::int64_t k = k0; k < k1; k += B::kBlock) {
    const std::int64_t at = k / B::kBlock * B::kBytes;
    const std::int64_t ahead = stream.ahead<std::uint8_t>(at, row_bytes);
    for (int r = 0; r < R; ++r)
      for (std::int64_t j = 0; j < B::kBytes; j += 64)
        prefetch_at(w + r * row_bytes + at + j, ahead);
    const float* xk = xp + k * M;  // x packed from column k on
    if constexpr (Isa<W>::template kQuantRows<B>) {
      Isa<W>::template quant_rows_x<R, C, Store>(B{}, a, w + at, row_bytes, xk, M,
                                                 Store ? buf + (k - k0) : nullptr, kStepCols);
    } else {
      constexpr int J = B::kBlock / W;  // x's chunks of a block
      V x[J][C];
      for (int j = 0; j < J; ++j)
        for (int c = 0; c < C; ++c) {
          load<W>(x[j][c], xk + (j * M + c) * kPack);
          pin(x[j][c]);
        }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        block_chunks<W>(B{}, w + r * row_bytes + at, [&](int j, const V& wc) {
          if constexpr (Store) std::memcpy(buf + r * kStepCols + (k - k0) + j * W, &wc, sizeof wc);
          for (int c = 0; c < C; ++c) fmadd<W>(a[r][c], wc, x[j][c]);
        });
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) std::memcpy(acc + (r * M + c) * N, &a[r][c], sizeof(V));
}

// block_rows_regs for every M rows of x in groups of up to C, as even as they come (5 rows go as
// 2 + 3): each group widens the R rows again (from L1 and L2 after the first), which costs less
// than storing them widened once and reading them back (docs/perf/batched-decode.md, "Zen 4,
// quantized B = 2..32").
template <int W, int R, int C, typename B>
[[gnu::always_inline]] inline void block_rows_groups(const std::uint8_t* w, std::int64_t row_bytes,
                                                     const float* xp, std::int64_t M,
                                                     std::int64_t k0, std::int64_t k1, float* acc) {
  static_assert(C == 4);
  constexpr int N = kChains<W>;
  const std::int64_t groups = (M + C - 1) / C;
  const Stream stream{k0 / B::kBlock * B::kBytes, k1 / B::kBlock * B::kBytes, R};
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t m0 = M * g / groups, m1 = M * (g + 1) / groups;
    const float* xg = xp + m0 * kPack;
    float* ag = acc + m0 * N;
    if (m1 - m0 == 4)
      block_rows_regs<W, R, 4, B>(w, row_bytes, xg, M, k0, k1, ag, stream);
    else if (m1 - m0 == 3)
      block_rows_regs<W, R, 3, B>(w, row_bytes, xg, M, k0, k1, ag, stream);
    else
      block_rows_regs<W, R, 2, B>(w, row_bytes, xg, M, k0, k1, ag, stream);
  }
}

// The first kFirstRows rows of x by the register path, each step's widened rows stored into a
// buffer in L1 as they go, then the other M - kFirstRows rows in groups of up to C from that
// buffer (vectors.hpp's dot_block, as block_rows_block): the widening runs once and beside the
// first rows' FMAs, where block_rows_block widens each step alone first.
inline constexpr int kFirstRows = 3;

template <int W, int R, int C, typename B>
[[gnu::always_inline]] inline void block_rows_first(const std::uint8_t* w, std::int64_t row_bytes,
                                                    const float* xp, std::int64_t M,
                                                    std::int64_t k0, std::int64_t k1, float* acc) {
  static_assert(R <= kMaxBlockRows && kStepCols % B::kBlock == 0);
  alignas(64) float buf[R * kStepCols];  // [R, kStepCols]: a step, widened
  constexpr int N = kChains<W>;
  const std::int64_t rest = M - kFirstRows, groups = (rest + C - 1) / C;
  const Stream stream{k0 / B::kBlock * B::kBytes, k1 / B::kBlock * B::kBytes, R};
  for (std::int64_t s0 = k0; s0 < k1; s0 += kStepCols) {
    const std::int64_t s1 = std::min(k1, s0 + kStepCols);
    block_rows_regs<W, R, kFirstRows, B, true>(w, row_bytes, xp, M, s0, s1, acc, stream, buf);
    const float* xs = xp + s0 * M;  // x packed from column s0 on
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t m0 = kFirstRows + rest * g / groups,
                         m1 = kFirstRows + rest * (g + 1) / groups;
      dot_block_upto<W, R, C, false, float, true>(int(m1 - m0), buf, kStepCols, xs + m0 * kPack, M,
                                                  0, s1 - s0, acc + m0 * N, Stream{0, 0, 0});
    }
  }
}

// How batch_blocks runs its rows: block_rows_block (buffer), block_rows_groups (regs: one group
// up to 4 rows of x) or block_rows_first.
enum class BlockPath { buffer, regs, first };

template <int W, int R, int C, bool Exact, typename B, BlockPath P>
[[gnu::always_inline]] inline void block_rows_of(const std::uint8_t* w, std::int64_t row_bytes,
                                                 const float* xp, std::int64_t M, std::int64_t k0,
                                                 std::int64_t k1, float* acc) {
  if constexpr (P == BlockPath::regs)
    block_rows_groups<W, R, C, B>(w, row_bytes, xp, M, k0, k1, acc);
  else if constexpr (P == BlockPath::first)
    block_rows_first<W, R, C, B>(w, row_bytes, xp, M, k0, k1, acc);
  else
    block_rows_block<W, R, C, Exact, B>(w, row_bytes, xp, M, k0, k1, acc);
}

// batch_rows (vectors.hpp) over n <= kGemvRows rows of blocks B, ldw weights apart, K whole
// blocks: each output's chains in the canonical order, so the bits of the F32 kernels over the
// dequantized rows, by path P.
template <int W, int R, int C, bool Exact, typename B, BlockPath P = BlockPath::buffer>
[[gnu::always_inline]] inline void batch_blocks(const void* w, std::int64_t ldw, const float* xp,
                                                std::int64_t M, std::int64_t K, float* y,
                                                std::int64_t ldy, std::int64_t n, bool accumulate) {
  static_assert(W <= 16 && kPack % W == 0 && B::kBlock % kPack == 0);
  const auto* b = static_cast<const std::uint8_t*>(w);
  const std::int64_t row_bytes = ldw / B::kBlock * B::kBytes;
  constexpr int N = kChains<W>;
  alignas(64) float acc[kBatchChainFloats];  // [n, M, N]: the chains so far
  std::fill(acc, acc + n * M * N, 0.0f);
  const std::int64_t kc = batch_chunk_cols(M);
  for (std::int64_t k0 = 0; k0 < K; k0 += kc) {
    const std::int64_t k1 = std::min(K, k0 + kc);
    std::int64_t r = 0;
    for (; r + R <= n; r += R)
      block_rows_of<W, R, C, Exact, B, P>(b + r * row_bytes, row_bytes, xp, M, k0, k1,
                                          acc + r * M * N);
    if constexpr (R > 4)
      for (; r + 4 <= n; r += 4)
        block_rows_of<W, 4, C, Exact, B, P>(b + r * row_bytes, row_bytes, xp, M, k0, k1,
                                            acc + r * M * N);
    for (; r < n; ++r)
      block_rows_of<W, 1, C, Exact, B, P>(b + r * row_bytes, row_bytes, xp, M, k0, k1,
                                          acc + r * M * N);
  }
  const auto none = [](std::int64_t, std::int64_t) { return 0.0f; };  // K: whole blocks
  finish_chains<W>(acc, none, xp, M, K, K, y, ldy, n, accumulate);
}

}  // namespace
}  // namespace attn
