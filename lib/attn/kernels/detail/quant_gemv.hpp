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

template <int V>
struct Ints {
  typedef std::int32_t type __attribute__((vector_size(V * sizeof(std::int32_t))));
};

// V bytes from p, each in a 32-bit lane: signed (Q8_0's quants) or not (the nibbles' bytes).
// With the ISA's extensions for 16 and 8 lanes (vpmovsxbd, vpmovzxbd): GCC 12 lowers
// __builtin_convertvector of bytes to 32-bit lanes one byte at a time through general registers.
// Not always_inline, as lanes.hpp's widen16: only the kernels compiled for the ISA inline them.
// Out-parameters, as in vectors.hpp: no vector crosses an ABI.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline void bytes16(__m512i& q, const std::uint8_t* p,
                                                       bool sign) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __mmask16 all = 0xFFFF;
  q = sign ? _mm512_maskz_cvtepi8_epi32(all, b) : _mm512_maskz_cvtepu8_epi32(all, b);
}
__attribute__((target("avx2"))) inline void bytes8(__m256i& q, const std::uint8_t* p, bool sign) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  q = sign ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
}
#endif

template <int V, bool Sign = false>
[[gnu::always_inline]] inline void load_bytes(typename Ints<V>::type& q, const std::uint8_t* p) {
#if defined(__x86_64__)
  if constexpr (V == 16) return bytes16(reinterpret_cast<__m512i&>(q), p, Sign);
  if constexpr (V == 8) return bytes8(reinterpret_cast<__m256i&>(q), p, Sign);
#endif
  typedef std::conditional_t<Sign, std::int8_t, std::uint8_t> E __attribute__((vector_size(V)));
  E b;
  std::memcpy(&b, p, sizeof b);
  q = __builtin_convertvector(b, typename Ints<V>::type);
}

// v = scale in every lane: vbroadcastss (GCC 12 made a loop of lane stores one masked broadcast
// per lane; Vt{} + scale would add +0, turning -0 into +0).
#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline void splat16(__m512& v, float scale) {
  v = _mm512_set1_ps(scale);
}
__attribute__((target("avx"))) inline void splat8(__m256& v, float scale) {
  v = _mm256_set1_ps(scale);
}
#endif

template <int V>
[[gnu::always_inline]] inline void splat(typename Vec<V>::type& v, float scale) {
#if defined(__x86_64__)
  if constexpr (V == 16) return splat16(reinterpret_cast<__m512&>(v), scale);
  if constexpr (V == 8) return splat8(reinterpret_cast<__m256&>(v), scale);
#endif
  for (int l = 0; l < V; ++l) v[l] = scale;
}

// v = the F16 at p widened (f16_to_f32) in every lane: vcvtph2ps where the set has it (a block's
// scale, once per 32 weights, where the scalar conversion's branches cost as much as the FMAs).
#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline void f16_splat16(__m512& v, std::uint16_t h) {
  v = _mm512_maskz_cvtph_ps(__mmask16(0xFFFF), _mm256_set1_epi16(short(h)));
}
__attribute__((target("avx2,f16c"))) inline void f16_splat8(__m256& v, std::uint16_t h) {
  v = _mm256_cvtph_ps(_mm_set1_epi16(short(h)));
}
#endif

