// libFuzzer harness: a cache session file (--load-session, Python's load_session) of any bytes,
// loaded into one small engine with drawn weights (fuzz/seeds/session/config.json, seed 42: the
// model fuzz/run.sh saves its seed sessions with), then continued for one step when accepted.
// Refusals (InputError) are expected; anything else, a crash, a hang or a sanitizer report is a
// finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/engine/session.hpp"
#include "attn/error.hpp"

namespace {

attn::Session& engine() {
  static attn::Session e = [] {
    attn::ModelSpec spec;
    spec.config = ATTN_SESSION_CONFIG;
    spec.seed = 42;
    spec.threads = 1;
    return attn::open_session(spec, {1, 0, 1});
  }();
  return e;
}

// The input as a file the loader maps: one memory file, rewritten for each input.
const std::string& input_path(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("fuzz_session", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != ssize_t(size)) __builtin_trap();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  attn::Session& e = engine();
  const std::string& path = input_path(data, size);
  try {
    attn::load_cache_session(e, path);
    attn::generate(e, {}, 1, {}, {}, false, [](const attn::Generated&) {});
  } catch (const attn::InputError&) {
  }
  attn::reset(e);
  return 0;
}
