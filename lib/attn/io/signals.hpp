#pragma once
// What a signal must not leave behind. SIGBUS on a mapped weights file (it shrank under the run)
// becomes a message naming the file and exit status 1 instead of a silent kill; SIGINT, SIGTERM
// and SIGHUP remove the temporary file of an output being written, then end the process as the
// signal would. Handlers are installed on first use and do only async-signal-safe work.
#include <cstdint>

namespace attn {

// A read-only mapping of `path`, [base, base + size): a SIGBUS inside it names the file.
void watch_mapping(const void* base, std::uint64_t size, const char* path);
void unwatch_mapping(const void* base);

// The temporary file being written: removed if SIGINT, SIGTERM, SIGHUP or SIGPIPE arrives
// before forget_temp_file(path) (matched by the path's text). Registering also ignores SIGXFSZ,
// so a write past a file-size limit fails with EFBIG instead of killing the process.
void remove_on_signal(const char* path);
void forget_temp_file(const char* path);

}  // namespace attn
