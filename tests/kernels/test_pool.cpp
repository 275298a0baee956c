// The Runtime's pool (kernels/pool.hpp): every item runs exactly once, on any slot, at 16 threads
// on this 2-core machine; the caller finishes a job alone when no worker runs; an item's exception
// reaches the caller; a job started inside an item or beside another runs inline.
#include <doctest/doctest.h>

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
