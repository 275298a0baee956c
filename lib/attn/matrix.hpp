#pragma once
// A weight matrix as its file stores it, in one of the weight types (weight_type.hpp). F32 is
// read as it is; BF16 and F16 stay at half the bytes, mapped, and are widened to F32 where a
// product reads them (matmul.cpp). Widening is exact, since every BF16 and F16 value is an F32
// value, so a product over BF16 weights gives the bits the same product gives over the
// F32-widened weights.
#include <cstdint>
#include <stdexcept>

#include "attn/weight_type.hpp"

namespace attn {

// Rows are addressed in whole blocks of their type (weight_type.hpp): an offset in weights must
// fall on a block boundary, which the load checks for every view it makes.
struct Matrix {
  const void* data = nullptr;
  WeightType type = WeightType::f32;
  std::int64_t ld = 0;  // weights from one row to the next; 0: dense (a rank's column slice
                        // of a mapped matrix is strided)

  Matrix() = default;
  Matrix(const float* f32) : data(f32) {}  // F32 rows, as tests and callers have them
  Matrix(const void* p, WeightType t, std::int64_t ld = 0) : data(p), type(t), ld(ld) {}

  // The view `weights` weights on (whole blocks): a block of rows, or the first of a block of
  // columns.
  Matrix at(std::int64_t weights) const {
    const WeightTypeTraits& t = traits(type);
    return {static_cast<const char*>(data) + weights / t.block * t.block_bytes, type, ld};
  }
  // Row r's first weight, rows being `cols` long when dense.
  Matrix row(std::int64_t r, std::int64_t cols) const { return at(r * stride(cols)); }
  // Weights from one row to the next, rows being `cols` long when dense.
  std::int64_t stride(std::int64_t cols) const { return ld ? ld : cols; }
  // A block of `cols` columns from column c0 of a [?, cols_total] matrix: the same rows, strided.
  // c0 starts a block of the type, or the view would start inside one.
  Matrix columns(std::int64_t c0, std::int64_t cols_total) const {
    if (c0 % traits(type).block != 0)
      throw std::logic_error("Matrix::columns: column " + std::to_string(c0) +
                             " is inside a block of " + traits(type).name + " weights");
    return {at(c0).data, type, stride(cols_total)};
  }
  explicit operator bool() const { return data != nullptr; }
};

// Weight i of m, widened (its block widened whole): for tests and checks, not for hot loops.
inline float element(const Matrix& m, std::int64_t i) {
  const WeightTypeTraits& t = traits(m.type);
  float block[kMaxBlock];
  t.to_f32(m.at(i - i % t.block).data, t.block, block);
  return block[i % t.block];
}

}  // namespace attn
