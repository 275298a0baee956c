// libFuzzer harness: the GGUF reader on any bytes, then every typed read of every key and every
// tensor described and read through the TensorSource. Refusals (InputError) are the expected
// outcome; a crash, a sanitizer report, a tensor outside the file or any other exception is a
// finding.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "attn/error.hpp"
#include "attn/io/format.hpp"
#include "attn/io/gguf.hpp"

namespace {

// Each typed read on its own: one refusing must not hide another's bug.
template <class F>
void read(F f) {
  try {
    f();
  } catch (const attn::InputError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  attn::detect_format(bytes, size);
  std::shared_ptr<const attn::GgufFile> f;
  try {
    f = std::make_shared<const attn::GgufFile>(attn::parse_gguf(bytes, "fuzz.gguf"));
  } catch (const attn::InputError&) {
    return 0;
  }
  for (const auto& entry : f->kv) {
    const std::string& key = entry.first;  // clang 14 cannot capture structured bindings
    if (f->find(key) != &entry.second) __builtin_trap();  // keys are unique
    read([&] { f->integer(key); });
    read([&] { f->number(key); });
    read([&] { f->boolean(key); });
    read([&] { f->string(key); });
    read([&] { f->strings(key); });
    read([&] { f->floats(key); });
    read([&] { f->integers(key); });
  }
  const auto source = attn::gguf_tensor_source(f);
  for (const attn::GgufTensorInfo& t : f->tensors) {
    // Every accepted tensor lies inside the file, aligned, with a positive shape.
    if (t.offset > size || t.size > size - t.offset || t.offset % f->alignment != 0)
      __builtin_trap();
    for (std::int64_t d : t.shape)
      if (d <= 0) __builtin_trap();
    const attn::SourceTensor s = source->tensor(t.name);
    if (s.data != data + t.offset || s.size != t.size || s.shape != t.shape) __builtin_trap();
    if (s.size > 0) {
      volatile std::uint8_t last = s.data[s.size - 1];  // ASan checks the whole extent
      (void)last;
    }
    source->describe(t.name);
  }
  return 0;
}
