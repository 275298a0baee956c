#include "attn/kernels/matmul.hpp"

#include <cblas.h>
#include <omp.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/kernels/detail/claims.hpp"
#include "attn/kernels/detail/gemm.hpp"
#include "attn/kernels/detail/lanes.hpp"
#include "attn/matrix.hpp"
#include "attn/kernels/detail/prefetch.hpp"

namespace attn {

namespace {

constexpr std::int64_t kGemvRows = 64;

// Rows of w for thread t of nt, aligned to 16 so each slice starts on a cache-line multiple.
std::pair<std::int64_t, std::int64_t> slice(std::int64_t n, int t, int nt) {
  const std::int64_t blocks = (n + 15) / 16;
  const std::int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
  return {std::min(n, b0 * 16), std::min(n, b1 * 16)};
}

// The decode kernels are written once, in plain C++ with GCC vector types of W floats, and
// instantiated per instruction set below: each instance is inlined into a function compiled for
// that ISA (target attribute), so a build without -march=native still runs AVX-512 or AVX2
// where the CPU has them. Products are written out as FMAs (fmadd below).
template <int W>
struct Vec {
  typedef float type __attribute__((vector_size(W * sizeof(float))));
};

// Unaligned load (memcpy compiles to one vmovups); by reference, so no vector crosses an ABI.
template <int W>
[[gnu::always_inline]] inline void load(typename Vec<W>::type& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}

// Keeps v in a register. GCC would fold the loads of x and w into the FMAs that use them: every
// vector loaded again for each FMA (R x C loads instead of R + C), and the load ports, not the
// FMAs, would set the pace (measured on Zen 4, one core, weights in L2, 4-24 rows: 40-65
// GFLOP/s with the folded loads, 71-81 with this).
template <typename V>
[[gnu::always_inline]] inline void pin(V& v) {
#if defined(__x86_64__)
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

template <int W>
struct Halves {
  typedef std::uint16_t type __attribute__((vector_size(W * sizeof(std::uint16_t))));
};
template <int W>
struct Bits {
  typedef std::uint32_t type __attribute__((vector_size(W * sizeof(std::uint32_t))));
};

// W weights widened to F32 lanes: with the ISA's instructions for 16 and 8 lanes (lanes.hpp),
// else in plain vector code (GCC 12 converts _Float16 vectors element by element through
// libgcc; clang 14 has no _Float16 on x86). The ISA helpers (lanes.hpp, and fma_lanes here) are
// not always_inline: only the kernels compiled for the ISA (flatten, ATTN_KERNELS) inline them.
template <int W>
[[gnu::always_inline]] inline void load_w(typename Vec<W>::type& v, const float* p) {
  load<W>(v, p);
}

template <int W>
[[gnu::always_inline]] inline void load_w(typename Vec<W>::type& v, const Bf16* p) {
#if defined(__x86_64__)
  if constexpr (W == 16) return widen16(reinterpret_cast<__m512&>(v), p);
  if constexpr (W == 8) return widen8(reinterpret_cast<__m256&>(v), p);
#endif
  typename Halves<W>::type h;
  std::memcpy(&h, p, sizeof h);
  const typename Bits<W>::type b = __builtin_convertvector(h, typename Bits<W>::type) << 16;
  std::memcpy(&v, &b, sizeof v);
}

// f16_to_f32 (matrix.hpp) lane-wise, without branches: exponent 1..30 rebased by 127 - 15;
// 31 (Inf, NaN) to 255, a NaN made quiet; 0 (zero, subnormal) as (2^-14 + mant x 2^-24) - 2^-14,
// exact.
template <int W>
[[gnu::always_inline]] inline void load_w(typename Vec<W>::type& v, const F16* p) {
#if defined(__x86_64__)
  if constexpr (W == 16) return widen16(reinterpret_cast<__m512&>(v), p);
  if constexpr (W == 8) return widen8(reinterpret_cast<__m256&>(v), p);
#endif
  using U = typename Bits<W>::type;
  using V = typename Vec<W>::type;
  typename Halves<W>::type h;
  std::memcpy(&h, p, sizeof h);
  const U u = __builtin_convertvector(h, U);
  const U em = (u & 0x7FFFu) << 13, e = em & 0x0F800000u;
  const U special = U(e == 0x0F800000u), tiny = U(e == 0u);
  const U nan = special & U((em & 0x007FE000u) != 0u);
  const U normal = (em + (112u << 23) + (special & (112u << 23))) | (nan & 0x00400000u);
  V sub;
  const U sub_bits = em + (113u << 23);
  std::memcpy(&sub, &sub_bits, sizeof sub);
  sub -= 0x1p-14f;
  U sub_u;
  std::memcpy(&sub_u, &sub, sizeof sub_u);
  const U out = ((tiny & sub_u) | (~tiny & normal)) | ((u & 0x8000u) << 16);
  std::memcpy(&v, &out, sizeof v);
}

// a += b * c in one rounding. Written out, not left to -ffp-contract: GCC contracted a * b + c
// in some loops of the F32 instances and not in the same loops of the F16 ones, and the bits
// must not differ. The scalar tails use std::fma for the same reason.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline void fma_lanes(Vec<16>::type& a, const Vec<16>::type& b,
                                                         const Vec<16>::type& c) {
  a = Vec<16>::type(_mm512_fmadd_ps(__m512(b), __m512(c), __m512(a)));
}
__attribute__((target("avx2,fma"))) inline void fma_lanes(Vec<8>::type& a, const Vec<8>::type& b,
                                                          const Vec<8>::type& c) {
  a = Vec<8>::type(_mm256_fmadd_ps(__m256(b), __m256(c), __m256(a)));
}
#endif

template <int W>
[[gnu::always_inline]] inline void fmadd(typename Vec<W>::type& a, const typename Vec<W>::type& b,
                                         const typename Vec<W>::type& c) {
#if defined(__x86_64__)
  if constexpr (W == 16 || W == 8) return fma_lanes(a, b, c);
#endif
  for (int l = 0; l < W; ++l) a[l] = std::fma(b[l], c[l], a[l]);  // the generic kernels
}

// The gemv reads each row in blocks of B columns (16 with AVX-512 or AVX2, 8 without), so every
// residue of k mod B has its own FMA chain, in k order, and sums the B chains in one order
// whatever the type: a BF16 or F16 row gives the bits of its F32-widened row. The chains sit in
// A accumulators of V lanes per row (V x A = B):
// - F32 with AVX-512: one zmm, lane c holding chain c;
// - otherwise two vectors. F32 and F16 put columns 0..V-1 of a block in the first and V..2V-1
//   in the second. BF16 puts the even columns in the first and the odd ones in the second: one
//   load of 2V halves splits into them with a shift and a mask (against two widening loads and
//   two shifts: 11% more bandwidth on one Zen 4 core, where the widening, not memory, held BF16
//   back), and x is read deinterleaved the same way (xd).
// Under AVX-512, BF16 and F16 still run in ymm registers (B = 16): on one Zen 4 core streaming
// the 8B layer's products, F16 9% and BF16 2% faster than in zmm with B = 32.
template <int W, typename T>
inline constexpr int kGemvLanes = W == 16 && sizeof(T) == 2 ? 8 : W;  // V
template <int W, typename T>
inline constexpr int kGemvAccs = W == 16 && sizeof(T) == 4 ? 1 : 2;  // A
template <typename T>
inline constexpr bool kEvenOdd = std::is_same_v<T, Bf16>;

// 2V weights from p as two V-lane vectors, in the order above.
template <int V, typename T>
[[gnu::always_inline]] inline void load_pair(typename Vec<V>::type& lo, typename Vec<V>::type& hi,
                                             const T* p) {
  if constexpr (kEvenOdd<T>) {
    typename Bits<V>::type b;  // lane l: half 2l in the low 16 bits, half 2l + 1 in the high
    std::memcpy(&b, p, sizeof b);
    const typename Bits<V>::type even = b << 16, odd = b & 0xFFFF0000u;
    std::memcpy(&lo, &even, sizeof lo);
    std::memcpy(&hi, &odd, sizeof hi);
  } else {
    load_w<V>(lo, p);
    load_w<V>(hi, p + V);
  }
}

// x [K] deinterleaved for BF16 rows: in each block of 2V, the even columns, then the odd ones.
void deinterleave(const float* x, std::int64_t K, int V, float* xd) {
  for (std::int64_t b = 0; b + 2 * V <= K; b += 2 * V)
    for (int l = 0; l < V; ++l) {
      xd[b + l] = x[b + 2 * l];
      xd[b + V + l] = x[b + 2 * l + 1];
    }
}

// Where column c of a block lies among a row's accumulators' V x A lanes.
template <int V, typename T>
constexpr int lane(std::int64_t c) {
  return kEvenOdd<T> ? int(c % 2) * V + int(c / 2) : int(c);
}

// v's lanes summed as a tree: lanes i and i + N/2, halving until one is left.
template <typename Vv, int... I>
[[gnu::always_inline]] inline float sum_tree(const Vv& v, std::integer_sequence<int, I...>) {
  constexpr int half = sizeof...(I);
  if constexpr (half == 1) {
    return v[0] + v[1];
  } else {
    const auto h =
        __builtin_shufflevector(v, v, I...) + __builtin_shufflevector(v, v, (I + half)...);
    return sum_tree(h, std::make_integer_sequence<int, half / 2>());
  }
}

// One accumulator's V chains: lanes 2i and 2i + 1, then the tree. I: 0..V/2-1.
template <int V, int... I>
[[gnu::always_inline]] inline float sum_chains_one(const typename Vec<V>::type& a,
                                                   std::integer_sequence<int, I...>) {
  return sum_tree(
      __builtin_shufflevector(a, a, (2 * I)...) + __builtin_shufflevector(a, a, (2 * I + 1)...),
      std::make_integer_sequence<int, V / 4>());
}

// The B chains summed in one order for every layout: chains 2i and 2i + 1 first, then those B/2
// sums as a tree (a row's sum waits on 5 adds, not 15), in vector registers. I: 0..V-1.
template <int V, int A, typename T, int... I>
[[gnu::always_inline]] inline float sum_chains(const typename Vec<V>::type& lo,
                                               const typename Vec<V>::type& hi,
                                               std::integer_sequence<int, I...>) {
  constexpr int B = V * A;
  if constexpr (A == 1) {
    return sum_chains_one<V>(lo, std::make_integer_sequence<int, V / 2>());
  } else if constexpr (kEvenOdd<T>) {
    return sum_tree(lo + hi, std::make_integer_sequence<int, B / 4>());
  } else {
    const typename Vec<V>::type t = __builtin_shufflevector(lo, hi, (2 * I)...) +
                                    __builtin_shufflevector(lo, hi, (2 * I + 1)...);
    return sum_tree(t, std::make_integer_sequence<int, B / 4>());
  }
}

// y[r] (=|+=) w[r] . x for R rows of length K: R rows' chains side by side (A x R independent FMA
// chains hide the FMA latency and keep R streams of weights in flight while x stays in L1).
template <int V, int A, int R, typename T>
[[gnu::always_inline]] inline void dot_rows(const T* w, std::int64_t ldw, const float* x,
                                            const float* xd, std::int64_t K, float* y,
                                            bool accumulate) {
  using Vt = typename Vec<V>::type;
  constexpr std::int64_t B = V * A, kLine = 64 / std::int64_t(sizeof(T));  // weights per line
  Vt lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = Vt{};
  const float* xs = kEvenOdd<T> ? xd : x;
  const Stream stream{0, K, R};
  std::int64_t k = 0;
  for (; k + B <= K; k += B) {
    Vt x0, x1;
    load<V>(x0, xs + k);
    if constexpr (A == 2) load<V>(x1, xs + k + V);
    const std::int64_t ahead = stream.ahead<T>(k, ldw);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      Vt w0, w1;
      if constexpr (A == 2)
        load_pair<V>(w0, w1, w + r * ldw + k);
      else
        load_w<V>(w0, w + r * ldw + k);
#pragma GCC unroll 2
      for (std::int64_t i = 0; i < B; i += kLine) prefetch_at(w + r * ldw + k + i, ahead);
      fmadd<V>(lo[r], w0, x0);
      if constexpr (A == 2) fmadd<V>(hi[r], w1, x1);
    }
  }
  if (k < K) {  // the last K - k < B columns as one more block, zero-padded
    alignas(64) float xt[B] = {};
    for (std::int64_t j = k; j < K; ++j) xt[lane<V, T>(j - k)] = x[j];
    Vt x0, x1;
    load<V>(x0, xt);
    if constexpr (A == 2) load<V>(x1, xt + V);
    for (int r = 0; r < R; ++r) {
      alignas(64) float wt[B] = {};
      for (std::int64_t j = k; j < K; ++j) wt[lane<V, T>(j - k)] = to_f32(w[r * ldw + j]);
      Vt w0, w1;
      load<V>(w0, wt);
      fmadd<V>(lo[r], w0, x0);  // a padded lane adds 0 x 0: its chain keeps its bits
      if constexpr (A == 2) {
        load<V>(w1, wt + V);
        fmadd<V>(hi[r], w1, x1);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    y[r] = (accumulate ? y[r] : 0.0f) +
           sum_chains<V, A, T>(lo[r], hi[r], std::make_integer_sequence<int, V>());
}

// R rows at a time: A x R accumulators and four vectors must fit the register file (32 zmm, 16
// ymm). With AVX-512, F32 runs 8 rows and BF16/F16 4 (one Zen 4 core streaming the 8B layer's
// products from memory, interleaved runs: F32 7% slower on 4 rows; BF16 and F16 4-6% faster on 4
// than on 8 in zmm, 20% faster than on 8 and 10% faster than on 2 in ymm).
template <int W, typename T>
[[gnu::always_inline]] inline void gemv_rows(const T* w, std::int64_t ldw, const float* x,
                                             const float* xd, float* y, std::int64_t n,
                                             std::int64_t K, bool accumulate) {
  constexpr int V = kGemvLanes<W, T>, A = kGemvAccs<W, T>, R = W == 16 && A == 1 ? 8 : 4;
  std::int64_t r = 0;
  for (; r + R <= n; r += R) dot_rows<V, A, R>(w + r * ldw, ldw, x, xd, K, y + r, accumulate);
  for (; r < n; ++r) dot_rows<V, A, 1>(w + r * ldw, ldw, x, xd, K, y + r, accumulate);
}

// Decode attention, one query position: the n query heads of a KV head's group against its keys
// and values, on the calling thread. Each key and value row is read once for the whole group,
// where OpenBLAS's sgemv, one call per head, read it n times. The 8B layer's attention at about
// 560 positions, 2 threads, Zen 4, median (best) of 2000 calls in three alternating runs, before
// the prefetches below: batch 1 131-164 (114) us against 184-205 (160) with sgemv; batch 4
// 846-1256 (510) against 1020-1288 (773); batch 16 5.7-6.0 (4.4) ms against 6.1-6.6 (4.8).
// With the prefetches and the mix in runs of 4 vectors (bench/decode_attention.cpp, 2 512 1 16):
// batch 1 150-157 (111) us against 212-245 (178-179); batch 16 4.1-4.2 (3.1-3.2) ms against
// 7.5-7.6 (5.4-5.5).
// s[h * keys + j] = scale * (q[h] . k[j]) for KB keys from j: KB independent FMA chains, each
// key's row read once for all n heads (from L1 after the first).
template <int W, int KB>
[[gnu::always_inline]] inline void score_keys(const float* q, std::int64_t n, const float* k,
                                              std::int64_t j, std::int64_t keys, std::int64_t hd,
                                              float scale, float* s) {
  using V = typename Vec<W>::type;
  const std::int64_t hv = hd / W * W;
  // The key rows 8 on asked for into L2 (the value rows 16 on in group_mix): with a batch's
  // cache in memory, not L3, the hardware prefetcher alone left attention waiting on it (the 8B
  // layer at batch 16, 2 threads: 4.9-5.3 ms a step against 5.6-6.3 without; 32 rows ahead no
  // better; batch 1 level).
  for (std::int64_t b = 0; b < KB; ++b)
    for (std::int64_t c = 0; c < hd; c += 16) prefetch_at(k + (j + b) * hd + c, 8 * hd);
  for (std::int64_t h = 0; h < n; ++h) {
    const float* qh = q + h * hd;
    V a[KB] = {};
    for (std::int64_t c = 0; c < hv; c += W) {
      V x;
      load<W>(x, qh + c);
      pin(x);
      for (int b = 0; b < KB; ++b) {
        V y;
        load<W>(y, k + (j + b) * hd + c);
        fmadd<W>(a[b], x, y);
      }
    }
    for (int b = 0; b < KB; ++b) {
      float d = sum_tree(a[b], std::make_integer_sequence<int, W / 2>());
      for (std::int64_t c = hv; c < hd; ++c) d = std::fma(qh[c], k[(j + b) * hd + c], d);
      s[h * keys + j + b] = scale * d;
    }
  }
}

// s[h * keys + j] = scale * (q[h] . k[j]): q [n, hd], k [keys, hd].
template <int W>
[[gnu::always_inline]] inline void group_scores(const float* q, std::int64_t n, const float* k,
                                                std::int64_t keys, std::int64_t hd, float scale,
                                                float* s) {
  std::int64_t j = 0;
  for (; j + 4 <= keys; j += 4) score_keys<W, 4>(q, n, k, j, keys, hd, scale, s);
  for (; j < keys; ++j) score_keys<W, 1>(q, n, k, j, keys, hd, scale, s);
}

// out[h * hd + c0 ..] = sum over j of p[h * keys + j] v[j, c0 ..], for HB heads and CV vectors of
// W columns from c0: HB x CV sums stay in registers while the keys pass, so a value row's
// CV x W columns are read once per HB heads, one after the other.
template <int W, int HB, int CV>
[[gnu::always_inline]] inline void mix_columns(const float* p, std::int64_t keys, const float* v,
                                               std::int64_t hd, std::int64_t c0, float* out) {
  using V = typename Vec<W>::type;
  V acc[HB][CV] = {};
  for (std::int64_t j = 0; j < keys; ++j) {
    const float* row = v + j * hd + c0;
    for (int l = 0; l < CV * W; l += 16) prefetch_at(row + l, 16 * hd);
    V x[CV];
    for (int i = 0; i < CV; ++i) {
      load<W>(x[i], row + i * W);
      pin(x[i]);
    }
    for (int h = 0; h < HB; ++h) {
      const V ph = V{} + p[h * keys + j];  // broadcast (p >= 0: + 0 changes nothing)
      for (int i = 0; i < CV; ++i) fmadd<W>(acc[h][i], ph, x[i]);
    }
  }
  for (int h = 0; h < HB; ++h)
    for (int i = 0; i < CV; ++i) std::memcpy(out + h * hd + c0 + i * W, &acc[h][i], sizeof(V));
}

// out[h * hd + :] for HB heads: the columns in runs of CV vectors, so that each pass over the
// keys reads CV x W floats of each value row in a row, not one vector (8B layer, B = 16 at 512
// positions: with one vector per pass the mix took 2.3x the scores' time on the same bytes).
template <int W, int HB>
[[gnu::always_inline]] inline void mix_heads(const float* p, std::int64_t keys, const float* v,
                                             std::int64_t hd, float* out) {
  constexpr int CV = W == 16 ? 4 : 2;  // HB x CV sums, CV values and p fit 32 (16) registers
  const std::int64_t hv = hd / W * W;
  std::int64_t c = 0;
  for (; c + CV * W <= hv; c += CV * W) mix_columns<W, HB, CV>(p, keys, v, hd, c, out);
  for (; c < hv; c += W) mix_columns<W, HB, 1>(p, keys, v, hd, c, out);
  for (; c < hd; ++c)
    for (int h = 0; h < HB; ++h) {
      float a = 0;
      for (std::int64_t j = 0; j < keys; ++j) a = std::fma(p[h * keys + j], v[j * hd + c], a);
      out[h * hd + c] = a;
    }
}

// out[h * hd + :] = sum over j of p[h * keys + j] v[j], for h < n: p [n, keys], v [keys, hd].
template <int W>
[[gnu::always_inline]] inline void group_mix(const float* p, std::int64_t n, const float* v,
                                             std::int64_t keys, std::int64_t hd, float* out) {
  std::int64_t h = 0;
  for (; h + 4 <= n; h += 4) mix_heads<W, 4>(p + h * keys, keys, v, hd, out + h * hd);
  switch (n - h) {
    case 3:
      return mix_heads<W, 3>(p + h * keys, keys, v, hd, out + h * hd);
    case 2:
      return mix_heads<W, 2>(p + h * keys, keys, v, hd, out + h * hd);
    case 1:
      return mix_heads<W, 1>(p + h * keys, keys, v, hd, out + h * hd);
    default:
      return;
  }
}

// rows x K weights (ldw apart) widened into out [rows, K]: a block of a BF16 or F16 matrix
// made F32 for sgemm.
template <int W, typename T>
[[gnu::always_inline]] inline void widen_block(const T* w, std::int64_t ldw, std::int64_t rows,
                                               std::int64_t K, float* out) {
  using V = typename Vec<W>::type;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t k = 0;
    for (; k + W <= K; k += W) {
      V v;
      load_w<W>(v, w + r * ldw + k);
      std::memcpy(out + r * K + k, &v, sizeof v);
    }
    for (; k < K; ++k) out[r * K + k] = to_f32(w[r * ldw + k]);
  }
}

// The batched kernel reads x packed: for each block of kPack columns, the M rows' kPack floats
// side by side, [K / kPack, M, kPack]. The rows of x and of w lie K floats apart, often a
// multiple of 4 KB, so unpacked they all map to one L1 set and more than 8 streams thrash it;
// packed, x is one stream beside R weight rows.
constexpr std::int64_t kPack = 16;

// acc[r][c] += w[r] . x[c] lane-wise over k0..k1 (whole kPack blocks), for R rows of w and C
// rows of x: xp is the packed x at its first row, M the rows of the packing, acc [R, M, W] at
// the first row. R x C accumulators of W lanes stay in registers: each weight vector loaded
// serves C input rows, each input vector R weight rows.
template <int W, int R, int C, typename T>
[[gnu::always_inline]] inline void dot_block(const T* w, std::int64_t ldw, const float* xp,
                                             std::int64_t M, std::int64_t k0, std::int64_t k1,
                                             float* acc, const Stream* prefetch) {
  using V = typename Vec<W>::type;
  V a[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) load<W>(a[r][c], acc + (r * M + c) * W);
  const Stream stream = prefetch ? *prefetch : Stream{0, 0, 0};  // in registers
  for (std::int64_t k = k0; k < k1; k += kPack) {
    const float* xk = xp + k * M;  // block k / kPack starts at (k / kPack) * M * kPack
#pragma GCC unroll 4
    for (int s = 0; s < kPack; s += W) {
      const std::int64_t ahead = stream.ahead<T>(k + s, ldw);
      V xv[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        V t;
        load<W>(t, xk + c * kPack + s);
        pin(t);
        xv[c] = t;
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        V wv;
        load_w<W>(wv, w + r * ldw + k + s);
        pin(wv);
        if (prefetch) prefetch_at(w + r * ldw + k + s, ahead);
        prefetch_l1_at(w + r * ldw + k + s, kL1PrefetchBytes / std::int64_t(sizeof(T)));
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) fmadd<W>(a[r][c], wv, xv[c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) std::memcpy(acc + (r * M + c) * W, &a[r][c], sizeof(V));
}

// dot_block for c (1..C) input rows, the count known only at run time.
template <int W, int R, int C, typename T>
[[gnu::always_inline]] inline void dot_block_upto(int c, const T* w, std::int64_t ldw,
                                                  const float* xp, std::int64_t M, std::int64_t k0,
                                                  std::int64_t k1, float* acc,
                                                  const Stream* prefetch) {
  if constexpr (C > 1)
    if (c < C) return dot_block_upto<W, R, C - 1>(c, w, ldw, xp, M, k0, k1, acc, prefetch);
  dot_block<W, R, C>(w, ldw, xp, M, k0, k1, acc, prefetch);
}

// Columns per step of a weight row group when x's rows go in several groups: R rows of this many
// floats (8 KB) stay in L1 while every group of x's rows passes over them, so the weights stream
// from memory at a steady pace rather than in bursts between compute-only passes. With one group
// the whole chunk is one step: the accumulators stay in registers (5-10% faster at 4-8 rows, one
// Zen 4 core).
constexpr std::int64_t kStepCols = 512;
// Weight rows per register block, at most (the accumulators' spill area below).
constexpr int kMaxBlockRows = 8;
// x's packed columns kept hot (L2) across a 64-row block: column chunks of about this many floats.
constexpr std::int64_t kXChunkFloats = 1 << 16;

// R rows of w against all M rows of x over k0..k1 (whole kPack blocks): part[r * M + m] +=.
// x's rows go in groups of at most C, as even as they come (8 rows go as 4 + 4, not 6 + 2).
// Exact: M == C, one group, and only the kernel for C rows is compiled (each count of rows a
// kernel serves is a fully unrolled copy; compile time).
template <int W, int R, int C, bool Exact, typename T>
[[gnu::always_inline]] inline void rows_block(const T* w, std::int64_t ldw, const float* xp,
                                              std::int64_t M, std::int64_t k0, std::int64_t k1,
                                              float* part) {
  static_assert(R <= kMaxBlockRows);
  alignas(64) float acc[kMaxBlockRows * kBatchRows * 16];  // [R, M, W] lane sums
  std::fill(acc, acc + R * M * W, 0.0f);
  const std::int64_t groups = (M + C - 1) / C;
  const Stream stream{k0, k1, R};  // the next R rows read the same columns k0..k1
  const std::int64_t step = groups == 1 ? k1 - k0 : kStepCols;
  for (std::int64_t s0 = k0; s0 < k1; s0 += step) {
    const std::int64_t s1 = std::min(k1, s0 + step);
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t m0 = M * g / groups, m1 = M * (g + 1) / groups;
      // The first group reads the weights from memory, the others from L1: it asks for the next.
      if constexpr (Exact)
        dot_block<W, R, C>(w, ldw, xp, M, s0, s1, acc, &stream);
      else
        dot_block_upto<W, R, C>(int(m1 - m0), w, ldw, xp + m0 * kPack, M, s0, s1, acc + m0 * W,
                                g == 0 ? &stream : nullptr);
    }
  }
  for (std::int64_t i = 0; i < R * M; ++i) {
    float s = 0;
    for (int l = 0; l < W; ++l) s += acc[i * W + l];
    part[i] += s;
  }
}

// y[m * ldy + r] (=|+=) w[r] . x[m] for n <= kGemvRows rows of w and 2 <= M <= kBatchRows
// rows of x (xp: x packed): every weight is read from memory once for all M rows.
template <int W, int R, int C, bool Exact, typename T>
[[gnu::always_inline]] inline void batch_rows(const T* w, std::int64_t ldw, const float* xp,
                                              const float* x, std::int64_t M, std::int64_t K,
                                              float* y, std::int64_t ldy, std::int64_t n,
                                              bool accumulate) {
  static_assert(W <= 16 && kPack % W == 0);
  float part[kGemvRows * kBatchRows];  // [n, M]: the sums so far
  std::fill(part, part + n * M, 0.0f);
  const std::int64_t kv = K / kPack * kPack;  // whole packed blocks; the rest from x below
  const std::int64_t kc = std::max(kStepCols, kXChunkFloats / M / kStepCols * kStepCols);
  for (std::int64_t k0 = 0; k0 < kv; k0 += kc) {
    const std::int64_t k1 = std::min(kv, k0 + kc);
    std::int64_t r = 0;
    for (; r + R <= n; r += R)
      rows_block<W, R, C, Exact>(w + r * ldw, ldw, xp, M, k0, k1, part + r * M);
    if constexpr (R > 4)  // 64 = 6 x 10 + 4 = 5 x 12 + 4
      for (; r + 4 <= n; r += 4)
        rows_block<W, 4, C, Exact>(w + r * ldw, ldw, xp, M, k0, k1, part + r * M);
    for (; r < n; ++r) rows_block<W, 1, C, Exact>(w + r * ldw, ldw, xp, M, k0, k1, part + r * M);
  }
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t k = kv; k < K; ++k)
        part[r * M + m] = std::fma(to_f32(w[r * ldw + k]), x[m * K + k], part[r * M + m]);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t r = 0; r < n; ++r)
      y[m * ldy + r] = (accumulate ? y[m * ldy + r] : 0.0f) + part[r * M + m];
}

bool any_bf16(std::span<const Projection> projections) {
  for (const Projection& p : projections)
    if (p.w.type == WeightType::bf16) return true;
  return false;
}

// x [M, K] packed as [K / kPack, M, kPack] (whole blocks only) into a buffer of the calling
// thread, which grows to the largest product once and is reused: no allocation per step.
const float* pack_rows(const float* x, std::int64_t M, std::int64_t K, float* out) {
  const std::int64_t blocks = K / kPack;
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t m = 0; m < M; ++m)
      std::memcpy(out + (b * M + m) * kPack, x + m * K + b * kPack, kPack * sizeof(float));
  return out;
}

using GemvFn = void (*)(const void*, std::int64_t, const float*, const float*, float*, std::int64_t,
                        std::int64_t, bool);
using BatchFn = void (*)(const void*, std::int64_t, const float*, const float*, std::int64_t,
                         std::int64_t, float*, std::int64_t, std::int64_t, bool);
using WidenFn = void (*)(const void*, std::int64_t, std::int64_t, std::int64_t, float*);
using ScoresFn = void (*)(const float*, std::int64_t, const float*, std::int64_t, std::int64_t,
                          float, float*);
using MixFn = void (*)(const float*, std::int64_t, const float*, std::int64_t, std::int64_t,
                       float*);

// The kernels for one weight type.
struct TypedKernels {
  GemvFn gemv;
  BatchFn batch;
  WidenFn widen;
};

struct Kernels {
  const char* isa;
  int lanes;           // V of the BF16 gemv, which x is deinterleaved for
  TypedKernels of[3];  // by WeightType: f32, bf16, f16
  bool own_gemm;       // prefill on gemm_avx512, else on OpenBLAS sgemm
  ScoresFn scores;     // decode attention (group_scores, group_mix)
  MixFn mix;
};

// flatten: everything the kernel calls is compiled into it, for its ISA (the F16 conversions
// above included).
#define ATTN_FLATTEN __attribute__((flatten))

// batch_rows with the register blocking R x C for M rows: R x C accumulators, C input vectors
// and a weight vector share the register file. With 16 registers (AVX2, SSE), 4 x 3. With 32
// (AVX-512), as many weight rows as come near filling it beside all M rows, even past it (GCC then
// spills a few): more weight streams in flight while the FMAs run. One Zen 4 core, the 8B layer's
// products from memory, interleaved, ms per pass: M = 2 on 8 rows 32-39 against 39-46 on 4; M = 3
// on 8 35 against 43; M = 4 on 8 38-44 against 44-47 on 6 and 47 on 4; M = 5 on 6 47 against 53 on
// 5; M = 6 on 5 41-42 against 46-48 on 4 and 49-50 on 6 (two threads: 28.2-29.3 against
// 29.2-30.1 on 4); M = 7 on 4 40 against 59 on 3; M = 8 on 4 50-51 against 56-59 on 3 and 69 on 5
// (two threads: 27.5-29.3 against 30.5-32.0 on 3; with the weights in L2, 3 is faster). From 9
// rows on, groups of up to 6 under 4 weight rows (groups of 8 under 3 or 4, of 4 under 6 or 8, of
// 6 under 5: as fast or 5-10% slower at 12 and 16 rows). The bits do not depend on the blocking:
// every accumulator sums the same products in the same order.
// One batched kernel per register blocking R x C (Exact: C == M), each its own function: one
// function holding every blocking took clang several minutes to compile with the sanitizers.
#define ATTN_BATCH(name, target, W, T, R, C, Exact)                                                \
  target ATTN_FLATTEN __attribute__((noinline)) void batch_##name##_##T##_##R##x##C(               \
      const void* w, std::int64_t ldw, const float* xp, const float* x, std::int64_t M,            \
      std::int64_t K, float* y, std::int64_t ldy, std::int64_t n, bool accumulate) {               \
    batch_rows<W, R, C, Exact>(static_cast<const T*>(w), ldw, xp, x, M, K, y, ldy, n, accumulate); \
  }

// The batched kernels of a set with 16 vector registers (AVX2, SSE): 4 x 3 for every M.
#define ATTN_BATCH_NARROW(name, target, W, T)                                               \
  ATTN_BATCH(name, target, W, T, 4, 3, false)                                               \
  void batch_##name##_##T(const void* w, std::int64_t ldw, const float* xp, const float* x, \
                          std::int64_t M, std::int64_t K, float* y, std::int64_t ldy,       \
                          std::int64_t n, bool accumulate) {                                \
    batch_##name##_##T##_4x3(w, ldw, xp, x, M, K, y, ldy, n, accumulate);                   \
  }

