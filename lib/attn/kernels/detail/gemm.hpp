#pragma once
// Prefill's matrix products on AVX-512 (engine-internal, not installed): one thread's share of
// out[M, n] (=|+=) x[M, K] · w[n, K]^T, with w F32, BF16 or F16: register-blocked 8 rows of x by
// 48 features, x packed once per call in 8-row panels, w in panels packed (and widened) per
// block (docs/perf/prefill-gemm.md). Every output is
// summed in one order, k = 0..K-1 in chunks of kGemmKC, whatever the type, the thread count or the
// block it falls in: a BF16 or F16 matrix gives the bits of its F32 widening.
#include <cstdint>

#include "attn/matrix.hpp"

namespace attn {

// Columns of w per packed panel, and features per block: a block's panels (kGemmKC x kGemmNC
// floats, 192 KB) stay in L2 and pass in turn over each 8 rows of x (kGemmKC x 8, 8 KB), which
// stay in L1. 256 columns rather than 128: a tile loads and stores its sums once per chunk, half
// as often, and x's panel still fits L1 (docs/perf/kernels.md).
inline constexpr std::int64_t kGemmKC = 256;
inline constexpr std::int64_t kGemmNC = 192;
// Rows of x per tile, and per panel of pack_gemm_rows.
inline constexpr std::int64_t kGemmMR = 8;
// Column pairs per chunk of the compute-bf16 GEMM (bf16_dot.hpp): its own blocking, chosen for
// that GEMM alone and kept apart from kGemmKC (docs/perf/prefill-gemm.md).
inline constexpr std::int64_t kGemmPairsKC = 256;
// Features of the small items that end a prefill product (matmul.cpp): one panel of 48.
inline constexpr std::int64_t kGemmSteal = 48;

// Floats of one thread's panel buffer (either GEMM's).
inline constexpr std::int64_t gemm_panel_floats() {
  return (kGemmKC > kGemmPairsKC ? kGemmKC : kGemmPairsKC) * kGemmNC;
}

// Floats of x [M, K] packed by pack_gemm_rows.
inline constexpr std::int64_t gemm_rows_floats(std::int64_t M, std::int64_t K) {
  return (M + kGemmMR - 1) / kGemmMR * kGemmMR * K;
}

// xg [ceil(M / 8), K, 8] = x [M, K] in panels of 8 rows, column by column: the tiles read 8 rows'
// column k as one contiguous line where x's rows, K floats apart, fell into the same L1 sets.
// Rows past M are zero.
void pack_gemm_rows(const float* x, std::int64_t M, std::int64_t K, float* xg);
// The same for panels p0..p1 only (rows 8 p0 .. 8 p1 - 1), each independent of the others: the
// pool's items pack x this way (matmul.cpp).
void pack_gemm_panels(const float* x, std::int64_t M, std::int64_t K, std::int64_t p0,
                      std::int64_t p1, float* xg);

// out[m * ldo + j] (=|+=) sum_k x[m * K + k] * w[j * ldw + k] for m < M, j < n, with xg x packed
// by pack_gemm_rows. accumulate: out += product, else out = product. panel: gemm_panel_floats()
// floats of the calling thread.
// Only for CPUs with AVX-512F: matmul.cpp calls it from its avx512 kernel set, which
// supported_kernels() offers only there.
void gemm_avx512(const Matrix& w, std::int64_t ldw, const float* xg, std::int64_t M, std::int64_t K,
                 float* out, std::int64_t ldo, std::int64_t n, bool accumulate, float* panel);

}  // namespace attn
