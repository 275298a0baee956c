#pragma once
// What a signal handler needs to know, kept for a front that installs one. The library installs
// no handler itself: signal dispositions belong to the process (a Python interpreter turns
// SIGINT into KeyboardInterrupt, a Jupyter kernel into an interrupt), so a library that took
// them would end its host. It only keeps, in fixed slots a handler can read without locks or
// allocation, which files are mapped and which temporary files are being written; a program
// that wants SIGBUS on a shrunk mapping to name the file, or SIGINT to leave no temporary file
// behind, calls mapped_file_at and remove_temp_files from its own handlers (attn-cli:
// apps/signals.cpp).
#include <cstdint>

namespace attn {

// A read-only mapping of `path`, [base, base + size), live until unwatch_mapping(base).
void watch_mapping(const void* base, std::uint64_t size, const char* path);
void unwatch_mapping(const void* base);

// The temporary file being written, from creation until forget_temp_file(path) (matched by the
// path's text: the string holding it may move).
void watch_temp_file(const char* path);
void forget_temp_file(const char* path);

// Async-signal-safe. The path of the watched mapping holding `addr` (a SIGBUS's si_addr), or
// nullptr when no watched mapping holds it.
const char* mapped_file_at(const void* addr) noexcept;

// Async-signal-safe. Unlinks every temporary file being written, for a handler that then ends
// the process; the writers' own cleanup on unwinding is unaffected.
void remove_temp_files() noexcept;

}  // namespace attn
