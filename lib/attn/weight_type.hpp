#pragma once
// The weight types a matrix may be held in, one row of kWeightTypeTraits each (ggml's
// type_traits): how many weights a block holds and in how many bytes, which file dtype it is read
// from, and how a row is widened to F32. A row of a matrix is a whole number of blocks; F32, BF16
// and F16 are blocks of one weight. Everything that sizes, addresses, names, checks or widens
// weights asks this table, so that a new type is a row here and its kernels (docs/design.md,
// "Adding a weight type").
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "attn/checked_size.hpp"
#include "attn/error.hpp"
#include "attn/halves.hpp"
#include "attn/quant_blocks.hpp"

namespace attn {

// In the order of kWeightTypeTraits' rows; the kernels' tables are indexed by it. The types of
// one weight per block (the kernels' element types, ATTN_STORAGE_TYPES) come first, then ggml's
// quantized blocks (quant_blocks.hpp).
enum class WeightType : std::uint8_t {
  f32,
  bf16,
  f16,
  q8_0,
  q4_0,
  q4_k,
  q5_k,
  q6_k,
  q4_1,
  q5_0,
  q5_1,
  q2_k,
  q3_k,
  iq4_nl,
  iq4_xs
};

// n weights (a whole number of blocks) from p widened to F32, exactly.
using RowToF32 = void (*)(const void* p, std::int64_t n, float* out);
// n F32 values (whole blocks) stored into out in the type, as PyTorch rounds to it (a quantized
// type: as ggml's reference quantizer stores it): how seeded weights are drawn in a type.
using RowFromF32 = void (*)(const float* x, std::int64_t n, void* out);
// The index of the first of n weights (whole blocks) that is NaN or Inf once widened, or -1:
// read in the stored type, so that the load checks every weight without widening it.
using FirstNonFinite = std::int64_t (*)(const void* p, std::int64_t n);

struct WeightTypeTraits {
  WeightType type;
  const char* name;          // "F32": as messages, traces and the benchmark print it
  const char* safetensors;   // the safetensors dtype held as this type, null if none
  std::int32_t ggml;         // ggml's type id (enum ggml_type) in GGUF files, -1 if none
  std::int64_t block;        // weights per block
  std::int64_t block_bytes;  // bytes per block
  RowToF32 to_f32;
  RowFromF32 from_f32;  // null: weights are not drawn in the type (no reference quantizer here)
  FirstNonFinite first_non_finite;
  // ggml's blocks: the byte offsets of the F16 scale d and of the F16 min (-1: none) in a block,
  // the fields first_non_finite reads (and tests and benchmarks draw scales into).
  std::int16_t scale_at = -1, min_at = -1;
};

namespace detail {

// Files are little-endian; read so, whatever the alignment.
inline std::uint16_t load_le16(const void* p, std::int64_t i) {
  const auto* b = static_cast<const std::uint8_t*>(p) + 2 * i;
  return std::uint16_t(b[0] | (b[1] << 8));
}

inline void f32_row(const void* p, std::int64_t n, float* out) {
  std::memmove(out, p, std::size_t(n) * sizeof(float));
}

template <float (*Widen)(std::uint16_t)>
void half_row(const void* p, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = Widen(load_le16(p, i));
}

inline void f32_from_row(const float* x, std::int64_t n, void* out) {
  std::memmove(out, x, std::size_t(n) * sizeof(float));
}

template <std::uint16_t (*Narrow)(float)>
void half_from_row(const float* x, std::int64_t n, void* out) {
  auto* b = static_cast<std::uint8_t*>(out);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t h = Narrow(x[i]);
    b[2 * i] = std::uint8_t(h);
    b[2 * i + 1] = std::uint8_t(h >> 8);
  }
}

// A branch-free pass per block, then the exact index only if needed. The pass is on the bits (a
// value is not finite when its exponent bits are all set): integer operations, which the
// compiler vectorizes where a float comparison stays one value at a time (the scan was 4% of
// `generate`'s start-up on stories260K, issue 52, and runs on every layer's residual).
inline std::int64_t f32_first_non_finite(const void* p, std::int64_t n) {
  const float* f = static_cast<const float*>(p);
  constexpr std::int64_t kBlock = 1024;
  for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::int64_t i1 = std::min(n, i0 + kBlock);
    std::int32_t bad = 0;
    for (std::int64_t i = i0; i < i1; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, f + i, sizeof bits);
      bad |= std::int32_t(bits & 0x7fffffffu) > 0x7f7fffff;
    }
    if (!bad) continue;
    for (std::int64_t i = i0; i < i1; ++i)
      if (!std::isfinite(f[i])) return i;
  }
  return -1;
}

