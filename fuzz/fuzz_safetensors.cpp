// libFuzzer harness: the safetensors header parser on any bytes. Refusals (InputError) are the
// expected outcome; a crash, a sanitizer report or any other exception is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const attn::SafetensorsHeader h = attn::parse_safetensors({data, size}, "fuzz");
    for (const auto& [name, t] : h.tensors) {
      // Every accepted tensor lies inside the file and its byte count matches its shape.
      if (h.data_start + t.end > size || t.end < t.begin) __builtin_trap();
      if (std::uint64_t(t.numel()) * attn::dtype_size(t.dtype) != t.end - t.begin) __builtin_trap();
    }
  } catch (const attn::InputError&) {
  }
  return 0;
}
