#include "attn/kernels/pool.hpp"

#include <chrono>
#include <system_error>

namespace attn {

namespace {

thread_local int tls_slot = 0;

// A worker spins this long after its last item for the next job before it sleeps: the products of
// a decode step follow each other within microseconds, and a futex wake costs a few. Past the
// first microseconds the spin yields, so that on a core shared with the caller (a busy machine)
// the caller runs instead (docs/perf/pool.md). 200 us, not 50: the caller's RoPE and attention
// between q/k/v and wo take about 100 us at 2 threads (a Llama-3-8B layer), and a worker asleep
// by then joined wo 27-32 us late under KVM, the caller alone meanwhile (docs/perf/quant-types.md,
// "round two").
constexpr std::int64_t kWorkerSpinNs = 200'000;
// The caller spins this long for the items running workers still hold, then sleeps until the last
// one ends.
constexpr std::int64_t kCallerSpinNs = 20'000;
constexpr std::int64_t kPauseOnlyNs = 2'000;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins (pause, then yield) until done() or ns nanoseconds have passed; done()'s last value.
template <typename Done>
bool spin_until(Done done, std::int64_t ns) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  for (std::int64_t i = 1;; ++i) {
    if (done()) return true;
    if (i % 32 == 0) {
      const std::int64_t spent =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
      if (spent > ns) return false;
      if (spent > kPauseOnlyNs) std::this_thread::yield();
    }
    cpu_relax();
  }
}

constexpr int kIndexBits = 24;
constexpr std::uint64_t kIndexMask = (std::uint64_t(1) << kIndexBits) - 1;

constexpr std::uint64_t kGenMask = 0xFFFF;
constexpr std::uint64_t kFront = std::uint64_t(1) << kIndexBits;  // one item off a range's front

// A range word (Pool::Range) or the job word (generation and item count).
std::uint64_t pack(std::uint64_t gen, std::uint64_t first, std::uint64_t end) {
  return (gen & kGenMask) << (2 * kIndexBits) | first << kIndexBits | end;
}
std::uint64_t gen_of(std::uint64_t word) {
  return word >> (2 * kIndexBits);
}
std::uint64_t first_of(std::uint64_t word) {
  return (word >> kIndexBits) & kIndexMask;
}
std::uint64_t end_of(std::uint64_t word) {
  return word & kIndexMask;
}

}  // namespace

Pool::Pool(int slots, bool start_workers)
    : slots_(slots < 1 ? 1 : slots),
      start_workers_(start_workers),
      work_(std::make_unique<Counter[]>(std::size_t(slots_))),
      ranges_(std::make_unique<Range[]>(std::size_t(slots_))) {}

