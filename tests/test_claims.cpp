// RowClaims (claims.hpp), how prefill's threads share a product's rows: every row handed out
// exactly once, blocks within one projection, a thread's own stretch from the front in blocks of
// `own`, the others' from the back in blocks of `steal`, whatever order the threads ask in.
#include <doctest/doctest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "attn/kernels/detail/claims.hpp"

namespace {

// Claims every row, the threads in `order` asking in turn (cyclically) until each has been told
// nothing is left; threads not in `order` never ask, so the others must take their stretches.
// Checks each block and that the blocks cover every row exactly once.
void check_claims(const std::vector<std::int64_t>& bounds, int threads, std::int64_t own,
                  std::int64_t steal, const std::vector<int>& order) {
  attn::RowClaims claims(bounds, threads, own, steal);
  const std::int64_t total = bounds.back();
  std::vector<int> owner(static_cast<std::size_t>(total), -1);
  std::vector<bool> done(order.size(), false);
  std::size_t finished = 0;
  for (std::size_t i = 0; finished < order.size(); ++i) {
    // Each call hands out a row or ends a thread: more calls than that would never end.
    if (i > std::size_t(4 * total + 100)) FAIL("the claims do not end");
    const std::size_t k = i % order.size();
    if (done[k]) continue;
    const int t = order[k];
    const attn::RowBlock b = claims.next(t);
    if (b.end <= b.begin) {
      done[k] = true;
      ++finished;
      continue;
    }
    const auto bound = std::upper_bound(bounds.begin(), bounds.end(), b.begin);
    bool again = false;  // a row handed out before
    for (std::int64_t r = b.begin; r < b.end; ++r) {
      again = again || owner[std::size_t(r)] != -1;
      owner[std::size_t(r)] = t;
    }
    // One assertion per bad block: a block of one row each for 28672 rows would be 10^7 checks.
    const bool in_part = b.part == std::size_t(bound - bounds.begin() - 1) && b.end <= *bound;
    if (b.begin < 0 || b.end > total || b.end - b.begin > std::max(own, steal) || !in_part || again)
      FAIL_CHECK("thread " << t << " got rows " << b.begin << ".." << b.end << " of part " << b.part
                           << (again ? ", some handed out before" : ""));
  }
  CHECK(std::count(owner.begin(), owner.end(), -1) == 0);
}

}  // namespace

TEST_CASE("RowClaims: each row once, blocks inside a projection, any order of asking") {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {0},                    // no rows
      {0, 5},                 // fewer rows than a block
      {0, 4096, 5120, 6144},  // wq, wk, wv of the 8B layer
      {0, 100, 1124, 2124},   // bounds off the 16-row grid
      {0, 1, 2, 3, 700},      // one-row projections
      {0, 14336, 28672}};     // w1, w3
  for (const auto& bounds : shapes)
    for (int threads : {1, 2, 3, 4})
      for (std::int64_t own : {1, 48, 192})
        for (std::int64_t steal : {1, 16, 48}) {
          CAPTURE(bounds.back());
          CAPTURE(threads);
          CAPTURE(own);
          CAPTURE(steal);
          std::vector<int> in_turn;
          for (int t = 0; t < threads; ++t) in_turn.push_back(t);
          check_claims(bounds, threads, own, steal, in_turn);
          check_claims(bounds, threads, own, steal, {0});  // thread 0 alone takes every row
          check_claims(bounds, threads, own, steal, {threads - 1});
          std::vector<int> skewed{0, 0, 0};  // thread 0 three times as fast
          for (int t = 1; t < threads; ++t) skewed.push_back(t);
          check_claims(bounds, threads, own, steal, skewed);
        }
  // More threads than stretches: the threads past kMaxStretches own none and only take.
  const int many = attn::RowClaims::kMaxStretches + 36;
  std::vector<int> all;
  for (int t = 0; t < many; ++t) all.push_back(t);
  check_claims({0, 4096, 5120, 6144}, many, 192, 48, all);
  check_claims({0, 4096, 5120, 6144}, many, 192, 48, {many - 1});
}

TEST_CASE("RowClaims: a thread takes its own stretch from the front, then others' from the back") {
  // Two threads, 1000 rows: stretches 0..496 and 496..1000 (cut on 16 rows).
  const std::vector<std::int64_t> bounds{0, 1000};
  attn::RowClaims claims(bounds, 2, 192, 48);
  auto expect = [&](int t, std::int64_t begin, std::int64_t end) {
    const attn::RowBlock b = claims.next(t);
    CAPTURE(t);
    CHECK(b.begin == begin);
    CHECK(b.end == end);
  };
  expect(1, 496, 688);
  expect(0, 0, 192);
  expect(1, 688, 880);
  expect(1, 880, 1000);
  expect(1, 448, 496);  // thread 1's stretch is done: it takes thread 0's last 48 rows
  expect(0, 192, 384);
  expect(0, 384, 448);
  CHECK(claims.next(0).end == claims.next(0).begin);
  CHECK(claims.next(1).end == claims.next(1).begin);
}

TEST_CASE("RowClaims: threads asking at once get every row exactly once") {
  for (int threads : {2, 4, 8}) {
    const std::vector<std::int64_t> bounds{0, 4096, 5120, 6144, 20480};
    attn::RowClaims claims(bounds, threads, 192, 48);
    std::vector<std::vector<attn::RowBlock>> got(static_cast<std::size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (attn::RowBlock b = claims.next(t); b.end > b.begin; b = claims.next(t))
          got[std::size_t(t)].push_back(b);
      });
    for (std::thread& th : pool) th.join();
    std::vector<int> seen(std::size_t(bounds.back()), 0);
    for (const auto& blocks : got)
      for (const attn::RowBlock& b : blocks)
        for (std::int64_t r = b.begin; r < b.end; ++r) ++seen[std::size_t(r)];
    CAPTURE(threads);
    for (int count : seen) REQUIRE(count == 1);
  }
}
