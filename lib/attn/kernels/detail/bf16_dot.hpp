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
// Prefill's x: [M, K] rounded to BF16 row by row, rows K2 = K rounded up to 2 apart (zero past K).
std::int64_t rounded_bf16_elements(std::int64_t M, std::int64_t K);

// The prefill GEMM's blocking: blocks of kGemmNC features; in each, chunks of kGemmPairsKC column
// pairs, whose panels (kGemmPairsKC x kGemmNC pairs, 192 KB) are packed once into L2 and pass over
// each 8 rows of x in turn (docs/perf/prefill-gemm.md).
inline constexpr std::int64_t kGemmNC = 192;
inline constexpr std::int64_t kGemmPairsKC = 256;
// Floats of one thread's panel buffer: a chunk's panels, a pair of BF16 per float.
inline constexpr std::int64_t gemm_panel_floats() {
  return kGemmPairsKC * kGemmNC;
}

// The kernels, one table per way of computing the pair products (Runtime::bf16_dot).
struct Bf16Dot {
  // x [M, K] into the decode kernel's packing.
  void (*pack)(const float* x, std::int64_t M, std::int64_t K, std::uint16_t* xp);
  // x [M, K] into prefill's rows.
  void (*round)(const float* x, std::int64_t M, std::int64_t K, std::uint16_t* xb);
  // y[m * ldy + r] (=|+=) w[r] . bf16(x[m]) for n <= kGemvRows rows of w (ldw apart) and M <=
  // kBatchRows rows of x, packed by pack: each weight read once for all M rows.
  void (*batch)(const Bf16* w, std::int64_t ldw, const std::uint16_t* xp, std::int64_t M,
                std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate);
  // out[m * ldo + j] (=|+=) w[j] . xb[m] for m < M, j < n, xb from round: register tiles of 8
  // rows of x by 48 features over panels of BF16 pairs (kGemmNC, kGemmPairsKC). panel:
  // gemm_panel_floats() floats of the calling thread.
  void (*gemm)(const Bf16* w, std::int64_t ldw, const std::uint16_t* xb, std::int64_t M,
               std::int64_t K, float* out, std::int64_t ldo, std::int64_t n, bool accumulate,
               float* panel);
  // Decode products (M <= kBatchRows) of fewer rows than this run the exact F32 kernels, which
  // are as fast or faster there: the result is then exact, more than compute bf16 asks
  // (docs/perf/bf16-compute.md). 1 for the emulation, which the tests run at every M.
  std::int64_t exact_below = 1;
};

// vdpbf16ps: null where has_bf16_dot() is false.
const Bf16Dot* bf16_dot_native();
// The same kernels with vdpbf16ps emulated by two FMAs (and the rounding by integer operations)
// on AVX-512F and BW, the same sums where no subnormal occurs: for testing the kernels on CPUs
// without AVX512-BF16 (tests/kernels/test_bf16_compute.cpp), slower than exact F32 compute. Null
// without AVX-512BW.
const Bf16Dot* bf16_dot_emulated();

}  // namespace attn
