#pragma once
// Prefill's matrix products on AVX-512 (engine-internal, not installed): one thread's share of
// out[M, n] (=|+=) x[M, K] · w[n, K]^T, with w F32, BF16 or F16: register-blocked 8 rows of x by
// 48 features, fed from panels of w packed (and widened) per block, it runs nearer the FMA peak
// than OpenBLAS's sgemm on the 8B layer's shapes (docs/perf/prefill-gemm.md). Every output is
// summed in one order, k = 0..K-1 in chunks of kGemmKC, whatever the type, the thread count or the
// block it falls in: a BF16 or F16 matrix gives the bits of its F32 widening.
#include <cstdint>

#include "attn/matrix.hpp"

namespace attn {

// Columns of w per packed panel, and features per block: a block's panel (kGemmKC x kGemmNC
// floats, 192 KB) stays in L2 while every 8 rows of x pass over it.
inline constexpr std::int64_t kGemmKC = 256;
inline constexpr std::int64_t kGemmNC = 192;
// Rows a thread takes at a time from another's share (claims.hpp): one panel of 48 features.
inline constexpr std::int64_t kGemmSteal = 48;

// Floats of one thread's panel buffer.
inline constexpr std::int64_t gemm_panel_floats() {
  return kGemmKC * kGemmNC;
}

// out[m * ldo + j] (=|+=) sum_k x[m * K + k] * w[j * ldw + k] for m < M, j < n. accumulate:
// out += product, else out = product. panel: gemm_panel_floats() floats of the calling thread.
// Only for CPUs with AVX-512F: matmul.cpp calls it from its avx512 kernel set, which
// supported_kernels() offers only there.
void gemm_avx512(const Matrix& w, std::int64_t ldw, const float* x, std::int64_t M, std::int64_t K,
                 float* out, std::int64_t ldo, std::int64_t n, bool accumulate, float* panel);

}  // namespace attn
