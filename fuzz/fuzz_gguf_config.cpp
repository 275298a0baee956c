// libFuzzer harness: a GGUF's metadata read as a model config (gguf_config) on any bytes the
// GGUF reader accepts, then what the engine does next with an accepted config: the printed keys
// and the memory estimate, in 64 bits. Refusals (InputError) are expected; a crash, a sanitizer
// report or any other exception is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/model/config.hpp"
#include "attn/model/memory.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const attn::GgufFile f = attn::parse_gguf(std::span<const std::uint8_t>(data, size), "fuzz");
    const attn::ModelArgs a = attn::gguf_config(f);
    attn::config_values(a);
    attn::check_memory(attn::memory_parts(a, {1, 7, 3, 7, 2, true}), {1ull << 30, "fuzz"});
  } catch (const attn::InputError&) {
  }
  return 0;
}
