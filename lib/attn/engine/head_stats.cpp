#include "attn/engine/head_stats.hpp"

#include <cmath>
#include <limits>

namespace attn {

void add_row(HeadStats& s, std::span<const float> p, std::int64_t t) {
  if (p.empty() || t < 0) return;
  double h = 0;
  for (const float v : p)
    if (v > 0) h -= double(v) * std::log(double(v));
  s.entropy += h;
  s.first += double(p[0]);
  ++s.rows;
  const auto keys = std::int64_t(p.size());
  if (t >= 1 && t - 1 < keys) {
    s.prev += double(p[std::size_t(t - 1)]);
    ++s.prev_rows;
  }
  if (t < keys) {
    s.diag += double(p[std::size_t(t)]);
    ++s.diag_rows;
  }
}

std::array<double, 4> head_means(const HeadStats& s) {
  const auto mean = [](double sum, std::int64_t n) {
    return n > 0 ? sum / double(n) : std::numeric_limits<double>::quiet_NaN();
  };
  return {mean(s.entropy, s.rows), mean(s.first, s.rows), mean(s.prev, s.prev_rows),
          mean(s.diag, s.diag_rows)};
}

}  // namespace attn
