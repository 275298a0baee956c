#pragma once
// The avx512 set's vector primitives: Isa<16> (declared in detail/vectors.hpp), 16 floats in a
// zmm register, with AVX-512F's instructions, and the 8-lane ones of the avx2 set (Isa<8>, which
// the set's BF16 and F16 gemv runs on: kGemvLanes). Besides the loads, FMAs and broadcasts every
// set has, the K-quants' own code (Q4_K, Q6_K: kQuantRows), where the gemv is bound by
// instructions, not memory: each weight widened by fewer of them, to the same bits. The helpers
// are not always_inline: ISA-neutral templates call them, and only code compiled for the ISA
// (flatten, define_kernels.hpp) inlines them; by reference, so no vector crosses an ABI.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attn/kernels/detail/vectors.hpp"
#include "attn/kernels/x86/avx2/detail/vec.hpp"
#include "attn/kernels/x86/avx512/detail/widen.hpp"
#include "attn/quant_blocks.hpp"

namespace attn {
namespace {

// a += b * c in one rounding (vfmadd). Written out, not left to -ffp-contract (vectors.hpp).
__attribute__((target("avx512f"))) inline void fma_lanes(Vec<16>::type& a, const Vec<16>::type& b,
                                                         const Vec<16>::type& c) {
  a = Vec<16>::type(_mm512_fmadd_ps(__m512(b), __m512(c), __m512(a)));
}

// 16 bytes from p, each in a 32-bit lane: signed (Q8_0's quants) or not (the nibbles' bytes), by
// vpmovsxbd, vpmovzxbd.
__attribute__((target("avx512f"))) inline void bytes16(__m512i& q, const std::uint8_t* p,
                                                       bool sign) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __mmask16 all = 0xFFFF;
  q = sign ? _mm512_maskz_cvtepi8_epi32(all, b) : _mm512_maskz_cvtepu8_epi32(all, b);
}
// v = scale in every lane: vbroadcastss.
__attribute__((target("avx512f"))) inline void splat16(__m512& v, float scale) {
  v = _mm512_set1_ps(scale);
}
// v = the F16 h widened (f16_to_f32) in every lane: vcvtph2ps.
__attribute__((target("avx512f"))) inline void f16_splat16(__m512& v, std::uint16_t h) {
  v = _mm512_maskz_cvtph_ps(__mmask16(0xFFFF), _mm256_set1_epi16(short(h)));
}
// Every lane: the masked forms avoid GCC 12's -Wmaybe-uninitialized on the plain intrinsics'
// undefined source (widen.hpp).
inline constexpr __mmask16 kAll = 0xFFFF;
inline constexpr __mmask8 kAll8 = 0xFF;

// Q4_K's 8 scales and 8 mins unpacked at once (scale_min_k4's bits) in one 16-byte register, by
// two pshufb, shifts and masks: half the instructions of the scalar unpacking and its moves into
// a vector register (the gemv 2-3% faster; the unpacking, 8 rows' scales a block, still costs
// it 12%: docs/perf/quant-types.md); then, interleaved, dm[2 j] = d * float(sc[j])
// and dm[2 j + 1] = dmin * float(m[j]), the widening's products, with d and dmin widened by one
// vcvtph2ps (the scalar f16_to_f32's branches cost more).
__attribute__((target("avx512f"))) inline void k4_scales16(float* dm, const std::uint8_t* b) {
  // q = the 12 scale bytes (and 4 of the quants after them, unused). Sub-block j < 4: sc =
  // q[j] & 63, m = q[j + 4] & 63; j >= 4: sc = q[j + 4] & 15 | (q[j - 4] >> 6) << 4, m =
  // q[j + 4] >> 4 | (q[j] >> 6) << 4. a holds each output byte's low source, h its high one.
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4));
  const __m128i a =
      _mm_shuffle_epi8(q, _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 8, 9, 9, 10, 10, 11, 11));
  const __m128i h =
      _mm_shuffle_epi8(q, _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 1, 5, 2, 6, 3, 7));
  const __m128i low =
      _mm_and_si128(a, _mm_setr_epi8(63, 63, 63, 63, 63, 63, 63, 63, 15, 0, 15, 0, 15, 0, 15, 0));
  const __m128i mid = _mm_and_si128(
      _mm_srli_epi16(a, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 0, 15, 0, 15, 0, 15));
  const __m128i top = _mm_and_si128(_mm_srli_epi16(h, 2), _mm_set1_epi8(0x30));
  const __m128i scm = _mm_or_si128(_mm_or_si128(low, mid), top);  // sc0, m0, sc1, m1, ...
  std::uint32_t dmin;
  std::memcpy(&dmin, b, 4);
  const __m512 sm = _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvtepu8_epi32(kAll, scm));
  const __m512 dd = _mm512_maskz_cvtph_ps(kAll, _mm256_set1_epi32(int(dmin)));  // d, dmin, d, ...
  _mm512_store_ps(dm, _mm512_mul_ps(sm, dd));
}