// The batched kernels of a set with 32 (AVX-512), chosen by M.
#define ATTN_BATCH_WIDE(name, target, W, T)                                                 \
  ATTN_BATCH(name, target, W, T, 8, 2, true)                                                \
  ATTN_BATCH(name, target, W, T, 8, 3, true)                                                \
  ATTN_BATCH(name, target, W, T, 8, 4, true)                                                \
  ATTN_BATCH(name, target, W, T, 6, 5, true)                                                \
  ATTN_BATCH(name, target, W, T, 5, 6, true)                                                \
  ATTN_BATCH(name, target, W, T, 4, 7, true)                                                \
  ATTN_BATCH(name, target, W, T, 4, 8, true)                                                \
  ATTN_BATCH(name, target, W, T, 4, 6, false)                                               \
  void batch_##name##_##T(const void* w, std::int64_t ldw, const float* xp, const float* x, \
                          std::int64_t M, std::int64_t K, float* y, std::int64_t ldy,       \
                          std::int64_t n, bool accumulate) {                                \
    auto f = M == 2   ? batch_##name##_##T##_8x2                                            \
             : M == 3 ? batch_##name##_##T##_8x3                                            \
             : M == 4 ? batch_##name##_##T##_8x4                                            \
             : M == 5 ? batch_##name##_##T##_6x5                                            \
             : M == 6 ? batch_##name##_##T##_5x6                                            \
             : M == 7 ? batch_##name##_##T##_4x7                                            \
             : M == 8 ? batch_##name##_##T##_4x8                                            \
                      : batch_##name##_##T##_4x6;                                           \
    f(w, ldw, xp, x, M, K, y, ldy, n, accumulate);                                          \
  }

