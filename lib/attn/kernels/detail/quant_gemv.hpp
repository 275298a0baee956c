#pragma once
// The gemv of ggml's quantized rows (decode, M = 1): each block widened in vector registers and
// its weights FMA'd straight away, in the F32 gemv's order (vectors.hpp, dot_rows): the row's
// V-lane chunks in k order, chunk c into accumulator c % A, the chains summed by sum_chains. A
// widened weight has the bits of quant_blocks.hpp's widening (every product exact, Q4_K's and
// Q5_K's one subtraction rounded once), so the result has the bits of the F32 gemv over the
// dequantized rows, which the tiled path (matmul.cpp) computes by widening a tile first; here
// the weights are read once, in their own bytes, and never stored as floats. In an unnamed
// namespace, as vectors.hpp: each set's file compiles its own copy (define_kernels.hpp).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attn/kernels/detail/prefetch.hpp"
#include "attn/kernels/detail/vectors.hpp"
#include "attn/quant_blocks.hpp"

namespace attn {
namespace {

// V bytes from p, each in a 32-bit lane: signed (Q8_0's quants) or not (the nibbles' bytes).
template <int V, bool Sign = false>
[[gnu::always_inline]] inline void load_bytes(typename Ints<V>::type& q, const std::uint8_t* p) {
  Isa<V>::template bytes<Sign>(q, p);
}

// v = scale in every lane (Vt{} + scale would add +0, turning -0 into +0).
template <int V>
[[gnu::always_inline]] inline void splat(typename Vec<V>::type& v, float scale) {
  Isa<V>::splat(v, scale);
}

// v = the F16 at p widened (f16_to_f32) in every lane: vcvtph2ps where the set has it (a block's
// scale, once per 32 weights, where the scalar conversion's branches cost as much as the FMAs).
template <int V>
[[gnu::always_inline]] inline void splat_f16(typename Vec<V>::type& v, const std::uint8_t* p) {
  Isa<V>::splat_f16(v, quant::le16(p));
}

// w = scale * float(q), lane-wise: exact (Q8_0, Q6_K).
template <int V>
[[gnu::always_inline]] inline void scaled(typename Vec<V>::type& w, const typename Ints<V>::type& q,
                                          const typename Vec<V>::type& scale) {
  w = scale * __builtin_convertvector(q, typename Vec<V>::type);
}

// w = scale * float(q) - shift (Q4_K): the product exact, the subtraction rounded once, so that a
// fused multiply-subtract gives the same bits.
template <int V>
[[gnu::always_inline]] inline void scaled_less(typename Vec<V>::type& w,
                                               const typename Ints<V>::type& q,
                                               const typename Vec<V>::type& scale,
                                               const typename Vec<V>::type& shift) {
  w = scale * __builtin_convertvector(q, typename Vec<V>::type) - shift;
}

// Each block type's weights as V-lane chunks in k order: f(c, w) for chunk c (weights c V ..
// c V + V - 1 of the block), w computed as B::widen computes it; only the weights from..to of the
// block, multiples of kPart<B> (the batched kernels widen half a K-quant block at a time; the
// others are widened whole into the stack, and any multiple of 16 is read from there).
template <typename B>
inline constexpr int kPart = std::is_same_v<B, quant::Q8_0>   ? 32
                             : std::is_same_v<B, quant::Q4_K> ? 64
                             : std::is_same_v<B, quant::Q6_K> ? 128
                                                              : 16;

template <int V, typename F>
[[gnu::always_inline]] inline void block_chunks(quant::Q8_0, const std::uint8_t* b, F&& f, int = 0,
                                                int = 32) {
  typename Vec<V>::type d;
  splat_f16<V>(d, b);
#pragma GCC unroll 8
  for (int c = 0; c < 32 / V; ++c) {
    typename Ints<V>::type q;
    load_bytes<V, true>(q, b + 2 + c * V);
    typename Vec<V>::type w;
    scaled<V>(w, q, d);
    f(c, w);
  }
}

template <int V, typename F>
[[gnu::always_inline]] inline void block_chunks(quant::Q4_K, const std::uint8_t* b, F&& f,
                                                int from = 0, int to = 256) {
  const float d = f16_to_f32(quant::le16(b)), min = f16_to_f32(quant::le16(b + 2));
  const std::uint8_t* q = b + 16 + from / 2;
  for (int is = from / 32; is < to / 32; is += 2, q += 32) {  // 64 weights: q's low nibbles, then
    std::uint8_t sc, m;
    quant::scale_min_k4(is, b + 4, sc, m);
    typename Vec<V>::type d1, m1, d2, m2;
    splat<V>(d1, d * float(sc));
    splat<V>(m1, min * float(m));
    quant::scale_min_k4(is + 1, b + 4, sc, m);
    splat<V>(d2, d * float(sc));
    splat<V>(m2, min * float(m));
#pragma GCC unroll 8
    for (int c = 0; c < 32 / V; ++c) {
      typename Ints<V>::type u;
      load_bytes<V>(u, q + c * V);
      typename Vec<V>::type w;
      scaled_less<V>(w, u & 0xF, d1, m1);
      f(is * (32 / V) + c, w);
    }
#pragma GCC unroll 8
    for (int c = 0; c < 32 / V; ++c) {
      typename Ints<V>::type u;
      load_bytes<V>(u, q + c * V);
      typename Vec<V>::type w;
      scaled_less<V>(w, u >> 4, d2, m2);
      f((is + 1) * (32 / V) + c, w);
    }
  }
}

// Q6_K: in each half of 128 weights, quarter j (32 weights) takes ql's low nibbles (j = 0, 1) or
// high ones (2, 3) at ql + 32 (j % 2), and bits 2j, 2j + 1 of qh; scale sc[p / 16] for weight p.
template <int V, typename F>
[[gnu::always_inline]] inline void block_chunks(quant::Q6_K, const std::uint8_t* b, F&& f,
                                                int from = 0, int to = 256) {
  const float d = f16_to_f32(quant::le16(b + 208));
  const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
  for (int n = from / 128; n < to / 128; ++n) {
    const std::uint8_t* ql = b + 64 * n;
    const std::uint8_t* qh = b + 128 + 32 * n;
#pragma GCC unroll 32
    for (int c = 0; c < 128 / V; ++c) {
      const int p = c * V, j = p / 32, l = p % 32;
      typename Ints<V>::type lo, hi;
      load_bytes<V>(lo, ql + 32 * (j % 2) + l);
      load_bytes<V>(hi, qh + l);
      typename Vec<V>::type s, w;
      splat<V>(s, d * float(sc[8 * n + p / 16]));
      scaled<V>(w, ((lo >> (4 * (j / 2)) & 0xF) | (hi >> (2 * j) & 3) << 4) - 32, s);
      f(n * (128 / V) + c, w);
    }
  }
}

// The 32-weight blocks of nibbles (Q4_0, Q4_1, Q5_0, Q5_1), lane-wise as Q8_0's: weight p's
// quant is byte p % 16 of qs, its low nibble for p < 16 and its high one after, and for Q5_0 and
// Q5_1 bit p of qh as its fifth bit; then (q - 8) * d, q * d + m, (q - 16) * d or q * d + m, the
// widening's exact product and (Q4_1, Q5_1) its one rounded addition, written q * d - (-m): the
// same sum, so the same bits, fused or not.
template <int V, typename B, typename F>
[[gnu::always_inline]] inline void nibble_chunks(const std::uint8_t* b, F&& f, int from, int to) {
  constexpr bool kMin = B::kMinAt >= 0;
  constexpr bool kFive = std::is_same_v<B, quant::Q5_0> || std::is_same_v<B, quant::Q5_1>;
  constexpr int kQs = 2 + 2 * kMin + 4 * kFive;  // qs after d, the min, qh
  constexpr int kOffset = std::is_same_v<B, quant::Q4_0>   ? 8
                          : std::is_same_v<B, quant::Q5_0> ? 16
                                                           : 0;
  using Vt = typename Vec<V>::type;
  using It = typename Ints<V>::type;
  Vt d, neg_m{};
  splat_f16<V>(d, b);
  if constexpr (kMin) splat<V>(neg_m, -f16_to_f32(quant::le16(b + 2)));
  const int qh = kFive ? int(quant::le32(b + 2 + 2 * kMin)) : 0;
#pragma GCC unroll 8
  for (int c = from / V; c < to / V; ++c) {
    const int p0 = c * V;
    It u;
    load_bytes<V>(u, b + kQs + p0 % 16);
    It q = p0 < 16 ? (u & 0xF) : (u >> 4);
    if constexpr (kFive) {
      It lane, bits;
      for (int i = 0; i < V; ++i) {
        lane[i] = p0 + i;
        bits[i] = qh;
      }
      q |= ((bits >> lane) & 1) << 4;
    }
    Vt w;
    if constexpr (kMin)
      scaled_less<V>(w, q, d, neg_m);
    else
      scaled<V>(w, q - kOffset, d);
    f(c, w);
  }
}

template <int V, typename F>
[[gnu::always_inline]] inline void block_chunks(quant::Q4_0, const std::uint8_t* b, F&& f,
                                                int from = 0, int to = 32) {
  nibble_chunks<V, quant::Q4_0>(b, f, from, to);
}
template <int V, typename F>
[[gnu::always_inline]] inline void block_chunks(quant::Q4_1, const std::uint8_t* b, F&& f,
                                                int from = 0, int to = 32) {
  nibble_chunks<V, quant::Q4_1>(b, f, from, to);
}
template <int V, typename F>
[[gnu::always_inline]] inline void block_chunks(quant::Q5_0, const std::uint8_t* b, F&& f,
                                                int from = 0, int to = 32) {
  nibble_chunks<V, quant::Q5_0>(b, f, from, to);
}
template <int V, typename F>
[[gnu::always_inline]] inline void block_chunks(quant::Q5_1, const std::uint8_t* b, F&& f,
                                                int from = 0, int to = 32) {
  nibble_chunks<V, quant::Q5_1>(b, f, from, to);
}

// Any other block (Q5_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS): widened by B::widen into the stack, then
// read back.
template <int V, typename B, typename F>
[[gnu::always_inline]] inline void block_chunks(B, const std::uint8_t* b, F&& f, int from = 0,
                                                int to = int(B::kBlock)) {
  alignas(64) float y[B::kBlock];
  B::widen(b, y);
#pragma GCC unroll 64
  for (int c = from / V; c < to / V; ++c) {
    typename Vec<V>::type w;
    load<V>(w, y + c * V);
    f(c, w);
  }
}

// y[r] (=|+=) w[r] . x for R rows of whole blocks (row_bytes apart), as dot_rows sums them.
template <int V, int A, int R, typename B>
[[gnu::always_inline]] inline void dot_block_rows(const std::uint8_t* w, std::int64_t row_bytes,
                                                  const float* x, std::int64_t K, float* y,
                                                  bool accumulate) {
  using Vt = typename Vec<V>::type;
  Vt acc[R][A];
  for (int r = 0; r < R; ++r)
    for (int a = 0; a < A; ++a) acc[r][a] = Vt{};
  const std::int64_t blocks = K / B::kBlock, used = blocks * B::kBytes;
  const Stream stream{0, used, R};
  for (std::int64_t i = 0; i < blocks; ++i) {
    const float* xb = x + i * B::kBlock;
    const std::int64_t at = i * B::kBytes, ahead = stream.ahead<std::uint8_t>(at, row_bytes);
    if constexpr (A == 1 && Isa<V>::template kQuantRows<B>) {  // the set's own (AVX-512's)
      for (int r = 0; r < R; ++r)
        for (std::int64_t j = 0; j < B::kBytes; j += 64)
          prefetch_at(w + r * row_bytes + at + j, ahead);
      Vt a[R];
      for (int r = 0; r < R; ++r) a[r] = acc[r][0];
      Isa<V>::template quant_rows<R>(B{}, a, w + at, row_bytes, xb);
      for (int r = 0; r < R; ++r) acc[r][0] = a[r];
      continue;
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* blk = w + r * row_bytes + at;
      for (std::int64_t j = 0; j < B::kBytes; j += 64) prefetch_at(blk + j, ahead);
      block_chunks<V>(B{}, blk, [&](int c, const Vt& wc) {
        Vt xc;
        load<V>(xc, xb + c * V);
        fmadd<V>(acc[r][c % A], wc, xc);
      });
    }
  }
  for (int r = 0; r < R; ++r)
    y[r] = (accumulate ? y[r] : 0.0f) +
           sum_chains<V, A, float>(acc[r][0], acc[r][A - 1], std::make_integer_sequence<int, V>());
}

// The F32 gemv's layout (kGemvLanes, kGemvAccs of float) over n rows of ggml's blocks B, ldw
// weights apart, K a whole number of blocks.
template <int W, typename B>
[[gnu::always_inline]] inline void gemv_blocks(const void* w, std::int64_t ldw, const float* x,
                                               float* y, std::int64_t n, std::int64_t K,
                                               bool accumulate) {
  constexpr int V = kGemvLanes<W, float>, A = kGemvAccs<W, float>, R = W == 16 ? 8 : 4;
  const auto* b = static_cast<const std::uint8_t*>(w);
  const std::int64_t row_bytes = ldw / B::kBlock * B::kBytes;
  std::int64_t r = 0;
  for (; r + R <= n; r += R)
    dot_block_rows<V, A, R, B>(b + r * row_bytes, row_bytes, x, K, y + r, accumulate);
  for (; r < n; ++r)
    dot_block_rows<V, A, 1, B>(b + r * row_bytes, row_bytes, x, K, y + r, accumulate);
}

// Columns c0..c1 of one row of blocks B (multiples of kPart<B>) widened into out [c1 - c0]: with
// AVX-512 Q4_K and Q6_K by the set's quant_part (widen_part16), elsewhere they and Q8_0 by
// block_chunks, V lanes at a time with B::widen's bits, where B::widen costs several times the F32
// kernels' reading of them (the tiles of B = 4 ran at a quarter of B = 1's tokens/s); the others by
// B::widen, whole blocks into the stack.
template <int W, typename B>
[[gnu::always_inline]] inline void widen_row_part(const std::uint8_t* row, std::int64_t c0,
                                                  std::int64_t c1, float* out) {
  constexpr int V = kGemvLanes<W, float>;
  using Vt = typename Vec<V>::type;
  for (std::int64_t i = c0 / B::kBlock; i * B::kBlock < c1; ++i) {
    const std::int64_t start = i * B::kBlock, from = std::max(c0, start) - start,
                       to = std::min(c1, start + B::kBlock) - start;
    if constexpr (Isa<V>::template kQuantRows<B>) {
      Isa<V>::quant_part(B{}, row + i * B::kBytes, int(from), int(to), out + (start + from - c0));
      continue;
    }
    const std::int64_t at = start - c0;  // out's index of the block's column 0 (may be < 0)
    block_chunks<V>(
        B{}, row + i * B::kBytes,
        [&](int c, const Vt& wc) { std::memcpy(out + (at + c * V), &wc, sizeof wc); }, int(from),
        int(to));
  }
}

// rows of blocks B widened into out [rows, K] for the tiled products (prefill).
template <int W, typename B>
[[gnu::always_inline]] inline void widen_block_rows(const void* w, std::int64_t ldw,
                                                    std::int64_t rows, std::int64_t K, float* out) {
  const auto* b = static_cast<const std::uint8_t*>(w);
  const std::int64_t row_bytes = ldw / B::kBlock * B::kBytes;
  for (std::int64_t r = 0; r < rows; ++r)
    widen_row_part<W, B>(b + r * row_bytes, 0, K, out + r * K);
}

}  // namespace
}  // namespace attn
