#include "attn/claims.hpp"

#include <algorithm>
#include <stdexcept>

namespace attn {

namespace {

std::uint64_t pack(std::int64_t front, std::int64_t back) {
  return std::uint64_t(front) << 32 | std::uint64_t(back);
}
std::int64_t front_of(std::uint64_t s) {
  return std::int64_t(s >> 32);
}
std::int64_t back_of(std::uint64_t s) {
  return std::int64_t(s & 0xFFFFFFFFu);
}

}  // namespace

RowClaims::RowClaims(std::vector<std::int64_t> bounds_, int threads_, std::int64_t own_,
                     std::int64_t steal_)
    : bounds(std::move(bounds_)),
      threads(std::max(threads_, 1)),
      own(std::max<std::int64_t>(own_, 1)),
      steal(std::max<std::int64_t>(steal_, 1)),
      stretch(new std::atomic<std::uint64_t>[std::size_t(threads)]) {
  const std::int64_t total = bounds.empty() ? 0 : bounds.back();
  if (total >= (std::int64_t(1) << 31)) throw std::length_error("RowClaims: over 2^31 rows");
  // Stretches cut on multiples of 16 rows, as the decode blocks are, so that no two threads
  // write one cache line of an output row.
  const std::int64_t blocks = (total + 15) / 16;
  for (int t = 0; t < threads; ++t)
    stretch[t] = pack(std::min(total, blocks * t / threads * 16),
                      std::min(total, blocks * (t + 1) / threads * 16));
}

RowBlock RowClaims::next(int t) {
  for (int i = 0; i < threads; ++i) {
    const int u = (t + i) % threads;
    std::uint64_t s = stretch[u].load();
    while (front_of(s) < back_of(s)) {
      const std::int64_t f = front_of(s), b = back_of(s);
      if (i == 0) {  // one's own, from the front: up to the next bound
        const std::int64_t bound = *std::upper_bound(bounds.begin(), bounds.end(), f);
        const std::int64_t e = std::min({b, f + own, bound});
        if (stretch[u].compare_exchange_weak(s, pack(e, b))) return {f, e};
      } else {  // another's, from the back: down to the bound before its end
        const std::int64_t bound = *(std::lower_bound(bounds.begin(), bounds.end(), b) - 1);
        const std::int64_t e = std::max({f, b - steal, bound});
        if (stretch[u].compare_exchange_weak(s, pack(f, e))) return {e, b};
      }
    }
  }
  return {};
}

}  // namespace attn
