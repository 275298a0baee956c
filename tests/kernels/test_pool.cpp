// The Runtime's pool (kernels/pool.hpp) and how a prefill product is cut into its items
// (kernels/detail/prefill_items.hpp): every item runs exactly once, on any slot, at 16 threads on
// this 2-core machine; the caller finishes a job alone when no worker runs; an item's exception
// reaches the caller; a job started inside an item or beside another runs inline; the prefill's
// items cover every output once, inside one projection, small ones last, and many enough for 16
// threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "attn/kernels/detail/prefill_items.hpp"
#include "attn/kernels/pool.hpp"

namespace {

// Runs a job of n items on the pool; checks each ran once, on a slot in range, and that the
// pool's counters grew by the items and the flops the items reported.
void check_job(attn::Pool& pool, std::int64_t n) {
  std::vector<std::atomic<int>> runs(std::size_t(n + 1));
  std::atomic<bool> bad_slot{false};
  pool.reset_work();
  pool.run(n, [&](std::int64_t i, int slot) -> std::int64_t {
    runs[std::size_t(i)].fetch_add(1);
    if (slot < 0 || slot >= pool.slots() || attn::Pool::current_slot() != slot) bad_slot = true;
    return i + 1;
  });
  CHECK_FALSE(bad_slot.load());
  int wrong = 0;
  for (std::int64_t i = 0; i < n; ++i) wrong += runs[std::size_t(i)].load() != 1;
  CHECK_MESSAGE(wrong == 0, n << " items: " << wrong << " did not run exactly once");
  std::int64_t items = 0, flops = 0;
  for (const attn::SlotWork& w : pool.work()) {
    items += w.items;
    flops += w.flops;
  }
  CHECK(items == n);
  CHECK(flops == n * (n + 1) / 2);
}

}  // namespace

TEST_CASE("Pool: every item exactly once at 16 threads on 2 cores, job after job") {
  attn::Pool pool(16);
  for (int round = 0; round < 20; ++round)
    for (std::int64_t n : {0, 1, 2, 3, 15, 16, 17, 64, 1000}) check_job(pool, n);
}