Pool::~Pool() {
  stop_.store(true);
  gen_.fetch_add(1);
  gen_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int Pool::current_slot() {
  return tls_slot;
}

std::vector<SlotWork> Pool::work() const {
  std::vector<SlotWork> out(static_cast<std::size_t>(slots_));
  for (int s = 0; s < slots_; ++s)
    out[std::size_t(s)] = {work_[std::size_t(s)].items.load(std::memory_order_relaxed),
                           work_[std::size_t(s)].flops.load(std::memory_order_relaxed)};
  return out;
}

void Pool::reset_work() {
  for (int s = 0; s < slots_; ++s) {
    work_[std::size_t(s)].items.store(0, std::memory_order_relaxed);
    work_[std::size_t(s)].flops.store(0, std::memory_order_relaxed);
  }
}

// The workers start at the first job and the caller does not wait for them: a job that begins
// before they run is the caller's alone. A worker that cannot be created is done without.
void Pool::start() {
  started_ = true;
  if (!start_workers_) return;
  threads_.reserve(std::size_t(slots_ - 1));
  for (int s = 1; s < slots_; ++s) {
    try {
      threads_.emplace_back([this, s] { worker(s); });
    } catch (const std::system_error&) {
      break;
    }
  }
}

void Pool::worker(int slot) {
  tls_slot = slot;
  std::uint32_t seen = gen_.load(std::memory_order_acquire);
  for (;;) {
    // stop_ too: a worker that starts after the destructor moved gen_ on has it as `seen`.
    auto ready = [&] { return gen_.load(std::memory_order_acquire) != seen || stop_.load(); };
    if (!spin_until(ready, kWorkerSpinNs)) {
      sleepers_.fetch_add(1);
      while (gen_.load() == seen && !stop_.load()) gen_.wait(seen);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = gen_.load(std::memory_order_acquire);
    take(slot);
  }
}

std::int64_t Pool::claim_front(int v, std::uint64_t gen) {
  std::atomic<std::uint64_t>& word = ranges_[std::size_t(v)].word;
  std::uint64_t s = word.load(std::memory_order_acquire);
  do {
    if (gen_of(s) != gen || first_of(s) >= end_of(s)) return -1;
  } while (!word.compare_exchange_weak(s, s + kFront, std::memory_order_acq_rel,
                                       std::memory_order_acquire));
  return std::int64_t(first_of(s));
}

// One item at a time, not half a range: a thief that loses its core between taking items and
// publishing them as its own would hold them, and the caller would wait for it.
std::int64_t Pool::steal(int slot, std::uint64_t gen) {
  for (;;) {
    int victim = -1;
    std::uint64_t s = 0, most = 0;
    for (int d = 1; d < slots_; ++d) {
      const int v = (slot + d) % slots_;
      const std::uint64_t w = ranges_[std::size_t(v)].word.load(std::memory_order_acquire);
      if (gen_of(w) != gen || first_of(w) >= end_of(w)) continue;
      if (const std::uint64_t left = end_of(w) - first_of(w); left > most)
        victim = v, s = w, most = left;
    }
    if (victim < 0) return -1;
    // Fails when the owner or another thief moved the range meanwhile: look again.
    if (ranges_[std::size_t(victim)].word.compare_exchange_strong(
            s, s - 1, std::memory_order_acq_rel, std::memory_order_acquire))
      return std::int64_t(end_of(s) - 1);
  }
}

void Pool::take(int slot) {
  Counter& work = work_[std::size_t(slot)];
  const std::uint64_t job = job_.load(std::memory_order_acquire);
  const std::uint64_t gen = gen_of(job), n = end_of(job);
  bool own = true;  // a range only shrinks: once empty, it stays so for the job
  for (;;) {
    std::int64_t i = own ? claim_front(slot, gen) : -1;
    if (i < 0) {
      own = false;
      if ((i = steal(slot, gen)) < 0) return;
    }
    // Item i is ours: the job cannot end before it is counted finished, so its function and
    // context (stored before its ranges were published) are still the ones we read.
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        const std::int64_t flops =
            fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), i, slot);
        work.items.fetch_add(1, std::memory_order_relaxed);
        work.flops.fetch_add(flops, std::memory_order_relaxed);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_relaxed);
      }
    }
    if (finished_.fetch_add(1) + 1 == n && caller_sleeps_.load()) finished_.notify_one();
  }
}

void Pool::run_inline(std::int64_t n, ItemFn fn, void* ctx) {
  const int slot = tls_slot < slots_ ? tls_slot : 0;  // a worker of another pool counts as 0
  Counter& work = work_[std::size_t(slot)];
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t flops = fn(ctx, i, slot);
    work.items.fetch_add(1, std::memory_order_relaxed);
    work.flops.fetch_add(flops, std::memory_order_relaxed);
  }
}

void Pool::run_items(std::int64_t n, ItemFn fn, void* ctx) {
  if (n <= 0) return;
  if (n == 1 || slots_ == 1 || n > kMaxItems || busy_.exchange(true, std::memory_order_acquire))
    return run_inline(n, fn, ctx);
  if (!started_) start();
  failed_.store(false, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  fn_.store(fn, std::memory_order_relaxed);
  ctx_.store(ctx, std::memory_order_relaxed);
  // Slot s's share: items n*s/slots .. n*(s+1)/slots. Each range published is claimable from
  // here; the job word, stored last, tells a worker the generation whose ranges to take from.
  const std::uint64_t gen = (gen_of(job_.load(std::memory_order_relaxed)) + 1) & kGenMask;
  const std::uint64_t items = std::uint64_t(n), slots = std::uint64_t(slots_);
  for (std::uint64_t s = 0; s < slots; ++s)
    ranges_[s].word.store(pack(gen, items * s / slots, items * (s + 1) / slots));
  job_.store(pack(gen, 0, items));
  gen_.fetch_add(1);
  if (sleepers_.load() > 0) gen_.notify_all();
  const int outer =
      std::exchange(tls_slot, 0);  // the caller is slot 0 (it may be another pool's worker)
  take(0);
  tls_slot = outer;
  // Every item is claimed; wait for the ones running workers hold.
  const std::uint32_t all = std::uint32_t(n);
  auto done = [&] { return finished_.load(std::memory_order_acquire) == all; };
  if (!spin_until(done, kCallerSpinNs)) {
    caller_sleeps_.store(true);
    for (std::uint32_t f; (f = finished_.load()) != all;) finished_.wait(f);
    caller_sleeps_.store(false);
  }
  std::exception_ptr error;
  if (failed_.load(std::memory_order_relaxed)) {
    const std::lock_guard<std::mutex> lock(error_mutex_);
    error = std::exchange(error_, nullptr);
  }
  busy_.store(false, std::memory_order_release);
  if (error) std::rethrow_exception(error);
}

}  // namespace attn
