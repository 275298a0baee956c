#include "attn/io/signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace attn {

namespace {

constexpr int kSlots = 16;
constexpr std::size_t kPathMax = 4096;

// Fixed slots, published by an atomic pointer after the path is written: the handler reads
// them without locks or allocation.
struct Slot {
  std::atomic<const void*> key{nullptr};
  std::uint64_t size = 0;
  char path[kPathMax] = {};
};

Slot g_mappings[kSlots];
Slot g_temps[kSlots];
std::mutex g_mutex;  // between registering threads only, never taken in a handler

void put(const char* s) {
  ssize_t r = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)r;
}

void on_sigbus(int sig, siginfo_t* info, void*) {
  const auto* addr = static_cast<const char*>(info->si_addr);
  for (const Slot& s : g_mappings) {
    const auto* base = static_cast<const char*>(s.key.load(std::memory_order_acquire));
    if (base != nullptr && addr >= base && addr < base + s.size) {
      put("attn-cli: error: ");
      put(s.path);
      put(": the file shrank while the run had it mapped (truncated or rewritten under it); "
          "the run cannot go on\n");
      ::_exit(1);
    }
  }
  ::signal(sig, SIG_DFL);  // not ours: the default action
  ::raise(sig);
}

void on_terminate(int sig) {
  for (const Slot& s : g_temps)
    if (s.key.load(std::memory_order_acquire) != nullptr) ::unlink(s.path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Installed at every registration (rare and cheap), so a handler someone else set since (a test
// framework's, say) does not hide ours.
void install() {
  {
    struct sigaction bus {};
    bus.sa_sigaction = on_sigbus;
    bus.sa_flags = SA_SIGINFO;
    sigemptyset(&bus.sa_mask);
    ::sigaction(SIGBUS, &bus, nullptr);
    // A file-size limit (`ulimit -f`) makes write() fail with EFBIG, an error the writer
    // reports and cleans up after, instead of a kill that leaves the temporary file.
    ::signal(SIGXFSZ, SIG_IGN);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
      struct sigaction old {};
      ::sigaction(sig, nullptr, &old);
      if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring
      struct sigaction term {};
      term.sa_handler = on_terminate;
      sigemptyset(&term.sa_mask);
      ::sigaction(sig, &term, nullptr);
    }
  }
}

void add(Slot (&slots)[kSlots], const void* key, std::uint64_t size, const char* path) {
  install();
  std::lock_guard lock(g_mutex);
  for (Slot& s : slots)
    if (s.key.load() == nullptr) {
      std::strncpy(s.path, path, kPathMax - 1);
      s.size = size;
      s.key.store(key, std::memory_order_release);
      return;
    }
  // All slots taken: this one goes unwatched (at most a plain SIGBUS or a left temp file).
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

void remove_on_signal(const char* path) {
  add(g_temps, path, 0, path);
}

void forget_temp_file(const char* path) {
  remove_path(g_temps, path);
}

}  // namespace attn
