#pragma once
// BF16 compute (engine-internal, not installed): products of BF16 weights with activations
// rounded to BF16 (nearest even), by vdpbf16ps (AVX512-BF16): two products of BF16 pairs summed
// into each F32 lane, twice the F32 FMA's rate on the CPUs that have it. Opt-in (Runtime::compute)
// and not exact: each activation is off by up to 2^-9 of itself, so an output by up to about
// 2^-9 of the sum of its terms' magnitudes (docs/perf/bf16-compute.md). Every output is still
// summed in one order whatever the thread count or the block it falls in.
#include <cstdint>

#include "attn/kernels/detail/lanes.hpp"

namespace attn {

// Whether this CPU has vdpbf16ps (CPUID leaf 7, sub-leaf 1, EAX bit 5) beside AVX512-BW.
bool has_bf16_dot();

// The decode kernel's x: [M, K] rounded to BF16 and packed as [K32 / 32, M, 32], K32 = K rounded
// up to 32, zero past K. Elements of it for M rows of K.
std::int64_t packed_bf16_elements(std::int64_t M, std::int64_t K);
void pack_bf16(const float* x, std::int64_t M, std::int64_t K, std::uint16_t* xp);

// y[m * ldy + r] (=|+=) w[r] . bf16(x[m]) for n <= kGemvRows rows of w (ldw apart) and M <=
// kBatchRows rows of x, packed by pack_bf16: each weight read once for all M rows.
void batch_bf16_dot(const Bf16* w, std::int64_t ldw, const std::uint16_t* xp, std::int64_t M,
                    std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate);

// Prefill's x: [M, K] rounded to BF16 row by row, rows K2 = K rounded up to 2 apart (zero past K).
std::int64_t rounded_bf16_elements(std::int64_t M, std::int64_t K);
void round_bf16(const float* x, std::int64_t M, std::int64_t K, std::uint16_t* xb);

// out[m * ldo + j] (=|+=) w[j] . xb[m] for m < M, j < n, xb from round_bf16: gemm_avx512's
// blocking with BF16 pairs in the panels. panel: gemm_panel_floats() floats of the calling thread.
void gemm_bf16_dot(const Bf16* w, std::int64_t ldw, const std::uint16_t* xb, std::int64_t M,
                   std::int64_t K, float* out, std::int64_t ldo, std::int64_t n, bool accumulate,
                   float* panel);

}  // namespace attn