// One instance per ISA and weight type.
#define ATTN_TYPED_KERNELS(name, target, W, BATCH, T)                                             \
  BATCH(name, target, W, T)                                                                       \
  target ATTN_FLATTEN void gemv_##name##_##T(const void* w, std::int64_t ldw, const float* x,     \
                                             const float* xd, float* y, std::int64_t n,           \
                                             std::int64_t K, bool accumulate) {                   \
    gemv_rows<W>(static_cast<const T*>(w), ldw, x, xd, y, n, K, accumulate);                      \
  }                                                                                               \
  target ATTN_FLATTEN void widen_##name##_##T(const void* w, std::int64_t ldw, std::int64_t rows, \
                                              std::int64_t K, float* out) {                       \
    widen_block<W>(static_cast<const T*>(w), ldw, rows, K, out);                                  \
  }
#define ATTN_KERNELS(name, target, W, BATCH, GEMM)                                        \
  ATTN_TYPED_KERNELS(name, target, W, BATCH, float)                                       \
  ATTN_TYPED_KERNELS(name, target, W, BATCH, Bf16)                                        \
  ATTN_TYPED_KERNELS(name, target, W, BATCH, F16)                                         \
  target ATTN_FLATTEN void scores_##name(const float* q, std::int64_t n, const float* k,  \
                                         std::int64_t keys, std::int64_t hd, float scale, \
                                         float* s) {                                      \
    group_scores<W>(q, n, k, keys, hd, scale, s);                                         \
  }                                                                                       \
  target ATTN_FLATTEN void mix_##name(const float* p, std::int64_t n, const float* v,     \
                                      std::int64_t keys, std::int64_t hd, float* out) {   \
    group_mix<W>(p, n, v, keys, hd, out);                                                 \
  }                                                                                       \
  constexpr Kernels k_##name = {                                                          \
      #name,                                                                              \
      kGemvLanes<W, Bf16>,                                                                \
      {{gemv_##name##_float, batch_##name##_float, widen_##name##_float},                 \
       {gemv_##name##_Bf16, batch_##name##_Bf16, widen_##name##_Bf16},                    \
       {gemv_##name##_F16, batch_##name##_F16, widen_##name##_F16}},                      \
      GEMM,                                                                               \
      scores_##name,                                                                      \
      mix_##name};

ATTN_KERNELS(generic, , 4, ATTN_BATCH_NARROW, false)
#if defined(__x86_64__)
ATTN_KERNELS(avx2, __attribute__((target("avx2,fma,f16c"))), 8, ATTN_BATCH_NARROW, false)
ATTN_KERNELS(avx512, __attribute__((target("avx512f"))), 16, ATTN_BATCH_WIDE, true)
#endif
#undef ATTN_KERNELS
#undef ATTN_TYPED_KERNELS
#undef ATTN_BATCH_WIDE
#undef ATTN_BATCH_NARROW
#undef ATTN_BATCH
#undef ATTN_FLATTEN

#if defined(__x86_64__)
// F16C (vcvtph2ps on 8 lanes), from CPUID: clang 14's __builtin_cpu_supports does not know it.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

// The kernels for this CPU, best first.
std::vector<const Kernels*> supported_kernels() {
  std::vector<const Kernels*> out;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) out.push_back(&k_avx512);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
    out.push_back(&k_avx2);
#endif
  out.push_back(&k_generic);
  return out;
}

const Kernels& kernels_for(const std::string& isa) {
  static const std::vector<const Kernels*> supported = supported_kernels();
  for (const Kernels* k : supported)
    if (isa == k->isa) return *k;
  return *supported.front();
}

// Prefill: w's rows n0..n1. With AVX-512, gemm_avx512 packs and widens the weights itself.
// Else in blocks of widen_rows(K), each one OpenBLAS sgemm: a BF16 or F16 block is widened into
// the thread's scratch first; an F32 block is read in place, in the same blocks, so that both run
// the same sgemm calls and give the same bits (OpenBLAS's Haswell and Zen kernels round
// differently when the columns are split differently).
void prefill_product(const Kernels& kernels, const Projection& p, const float* x, std::int64_t M,
                     std::int64_t K, std::int64_t n0, std::int64_t n1, float* scratch,
                     bool accumulate) {
  const std::int64_t ldw = p.w.stride(K), rows = widen_rows(K);
  if (kernels.own_gemm)
    return gemm_avx512(p.w.at(n0 * ldw), ldw, x, M, K, p.out + n0, p.n, n1 - n0, accumulate,
                       scratch);
  const TypedKernels& k = kernels.of[int(p.w.type)];
  for (std::int64_t b0 = n0; b0 < n1; b0 += rows) {
    const std::int64_t nb = std::min(rows, n1 - b0);
    const Matrix block = p.w.at(b0 * ldw);
    const float* wb = static_cast<const float*>(block.data);
    std::int64_t ld = ldw;
    if (p.w.type != WeightType::f32) {
      k.widen(block.data, ldw, nb, K, scratch);  // [nb, K]
      wb = scratch;
      ld = K;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(M), blasint(nb), blasint(K), 1.0f,
                x, blasint(K), wb, blasint(ld), accumulate ? 1.0f : 0.0f, p.out + b0, blasint(p.n));
  }
}

// One thread's share of one projection. xp: x packed, for the batched kernel, or deinterleaved,
// for the BF16 gemv; scratch: the thread's panel or widening buffer, for prefill.
void product(const Kernels& kernels, const Projection& p, const float* x, const float* xp,
             std::int64_t M, std::int64_t K, std::int64_t n0, std::int64_t n1, float* scratch,
             bool accumulate) {
  const std::int64_t n = n1 - n0;
  if (n <= 0) return;
  const TypedKernels& k = kernels.of[int(p.w.type)];
  const std::int64_t ldw = p.w.stride(K);
  const void* w = p.w.at(n0 * ldw).data;
  // A handful of rows: our kernels stream the weights at full bandwidth, reading each weight
  // once for all M rows, where OpenBLAS's sgemm with tiny M runs several times slower. Our gemv
  // streams 10-15% faster than OpenBLAS 0.3.21's sgemv on the 8B layer's shapes.
  if (M == 1)
    k.gemv(w, ldw, x, xp, p.out + n0, n, K, accumulate);
  else if (M <= kBatchRows)
    k.batch(w, ldw, xp, x, M, K, p.out + n0, p.n, n, accumulate);
  else
    prefill_product(kernels, p, x, M, K, n0, n1, scratch, accumulate);
  if (p.bias)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t j = n0; j < n1; ++j) p.out[m * p.n + j] += p.bias[j];
}

// Decode: the weights are cut into blocks of kGemvRows rows that threads take as they finish,
// so a thread slowed by the other core's neighbours does not hold up the step at the barrier.
void linear_rows(const Kernels& kernels, std::span<const Projection> projections, const float* x,
                 const float* xp, std::int64_t M, std::int64_t K, bool accumulate) {
  std::int64_t blocks = 0;
  for (const Projection& p : projections) blocks += (p.n + kGemvRows - 1) / kGemvRows;
#pragma omp for schedule(dynamic, 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::int64_t i = b;
    for (const Projection& p : projections) {
      const std::int64_t nb = (p.n + kGemvRows - 1) / kGemvRows;
      if (i < nb) {
        product(kernels, p, x, xp, M, K, i * kGemvRows, std::min(p.n, (i + 1) * kGemvRows), nullptr,
                accumulate);
        break;
      }
      i -= nb;
    }
  }
}

// Floats of one thread's prefill scratch for inputs of K features: gemm_avx512's panels, or
// widen_rows(K) rows to widen BF16 and F16 blocks into.
std::int64_t prefill_floats(const Kernels& kernels, std::int64_t K) {
  return kernels.own_gemm ? gemm_panel_floats() : widen_rows(K) * K;
}

// Prefill on gemm_avx512, whose bits do not depend on how the rows are split: the threads take
// the projections' rows as RowClaims hands them out, gemm blocks (kGemmNC) from the front of
// their own stretch, panels (48 rows) from the back of another's. Static halves lost about 5%
// of a prefill to waiting (perf: libgomp's barrier) when a neighbour slowed one core.
void prefill_claimed(const Kernels& kernels, std::span<const Projection> projections,
                     const float* x, std::int64_t M, std::int64_t K, float* scratch,
                     bool accumulate, int threads) {
  std::array<std::int64_t, RowClaims::kMaxProjections + 1> bounds{};
  const std::size_t n_bounds = projections.size() + 1;
  if (n_bounds > bounds.size()) throw std::logic_error("linear: over 8 projections in one call");
  for (std::size_t i = 0; i < projections.size(); ++i) bounds[i + 1] = bounds[i] + projections[i].n;
  RowClaims claims({bounds.data(), n_bounds}, threads, kGemmNC, kGemmSteal);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    float* own = scratch + t * prefill_floats(kernels, K);
    for (RowBlock b = claims.next(t); b.end > b.begin; b = claims.next(t))
      product(kernels, projections[b.part], x, nullptr, M, K, b.begin - bounds[b.part],
              b.end - bounds[b.part], own, accumulate);
  }
}

}  // namespace

