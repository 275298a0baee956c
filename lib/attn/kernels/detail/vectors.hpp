#pragma once
// The own kernels' code, written once over GCC vector types of W floats: each instruction set's
// files (generated from set.cpp.in) instantiate it through define_kernels.hpp inside functions
// compiled for that set, with the set's primitives (Isa<W>: its vec.hpp). Everything here is in
// an unnamed namespace: each file gets its own copy, so no instance compiled for one set can
// stand in for another's at link time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "attn/kernels/detail/lanes.hpp"
#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/matrix.hpp"

namespace attn {
namespace {

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

template <int W>
struct Halves {
  typedef std::uint16_t type __attribute__((vector_size(W * sizeof(std::uint16_t))));
};
template <int W>
struct Bits {
  typedef std::uint32_t type __attribute__((vector_size(W * sizeof(std::uint32_t))));
};
template <int W>
struct Ints {
  typedef std::int32_t type __attribute__((vector_size(W * sizeof(std::int32_t))));
};

// The instruction set's primitives on W-lane vectors, defined by the set's detail/vec.hpp, which
// its files include first (generic/: any W in plain vector code; x86/avx2/: 8 lanes;
// x86/avx512/: 16 lanes, and 8): static functions, each giving the bits of every other
// set's, and all by reference, so no vector crosses an ABI:
//   widen(v, p)        W BF16 or F16 weights from p widened to F32 lanes
//   fma(a, b, c)       a += b * c in one rounding, lane-wise
//   bytes<Sign>(q, p)  W bytes from p in 32-bit lanes, signed (Sign) or not
//   splat(v, s)        s in every lane
//   splat_f16(v, h)    the F16 h widened (f16_to_f32) in every lane
//   kQuantRows<B>      whether the set has its own code for rows of quantized blocks B:
//                      quant_rows and quant_part (quant_gemv.hpp)
//   pin(v)             keeps v in a register (an empty asm naming it; pin below)
// A width no file of the set defines Isa for does not compile: no set falls back silently.
template <int W>
struct Isa;

// Keeps v in a register. GCC would fold the loads of x and w into the FMAs that use them: every
// vector loaded again for each FMA (R x C loads instead of R + C), and the load ports, not the
// FMAs, would set the pace (docs/perf/kernels.md).
template <typename V>
[[gnu::always_inline]] inline void pin(V& v) {
  Isa<int(sizeof(V) / sizeof(float))>::pin(v);
}

// W weights widened to F32 lanes: F32 as they are, BF16 and F16 by the set's widening (Isa).
template <int W>
[[gnu::always_inline]] inline void load_w(typename Vec<W>::type& v, const float* p) {
  load<W>(v, p);
}

template <int W>
[[gnu::always_inline]] inline void load_w(typename Vec<W>::type& v, const Bf16* p) {
  Isa<W>::widen(v, p);
}

template <int W>
[[gnu::always_inline]] inline void load_w(typename Vec<W>::type& v, const F16* p) {
  Isa<W>::widen(v, p);
}

// a += b * c in one rounding (Isa<W>::fma: vfmadd, or std::fma lane by lane). Written out, not
// left to -ffp-contract: GCC contracted a * b + c in some loops of the F32 instances and not in
// the same loops of the F16 ones, and the bits must not differ. The scalar tails use std::fma for
// the same reason.
template <int W>
[[gnu::always_inline]] inline void fmadd(typename Vec<W>::type& a, const typename Vec<W>::type& b,
                                         const typename Vec<W>::type& c) {
  Isa<W>::fma(a, b, c);
}

// The gemv reads each row in blocks of B columns (16 with AVX-512 or AVX2, 8 without), so every
// residue of k mod B has its own FMA chain, in k order, and sums the B chains in one order
// whatever the type: a BF16 or F16 row gives the bits of its F32-widened row. The chains sit in
// A accumulators of V lanes per row (V x A = B):
// - F32 with AVX-512: one zmm, lane c holding chain c;
// - otherwise two vectors. F32 and F16 put columns 0..V-1 of a block in the first and V..2V-1
//   in the second. BF16 puts the even columns in the first and the odd ones in the second: one
//   load of 2V halves splits into them with a shift and a mask (fewer instructions than two
//   widening loads: the widening, not memory, held BF16 back), and x is read deinterleaved the
//   same way (xd).
// Under AVX-512, BF16 and F16 still run in ymm registers (B = 16): faster than zmm with B = 32
// (docs/perf/kernels.md).
template <int W, typename T>
inline constexpr int kGemvLanes = W == 16 && sizeof(T) == 2 ? 8 : W;  // V
template <int W, typename T>
inline constexpr int kGemvAccs = W == 16 && sizeof(T) == 4 ? 1 : 2;  // A
template <typename T>
inline constexpr bool kEvenOdd = std::is_same_v<T, Bf16>;

// The canonical order of a product's output (docs/design.md, "One order per output"): the B
// chains of the set's gemv, chain c summing the k with k mod B = c in increasing k with FMAs (the
// last columns zero-padded), then chains 2i and 2i + 1 added, then those B/2 sums as a tree.
// Every kernel of a product (gemv, batched, the prefill's tiles, the quantized blocks') sums each
// output in this order whatever the rows computed with it: B = 16 with AVX-512 and AVX2 (the
// same bits on both), 8 on the generic set's 4-lane vectors.
template <int W>
inline constexpr int kChains = kGemvLanes<W, float>* kGemvAccs<W, float>;
static_assert(kChains<16> == 16 && kChains<8> == 16 && kChains<4> == 8);

// The chains' sums (c [N]) in the canonical order: the gemv's sum_chains, one output at a time.
template <int N>
[[gnu::always_inline]] inline float sum_chains_of(const float* c) {
  float t[N / 2];
  for (int i = 0; i < N / 2; ++i) t[i] = c[2 * i] + c[2 * i + 1];
  for (int h = N / 4; h >= 1; h /= 2)
    for (int i = 0; i < h; ++i) t[i] = t[i] + t[i + h];
  return t[0];
}

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
// ymm). With AVX-512, F32 runs 8 rows and BF16/F16 4, the fastest of 2, 4 and 8
// (docs/perf/kernels.md).
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
// where OpenBLAS's sgemv, one call per head, read it n times (bench_decode_attention;
// docs/perf/kernels.md).
// s[h * keys + j] = scale * (q[h] . k[j]) for KB keys from j: KB independent FMA chains, each
// key's row read once for all n heads (from L1 after the first).
template <int W, int KB>
[[gnu::always_inline]] inline void score_keys(const float* q, std::int64_t n, const float* k,
                                              std::int64_t j, std::int64_t keys, std::int64_t hd,
                                              float scale, float* s) {
  using V = typename Vec<W>::type;
  const std::int64_t hv = hd / W * W;
  // The key rows 8 on asked for into L2 (the value rows 16 on in group_mix): with a batch's
  // cache in memory, not L3, the hardware prefetcher alone leaves attention waiting on it
  // (docs/perf/kernels.md).
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
// keys reads CV x W floats of each value row in a row, not one vector: one vector per pass
// leaves the mix far slower than the scores on the same bytes (docs/perf/kernels.md).
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

// A part of x's packed floats asked for into L2 by a dot_block while it multiplies: n floats
// from p, kPerBlock (two lines) each kPack columns. batch_rows hands each block of weight rows
// and each group of x's rows its share of the next column chunk (or, after the last, of what
// follows x in the packing: the next prefill tile), so that chunk is in L2 when its turn comes;
// read from L3 only as the groups reach it, x held a prefill at 55-65% of the FMA peak
// (docs/perf/prefill-gemm.md, "Zen 4 prefill tiles"). Asking changes no sum.
struct XAhead {
  static constexpr std::int64_t kPerBlock = 2 * kPack;
  const float* p = nullptr;
  std::int64_t n = 0;
  // Parts i0..i1 - 1 of `parts` equal ones.
  XAhead part(std::int64_t i0, std::int64_t i1, std::int64_t parts) const {
    const std::int64_t a = n * i0 / parts, b = n * i1 / parts;
    return {p + a, b - a};
  }
};
// Rows of x from which batch_rows asks for x ahead: every tile of a prefill past kBatchRows rows
// but the 16-row one of 33 rows, and decode batches of 17..32 rows (harmless there).
constexpr std::int64_t kAheadRows = 17;

// acc[r][c] += w[r] . x[c] chain-wise over k0..k1 (whole kPack blocks), for R rows of w and C
// rows of x: xp is the packed x at its first row, M the rows of the packing, acc [R, M, kChains]
// at the first row (the canonical order's chains: kChains / W vectors per output). R x C
// accumulators of W lanes stay in registers: each weight vector loaded serves C input rows, each
// input vector R weight rows. Ahead: also ask for the weights `stream` reads next into L2 (a
// template flag for AVX2, where a branch in the loop cost a register; with AVX-512 only where
// stream.rows > 0). Buffered: w is a buffer in L1 (quant_batch.hpp), asked for nothing. xa: a
// part of x's next chunk to ask for into L2 (XAhead).
template <int W, int R, int C, bool Ahead, typename T, bool Buffered = false>
[[gnu::always_inline]] inline void dot_block(const T* w, std::int64_t ldw, const float* xp,
                                             std::int64_t M, std::int64_t k0, std::int64_t k1,
                                             float* acc, Stream stream, XAhead xa = {}) {
  using V = typename Vec<W>::type;
  constexpr int N = kChains<W>, A = N / W;
  static_assert(kPack % N == 0);
  V a[R][C][A];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < A; ++i) load<W>(a[r][c][i], acc + (r * M + c) * N + i * W);
  for (std::int64_t k = k0; k < k1; k += kPack) {
    const float* xk = xp + k * M;  // block k / kPack starts at (k / kPack) * M * kPack
    if (const std::int64_t i = (k - k0) / kPack * XAhead::kPerBlock; i < xa.n)
      for (std::int64_t l = 0; l < XAhead::kPerBlock; l += kPack) prefetch_at(xa.p, i + l);
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
        if (!Buffered && s == 0) {  // once per kPack block: a line of F32 weights
          if constexpr (Ahead)
            if (W < 16 || stream.rows > 0) prefetch_at(w + r * ldw + k + s, ahead);
          prefetch_l1_at(w + r * ldw + k + s, kL1PrefetchBytes / std::int64_t(sizeof(T)));
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) fmadd<W>(a[r][c][(s / W) % A], wv, xv[c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < A; ++i)
        std::memcpy(acc + (r * M + c) * N + i * W, &a[r][c][i], sizeof(V));
}

// dot_block for c (1..C) input rows, the count known only at run time.
template <int W, int R, int C, bool Ahead, typename T, bool Buffered = false>
[[gnu::always_inline]] inline void dot_block_upto(int c, const T* w, std::int64_t ldw,
                                                  const float* xp, std::int64_t M, std::int64_t k0,
                                                  std::int64_t k1, float* acc, Stream stream,
                                                  XAhead xa = {}) {
  if constexpr (C > 1)
    if (c < C)
      return dot_block_upto<W, R, C - 1, Ahead, T, Buffered>(c, w, ldw, xp, M, k0, k1, acc, stream,
                                                             xa);
  dot_block<W, R, C, Ahead, T, Buffered>(w, ldw, xp, M, k0, k1, acc, stream, xa);
}

// Columns per step of a weight row group when x's rows go in several groups that take turns
// (rows_block's Stepped): R rows of this many floats (8 KB) stay in L1 while every group of x's
// rows passes over them, so the weights stream from memory at a steady pace rather than in bursts
// between compute-only passes. With one group, or groups in passes, the whole chunk is one step:
// the accumulators stay in registers.
constexpr std::int64_t kStepCols = 512;
// Weight rows per register block, at most (the accumulators' spill area below).
constexpr int kMaxBlockRows = 8;
// x's packed columns kept hot (L2) across a 64-row block: column chunks of about this many floats.
constexpr std::int64_t kXChunkFloats = 1 << 16;

// Columns per chunk of batch_rows for M rows of x: x's chunk stays hot while the weight rows pass.
// The chains are kept, not summed, from one chunk to the next, so the cut is no part of the bits.
constexpr std::int64_t batch_chunk_cols(std::int64_t M) {
  return std::max(kStepCols, kXChunkFloats / M / kStepCols * kStepCols);
}

// Floats of batch_rows' chains: [kGemvRows, kBatchRows, 16] at most.
constexpr std::int64_t kBatchChainFloats = kGemvRows * kBatchRows * kPack;

// R rows of w against all M rows of x over k0..k1 (whole kPack blocks): their chains
// acc [R, M, kChains] +=. x's rows go in groups of at most C, as even as they come (8 rows go as
// 4 + 4, not 6 + 2). Exact: M == C, one group, and only the kernel for C rows is compiled (each
// count of rows a kernel serves is a fully unrolled copy; compile time). Stepped: the groups take
// turns every kStepCols columns (the R rows' step in L1); else each group passes over all of
// k0..k1 in turn, its accumulators in registers throughout, the later groups reading the R rows
// from L2. Every output's chains get their products in k order whatever the grouping.
template <int W, int R, int C, bool Exact, bool Stepped, typename T>
[[gnu::always_inline]] inline void rows_block(const T* w, std::int64_t ldw, const float* xp,
                                              std::int64_t M, std::int64_t k0, std::int64_t k1,
                                              float* acc, XAhead xa = {}) {
  static_assert(R <= kMaxBlockRows);
  constexpr int N = kChains<W>;
  const std::int64_t groups = (M + C - 1) / C;
  const Stream stream{k0, k1, R};  // the next R rows read the same columns k0..k1
  const std::int64_t step = groups == 1 || !Stepped ? k1 - k0 : kStepCols;
  for (std::int64_t s0 = k0; s0 < k1; s0 += step) {
    const std::int64_t s1 = std::min(k1, s0 + step);
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t m0 = M * g / groups, m1 = M * (g + 1) / groups;
      // The first group reads the weights from memory, the others from L1 (L2 when not Stepped):
      // it asks for the next.
      const XAhead part = step == k1 - k0 ? xa.part(g, g + 1, groups) : XAhead{};
      if constexpr (Exact)
        dot_block<W, R, C, true>(w, ldw, xp, M, s0, s1, acc, stream, part);
      else if constexpr (W >= 16)  // one copy, the prefetch switched at run time: with every
        // blocking compiled twice, one AVX-512 file took clang's sanitizers over 4 minutes
        dot_block_upto<W, R, C, true>(int(m1 - m0), w, ldw, xp + m0 * kPack, M, s0, s1,
                                      acc + m0 * N, g == 0 ? stream : Stream{0, 0, 0}, part);
      else if (g == 0)
        dot_block_upto<W, R, C, true>(int(m1 - m0), w, ldw, xp + m0 * kPack, M, s0, s1,
                                      acc + m0 * N, stream, part);
      else
        dot_block_upto<W, R, C, false>(int(m1 - m0), w, ldw, xp + m0 * kPack, M, s0, s1,
                                       acc + m0 * N, stream, part);
    }
  }
}

// y[0..15] (=|+=) the canonical sums of 16 outputs' chains c + i * ldc (16 floats each) in
// vectors: each level of sum_chains_of's tree (pairs, then halves of 8, 4, 2) for two vectors'
// outputs at once by two shuffles and an add, the outputs ending in order in one vector: 15
// shuffle pairs and adds for 16 outputs, where one at a time took about 20 instructions each
// (1-2% of a B = 16 product: docs/perf/batched-decode.md, "Zen 4, BF16 B = 16, round three").
// The same adds of the same operands: the same bits.
template <int W>
[[gnu::always_inline]] inline void sum_rows16(const float* c, std::int64_t ldc, float* y,
                                              bool accumulate) {
  using V = typename Vec<W>::type;
  static_assert(W == 16);
  V u[16];
  for (int i = 0; i < 16; ++i) load<W>(u[i], c + i * ldc);
  // pairs: [a: 8 | b: 8]
  for (int j = 0; j < 8; ++j)
    u[j] = __builtin_shufflevector(u[2 * j], u[2 * j + 1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                   22, 24, 26, 28, 30) +
           __builtin_shufflevector(u[2 * j], u[2 * j + 1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21,
                                   23, 25, 27, 29, 31);
  // t[i] + t[i + 4]: [4 outputs x 4]
  for (int j = 0; j < 4; ++j)
    u[j] = __builtin_shufflevector(u[2 * j], u[2 * j + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19,
                                   24, 25, 26, 27) +
           __builtin_shufflevector(u[2 * j], u[2 * j + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22,
                                   23, 28, 29, 30, 31);
  // t[i] + t[i + 2]: [8 outputs x 2]
  for (int j = 0; j < 2; ++j)
    u[j] = __builtin_shufflevector(u[2 * j], u[2 * j + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21,
                                   24, 25, 28, 29) +
           __builtin_shufflevector(u[2 * j], u[2 * j + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22,
                                   23, 26, 27, 30, 31);
  // t[0] + t[1]: the 16 outputs in order
  const V s = __builtin_shufflevector(u[0], u[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                      28, 30) +
              __builtin_shufflevector(u[0], u[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                      29, 31);
  V out{};  // 0 + s as the scalar path adds it (a -0 sum becomes +0 there too)
  if (accumulate) load<W>(out, y);
  out = out + s;
  std::memcpy(y, &out, sizeof out);
}

// The end of a batched product from its chains acc [n, M, kChains] over K's whole kPack blocks
// kv: the last K - kv columns into chains 0.. (as the gemv pads them), the chains summed in the
// canonical order, y[m * ldy + r] (=|+=) the sum.
template <int W, typename Wt>
[[gnu::always_inline]] inline void finish_chains(float* acc, const Wt& weight, const float* x,
                                                 std::int64_t M, std::int64_t K, std::int64_t kv,
                                                 float* y, std::int64_t ldy, std::int64_t n,
                                                 bool accumulate) {
  constexpr int N = kChains<W>;
  if (kv < K)
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t m = 0; m < M; ++m) {
        float* c = acc + (r * M + m) * N;
        for (std::int64_t k = kv; k < K; ++k)
          c[(k - kv) % N] = std::fma(weight(r, k), x[m * K + k], c[(k - kv) % N]);
      }
  std::int64_t r0 = 0;
  if constexpr (W == N)  // 16 rows' outputs at a time, one vector each (sum_rows16)
    for (; r0 + N <= n; r0 += N)
      for (std::int64_t m = 0; m < M; ++m)
        sum_rows16<W>(acc + (r0 * M + m) * N, M * N, y + m * ldy + r0, accumulate);
  for (std::int64_t r = r0; r < n; ++r)
    for (std::int64_t m = 0; m < M; ++m)
      y[m * ldy + r] =
          (accumulate ? y[m * ldy + r] : 0.0f) + sum_chains_of<N>(acc + (r * M + m) * N);
}

// y[m * ldy + r] (=|+=) w[r] . x[m] for n <= kGemvRows rows of w and 2 <= M <= kBatchRows
// rows of x (xp: x packed): every weight is read from memory once for all M rows; each output in
// the canonical order (the gemv's bits).
template <int W, int R, int C, bool Exact, bool Stepped, typename T>
[[gnu::always_inline]] inline void batch_rows(const T* w, std::int64_t ldw, const float* xp,
                                              const float* x, std::int64_t M, std::int64_t K,
                                              float* y, std::int64_t ldy, std::int64_t n,
                                              bool accumulate) {
  static_assert(W <= 16 && kPack % W == 0);
  constexpr int N = kChains<W>;
  alignas(64) float acc[kBatchChainFloats];  // [n, M, N]: the chains so far
  std::fill(acc, acc + n * M * N, 0.0f);
  const std::int64_t kv = K / kPack * kPack;  // whole packed blocks; the rest from x below
  const std::int64_t kc = batch_chunk_cols(M);
  for (std::int64_t k0 = 0; k0 < kv; k0 += kc) {
    const std::int64_t k1 = std::min(kv, k0 + kc);
    // x's next chunk, or past the last the packing's next M x kc floats (the next tile's first
    // chunk in a prefill): each block of rows asks for its share (XAhead). Only from kAheadRows
    // rows: a decode batch's x stays in L2 from one item to the next.
    const XAhead xa =
        M < kAheadRows
            ? XAhead{}
            : XAhead{xp + k1 * M, M * (k1 < kv ? std::min(kv, k1 + kc) - k1 : std::min(kv, kc))};
    std::int64_t r = 0;
    for (; r + R <= n; r += R)
      rows_block<W, R, C, Exact, Stepped>(w + r * ldw, ldw, xp, M, k0, k1, acc + r * M * N,
                                          xa.part(r, r + R, n));
    if constexpr (R > 4)  // 64 = 6 x 10 + 4 = 5 x 12 + 4
      for (; r + 4 <= n; r += 4)
        rows_block<W, 4, C, Exact, Stepped>(w + r * ldw, ldw, xp, M, k0, k1, acc + r * M * N);
    for (; r < n; ++r)
      rows_block<W, 1, C, Exact, Stepped>(w + r * ldw, ldw, xp, M, k0, k1, acc + r * M * N);
  }
  finish_chains<W>(
      acc, [&](std::int64_t r, std::int64_t k) { return to_f32(w[r * ldw + k]); }, x, M, K, kv, y,
      ldy, n, accumulate);
}

}  // namespace
}  // namespace attn
