#pragma once
// How a prefill product is cut into the pool's items (engine-internal, not installed; matmul.cpp).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "attn/kernels/detail/gemm.hpp"
#include "attn/kernels/matmul.hpp"

namespace attn {

// One prefill item: features n0..n1 of projection `part`, rows m0..m1 of x.
struct PrefillBlock {
  std::size_t part;
  std::int64_t n0, n1, m0, m1;
};

// How a prefill product is cut into items, for any thread count. Each projection's features go in
// blocks of `big` features (one gemm_avx512 block: kGemmNC), except at the end of the last
// projection, whose final stretch goes in blocks of `small` (one 48-feature panel): the threads
// claim items in order, so the last items of a call are small and the threads finish within a
// panel of each other (a design for two threads gave each a half, and the one done first took over
// the other's tail). When the feature blocks are too few to keep every thread busy (many threads,
// narrow projections), x's rows are cut too, into chunks of whole 8-row panels; an output's sum
// runs over k in one order in every split, so the bits do not depend on the cut.
struct PrefillItems {
  static constexpr std::size_t kMaxParts = 8;
  std::array<std::int64_t, kMaxParts + 1> first{};  // the first feature item of each projection
  std::array<std::int64_t, kMaxParts> tail_from{};  // where a projection's small blocks start
  std::size_t parts = 0;
  std::int64_t big = 1, small = 1, m_chunks = 1, m_rows = 0, M = 0;

  PrefillItems(std::span<const Projection> projections, std::int64_t M_, int threads,
               std::int64_t big_, std::int64_t small_, bool cut_rows)
      : parts(projections.size()), big(big_), small(small_), M(M_) {
    if (parts > kMaxParts) throw std::logic_error("linear: over 8 projections in one call");
    for (std::size_t i = 0; i < parts; ++i) {
      const std::int64_t n = projections[i].n;
      // Two small blocks per thread at the end of the call, starting on a big block's edge.
      const std::int64_t tail = i + 1 == parts ? 2 * threads * small : 0;
      tail_from[i] = std::max<std::int64_t>(0, n - tail) / big * big;
      first[i + 1] =
          first[i] + (tail_from[i] + big - 1) / big + (n - tail_from[i] + small - 1) / small;
    }
    const std::int64_t panels = (M + kGemmMR - 1) / kGemmMR;
    const std::int64_t want = 4 * std::int64_t(threads);  // items per thread that even out
    if (cut_rows && first[parts] < want)
      m_chunks =
          std::min(panels, (want + first[parts] - 1) / std::max<std::int64_t>(first[parts], 1));
    m_chunks = std::max<std::int64_t>(m_chunks, 1);
    m_rows = (panels + m_chunks - 1) / m_chunks * kGemmMR;
    m_chunks = (M + m_rows - 1) / std::max<std::int64_t>(m_rows, 1);
  }

  std::int64_t count() const { return first[parts] * m_chunks; }

  PrefillBlock at(std::int64_t item, std::span<const Projection> projections) const {
    const std::int64_t c = item / m_chunks, m = item % m_chunks;
    const std::size_t part = std::size_t(
        std::upper_bound(first.begin(), first.begin() + parts + 1, c) - first.begin() - 1);
    const std::int64_t j = c - first[part], n = projections[part].n;
    const std::int64_t bigs = (tail_from[part] + big - 1) / big;
    std::int64_t n0, n1;
    if (j < bigs) {
      n0 = j * big;
      n1 = std::min(tail_from[part], n0 + big);
    } else {
      n0 = tail_from[part] + (j - bigs) * small;
      n1 = std::min(n, n0 + small);
    }
    return {part, n0, n1, m * m_rows, std::min(M, (m + 1) * m_rows)};
  }
};

}  // namespace attn
