#include "attn/kernels/detail/bf16_dot.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/kernels.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/kernels/x86/avx512/detail/transpose.hpp"

namespace attn {

std::int64_t packed_bf16_elements(std::int64_t M, std::int64_t K) {
  return M * round_up(K, 32);
}

std::int64_t rounded_bf16_elements(std::int64_t M, std::int64_t K) {
  return M * round_up(K, 2);
}

#if defined(__x86_64__)

bool has_bf16_dot() {
  return cpu_features().avx512_bf16;
}

namespace {

#define ATTN_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define ATTN_EMULATED __attribute__((target("avx512f,avx512bw")))

// Keeps v in a register: GCC would otherwise fold the load into every vdpbf16ps that uses it.
template <typename V>
[[gnu::always_inline]] ATTN_BF16 inline void pin(V& v) {
  asm("" : "+v"(v));
}

// vdpbf16ps and vcvtneps2bf16 themselves.
struct Vdpbf16ps {
  [[gnu::always_inline]] ATTN_BF16 static __m512 dot(__m512 acc, __m512i a, __m512i b) {
    return _mm512_dpbf16_ps(acc, __m512bh(a), __m512bh(b));
  }
  // 16 floats rounded to BF16, nearest even, into out[0:n].
  [[gnu::always_inline]] ATTN_BF16 static void round16(__m512 v, std::uint16_t* out, int n) {
    const __m256bh h = _mm512_cvtneps_pbh(v);
    std::memcpy(out, &h, std::size_t(n) * sizeof(std::uint16_t));
  }
};

// The same on AVX-512F: each lane's two products added in turn, the high pair first, as the SDM
// writes vdpbf16ps (a product of two BF16 values is exact in F32, so one FMA rounds as its
// addition does), and the rounding as f32_to_bf16 (PyTorch's). It differs from the instruction
// only where that flushes subnormals to zero. Slower than F32 compute: it lets the kernels'
// blocking be tested on CPUs without AVX512-BF16.
struct Emulated {
  [[gnu::always_inline]] ATTN_EMULATED static __m512 dot(__m512 acc, __m512i a, __m512i b) {
    const __m512i high = _mm512_set1_epi32(int(0xFFFF0000u));
    const __mmask16 all = 0xFFFF;  // the masked forms: GCC 12 warns on the plain ones' sources
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(a, high)),
                          _mm512_castsi512_ps(_mm512_and_si512(b, high)), acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, a, 16)),
                           _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, b, 16)), acc);
  }
  [[gnu::always_inline]] ATTN_EMULATED static void round16(__m512 v, std::uint16_t* out, int n) {
    alignas(64) float f[16];
    _mm512_store_ps(f, v);
    for (int i = 0; i < n; ++i) out[i] = f32_to_bf16(f[i]);
  }
};

// Columns per step of a weight row group when x's rows go in several groups: R rows of 2 KB
// stay in L1 while each group of x's rows passes over them, as in the F32 kernel (kStepCols).
constexpr std::int64_t kStep = 1024;
// Weight rows per register block, at most (the accumulators' spill area).
constexpr int kMaxR = 8;