std::int64_t widen_rows(std::int64_t K) {
  return std::max<std::int64_t>(16, kWidenFloats / std::max<std::int64_t>(K, 1) / 16 * 16);
}

std::int64_t pack_floats(std::int64_t M, std::int64_t K) {
  return M == 1 ? K : M * (K / kPack) * kPack;  // 1: x deinterleaved (deinterleave)
}

std::int64_t scratch_floats(std::int64_t max_rows, std::int64_t k_max, int threads, bool halves,
                            const std::string& isa) {
  // The packed rows (M <= kBatchRows) and the prefill buffers (M > kBatchRows) are never needed
  // by the same call, so they share the buffer. widen_rows(K) * K <= max(16 K, kWidenFloats).
  const std::int64_t pack = pack_floats(std::min(max_rows, kBatchRows), k_max);
  if (max_rows <= kBatchRows) return pack;
  const std::int64_t prefill = kernels_for(isa).own_gemm ? gemm_panel_floats()
                               : halves                  ? std::max(16 * k_max, kWidenFloats)
                                                         : 0;
  return std::max(pack, threads * prefill);
}

void linear(const Runtime& rt, std::span<const Projection> projections, const float* x,
            std::int64_t M, std::int64_t K, float* scratch, bool accumulate) {
  std::int64_t flops = 0;
  for (const Projection& p : projections) flops += 2 * M * K * p.n;
  const Kernels& kernels = kernels_for(rt.isa);
  // xp: x packed for the batched kernel, or deinterleaved for BF16 rows in the gemv.
  const float* xp = nullptr;
  if (M >= 2 && M <= kBatchRows) xp = pack_rows(x, M, K, scratch);
  if (M == 1 && any_bf16(projections)) {
    deinterleave(x, K, kernels.lanes, scratch);
    xp = scratch;
  }
  // Waking a second thread costs microseconds, more than a small product takes.
  const bool parallel = rt.worth_parallel(flops);
  if (M > kBatchRows && kernels.own_gemm)
    return prefill_claimed(kernels, projections, x, M, K, scratch, accumulate,
                           parallel ? rt.threads : 1);
#pragma omp parallel num_threads(rt.threads) if (parallel)
  {
    if (M <= kBatchRows) {
      linear_rows(kernels, projections, x, xp, M, K, accumulate);
    } else {
      // Prefill on OpenBLAS: one share per thread and projection, exactly half the rows, in
      // fixed blocks (OpenBLAS rounds differently when a matrix's rows are split differently).
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      float* own = scratch + t * prefill_floats(kernels, K);
      for (const Projection& p : projections) {
        auto [n0, n1] = slice(p.n, t, nt);
        product(kernels, p, x, nullptr, M, K, n0, n1, own, accumulate);
      }
    }
  }
}

