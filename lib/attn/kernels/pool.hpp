#pragma once
// The threads of one Runtime (engine-internal, not installed): a job is n items, cut into one
// contiguous range per slot. Each thread claims its own range's items front to back, one at a
// time, so the weight rows it reads are one stream and its look-ahead past an item asks for its
// own next item (alternate 64-row items ran Q4_K 3% and Q6_K 6% slower than one stream, and
// started each item's prefetch cold: docs/perf/pool.md, "Contiguous ranges with stealing"). A
// thread whose range is done takes items one at a time from the end of the fullest other range,
// so the tails balance. The caller runs items too, and every item no worker has claimed: it waits
// only for items a running worker has claimed, never for a worker that has not started or has no
// core (its range is stolen by the caller). With OpenMP's teams each parallel region waited at its
// barrier for every thread of the team, and on a busy machine a thread without a core cost a
// scheduler slice per region (docs/perf/pool.md).
// Workers spin briefly after a job, then sleep on a futex (std::atomic::wait); a call allocates
// nothing. An exception thrown by an item reaches the caller (the first one; the items not yet
// started are skipped). Which thread runs an item must not change a result: an item may use
// per-thread scratch only through the slot it is given (0: the caller, 1..slots-1: workers).
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace attn {

// What one slot ran since the last reset: the items, and the flops the items reported.
struct SlotWork {
  std::int64_t items = 0, flops = 0;
};

class Pool {
 public:
  // slots: the caller plus slots - 1 workers, started at the first job that has more than one
  // item. start_workers false: the workers are never started, so the caller runs every item
  // (tests: a job finishes without them).
  explicit Pool(int slots, bool start_workers = true);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Jobs of more items run on the calling thread alone (a range word holds 24-bit indices).
  static constexpr std::int64_t kMaxItems = (std::int64_t(1) << 24) - 1;

  int slots() const { return slots_; }

  // Runs item(i, slot) once for each i in [0, n), on the caller and the workers; returns when all
  // have run. item returns the flops it did (counted per slot, for bench) or nothing. A job
  // started while another runs on this pool (a second caller thread, or an item of a job) runs
  // all its items on the calling thread, under the slot that thread has.
  template <typename F>
  void run(std::int64_t n, F&& item) {
    using Fn = std::remove_reference_t<F>;
    run_items(
        n,
        [](void* f, std::int64_t i, int slot) -> std::int64_t {
          if constexpr (std::is_void_v<std::invoke_result_t<Fn&, std::int64_t, int>>) {
            (*static_cast<Fn*>(f))(i, slot);
            return 0;
          } else {
            return std::int64_t((*static_cast<Fn*>(f))(i, slot));
          }
        },
        const_cast<void*>(static_cast<const void*>(&item)));
  }

  // The work of each slot since the last reset_work (or construction); [slots].
  std::vector<SlotWork> work() const;
  void reset_work();

  // The slot of the calling thread: its worker's number inside a job's item, else 0.
  static int current_slot();

 private:
  using ItemFn = std::int64_t (*)(void*, std::int64_t, int);
  struct alignas(64) Counter {  // one cache line per slot: no false sharing between threads
    std::atomic<std::int64_t> items{0}, flops{0};
  };
  // A slot's range of the current job in one word: the job's generation (16 bits), the first
  // unclaimed item and the end (24 bits each). The owner claims at the front, thieves at the end,
  // each by one compare-and-swap of the word, so a thread that wakes late can only claim an item
  // of the job that is running, never one of a finished job's ranges.
  struct alignas(64) Range {
    std::atomic<std::uint64_t> word{0};
  };

  void run_items(std::int64_t n, ItemFn fn, void* ctx);
  void run_inline(std::int64_t n, ItemFn fn, void* ctx);
  void start();
  void worker(int slot);
  // Claims and runs the current job's items until none is left unclaimed: its own range's from
  // the front, then the others' from their ends.
  void take(int slot);
  // The first unclaimed item of slot v's range in job gen, claimed; -1 when none is left.
  std::int64_t claim_front(int v, std::uint64_t gen);
  // The last unclaimed item of the fullest range but slot's own in job gen, claimed; -1: none.
  std::int64_t steal(int slot, std::uint64_t gen);

  const int slots_;
  const bool start_workers_;
  bool started_ = false;
  std::vector<std::thread> threads_;
  std::unique_ptr<Counter[]> work_;

  std::atomic<bool> busy_{false};    // a job is running: a second one runs inline
  std::unique_ptr<Range[]> ranges_;  // [slots]
  // The job: its generation (16 bits, as in its ranges) and its item count, stored after the
  // ranges: a worker that reads it sees them.
  alignas(64) std::atomic<std::uint64_t> job_{0};
  std::atomic<ItemFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  alignas(64) std::atomic<std::uint32_t> finished_{0};  // items of the job run (or skipped)
  std::atomic<bool> caller_sleeps_{false};
  alignas(64) std::atomic<std::uint32_t> gen_{0};  // the workers wait for it to change
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace attn