template <int V>
[[gnu::always_inline]] inline void splat_f16(typename Vec<V>::type& v, const std::uint8_t* p) {
#if defined(__x86_64__)
  if constexpr (V == 16) return f16_splat16(reinterpret_cast<__m512&>(v), quant::le16(p));
  if constexpr (V == 8) return f16_splat8(reinterpret_cast<__m256&>(v), quant::le16(p));
#endif
  splat<V>(v, f16_to_f32(quant::le16(p)));
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

// The K-quants' 16 lanes of AVX-512 (V = 16), where the gemv is bound by instructions, not
// memory: each weight widened by fewer of them, to the same bits.
#if defined(__x86_64__)
// Every lane: the masked forms avoid GCC 12's -Wmaybe-uninitialized on the plain intrinsics'
// undefined source (lanes.hpp).
inline constexpr __mmask16 kAll = 0xFFFF;
inline constexpr __mmask8 kAll8 = 0xFF;

// Q4_K's 8 scales and 8 mins unpacked at once, as ggml's AVX2 kernels do (its utmp masks): the
// bytes of u[0..1] are sc of sub-blocks 0..7 and those of u[2..3] their m (scale_min_k4); then,
// interleaved, dm[2 j] = d * float(sc[j]) and dm[2 j + 1] = dmin * float(m[j]), the widening's
// products, with d and dmin widened by one vcvtph2ps (the scalar f16_to_f32's branches cost more).
__attribute__((target("avx512f"))) inline void k4_scales16(float* dm, const std::uint8_t* b) {
  std::uint32_t u[4], dmin;
  std::memcpy(u, b + 4, 12);
  std::memcpy(&dmin, b, 4);
  constexpr std::uint32_t k6 = 0x3F3F3F3F, k4 = 0x0F0F0F0F, k2 = 0x03030303;
  u[3] = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);
  const std::uint32_t m_lo = u[1] & k6;
  u[1] = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);
  u[2] = m_lo;
  u[0] &= k6;
  const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u));
  const __m128i m = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 2));
  const __m512 sm = _mm512_maskz_cvtepi32_ps(
      kAll, _mm512_maskz_cvtepu8_epi32(kAll, _mm_unpacklo_epi8(sc, m)));        // sc0, m0, sc1, ...
  const __m512 dd = _mm512_maskz_cvtph_ps(kAll, _mm256_set1_epi32(int(dmin)));  // d, dmin, d, ...
  _mm512_store_ps(dm, _mm512_mul_ps(sm, dd));
}

// Sub-block j's 16 possible weights (d1 * q - m1 for the nibble q = 0..15, the product exact,
// rounded once as the widening rounds it), so that each weight is one vpermps of its nibble.
__attribute__((target("avx512f"))) inline void k4_table16(__m512& t, const float* dm, int j) {
  const __m512 q = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  t = _mm512_fmsub_ps(_mm512_set1_ps(dm[2 * j]), q, _mm512_set1_ps(dm[2 * j + 1]));
}

// The 16 weights of the nibbles in the low 4 bits of idx's lanes (vpermps reads only those) or,
// high, in bits 4..7.
__attribute__((target("avx512f"))) inline void k4_lookup16(__m512& w, const __m512i& idx,
                                                           const __m512& t, bool high) {
  w = _mm512_maskz_permutexvar_ps(kAll, high ? _mm512_maskz_srli_epi32(kAll, idx, 4) : idx, t);
}

// Block b's weights 32 is .. 32 is + 63 (sub-blocks is and is + 1: one 32 bytes' low nibbles,
// then their high ones) as four 16-weight vectors in k order, dm its k4_scales16.
__attribute__((target("avx512f"))) inline void k4_pair16(__m512 (&wc)[4], const float* dm,
                                                         const std::uint8_t* b, int is) {
  const std::uint8_t* q = b + 16 + 16 * is;
  __m512 t1, t2;
  k4_table16(t1, dm, is);
  k4_table16(t2, dm, is + 1);
  __m512i i0, i1;
  bytes16(i0, q, false);
  bytes16(i1, q + 16, false);
  k4_lookup16(wc[0], i0, t1, false);
  k4_lookup16(wc[1], i1, t1, false);
  k4_lookup16(wc[2], i0, t2, true);
  k4_lookup16(wc[3], i1, t2, true);
}