// acc[r][c] += w[r] . x[c] lane-wise over k0..k1 (multiples of 32): xp is the packed x at its
// first row, M the rows of the packing, acc [R, M, 16] at the first row. Tail: the one block
// past K (K not a multiple of 32), its weights read masked (x is zero there, w's row may end).
template <typename Op, int R, int C, bool Tail>
ATTN_BF16 inline void dot_span(const Bf16* w, std::int64_t ldw, const std::uint16_t* xp,
                               std::int64_t M, std::int64_t K, std::int64_t k0, std::int64_t k1,
                               __m512 (&a)[R][C], const Stream* prefetch) {
  const Stream stream = prefetch ? *prefetch : Stream{0, 0, 0};
  const __mmask32 live = Tail ? __mmask32((1ull << (K - k0)) - 1) : ~__mmask32(0);
  for (std::int64_t k = k0; k < k1; k += 32) {
    const std::uint16_t* xk = xp + k * M;  // block k / 32 starts at (k / 32) * M * 32
    const std::int64_t ahead = stream.ahead<Bf16>(k, ldw);
    __m512i xv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      __m512i t = _mm512_loadu_si512(xk + c * 32);
      pin(t);  // through a temporary: pinning the array's element put the array on the stack
      xv[c] = t;
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512i wv = Tail ? _mm512_maskz_loadu_epi16(live, w + r * ldw + k)
                        : _mm512_loadu_si512(w + r * ldw + k);
      pin(wv);
      if (prefetch) prefetch_at(w + r * ldw + k, ahead);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) a[r][c] = Op::dot(a[r][c], wv, xv[c]);
    }
  }
}

// dot_span over k0..k1 with the accumulators in registers, loaded from and stored to acc.
template <typename Op, int R, int C>
ATTN_BF16 inline void dot_block(const Bf16* w, std::int64_t ldw, const std::uint16_t* xp,
                                std::int64_t M, std::int64_t K, std::int64_t k0, std::int64_t k1,
                                float* acc, const Stream* prefetch) {
  __m512 a[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) a[r][c] = _mm512_loadu_ps(acc + (r * M + c) * 16);
  const std::int64_t whole = std::min(k1, K / 32 * 32);
  if (k0 < whole) dot_span<Op, R, C, false>(w, ldw, xp, M, K, k0, whole, a, prefetch);
  if (whole < k1) dot_span<Op, R, C, true>(w, ldw, xp, M, K, std::max(k0, whole), k1, a, prefetch);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(acc + (r * M + c) * 16, a[r][c]);
}

// dot_block for c (1..C) input rows, the count known only at run time.
template <typename Op, int R, int C>
ATTN_BF16 inline void dot_block_upto(int c, const Bf16* w, std::int64_t ldw,
                                     const std::uint16_t* xp, std::int64_t M, std::int64_t K,
                                     std::int64_t k0, std::int64_t k1, float* acc,
                                     const Stream* prefetch) {
  if constexpr (C > 1)
    if (c < C) return dot_block_upto<Op, R, C - 1>(c, w, ldw, xp, M, K, k0, k1, acc, prefetch);
  dot_block<Op, R, C>(w, ldw, xp, M, K, k0, k1, acc, prefetch);
}

// R rows of w against all M rows of x over k0..k1: part[r * M + m] +=, x's rows in groups of at
// most C as even as they come.
template <typename Op, int R, int C>
ATTN_BF16 void rows_block(const Bf16* w, std::int64_t ldw, const std::uint16_t* xp, std::int64_t M,
                          std::int64_t K, std::int64_t k0, std::int64_t k1, float* part) {
  alignas(64) float acc[kMaxR * kBatchRows * 16];  // [R, M, 16] lane sums
  std::fill(acc, acc + R * M * 16, 0.0f);
  const std::int64_t groups = (M + C - 1) / C;
  const Stream stream{k0, k1, R};
  const std::int64_t step = groups == 1 ? k1 - k0 : kStep;
  for (std::int64_t s0 = k0; s0 < k1; s0 += step) {
    const std::int64_t s1 = std::min(k1, s0 + step);
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t m0 = M * g / groups, m1 = M * (g + 1) / groups;
      dot_block_upto<Op, R, C>(int(m1 - m0), w, ldw, xp + m0 * 32, M, K, s0, s1, acc + m0 * 16,
                               g == 0 ? &stream : nullptr);
    }
  }
  for (std::int64_t i = 0; i < R * M; ++i) {
    float s = 0;
    for (int l = 0; l < 16; ++l) s += acc[i * 16 + l];
    part[i] += s;
  }
}

