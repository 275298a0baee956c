// libFuzzer harness: the config parser on any text. Refusals (InputError) are expected; any
// other exception (a JSON library error escaping as exit status 1), a crash or a sanitizer
// report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/error.hpp"
#include "attn/model/config.hpp"
#include "attn/model/memory.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const attn::ModelArgs a =
        attn::parse_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    // What the CLI does next with an accepted config: the memory estimate, in 64 bits.
    attn::check_memory(attn::memory_parts(a, {1, 7, 3, 7, 2, true}), {1ull << 30, "fuzz"});
  } catch (const attn::InputError&) {
  }
  return 0;
}
