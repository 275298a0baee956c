#include "attn/kernels/detail/claims.hpp"

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

RowClaims::RowClaims(std::span<const std::int64_t> bounds_, int threads, std::int64_t own_,
                     std::int64_t steal_)
    : n_bounds(int(bounds_.size())),
      stretches(std::clamp(threads, 1, kMaxStretches)),
      own(std::max<std::int64_t>(own_, 1)),
      steal(std::max<std::int64_t>(steal_, 1)) {
  if (bounds_.empty() || bounds_.size() > bounds.size() || bounds_.front() != 0)
    throw std::logic_error("RowClaims: 1 to 9 bounds, the first 0");
  std::copy(bounds_.begin(), bounds_.end(), bounds.begin());
  const std::int64_t total = bounds_.back();
  if (total >= (std::int64_t(1) << 31)) throw std::length_error("RowClaims: over 2^31 rows");
  // Stretches cut on multiples of 16 rows, as the decode blocks are, so that no two threads
  // write one cache line of an output row.
  const std::int64_t blocks = (total + 15) / 16;
  for (int t = 0; t < stretches; ++t)
    stretch[std::size_t(t)] = pack(std::min(total, blocks * t / stretches * 16),
                                   std::min(total, blocks * (t + 1) / stretches * 16));
}

RowBlock RowClaims::next(int t) {
  const std::int64_t* b0 = bounds.data();
  const std::int64_t* b1 = b0 + n_bounds;
  for (int i = 0; i < stretches; ++i) {
    const int u = (t + i) % stretches;
    const bool mine = u == t;
    std::atomic<std::uint64_t>& a = stretch[std::size_t(u)];
    std::uint64_t s = a.load();
    while (front_of(s) < back_of(s)) {
      const std::int64_t f = front_of(s), b = back_of(s);
      if (mine) {  // one's own, from the front: up to the next bound
        const std::int64_t* next = std::upper_bound(b0, b1, f);
        const std::int64_t e = std::min({b, f + own, *next});
        if (a.compare_exchange_weak(s, pack(e, b))) return {f, e, std::size_t(next - b0 - 1)};
      } else {  // another's, from the back: down to the bound before its end
        const std::int64_t* last = std::lower_bound(b0, b1, b) - 1;
        const std::int64_t e = std::max({f, b - steal, *last});
        if (a.compare_exchange_weak(s, pack(f, e))) return {e, b, std::size_t(last - b0)};
      }
    }
  }
  return {};
}

}  // namespace attn
