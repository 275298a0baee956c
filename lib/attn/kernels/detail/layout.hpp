#pragma once
// What the scheduling (matmul.cpp) and the kernels (vectors.hpp) agree on.
#include <cstdint>

namespace attn {

// Rows of w per block of a decode product: matmul.cpp hands them out, batch_rows sizes its sums.
inline constexpr std::int64_t kGemvRows = 64;

// The batched kernel reads x packed: for each block of kPack columns, the M rows' kPack floats
// side by side, [K / kPack, M, kPack]. The rows of x and of w lie K floats apart, often a
// multiple of 4 KB, so unpacked they all map to one L1 set and more than 8 streams thrash it;
// packed, x is one stream beside R weight rows.
inline constexpr std::int64_t kPack = 16;

// v rounded up to a multiple of `to` (> 0): the padded rows and aligned offsets of the kernels'
// buffers.
constexpr std::int64_t round_up(std::int64_t v, std::int64_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace attn