// batch_bf16_dot with the register blocking R x C.
template <typename Op, int R, int C>
ATTN_BF16 void batch_rows(const Bf16* w, std::int64_t ldw, const std::uint16_t* xp, std::int64_t M,
                          std::int64_t K, float* y, std::int64_t ldy, std::int64_t n,
                          bool accumulate) {
  float part[kGemvRows * kBatchRows];  // [n, M]: the sums so far
  std::fill(part, part + n * M, 0.0f);
  const std::int64_t k32 = round_up(K, 32);
  // x's packed columns kept hot in L2 across the 64-row block: 256 KB of them at a time.
  const std::int64_t kc = std::max(kStep, (std::int64_t(1) << 17) / M / kStep * kStep);
  for (std::int64_t k0 = 0; k0 < k32; k0 += kc) {
    const std::int64_t k1 = std::min(k32, k0 + kc);
    std::int64_t r = 0;
    for (; r + R <= n; r += R)
      rows_block<Op, R, C>(w + r * ldw, ldw, xp, M, K, k0, k1, part + r * M);
    if constexpr (R > 4)
      for (; r + 4 <= n; r += 4)
        rows_block<Op, 4, C>(w + r * ldw, ldw, xp, M, K, k0, k1, part + r * M);
    for (; r < n; ++r) rows_block<Op, 1, C>(w + r * ldw, ldw, xp, M, K, k0, k1, part + r * M);
  }
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t r = 0; r < n; ++r)
      y[m * ldy + r] = (accumulate ? y[m * ldy + r] : 0.0f) + part[r * M + m];
}

// The prefill tile: kMR rows of x by kNR features (24 accumulators); per pair of columns 3 panel
// loads, 8 broadcasts of a row's pair, 24 vdpbf16ps.
constexpr int kMR = 8;
constexpr int kNV = 3;
constexpr std::int64_t kNR = 16 * kNV;
static_assert(kGemmNC % kNR == 0);

// Columns ahead of the block being packed that its rows are asked for: 192 bytes, as the F32
// GEMM's 48 floats were (that GEMM is gone: docs/perf/prefill-gemm.md).
constexpr std::int64_t kPackAhead = 96;

// nr <= kNR rows of w (ldw apart), columns k0..k0 + kc, into panel [pairs, kNR]: each element
// the pair (w[i][2p], w[i][2p + 1]) as 32 bits, low half first; rows past nr and columns past kc
// zero. Whole 16 x 16 blocks of pairs go through registers.
ATTN_BF16 void pack_pairs(const Bf16* w, std::int64_t ldw, std::int64_t nr, std::int64_t kc,
                          std::uint32_t* panel) {
  const std::int64_t pairs = (kc + 1) / 2;
  std::int64_t p = 0;
  for (; 2 * (p + 16) <= kc; p += 16)
    for (int g = 0; g < kNV; ++g) {
      const std::int64_t rows = std::clamp<std::int64_t>(nr - 16 * g, 0, 16);
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        const Bf16* row = w + (16 * g + i) * ldw + 2 * p;
        if (i < rows) prefetch_at(row, kPackAhead);
        r[i] = i < rows ? _mm512_castsi512_ps(_mm512_loadu_si512(row)) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int c = 0; c < 16; ++c) _mm512_storeu_ps(panel + (p + c) * kNR + 16 * g, r[c]);
    }
  for (; p < pairs; ++p)
    for (std::int64_t i = 0; i < kNR; ++i) {
      std::uint32_t v = 0;
      if (i < nr) {
        v = w[i * ldw + 2 * p].bits;
        if (2 * p + 1 < kc) v |= std::uint32_t(w[i * ldw + 2 * p + 1].bits) << 16;
      }
      panel[p * kNR + i] = v;
    }
}

