// libFuzzer harness: the input reader (--input) on any bytes, read from a memfd as the CLI reads
// a file, against the seed config. Refusals (InputError) are expected; anything else is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/engine/run.hpp"
#include "attn/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("attn_fuzz_input", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != ssize_t(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const attn::ModelArgs args = attn::seed_args();
  attn::RunOptions opts{1, 3, 2};
  try {
    const std::vector<float> x = attn::load_input(path, args, opts, false);
    if (x.size() != std::size_t(opts.batch * 5 * args.dim)) __builtin_trap();
  } catch (const attn::InputError&) {
  }
  return 0;
}