// Halves are NaN or Inf when every exponent bit is set.
template <std::uint16_t Exp>
std::int64_t half_first_non_finite(const void* p, std::int64_t n) {
  const auto* h = static_cast<const std::uint16_t*>(p);
  for (std::int64_t i = 0; i < n; ++i)
    if ((h[i] & Exp) == Exp) return i;
  return -1;
}

// The row of ggml's block B: read from GGUF only, its sizes, widening and finite check from B,
// stored only where B has ggml's reference quantizer.
template <typename B>
constexpr WeightTypeTraits block_row(WeightType type, const char* name, std::int32_t ggml) {
  RowFromF32 store = nullptr;
  if constexpr (requires(const float* x, std::uint8_t* b) { B::store(x, b); })
    store = quant::store_row<B>;
  return {type,
          name,
          nullptr,
          ggml,
          B::kBlock,
          B::kBytes,
          quant::widen_row<B>,
          store,
          quant::first_non_finite_row<B>,
          B::kScaleAt,
          B::kMinAt};
}

}  // namespace detail

inline constexpr WeightTypeTraits kWeightTypeTraits[] = {
    {WeightType::f32, "F32", "F32", 0, 1, 4, detail::f32_row, detail::f32_from_row,
     detail::f32_first_non_finite},
    {WeightType::bf16, "BF16", "BF16", 30, 1, 2, detail::half_row<bf16_to_f32>,
     detail::half_from_row<f32_to_bf16>, detail::half_first_non_finite<0x7F80>},
    {WeightType::f16, "F16", "F16", 1, 1, 2, detail::half_row<f16_to_f32>,
     detail::half_from_row<f32_to_f16>, detail::half_first_non_finite<0x7C00>},
    // ggml's blocks (quant_blocks.hpp): NaN or Inf only in their F16 scales.
    detail::block_row<quant::Q8_0>(WeightType::q8_0, "Q8_0", 8),
    detail::block_row<quant::Q4_0>(WeightType::q4_0, "Q4_0", 2),
    detail::block_row<quant::Q4_K>(WeightType::q4_k, "Q4_K", 12),
    detail::block_row<quant::Q5_K>(WeightType::q5_k, "Q5_K", 13),
    detail::block_row<quant::Q6_K>(WeightType::q6_k, "Q6_K", 14),
    detail::block_row<quant::Q4_1>(WeightType::q4_1, "Q4_1", 3),
    detail::block_row<quant::Q5_0>(WeightType::q5_0, "Q5_0", 6),
    detail::block_row<quant::Q5_1>(WeightType::q5_1, "Q5_1", 7),
    detail::block_row<quant::Q2_K>(WeightType::q2_k, "Q2_K", 10),
    detail::block_row<quant::Q3_K>(WeightType::q3_k, "Q3_K", 11),
    detail::block_row<quant::IQ4_NL>(WeightType::iq4_nl, "IQ4_NL", 20),
    detail::block_row<quant::IQ4_XS>(WeightType::iq4_xs, "IQ4_XS", 23),
};
inline constexpr std::size_t kWeightTypeCount = std::size(kWeightTypeTraits);

// The widest block: element() widens one into a buffer on the stack.
inline constexpr std::int64_t kMaxBlock = [] {
  std::int64_t b = 0;
  for (const WeightTypeTraits& t : kWeightTypeTraits) b = std::max(b, t.block);
  return b;
}();

