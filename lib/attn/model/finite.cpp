#include "attn/model/finite.hpp"

#include <cmath>

#include "attn/error.hpp"
#include "attn/io/text.hpp"

namespace attn {

std::int64_t first_non_finite(const float* p, std::int64_t n) {
  return traits(WeightType::f32).first_non_finite(p, n);
}

namespace {

[[noreturn]] void refuse(float v, std::int64_t i, std::int64_t n, const std::string& source,
                         const std::string& name) {
  throw InputError(source + ": tensor " + quoted(name) + ": " +
                   (std::isnan(v) ? "NaN"
                    : v > 0       ? "Inf"
                                  : "-Inf") +
                   " at flat index " + std::to_string(i) + " (of " + std::to_string(n) +
                   " values): weights and inputs must be finite");
}

}  // namespace

void check_finite(const float* p, std::int64_t n, const std::string& source,
                  const std::string& name) {
  const std::int64_t i = first_non_finite(p, n);
  if (i >= 0) refuse(p[i], i, n, source, name);
}

void check_finite(const Matrix& m, std::int64_t rows, std::int64_t cols, const std::string& source,
                  const std::string& name) {
  // A dense matrix is one row of rows * cols values.
  const std::int64_t n = m.ld ? cols : rows * cols, row_count = m.ld ? rows : 1;
  for (std::int64_t r = 0; r < row_count; ++r) {
    const Matrix row = m.row(r, cols);
    const std::int64_t i = traits(m.type).first_non_finite(row.data, n);
    if (i >= 0) refuse(element(row, i), r * cols + i, rows * cols, source, name);
  }
}

}  // namespace attn
