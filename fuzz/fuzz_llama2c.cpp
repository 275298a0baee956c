// libFuzzer harness: the llama2.c checkpoint reader, the format detector and its description of
// files of no format (unknown_look) on any bytes. An accepted checkpoint's every tensor is read
// through the TensorSource; a tensor outside the file, a crash, a sanitizer report or any
// exception but InputError is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "attn/error.hpp"
#include "attn/io/format.hpp"
#include "attn/io/llama2c.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const attn::FileFormat format = attn::detect_format(bytes, size);
  const bool plausible = attn::llama2c_header(bytes, size).has_value();
  // The "what is this file" step: a checkpoint is never described as a broken one.
  const std::string look = attn::unknown_look(bytes, size);
  if (plausible && (format != attn::FileFormat::llama2c_checkpoint ||
                    !attn::llama2c_lookalike(bytes, size).empty()))
    __builtin_trap();
  (void)look;
  try {
    const auto c = attn::parse_llama2c(bytes, "fuzz.bin");
    if (!plausible) __builtin_trap();  // the two must agree
    for (const std::string& name : c->names()) {
      const attn::SourceTensor t = c->tensor(name);
      if (t.data < data || t.size > size || t.data + t.size > data + size) __builtin_trap();
      if (std::uint64_t(t.numel()) * 4 != t.size) __builtin_trap();
      volatile std::uint8_t last = t.data[t.size - 1];
      (void)last;
    }
  } catch (const attn::InputError&) {
    if (plausible) __builtin_trap();
  }
  return 0;
}
