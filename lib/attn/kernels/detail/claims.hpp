#pragma once
// How prefill's threads share the rows of a product (engine-internal, not installed). Thread t
// of nt owns the t-th of nt equal stretches of the rows and takes its blocks from the front;
// a thread whose stretch is done takes blocks from the back of the others' stretches. With
// static halves, a thread slowed by a neighbour on its core leaves the other waiting at the end of
// every product; with every block taken dynamically, the threads meet on a whole block and one
// waits for the other's last (docs/perf/prefill-gemm.md).
// Here, while the threads keep pace, each computes exactly its stretch, and what one leaves the
// other takes in small blocks. Fixed-size state on the caller's stack: a decode step of more
// than kBatchRows sequences runs this path too, and a step allocates nothing.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace attn {

// Rows begin..end of the concatenated rows, all in projection `part` (bounds[part] <= begin,
// end <= bounds[part + 1]); empty (begin == end) when none are left.
struct RowBlock {
  std::int64_t begin = 0, end = 0;
  std::size_t part = 0;
};

struct RowClaims {
  static constexpr int kMaxProjections = 8;
  static constexpr int kMaxStretches = 64;  // threads past this own no stretch; they only take

  // bounds: where each projection's rows start in the concatenation, then the total (ascending,
  // starting at 0, at most kMaxProjections + 1); no block crosses a bound. own, steal: rows per
  // block taken from the front of one's own stretch and from the back of another's.
  RowClaims(std::span<const std::int64_t> bounds, int threads, std::int64_t own,
            std::int64_t steal);

  // The next block for thread t (0 <= t < threads): its own stretch first, then the others'.
  // Safe to call from all threads at once; every row is handed out exactly once.
  RowBlock next(int t);

  std::array<std::int64_t, kMaxProjections + 1> bounds{};
  int n_bounds = 0, stretches = 0;
  std::int64_t own = 1, steal = 1;
  std::array<std::atomic<std::uint64_t>, kMaxStretches> stretch{};  // front << 32 | back
};

}  // namespace attn
