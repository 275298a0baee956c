#pragma once
// Buffers sized by a capacity (the KV cache, per-thread attention scratch, the RoPE table) that
// a run fills only in part. calloc hands large blocks over as untouched zero pages, so such a
// buffer costs memory only where it is written: a cache of 16 M positions for a 3-position run
// costs the 3 positions, not a minute of zeroing and gigabytes of resident memory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace attn {

// From this size on a buffer is its own anonymous mapping: zero pages that cost nothing until
// written, whatever malloc would have done (below glibc's mmap threshold calloc may clear
// memory it reuses, so a smaller buffer counts whole).
constexpr std::size_t kZeroedMapBytes = std::size_t(1) << 20;
constexpr std::uint64_t kPageBytes = 4096;

// What writing the first `used` bytes of each of `runs` equal parts of a FloatBuffer of
// `capacity` bytes costs at most: whole pages, one more per part for its alignment; the whole
// buffer when it is small enough to come from malloc.
inline std::uint64_t written_bytes(std::uint64_t capacity, std::uint64_t runs, std::uint64_t used) {
  if (capacity < kZeroedMapBytes || runs == 0) return capacity;
  const std::uint64_t per_run = (used + kPageBytes - 1) / kPageBytes * kPageBytes + kPageBytes;
  const std::uint64_t n = per_run > capacity / runs ? capacity : runs * per_run;
  return n < capacity ? n : capacity;
}

// `bytes` of zeros (throws std::bad_alloc): its own mapping from kZeroedMapBytes on, without
// transparent huge pages (one written float would cost 2 MiB), else calloc.
void* zeroed_alloc(std::size_t bytes);
void zeroed_free(void* p, std::size_t bytes) noexcept;

// Asks for 2 MiB pages over the whole 4 KiB pages of [p, p + bytes) (madvise(MADV_HUGEPAGE):
// transparent huge pages in `madvise` mode back only memory asked so), before anything is written
// there. For the weights the process holds itself: a decode step streams every weight, and on
// 4 KiB pages the TLB misses cost 5-8% of it (docs/perf/batched-decode.md). Harmless where the
// kernel refuses.
void advise_huge_pages(void* p, std::size_t bytes) noexcept;

template <class T>
struct ZeroedAllocator {
  using value_type = T;
  ZeroedAllocator() = default;
  template <class U>
  ZeroedAllocator(const ZeroedAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(zeroed_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { zeroed_free(p, n * sizeof(T)); }
  // Value-initialising would write every element: calloc's memory already reads as zeros.
  template <class U>
  void construct(U*) noexcept {}
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const ZeroedAllocator&, const ZeroedAllocator&) { return true; }
};

// Zeros that cost memory where they are written.
using FloatBuffer = std::vector<float, ZeroedAllocator<float>>;

}  // namespace attn
