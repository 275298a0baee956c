#include "attn/kernels/buffer.hpp"

#include <sys/mman.h>

namespace attn {

void* zeroed_alloc(std::size_t bytes) {
  if (bytes >= kZeroedMapBytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    ::madvise(p, bytes, MADV_NOHUGEPAGE);
    return p;
  }
  void* p = std::calloc(bytes ? bytes : 1, 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void advise_huge_pages(void* p, std::size_t bytes) noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = (begin + kPageBytes - 1) / kPageBytes * kPageBytes;
  const std::uintptr_t end = (begin + bytes) / kPageBytes * kPageBytes;
  if (p != nullptr && end > first)
    ::madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
}

void zeroed_free(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes >= kZeroedMapBytes)
    ::munmap(p, bytes);
  else
    std::free(p);
}

}  // namespace attn
