// The Runtime's pool (kernels/pool.hpp): every item runs exactly once, on any slot, at 16 threads
// on this 2-core machine; the caller finishes a job alone when no worker runs; an item's exception
// reaches the caller; a job started inside an item or beside another runs inline; each thread
// claims its own contiguous range in order and steals others' items from their ends.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "attn/kernels/pool.hpp"
#include "attn/kernels/probe.hpp"
#include "attn/kernels/runtime.hpp"

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

// Slot s's share of a job of n items at `slots` slots: [first, end).
struct Share {
  std::int64_t first, end;
};
Share share(std::int64_t n, int slots, int s) {
  return {n * s / slots, n * (s + 1) / slots};
}

// Runs a job of n items, each slot recording the items it ran in the order it ran them (a slot
// is one thread at a time: no lock). `slow`: how long the items of slot 0's share take.
std::vector<std::vector<std::int64_t>> record_job(attn::Pool& pool, std::int64_t n,
                                                  std::chrono::microseconds slow = {}) {
  std::vector<std::vector<std::int64_t>> ran(std::size_t(pool.slots()));
  for (auto& r : ran) r.reserve(std::size_t(n));
  const Share first = share(n, pool.slots(), 0);
  pool.run(n, [&](std::int64_t i, int slot) {
    ran[std::size_t(slot)].push_back(i);
    if (i < first.end && slow.count() > 0) std::this_thread::sleep_for(slow);
  });
  return ran;
}

// The claiming rules, whatever the timing: every item ran once; each slot ran a prefix of its own
// share, in order, before anything else; every item a slot took from another share came from
// that share's end, in descending order, after the items it had taken from it before.
void check_ranges(int slots, std::int64_t n, const std::vector<std::vector<std::int64_t>>& ran) {
  CAPTURE(slots);
  CAPTURE(n);
  std::vector<int> runs(std::size_t(n), 0);
  for (const auto& r : ran)
    for (const std::int64_t i : r) ++runs[std::size_t(i)];
  for (std::int64_t i = 0; i < n; ++i) REQUIRE_MESSAGE(runs[std::size_t(i)] == 1, "item " << i);
  // Per share: the owner's items [first, front) and the thieves' [.., end) must tile it.
  std::vector<std::int64_t> front;
  for (int s = 0; s < slots; ++s) front.push_back(share(n, slots, s).first);
  // The owner's items must precede its thefts; a thief's thefts from one share must descend.
  for (int s = 0; s < slots; ++s) {
    bool stealing = false;
    std::vector<std::int64_t> last_stolen(std::size_t(slots), n);
    for (const std::int64_t i : ran[std::size_t(s)]) {
      int v = 0;
      while (!(share(n, slots, v).first <= i && i < share(n, slots, v).end)) ++v;
      if (v == s) {
        CHECK_MESSAGE(!stealing, "slot " << s << " ran its own item " << i << " after a theft");
        CHECK_MESSAGE(i == front[std::size_t(s)], "slot " << s << " ran " << i << ", not the "
                                                          << "next of its range, "
                                                          << front[std::size_t(s)]);
        front[std::size_t(s)] = i + 1;
      } else {
        stealing = true;
        CHECK_MESSAGE(i < last_stolen[std::size_t(v)],
                      "slot " << s << " stole " << i << " after " << last_stolen[std::size_t(v)]);
        last_stolen[std::size_t(v)] = i;
      }
    }
  }
  for (int v = 0; v < slots; ++v) {
    const Share sh = share(n, slots, v);
    std::int64_t stolen_low = sh.end;
    for (int s = 0; s < slots; ++s)
      if (s != v)
        for (const std::int64_t i : ran[std::size_t(s)])
          if (sh.first <= i && i < sh.end) stolen_low = std::min(stolen_low, i);
    CHECK_MESSAGE(front[std::size_t(v)] == stolen_low,
                  "share " << v << ": the owner ran up to " << front[std::size_t(v)]
                           << ", the thieves from " << stolen_low);
  }
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

// bench's streaming read is compared with the decode steps it runs between, so it runs on their
// threads: as items of the runtime's pool (a second team, OpenMP's, kept spinning on a core after
// the read and slowed the next timed step by a third on a 2-core machine).
TEST_CASE("Pool: bench's streaming read runs as items of the runtime's pool, every pattern") {
  const attn::Runtime rt = attn::make_runtime(2);
  REQUIRE(rt.pool);
  std::vector<float> w(std::size_t(200 * 64), 1.0f);
  const attn::StreamMatrix mats[] = {{w.data(), 130, 64}, {w.data(), 70, 64}};
  for (const attn::ReadPattern& pattern : attn::read_patterns()) {
    CAPTURE(pattern.name);
    rt.pool->reset_work();
    CHECK(attn::stream_read_gbs(rt, mats, pattern) > 0);
    std::int64_t items = 0;
    for (const attn::SlotWork& s : rt.pool->work()) items += s.items;
    CHECK(items == (pattern.interleave == 0 ? 2 : 3 + 2));  // a share per thread; 64-row blocks
  }
}

TEST_CASE("Pool: each thread runs its own contiguous range in order, and steals from the ends") {
  for (const int slots : {1, 2, 3, 8}) {
    attn::Pool pool(slots);
    for (int round = 0; round < 10; ++round)
      for (const std::int64_t n :
           {std::int64_t(0), std::int64_t(1), std::int64_t(2), std::int64_t(slots - 1),
            std::int64_t(slots + 1), std::int64_t(1000)}) {
        check_job(pool, n);
        check_ranges(slots, n, record_job(pool, n));
      }
  }
}

TEST_CASE(
    "Pool: with no worker running, the caller runs its range, then the others' from the end") {
  for (const int slots : {2, 3, 8}) {
    attn::Pool pool(slots, /*start_workers=*/false);
    for (const std::int64_t n : {std::int64_t(2), std::int64_t(slots - 1), std::int64_t(slots + 1),
                                 std::int64_t(11), std::int64_t(1000)}) {
      const auto ran = record_job(pool, n);
      check_ranges(slots, n, ran);
      CHECK(std::int64_t(ran[0].size()) == n);
      // Its own share first, in order; then, with two slots, the worker's from the end down.
      const Share own = share(n, slots, 0);
      for (std::int64_t i = 0; i < std::min<std::int64_t>(n, own.end); ++i)
        CHECK(ran[0][std::size_t(i)] == i);
      if (slots == 2)
        for (std::int64_t i = own.end; i < n; ++i)
          CHECK(ran[0][std::size_t(i)] == n - 1 - (i - own.end));
    }
  }
}

TEST_CASE("Pool: a worker done with its range takes the caller's last items") {
  attn::Pool pool(2);
  // The caller's share takes 1 ms an item, the worker's none: an awake worker finishes its own
  // range at once and steals from the end of the caller's. On a busy machine the worker may not
  // wake within the job, so a few rounds are allowed.
  bool stole = false;
  for (int round = 0; round < 10 && !stole; ++round) {
    const auto ran = record_job(pool, 16, std::chrono::milliseconds(1));
    check_ranges(2, 16, ran);
    for (const std::int64_t i : ran[1]) stole = stole || i < 8;
  }
  CHECK(stole);
}