void group_scores(const Runtime& rt, const float* q, std::int64_t n, const float* k,
                  std::int64_t keys, std::int64_t hd, float scale, float* s) {
  kernels_for(rt.isa).scores(q, n, k, keys, hd, scale, s);
}

void group_mix(const Runtime& rt, const float* p, std::int64_t n, const float* v, std::int64_t keys,
               std::int64_t hd, float* out) {
  kernels_for(rt.isa).mix(p, n, v, keys, hd, out);
}

void widen_to_f32(const Runtime& rt, const Matrix& w, std::int64_t rows, std::int64_t K,
                  float* out) {
  kernels_for(rt.isa).of[int(w.type)].widen(w.data, K, rows, K, out);
}

std::string blas_core() {
  const char* core = openblas_get_corename();
  return core ? core : "unknown";
}

}  // namespace attn

namespace attn {

std::string matmul_path(const Runtime& rt) {
  const std::string prefill = kernels_for(rt.isa).own_gemm
                                  ? "own AVX-512 GEMM (8 x 48 tiles, weights packed per block) on "
                                    "each thread's half of the rows, the other's tail taken over"
                                  : "single-threaded OpenBLAS sgemm on row halves";
  return "OpenMP threads: " + prefill + " (M > " + std::to_string(kBatchRows) + "), own " + rt.isa +
         " kernels on 64-row blocks taken dynamically (M = 1: gemv; M = 2.." +
         std::to_string(kBatchRows) + ": each weight read once for all rows)";
}

std::vector<std::string> matmul_isas() {
  std::vector<std::string> out;
  for (const Kernels* k : supported_kernels()) out.push_back(k->isa);
  return out;
}

}  // namespace attn
