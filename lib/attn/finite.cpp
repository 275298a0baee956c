#include "attn/finite.hpp"

#include <cmath>

#include "attn/error.hpp"
#include "attn/text.hpp"

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

void check_finite(const float* p, std::int64_t n, const std::string& source,
                  const std::string& name) {
  const std::int64_t i = first_non_finite(p, n);
  if (i < 0) return;
  throw InputError(source + ": tensor " + quoted(name) + ": " +
                   (std::isnan(p[i]) ? "NaN"
                    : p[i] > 0       ? "Inf"
                                     : "-Inf") +
                   " at flat index " + std::to_string(i) + " (of " + std::to_string(n) +
                   " values): weights and inputs must be finite");
}

}  // namespace attn