// out[mr, features under mask] (= | +=) xb[mr, pairs] . panel[pairs, kNR], xb's rows ldx apart.
template <typename Op, int MR>
ATTN_BF16 void tile(std::int64_t pairs, const std::uint16_t* x, std::int64_t ldx,
                    const std::uint32_t* panel, float* out, std::int64_t ldo, const __mmask16* mask,
                    bool add) {
  __m512 c[MR][kNV];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < kNV; ++j) c[i][j] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < pairs; ++p) {
    __m512i b[kNV];
    for (int j = 0; j < kNV; ++j) b[j] = _mm512_loadu_si512(panel + p * kNR + 16 * j);
    for (int i = 0; i < MR; ++i) {
      std::uint32_t pair;
      std::memcpy(&pair, x + i * ldx + 2 * p, sizeof pair);
      const __m512i a = _mm512_set1_epi32(int(pair));
      for (int j = 0; j < kNV; ++j) c[i][j] = Op::dot(c[i][j], a, b[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < kNV; ++j) {
      float* o = out + i * ldo + 16 * j;
      const __m512 v = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask[j], o), c[i][j]) : c[i][j];
      _mm512_mask_storeu_ps(o, mask[j], v);
    }
}

template <typename Op, int MR>
ATTN_BF16 void tile_upto(int mr, std::int64_t pairs, const std::uint16_t* x, std::int64_t ldx,
                         const std::uint32_t* panel, float* out, std::int64_t ldo,
                         const __mmask16* mask, bool add) {
  if constexpr (MR > 1)
    if (mr < MR) return tile_upto<Op, MR - 1>(mr, pairs, x, ldx, panel, out, ldo, mask, add);
  tile<Op, MR>(pairs, x, ldx, panel, out, ldo, mask, add);
}

template <typename Op>
ATTN_BF16 void pack_bf16(const float* x, std::int64_t M, std::int64_t K, std::uint16_t* xp) {
  const std::int64_t k32 = round_up(K, 32);
  for (std::int64_t k = 0; k < k32; k += 32)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t h = 0; h < 32; h += 16) {
        const std::int64_t live = std::clamp<std::int64_t>(K - k - h, 0, 16);
        const __m512 v = _mm512_maskz_loadu_ps(__mmask16((1u << live) - 1), x + m * K + k + h);
        Op::round16(v, xp + k * M + m * 32 + h, 16);
      }
}

template <typename Op>
ATTN_BF16 void round_bf16(const float* x, std::int64_t M, std::int64_t K, std::uint16_t* xb) {
  const std::int64_t k2 = round_up(K, 2);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < k2; k += 16) {
      const std::int64_t live = std::min<std::int64_t>(K - k, 16);
      const __m512 v = _mm512_maskz_loadu_ps(__mmask16((1u << live) - 1), x + m * K + k);
      const std::int64_t out = std::min<std::int64_t>(k2 - k, 16);  // the row's last pair
      Op::round16(v, xb + m * k2 + k, int(out));
    }
}

