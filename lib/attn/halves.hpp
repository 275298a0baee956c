#pragma once
// BF16 and F16, the 16-bit floats weights are stored in (and the scales of ggml's quantized
// blocks), to and from F32: widening is exact, narrowing rounds to nearest even.
#include <bit>
#include <cstdint>

namespace attn {

// bf16 is the top half of an f32.
inline float bf16_to_f32(std::uint16_t b) {
  return std::bit_cast<float>(std::uint32_t(b) << 16);
}

// IEEE half to single, every value exactly: subnormals become normal floats; a NaN keeps its
// payload and comes out quiet, as the hardware's vcvtph2ps (and so PyTorch) makes it.
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant x 2^-24 = (2^-14 + mant x 2^-24) - 2^-14
    const float mag = std::bit_cast<float>((113u << 23) | (mant << 13)) - 0x1p-14f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(mag));
  }
  if (exp == 31)
    return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0));
  return std::bit_cast<float>(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// F32 to BF16 and F16, rounding to nearest even (as PyTorch's .bfloat16() and .half()), in
// integer operations only: no compiler can contract or reorder them. NaN stays NaN.
inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((u >> 16) | 0x40u);
  return std::uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f), a = u & 0x7FFFFFFFu;
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  auto round = [](std::uint32_t kept, std::uint32_t rest, std::uint32_t half) {
    return kept + (rest > half || (rest == half && (kept & 1u)));  // a carry moves up the exponent
  };
  if (a > 0x7F800000u) return std::uint16_t(sign | 0x7E00u);   // NaN
  if (a >= 0x477FF000u) return std::uint16_t(sign | 0x7C00u);  // rounds past 65504: Inf
  if (a <= 0x33000000u) return std::uint16_t(sign);            // at most 2^-25: zero
  if (a >= 0x38800000u)                                        // normal in F16
    return std::uint16_t(sign | round((a - 0x38000000u) >> 13, a & 0x1FFFu, 0x1000u));
  const std::uint32_t shift = 126 - (a >> 23), m = (a & 0x7FFFFFu) | 0x800000u;  // subnormal
  return std::uint16_t(sign | round(m >> shift, m & ((1u << shift) - 1), 1u << (shift - 1)));
}

}  // namespace attn
