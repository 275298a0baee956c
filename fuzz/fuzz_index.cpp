// libFuzzer harness: a Hugging Face model.safetensors.index.json on any text. Refusals
// (InputError) are expected; anything else, a crash or a sanitizer report is a finding. The
// shard files it names do not exist: asking for a tensor must be refused, not crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/error.hpp"
#include "attn/io/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    attn::Checkpoint c = attn::parse_index(std::string(reinterpret_cast<const char*>(data), size),
                                           "/nonexistent/model.safetensors.index.json");
    if (!c.weight_map.empty()) c.info(c.weight_map.begin()->first);
  } catch (const attn::InputError&) {
  }
  return 0;
}