TEST_CASE("Pool: the items of a job spread over more than one thread when they take time") {
  attn::Pool pool(4);
  // Items of 2 ms each: on an idle machine the workers claim some within the first item; on a
  // busy one they may not, so the check allows a few rounds before it fails.
  bool spread = false;
  for (int round = 0; round < 10 && !spread; ++round) {
    pool.reset_work();
    pool.run(16,
             [](std::int64_t, int) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
    int used = 0;
    for (const attn::SlotWork& w : pool.work()) used += w.items > 0;
    spread = used > 1;
  }
  CHECK(spread);
}

TEST_CASE("Pool: with no worker running, the caller runs every item and does not wait") {
  attn::Pool pool(8, /*start_workers=*/false);
  check_job(pool, 100);
  const std::vector<attn::SlotWork> w = pool.work();
  CHECK(w[0].items == 100);
  for (std::size_t s = 1; s < w.size(); ++s) CHECK(w[s].items == 0);
}

TEST_CASE("Pool: an item's exception reaches the caller, and the pool runs on") {
  attn::Pool pool(16);
  for (std::int64_t bad : {0, 7, 99}) {
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH_AS(pool.run(100,
                                  [&](std::int64_t i, int) {
                                    if (i == bad) throw std::runtime_error("item failed");
                                    ran.fetch_add(1);
                                  }),
                         "item failed", std::runtime_error);
    CHECK(ran.load() < 100);
    check_job(pool, 50);
  }
}

TEST_CASE("Pool: a job inside an item runs inline on the item's slot") {
  attn::Pool pool(16);
  std::atomic<int> inner{0}, wrong_slot{0};
  pool.run(32, [&](std::int64_t, int slot) {
    pool.run(8, [&](std::int64_t, int s) {
      inner.fetch_add(1);
      if (s != slot) wrong_slot.fetch_add(1);
    });
  });
  CHECK(inner.load() == 32 * 8);
  CHECK(wrong_slot.load() == 0);
}

TEST_CASE("Pool: two threads calling one pool at once both finish, each item once") {
  attn::Pool pool(4);
  std::vector<std::atomic<int>> a(500), b(500);
  std::thread other([&] {
    for (int r = 0; r < 50; ++r)
      pool.run(10, [&](std::int64_t i, int) { b[std::size_t(r * 10 + i)].fetch_add(1); });
  });
  for (int r = 0; r < 50; ++r)
    pool.run(10, [&](std::int64_t i, int) { a[std::size_t(r * 10 + i)].fetch_add(1); });
  other.join();
  for (std::size_t i = 0; i < 500; ++i) {
    if (a[i].load() != 1 || b[i].load() != 1)
      FAIL_CHECK("item " << i << " ran " << a[i] << ", " << b[i]);
  }
}

namespace {

// Cuts the projections of widths `ns` (M rows) for `threads` and checks: every (row, feature) of
// every projection is covered exactly once, blocks stay inside their projection, no block is wider
// than `big`, x's rows are cut on 8-row panels (kGemmMR) only when cut_rows, and the last 2 *
// threads items (when the last projection is wide enough to hold them) are no wider than `small`.
attn::PrefillItems check_items(const std::vector<std::int64_t>& ns, std::int64_t M, int threads,
                               bool cut_rows) {
  constexpr std::int64_t big = attn::kGemmNC, small = attn::kGemmSteal;
  std::vector<attn::Projection> ps;
  for (std::int64_t n : ns) ps.push_back({nullptr, attn::Matrix(), nullptr, n});
  const attn::PrefillItems items(ps, M, threads, big, small, cut_rows);
  // Counted per 8-row panel of x (a block's rows start on one and end on one or at M): what
  // per row counted made the sanitized run slow, with the same answer.
  constexpr std::int64_t mr = attn::kGemmMR;
  const std::int64_t panels = (M + mr - 1) / mr;
  std::vector<std::vector<int>> cover;
  for (std::int64_t n : ns) cover.emplace_back(std::size_t(n * panels), 0);
  int bad = 0;
  const std::int64_t count = items.count();
  for (std::int64_t i = 0; i < count; ++i) {
    const attn::PrefillBlock b = items.at(i, ps);
    const bool ok = b.part < ns.size() && b.n0 >= 0 && b.n0 < b.n1 && b.n1 <= ns[b.part] &&
                    b.n1 - b.n0 <= big && b.m0 >= 0 && b.m0 < b.m1 && b.m1 <= M && b.m0 % mr == 0 &&
                    (b.m1 % mr == 0 || b.m1 == M) && (cut_rows || (b.m0 == 0 && b.m1 == M));
    if (!ok) {
      if (++bad < 5)
        FAIL_CHECK("item " << i << ": part " << b.part << " features " << b.n0 << ".." << b.n1
                           << " rows " << b.m0 << ".." << b.m1);
      continue;
    }
    for (std::int64_t m = b.m0 / mr; m < (b.m1 + mr - 1) / mr; ++m)
      for (std::int64_t j = b.n0; j < b.n1; ++j) ++cover[b.part][std::size_t(m * ns[b.part] + j)];
    const std::int64_t from_end = items.first[items.parts] - i / items.m_chunks;
    if (from_end <= 2 * threads && ns.back() >= 2 * threads * small && b.part + 1 == ns.size() &&
        b.n1 - b.n0 > small)
      FAIL_CHECK("item " << i << ", " << from_end << " from the end, is " << b.n1 - b.n0
                         << " wide");
  }
  for (std::size_t p = 0; p < ns.size(); ++p)
    CHECK_MESSAGE(std::count(cover[p].begin(), cover[p].end(), 1) == std::int64_t(cover[p].size()),
                  "projection " << p << " of " << ns[p] << " features, " << M << " rows, "
                                << threads << " threads: not every output covered once");
  return items;
}

}  // namespace

TEST_CASE("PrefillItems: every output once, inside its projection, small blocks last") {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {5},                 // narrower than a panel
      {4096, 1024, 1024},  // wq, wk, wv of the 8B layer
      {100, 1124, 2124},   // off the block grid
      {1, 2, 3, 700},      // one-feature projections
      {0, 48, 0},          // empty ones
      {14336, 14336},      // w1, w3
      {512},
      {192},
      {193},
      {191}};
  for (const auto& ns : shapes)
    for (std::int64_t M : {33, 40, 64, 129, 512})
      for (int threads : {1, 2, 3, 16})
        for (bool cut : {false, true}) check_items(ns, M, threads, cut);
}

TEST_CASE("PrefillItems: enough items for 16 threads, and on 2 threads x's rows stay whole") {
  // The 8B layer's q, k, v at 512 positions: 34 feature blocks, too few for 16 threads at 4 each.
  const attn::PrefillItems sixteen = check_items({4096, 1024, 1024}, 512, 16, true);
  CHECK(sixteen.m_chunks > 1);
  CHECK(sixteen.count() >= 4 * 16);
  const attn::PrefillItems two = check_items({4096, 1024, 1024}, 512, 2, true);
  CHECK(two.m_chunks == 1);
  // dim 512 at 64 positions: 11 panel-wide blocks (all of it is the tail at 16 threads), x's 8
  // panels in 4 chunks of 2 (6 wanted, cut evenly): 44 items.
  const attn::PrefillItems small = check_items({512}, 64, 16, true);
  CHECK(small.m_chunks == 4);
  CHECK(small.count() == 44);
}
