#include "attn/engine/head_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn {

void add_row(HeadStats& s, std::span<const float> p, std::int64_t t,
             std::span<const std::int32_t> ids) {
  if (p.empty() || t < 0) return;
  double h = 0, mass = 0;
  for (const float v : p) {
    if (v > 0) h -= double(v) * std::log(double(v));
    mass += double(v);
  }
  s.entropy += h;
  s.first += double(p[0]);
  ++s.rows;
  s.mass += mass;
  const auto keys = std::int64_t(p.size());
  if (t >= 1 && t - 1 < keys) {
    s.prev += double(p[std::size_t(t - 1)]);
    s.previous += double(p[std::size_t(t - 1)]);
    ++s.prev_rows;
  }
  if (t < keys) {
    s.diag += double(p[std::size_t(t)]);
    ++s.diag_rows;
  }
  if (std::int64_t(ids.size()) <= t) return;
  // TransformerLens's patterns are lower-triangular (tril): keys past t count for neither.
  const std::int32_t now = ids[std::size_t(t)];
  const std::int64_t last = std::min(t, keys - 1);
  for (std::int64_t j = 0; j <= last; ++j) {
    const double v = double(p[std::size_t(j)]);
    if (j < t && ids[std::size_t(j)] == now) s.duplicate += v;
    if (j >= 1 && ids[std::size_t(j - 1)] == now) s.induction += v;
  }
  s.token_mass += mass;
}

std::array<double, kHeadStatNames.size()> head_means(const HeadStats& s) {
  const auto mean = [](double sum, double n) {
    return n > 0 ? sum / n : std::numeric_limits<double>::quiet_NaN();
  };
  return {mean(s.entropy, double(s.rows)),   mean(s.first, double(s.rows)),
          mean(s.prev, double(s.prev_rows)), mean(s.diag, double(s.diag_rows)),
          mean(s.previous, s.mass),          mean(s.duplicate, s.token_mass),
          mean(s.induction, s.token_mass)};
}

}  // namespace attn
