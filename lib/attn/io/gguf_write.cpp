#include "attn/io/gguf_write.hpp"

#include <cstring>
#include <stdexcept>

namespace attn {

namespace {

constexpr std::uint64_t kAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT
constexpr std::uint32_t kString = 8, kInt32 = 5, kGgmlF32 = 0;

struct Bytes {
  std::vector<std::uint8_t> b;
  template <class T>
  void put(T v) {
    const std::size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put(std::uint64_t(s.size()));
    const std::size_t at = b.size();
    b.resize(at + s.size());
    if (!s.empty()) std::memcpy(b.data() + at, s.data(), s.size());
  }
  void pad() { b.resize((b.size() + kAlignment - 1) / kAlignment * kAlignment, 0); }
};

std::uint64_t padded(std::uint64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

void write_gguf(OutputFile& out, std::span<const GgufKeyValue> kv,
                std::span<const GgufF32Tensor> tensors) {
  Bytes h;
  h.put(std::uint32_t(0x46554747));  // "GGUF"
  h.put(std::uint32_t(3));
  h.put(std::uint64_t(tensors.size()));
  h.put(std::uint64_t(kv.size()));
  for (const GgufKeyValue& e : kv) {
    h.put_string(e.key);
    if (const auto* s = std::get_if<std::string>(&e.value)) {
      h.put(kString);
      h.put_string(*s);
    } else {
      h.put(kInt32);
      h.put(std::get<std::int32_t>(e.value));
    }
  }
  std::uint64_t offset = 0;
  for (const GgufF32Tensor& t : tensors) {
    std::uint64_t n = 1;
    for (const std::int64_t d : t.shape) n *= std::uint64_t(d);
    if (n != t.data.size()) throw std::logic_error("write_gguf: " + t.name + "'s shape and data");
    h.put_string(t.name);
    h.put(std::uint32_t(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) h.put(std::uint64_t(*d));
    h.put(kGgmlF32);
    h.put(offset);
    offset += padded(n * sizeof(float));
  }
  h.pad();
  out.write(h.b.data(), h.b.size());
  const std::uint8_t zeros[kAlignment] = {};
  for (const GgufF32Tensor& t : tensors) {
    const std::uint64_t n = t.data.size() * sizeof(float);
    out.write(t.data.data(), n);
    out.write(zeros, padded(n) - n);
  }
}

}  // namespace attn