// The rows of one weight per block, which come first: the kernels' element types.
inline constexpr std::size_t kElementTypeCount = [] {
  std::size_t n = 0;
  while (n < kWeightTypeCount && kWeightTypeTraits[n].block == 1) ++n;
  return n;
}();

static_assert(
    [] {
      for (std::size_t i = 0; i < kWeightTypeCount; ++i)
        if (std::size_t(kWeightTypeTraits[i].type) != i || kWeightTypeTraits[i].block < 1 ||
            kWeightTypeTraits[i].block_bytes < 1 ||
            (i >= kElementTypeCount && kWeightTypeTraits[i].block == 1))
          return false;
      return true;
    }(),
    "kWeightTypeTraits: one row per WeightType, in its order, blocks of at least one weight, "
    "the blocks of one weight first");

inline const WeightTypeTraits& traits(WeightType t) {
  return kWeightTypeTraits[std::size_t(t)];
}

inline const char* weight_type_name(WeightType t) {
  return traits(t).name;
}

// The type named `name` (as traits' name, any case); none if no row has it.
inline std::optional<WeightType> find_weight_type(std::string_view name) {
  for (const WeightTypeTraits& t : kWeightTypeTraits)
    if (std::equal(name.begin(), name.end(), t.name, t.name + std::strlen(t.name),
                   [](char a, char b) { return (a | 0x20) == (b | 0x20); }))
      return t.type;
  return std::nullopt;
}

// The type a safetensors dtype ("BF16") is held in; none for a dtype no row reads.
inline std::optional<WeightType> weight_type_of_safetensors(std::string_view dtype) {
  for (const WeightTypeTraits& t : kWeightTypeTraits)
    if (t.safetensors && dtype == t.safetensors) return t.type;
  return std::nullopt;
}

// The type ggml's type id `ggml` (a GGUF tensor's type) is held in; none for a type no row reads.
inline std::optional<WeightType> weight_type_of_ggml(std::uint32_t ggml) {
  for (const WeightTypeTraits& t : kWeightTypeTraits)
    if (t.ggml >= 0 && std::uint32_t(t.ggml) == ggml) return t.type;
  return std::nullopt;
}

// The types' names as a message lists them: "F32, BF16 or F16".
inline std::string weight_type_names() {
  std::string s;
  for (std::size_t i = 0; i < kWeightTypeCount; ++i)
    s += std::string(i == 0                      ? ""
                     : i + 1 == kWeightTypeCount ? " or "
                                                 : ", ") +
         kWeightTypeTraits[i].name;
  return s;
}

// Bytes of `count` weights of type t, a whole number of its blocks: for sizes read from files
// and configs, so checked (InputError naming `what`).
inline std::uint64_t weight_bytes(WeightType t, std::int64_t count, const std::string& what) {
  const WeightTypeTraits& tt = traits(t);
  if (count < 0 || count % tt.block != 0)
    throw InputError(what + ": " + std::to_string(count) + " " + tt.name +
                     " weights are not a whole number of its blocks of " +
                     std::to_string(tt.block));
  const std::optional<std::uint64_t> n = size_product({count / tt.block, tt.block_bytes});
  if (!n)
    throw InputError(what + ": " + std::to_string(count) + " " + tt.name +
                     " weights would need more than 2^64 bytes");
  return *n;
}

// The alignment a view of the type needs: its blocks are made of floats or halves. ggml's blocks
// (18 to 210 bytes, all even) are read a byte at a time, their F16 scales as two bytes: 2,
// as ggml lays them out, whatever their size.
inline std::uintptr_t weight_alignment(WeightType t) {
  const WeightTypeTraits& tt = traits(t);
  if (tt.block > 1) return 2;
  return tt.block_bytes % 4 == 0 ? 4 : tt.block_bytes % 2 == 0 ? 2 : 1;
}

}  // namespace attn
