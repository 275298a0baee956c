#pragma once
// Batched decode on AVX-512 with x's rows in the vector lanes (engine-internal, not installed):
// one thread's share of y[M, n] (=|+=) x[M, K] · w[n, K]^T for up to 32 rows, each weight read
// from memory once for all rows and broadcast against a vector of 16 rows' x, 28 weight rows at a
// time (14 for 17-32 rows, two vectors of rows). The weight rows are widened 128 columns at a time
// into an L1 buffer first, so no set conflicts and no transposition: from 12 rows on, where
// 512-bit FMAs are full width, this outruns the dot-product kernels (docs/perf/batched-decode.md).
// Every output is summed as gemm_avx512 sums it (k in order, in chunks of kGemmKC added in turn),
// so its bits are the prefill GEMM's, whatever M, the thread count or the block a row falls in.
#include <cstdint>

#include "attn/matrix.hpp"

namespace attn {

// Rows of x per vector of lanes, and the most this kernel takes (two vectors).
inline constexpr std::int64_t kLanes = 16;
inline constexpr std::int64_t kLanesMaxRows = 2 * kLanes;

// The fewest rows batched decode runs on this kernel, where 512-bit FMAs are full width: one
// vector of lanes costs as much at 9 rows as at 16, so below 12 rows the dot-product kernels are
// the faster (docs/perf/batched-decode.md). Where 512-bit FMAs run as 256-bit halves (Zen 4) the
// dot-product kernels stay: this kernel has no figures there.
inline constexpr std::int64_t kLanesFrom = 12;

// Floats of x [M, K] in lanes: [K, 16] for M <= 16, [K, 32] up to 32.
inline constexpr std::int64_t lanes_floats(std::int64_t M, std::int64_t K) {
  return (M <= kLanes ? kLanes : kLanesMaxRows) * K;
}

// xl [K, 16 or 32] = x [M, K] transposed: column k's M values side by side, rows past M zero.
void pack_lanes(const float* x, std::int64_t M, std::int64_t K, float* xl);

// y[m * ldy + j] (=|+=) sum_k x[m * K + k] * w[j * ldw + k] for m < M <= 32, j < n, with xl x
// packed by pack_lanes. Only for CPUs with AVX-512F (the avx512 set's lanes_from).
void batch_lanes(const Matrix& w, std::int64_t ldw, const float* xl, std::int64_t M, std::int64_t K,
                 float* y, std::int64_t ldy, std::int64_t n, bool accumulate);

}  // namespace attn