template <typename Op>
void batch_bf16_dot(const Bf16* w, std::int64_t ldw, const std::uint16_t* xp, std::int64_t M,
                    std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {
  switch (M) {
    case 1:
      return batch_rows<Op, 8, 1>(w, ldw, xp, M, K, y, ldy, n, accumulate);
    case 2:
      return batch_rows<Op, 8, 2>(w, ldw, xp, M, K, y, ldy, n, accumulate);
    case 3:
      return batch_rows<Op, 8, 3>(w, ldw, xp, M, K, y, ldy, n, accumulate);
    default:
      return batch_rows<Op, 6, 4>(w, ldw, xp, M, K, y, ldy, n, accumulate);
  }
}

template <typename Op>
ATTN_BF16 void gemm_bf16_dot(const Bf16* w, std::int64_t ldw, const std::uint16_t* xb,
                             std::int64_t M, std::int64_t K, float* out, std::int64_t ldo,
                             std::int64_t n, bool accumulate, float* panel_floats) {
  if (K == 0 && !accumulate)
    for (std::int64_t m = 0; m < M; ++m) std::fill(out + m * ldo, out + m * ldo + n, 0.0f);
  auto* panel = reinterpret_cast<std::uint32_t*>(panel_floats);
  const std::int64_t ldx = round_up(K, 2);
  for (std::int64_t n0 = 0; n0 < n; n0 += kGemmNC) {
    const std::int64_t nc = std::min(kGemmNC, n - n0);
    for (std::int64_t k0 = 0; k0 < K; k0 += 2 * kGemmPairsKC) {
      const std::int64_t kc = std::min(2 * kGemmPairsKC, K - k0), pairs = (kc + 1) / 2;
      for (std::int64_t j = 0; j < nc; j += kNR)
        pack_pairs(w + (n0 + j) * ldw + k0, ldw, std::min(kNR, nc - j), kc, panel + j * pairs);
      const bool last_k = k0 + 2 * kGemmPairsKC >= K;
      const std::int64_t n_next = last_k ? n0 + kGemmNC : n0,
                         k_next = last_k ? 0 : k0 + 2 * kGemmPairsKC;
      ChunkPrefetch<Bf16> ahead(
          w, ldw, n_next, k_next, std::clamp<std::int64_t>(n - n_next, 0, kGemmNC),
          std::min(2 * kGemmPairsKC, K - k_next), (M + kMR - 1) / kMR * ((nc + kNR - 1) / kNR));
      for (std::int64_t m = 0; m < M; m += kMR)
        for (std::int64_t j = 0; j < nc; j += kNR) {
          ahead.step();
          __mmask16 mask[kNV];
          for (int v = 0; v < kNV; ++v) {
            const std::int64_t live = std::clamp<std::int64_t>(nc - j - 16 * v, 0, 16);
            mask[v] = __mmask16((1u << live) - 1);
          }
          tile_upto<Op, kMR>(int(std::min<std::int64_t>(kMR, M - m)), pairs, xb + m * ldx + k0, ldx,
                             panel + j * pairs, out + m * ldo + n0 + j, ldo, mask,
                             accumulate || k0 > 0);
        }
    }
  }
}

template <typename Op>
constexpr Bf16Dot kBf16Dot{pack_bf16<Op>, round_bf16<Op>, batch_bf16_dot<Op>, gemm_bf16_dot<Op>};

#undef ATTN_BF16
#undef ATTN_EMULATED

}  // namespace

// Where vdpbf16ps beats the exact F32 kernels in decode. On AMD (Zen 4, Zen 5) it runs at the
// FMA's rate, two products per lane: from 2 rows on; one row is a stream of the weights either
// way, and there the exact gemv was the faster (Zen 5: 146 against 125 steps/s). On Intel
// (Sapphire Rapids) it retires one every two cycles, half the FMA's products per cycle: the exact
// kernels are as fast from memory (1-4 rows) and faster past that (8 rows 42 against 45 ms,
// 16 rows 56 against 75 per layer on one core), so every decode product runs exactly there
// (docs/perf/bf16-compute.md).
std::int64_t native_exact_below() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool amd = __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541;  // "Auth"enticAMD
  return amd ? 2 : kBatchRows + 1;
}

const Bf16Dot* bf16_dot_native() {
  if (!has_bf16_dot()) return nullptr;
  static const Bf16Dot native = [] {
    Bf16Dot d = kBf16Dot<Vdpbf16ps>;
    d.exact_below = native_exact_below();
    return d;
  }();
  return &native;
}

const Bf16Dot* bf16_dot_emulated() {
  return cpu_features().avx512bw_vl ? &kBf16Dot<Emulated> : nullptr;
}

#else

bool has_bf16_dot() {
  return false;
}
const Bf16Dot* bf16_dot_native() {
  return nullptr;
}
const Bf16Dot* bf16_dot_emulated() {
  return nullptr;
}

#endif

}  // namespace attn