// A Q6_K half (128 weights) as int8 bytes in k order, each 4 * (q - 32): q's 6 bits shifted to
// bits 2..7 with the top one flipped (q - 32 in 6-bit two's complement, times 4), bits 0..1 zero.
// The ql bytes' low nibbles are weights 0..63 (ql[l] weight l, ql[32 + l] weight 32 + l), their
// high ones 64..127; qh[l]'s bit pairs 0, 1, 2, 3 the top bits of weights l, 32 + l, 64 + l,
// 96 + l. 64-bit shifts move bits across bytes; the masks keep only each byte's own.
__attribute__((target("avx512f"))) inline void k6_half16(std::int8_t* out, const std::uint8_t* ql,
                                                         const std::uint8_t* qh) {
  const __m512i l = _mm512_loadu_si512(ql);
  const __m512i h =
      _mm512_maskz_broadcast_i64x4(kAll8, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)));
  const __m512i m40 = _mm512_set1_epi8(0x40), m80 = _mm512_set1_epi8(char(0x80));
  const __m512i m3c = _mm512_set1_epi8(0x3C);
  // Bits 6, 7: the pair's bits, the top one flipped, 0 elsewhere: ternlog(a, m40, m80) =
  // m40 ? a : m80 ? ~a : 0 (0xC2, bit a << 2 | b << 1 | c of the immediate).
  const __m512i shl_lo = _mm512_setr_epi64(6, 6, 6, 6, 4, 4, 4, 4);
  const __m512i shl_hi = _mm512_setr_epi64(2, 2, 2, 2, 0, 0, 0, 0);
  const __m512i top_lo =
      _mm512_ternarylogic_epi32(_mm512_maskz_sllv_epi64(kAll8, h, shl_lo), m40, m80, 0xC2);
  const __m512i top_hi =
      _mm512_ternarylogic_epi32(_mm512_maskz_sllv_epi64(kAll8, h, shl_hi), m40, m80, 0xC2);
  // Bits 2..5: the nibble; ternlog(a, b, m3c) = m3c ? a : b (0xE4).
  const __m512i lo =
      _mm512_ternarylogic_epi32(_mm512_maskz_slli_epi64(kAll8, l, 2), top_lo, m3c, 0xE4);
  const __m512i hi =
      _mm512_ternarylogic_epi32(_mm512_maskz_srli_epi64(kAll8, l, 2), top_hi, m3c, 0xE4);
  _mm512_store_si512(out, lo);
  _mm512_store_si512(out + 64, hi);
}

// s4[c] = d * float(sc[c]) / 4 for Q6_K's 16 scales, one per 16 weights: the widening's exact
// product, and a power of two (d is at least 2^-24, so s / 4 is no subnormal).
__attribute__((target("avx512f"))) inline void k6_scales16(float* s4, const std::uint8_t* b) {
  const __m512 sc = _mm512_maskz_cvtepi32_ps(
      kAll,
      _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192))));
  const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm256_set1_epi16(short(quant::le16(b + 208))));
  _mm512_store_ps(s4, _mm512_mul_ps(_mm512_mul_ps(d, sc), _mm512_set1_ps(0.25f)));
}

// w = s4 * float(4 (q - 32)) for 16 bytes of k6_half16: s * (q - 32) exactly, as the widening.
__attribute__((target("avx512f"))) inline void k6_weights16(__m512& w, const std::int8_t* q4,
                                                            float s4) {
  const __m128i b = _mm_load_si128(reinterpret_cast<const __m128i*>(q4));
  w = _mm512_mul_ps(_mm512_set1_ps(s4),
                    _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvtepi8_epi32(kAll, b)));
}
#endif

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

// Any other block (Q4_0, Q5_K): widened by B::widen into the stack, then read back.
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

// R rows' blocks of Q4_K or Q6_K with AVX-512 (V = 16, one accumulator a row), each row's chunks
// in k order into its accumulator as block_chunks gives them, but the rows side by side: R
// independent FMA chains, x's chunks loaded once for all rows. Each row's scales (and Q6_K's
// quants) are first unpacked into the stack; the memory barrier keeps them there, so each scale
// is a broadcast load, not a vpermps of a register (GCC's choice otherwise).
#if defined(__x86_64__)
template <int R>
[[gnu::always_inline]] inline void block_rows16(quant::Q4_K, Vec<16>::type (&acc)[R],
                                                const std::uint8_t* w, std::int64_t row_bytes,
                                                const float* xb) {
  using Vt = Vec<16>::type;
  alignas(64) float dm[R][16];
  for (int r = 0; r < R; ++r) k4_scales16(dm[r], w + r * row_bytes);
  asm volatile("" ::: "memory");
  for (int is = 0; is < 8; is += 2) {  // 64 weights: 32 bytes' low nibbles, then their high
    Vt x[4];
    for (int c = 0; c < 4; ++c) load<16>(x[c], xb + 32 * is + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512 wc[4];
      k4_pair16(wc, dm[r], w + r * row_bytes, is);
      for (int c = 0; c < 4; ++c) fmadd<16>(acc[r], Vt(wc[c]), x[c]);
    }
  }
}

