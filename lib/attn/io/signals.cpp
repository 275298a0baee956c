#include "attn/io/signals.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace attn {

namespace {

constexpr int kSlots = 16;
constexpr std::size_t kPathMax = 4096;

// Fixed slots, published by an atomic pointer after the path is written: a signal handler reads
// them without locks or allocation.
struct Slot {
  std::atomic<const void*> key{nullptr};
  std::uint64_t size = 0;
  char path[kPathMax] = {};
};
static_assert(std::atomic<const void*>::is_always_lock_free, "a handler reads the slots");

Slot g_mappings[kSlots];
Slot g_temps[kSlots];
std::mutex g_mutex;  // between registering threads only, never taken in a handler

void add(Slot (&slots)[kSlots], const void* key, std::uint64_t size, const char* path) {
  std::lock_guard lock(g_mutex);
  for (Slot& s : slots)
    if (s.key.load() == nullptr) {
      std::strncpy(s.path, path, kPathMax - 1);
      s.size = size;
      s.key.store(key, std::memory_order_release);
      return;
    }
  // All slots taken: this one goes unwatched (at most a plain SIGBUS or a left temporary file).
}

void remove(Slot (&slots)[kSlots], const void* key) {
  std::lock_guard lock(g_mutex);
  for (Slot& s : slots)
    if (s.key.load() == key) s.key.store(nullptr, std::memory_order_release);
}

// Temporary files are known by their path's text (the string holding it may move).
void remove_path(Slot (&slots)[kSlots], const char* path) {
  std::lock_guard lock(g_mutex);
  for (Slot& s : slots)
    if (s.key.load() != nullptr && std::strncmp(s.path, path, kPathMax - 1) == 0)
      s.key.store(nullptr, std::memory_order_release);
}

}  // namespace

void watch_mapping(const void* base, std::uint64_t size, const char* path) {
  add(g_mappings, base, size, path);
}

void unwatch_mapping(const void* base) {
  remove(g_mappings, base);
}

void watch_temp_file(const char* path) {
  add(g_temps, path, 0, path);
}

void forget_temp_file(const char* path) {
  remove_path(g_temps, path);
}

const char* mapped_file_at(const void* addr) noexcept {
  const auto* a = static_cast<const char*>(addr);
  for (const Slot& s : g_mappings) {
    const auto* base = static_cast<const char*>(s.key.load(std::memory_order_acquire));
    if (base != nullptr && a >= base && a < base + s.size) return s.path;
  }
  return nullptr;
}

void remove_temp_files() noexcept {
  for (const Slot& s : g_temps)
    if (s.key.load(std::memory_order_acquire) != nullptr) ::unlink(s.path);
}

}  // namespace attn
