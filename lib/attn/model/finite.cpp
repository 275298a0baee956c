#include "attn/model/finite.hpp"

#include <cmath>

#include "attn/error.hpp"
#include "attn/io/text.hpp"

namespace attn {

std::int64_t first_non_finite(const float* p, std::int64_t n) {
  constexpr std::int64_t kBlock = 1024;
  for (std::int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::int64_t i1 = std::min(n, i0 + kBlock);
    bool bad = false;  // a branch-free pass per block, then the exact index only if needed
    for (std::int64_t i = i0; i < i1; ++i) bad |= !(std::fabs(p[i]) <= 3.4028235e38f);
    if (!bad) continue;
    for (std::int64_t i = i0; i < i1; ++i)
      if (!std::isfinite(p[i])) return i;
  }
  return -1;
}

namespace {

// Halves are NaN or Inf when every exponent bit is set.
std::int64_t first_non_finite_half(const std::uint16_t* p, std::int64_t n, std::uint16_t exp) {
  for (std::int64_t i = 0; i < n; ++i)
    if ((p[i] & exp) == exp) return i;
  return -1;
}

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
    const std::int64_t i =
        m.type == WeightType::f32
            ? first_non_finite(static_cast<const float*>(row.data), n)
            : first_non_finite_half(static_cast<const std::uint16_t*>(row.data), n,
                                    m.type == WeightType::bf16 ? 0x7F80 : 0x7C00);
    if (i >= 0) refuse(element(row, i), r * cols + i, rows * cols, source, name);
  }
}

}  // namespace attn