template <int R>
[[gnu::always_inline]] inline void block_rows16(quant::Q6_K, Vec<16>::type (&acc)[R],
                                                const std::uint8_t* w, std::int64_t row_bytes,
                                                const float* xb) {
  using Vt = Vec<16>::type;
  alignas(64) float s4[R][16];
  alignas(64) std::int8_t q4[R][256];  // 4 (q - 32) for every weight, in k order
  for (int r = 0; r < R; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    k6_scales16(s4[r], b);
    k6_half16(q4[r], b, b + 128);
    k6_half16(q4[r] + 128, b + 64, b + 160);
  }
  asm volatile("" ::: "memory");
  for (int c = 0; c < 16; ++c) {
    Vt x;
    load<16>(x, xb + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512 wc;
      k6_weights16(wc, q4[r] + 16 * c, s4[r][c]);
      fmadd<16>(acc[r], Vt(wc), x);
    }
  }
}
#endif

template <typename B>
inline constexpr bool kRows16 = std::is_same_v<B, quant::Q4_K> || std::is_same_v<B, quant::Q6_K>;

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
#if defined(__x86_64__)
    if constexpr (V == 16 && A == 1 && kRows16<B>) {
      for (int r = 0; r < R; ++r)
        for (std::int64_t j = 0; j < B::kBytes; j += 64)
          prefetch_at(w + r * row_bytes + at + j, ahead);
      Vt a[R];
      for (int r = 0; r < R; ++r) a[r] = acc[r][0];
      block_rows16<R>(B{}, a, w + at, row_bytes, xb);
      for (int r = 0; r < R; ++r) acc[r][0] = a[r];
      continue;
    }
#endif
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

#if defined(__x86_64__)
// A Q4_K or Q6_K block's weights from..to (kPart apart) widened into out [to - from] with the
// gemv's AVX-512 instructions above (block_rows16's, in its order): the widening's bits, at a
// third of block_chunks' cost per weight (bench_quant_gemv --batch).
__attribute__((target("avx512f"))) inline void widen_part16(quant::Q4_K, const std::uint8_t* b,
                                                            int from, int to, float* out) {
  alignas(64) float dm[16];
  k4_scales16(dm, b);
  asm volatile("" ::: "memory");  // the scales stay in the stack: broadcast loads
  for (int is = from / 32; is < to / 32; is += 2) {  // 64 weights: 32 bytes' low nibbles, high
    __m512 wc[4];
    k4_pair16(wc, dm, b, is);
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(out + (32 * is - from) + 16 * c, wc[c]);
  }
}

__attribute__((target("avx512f"))) inline void widen_part16(quant::Q6_K, const std::uint8_t* b,
                                                            int from, int to, float* out) {
  alignas(64) float s4[16];
  alignas(64) std::int8_t q4[128];  // 4 (q - 32) for each weight of a half, in k order
  k6_scales16(s4, b);
  for (int n = from / 128; n < to / 128; ++n) {
    k6_half16(q4, b + 64 * n, b + 128 + 32 * n);
    asm volatile("" ::: "memory");
    float* o = out + (128 * n - from);
    for (int c = 0; c < 8; ++c) {
      __m512 wc;
      k6_weights16(wc, q4 + 16 * c, s4[8 * n + c]);
      _mm512_storeu_ps(o + 16 * c, wc);
    }
  }
}
#endif

// Columns c0..c1 of one row of blocks B (multiples of kPart<B>) widened into out [c1 - c0]: with
// AVX-512 Q4_K and Q6_K by widen_part16, elsewhere they and Q8_0 by block_chunks, V lanes at a
// time with B::widen's bits, where B::widen costs several times the F32 kernels' reading of them
// (the tiles of B = 4 ran at a quarter of B = 1's tokens/s); the others by B::widen, whole blocks
// into the stack.
template <int W, typename B>
[[gnu::always_inline]] inline void widen_row_part(const std::uint8_t* row, std::int64_t c0,
                                                  std::int64_t c1, float* out) {
  constexpr int V = kGemvLanes<W, float>;
  using Vt = typename Vec<V>::type;
  for (std::int64_t i = c0 / B::kBlock; i * B::kBlock < c1; ++i) {
    const std::int64_t start = i * B::kBlock, from = std::max(c0, start) - start,
                       to = std::min(c1, start + B::kBlock) - start;
#if defined(__x86_64__)
    if constexpr (W == 16 && kRows16<B>) {
      widen_part16(B{}, row + i * B::kBytes, int(from), int(to), out + (start + from - c0));
      continue;
    }
#endif
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