// Sub-block j's 16 possible weights (d1 * q - m1 for the nibble q = 0..15, the product exact,
// rounded once as the widening rounds it), so that each weight is one vpermps of its nibble. A
// vmulps and a vsubps, not one vfmsub: the product is exact, so the bits are the same, and on Zen
// 4 the subtraction runs on the FP adders, where a vfmsub (and the broadcast load it needs) took
// slots from the two pipes the gemv's FMAs and vpermps share: 4.0 cycles per 32 weights of the
// gemv's mix instead of 5.1 (docs/perf/quant-types.md). Both scalars are read as embedded
// broadcasts ({1to16}) from dm.
__attribute__((target("avx512f"))) inline void k4_table16(__m512& t, const float* dm, int j) {
  const __m512 q = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  t = _mm512_sub_ps(_mm512_mul_ps(q, _mm512_set1_ps(dm[2 * j])), _mm512_set1_ps(dm[2 * j + 1]));
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
// R rows' blocks of Q4_K or Q6_K (V = 16, one accumulator a row), each row's chunks in k order
// into its accumulator as quant_gemv.hpp's block_chunks gives them, but the rows side by side: R
// independent FMA chains, x's chunks loaded once for all rows. Each row's scales (and Q6_K's
// quants) are first unpacked into the stack; the memory barrier keeps them there, so each scale
// is a broadcast load, not a vpermps of a register (GCC's choice otherwise).
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

// R rows' Q6_K blocks (row_bytes apart) unpacked for the FMAs: each row's 16 scales and
// 4 (q - 32) of its 256 weights, in k order.
template <int R>
[[gnu::always_inline]] inline void k6_rows16(float (&s4)[R][16], std::int8_t (&q4)[R][256],
                                             const std::uint8_t* w, std::int64_t row_bytes) {
  for (int r = 0; r < R; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    k6_scales16(s4[r], b);
    k6_half16(q4[r], b, b + 128);
    k6_half16(q4[r] + 128, b + 64, b + 160);
  }
}

template <int R>
[[gnu::always_inline]] inline void block_rows16(quant::Q6_K, Vec<16>::type (&acc)[R],
                                                const std::uint8_t* w, std::int64_t row_bytes,
                                                const float* xb) {
  using Vt = Vec<16>::type;
  alignas(64) float s4[R][16];
  alignas(64) std::int8_t q4[R][256];  // 4 (q - 32) for every weight, in k order
  k6_rows16(s4, q4, w, row_bytes);
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
// block_rows16 for C rows of x at once (the batched kernel's register path, quant_batch.hpp's
// block_rows_regs): each widened vector of R weight rows goes straight into C FMAs, one for each
// row of x, and is never stored; xk is the packed x at the block's first column (chunk j of row m
// at xk + (j M + m) 16), acc[r][m] the chains of weight row r and x row m. Q4_K goes by
// sub-blocks (32 weights: one table, the two 16-byte halves' low or high nibbles), x's two
// chunks of them loaded once for all R rows; each half's bytes are widened again for the high
// nibbles, a vpmovzxbd that C FMAs share, where keeping them would cost two registers a row.
// Store: each widened vector also written to buf (row r at buf + r ldb, 64-byte aligned), for
// the other rows of x to read (quant_batch.hpp's block_rows_first).
template <int R, int C, bool Store>
[[gnu::always_inline]] inline void block_rows16_x(quant::Q4_K, Vec<16>::type (&acc)[R][C],
                                                  const std::uint8_t* w, std::int64_t row_bytes,
                                                  const float* xk, std::int64_t M, float* buf,
                                                  std::int64_t ldb) {
  using Vt = Vec<16>::type;
  alignas(64) float dm[R][16];
  for (int r = 0; r < R; ++r) k4_scales16(dm[r], w + r * row_bytes);
  asm volatile("" ::: "memory");
#pragma GCC unroll 8
  for (int is = 0; is < 8; ++is) {  // sub-block is: bytes 32 (is / 2) .., high nibbles if odd
    Vt x[2][C];
    for (int h = 0; h < 2; ++h)
      for (int m = 0; m < C; ++m) {
        load<16>(x[h][m], xk + ((2 * is + h) * M + m) * 16);
        pin(x[h][m]);
      }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* q = w + r * row_bytes + 16 + 32 * (is / 2);
      // An address GCC cannot see through, so the high nibbles' bytes are widened again: it kept
      // the low nibbles' two vectors a row instead, R x 2 registers beside R x C accumulators,
      // and spilled accumulators and x (docs/perf/batched-decode.md, "round two").
      asm volatile("" : "+r"(q));
      __m512 t;
      k4_table16(t, dm[r], is);
      for (int h = 0; h < 2; ++h) {
        __m512i i;
        bytes16(i, q + 16 * h, false);
        __m512 wc;
        k4_lookup16(wc, i, t, is % 2 == 1);
        if constexpr (Store) std::memcpy(buf + r * ldb + 32 * is + 16 * h, &wc, sizeof wc);
        for (int m = 0; m < C; ++m) fmadd<16>(acc[r][m], Vt(wc), x[h][m]);
      }
    }
  }
}

template <int R, int C, bool Store>
[[gnu::always_inline]] inline void block_rows16_x(quant::Q6_K, Vec<16>::type (&acc)[R][C],
                                                  const std::uint8_t* w, std::int64_t row_bytes,
                                                  const float* xk, std::int64_t M, float* buf,
                                                  std::int64_t ldb) {
  using Vt = Vec<16>::type;
  alignas(64) float s4[R][16];
  alignas(64) std::int8_t q4[R][256];  // 4 (q - 32) for every weight, in k order
  k6_rows16(s4, q4, w, row_bytes);
  asm volatile("" ::: "memory");
  for (int c = 0; c < 16; ++c) {
    Vt x[C];
    for (int m = 0; m < C; ++m) {
      load<16>(x[m], xk + (c * M + m) * 16);
      pin(x[m]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512 wc;
      k6_weights16(wc, q4[r] + 16 * c, s4[r][c]);
      if constexpr (Store) std::memcpy(buf + r * ldb + 16 * c, &wc, sizeof wc);
      for (int m = 0; m < C; ++m) fmadd<16>(acc[r][m], Vt(wc), x[m]);
    }
  }
}
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
template <>
struct Isa<16> {
  using V = Vec<16>::type;
  [[gnu::always_inline]] static void widen(V& v, const Bf16* p) {
    widen16(reinterpret_cast<__m512&>(v), p);
  }
  [[gnu::always_inline]] static void widen(V& v, const F16* p) {
    widen16(reinterpret_cast<__m512&>(v), p);
  }
  [[gnu::always_inline]] static void fma(V& a, const V& b, const V& c) { fma_lanes(a, b, c); }
  template <bool Sign>
  [[gnu::always_inline]] static void bytes(Ints<16>::type& q, const std::uint8_t* p) {
    bytes16(reinterpret_cast<__m512i&>(q), p, Sign);
  }
  [[gnu::always_inline]] static void splat(V& v, float scale) {
    splat16(reinterpret_cast<__m512&>(v), scale);
  }
  [[gnu::always_inline]] static void splat_f16(V& v, std::uint16_t h) {
    f16_splat16(reinterpret_cast<__m512&>(v), h);
  }

  // Q4_K and Q6_K have their own code: quant_rows (the gemv's R rows of whole blocks),
  // quant_rows_x (the same against C rows of packed x) and quant_part (a block's weights
  // from..to, kPart apart, widened into out).
  [[gnu::always_inline]] static void pin(V& v) { asm("" : "+v"(v)); }

  template <typename B>
  static constexpr bool kQuantRows =
      std::is_same_v<B, quant::Q4_K> || std::is_same_v<B, quant::Q6_K>;
  template <int R, typename B>
  [[gnu::always_inline]] static void quant_rows(B, V (&acc)[R], const std::uint8_t* w,
                                                std::int64_t row_bytes, const float* xb) {
    block_rows16<R>(B{}, acc, w, row_bytes, xb);
  }
  template <int R, int C, bool Store, typename B>
  [[gnu::always_inline]] static void quant_rows_x(B, V (&acc)[R][C], const std::uint8_t* w,
                                                  std::int64_t row_bytes, const float* xk,
                                                  std::int64_t M, float* buf, std::int64_t ldb) {
    block_rows16_x<R, C, Store>(B{}, acc, w, row_bytes, xk, M, buf, ldb);
  }
  template <typename B>
  [[gnu::always_inline]] static void quant_part(B, const std::uint8_t* b, int from, int to,
                                                float* out) {
    widen_part16(B{}, b, from, to, out);
  }
};

}  // namespace
}  // namespace attn
#endif
