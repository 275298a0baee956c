#pragma once
// Counts every operator new (and its bytes) of the test binary that includes it (once per
// binary: it replaces the global operators). AddressSanitizer owns operator new and counts
// allocations of its own (thread-local set-up, its caches), so the counting exists only without it;
// the Release run of the suite has it. Tests read g_allocations before and after the code that must
// not allocate.
#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_allocations{0};
std::atomic<long> g_allocated_bytes{0};  // what they asked for, summed
}  // namespace

#if !defined(__SANITIZE_ADDRESS__)
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  g_allocated_bytes.fetch_add(long(n), std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
#endif
