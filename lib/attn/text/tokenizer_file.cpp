// load_tokenizer: which kind of tokenizer file a path holds, told by its content.
#include <algorithm>
#include <cstring>

#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/text.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

namespace {

// llama2.c's tokenizer.bin for a 128k vocabulary is about 2 MB.
constexpr std::uint64_t kMaxTokenizerBinBytes = std::uint64_t(1) << 28;

// What a file that is no tokenizer looks like it is, for the message: a safetensors file (a
// little-endian u64 header length, then a JSON object), a llama2.c checkpoint (seven positive
// int32s: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len).
std::string other_kind(const FileHead& h) {
  const auto& b = h.bytes;
  if (b.size() >= 9 && b[8] == '{') {
    std::uint64_t n;
    std::memcpy(&n, b.data(), 8);
    if (n + 8 <= h.size) return "a safetensors file";
  }
  if (b.size() >= 28) {
    std::int32_t v[7];
    std::memcpy(v, b.data(), sizeof v);
    if (std::all_of(v, v + 7, [](std::int32_t x) { return x != 0 && x > -(1 << 24) && x < (1 << 24); }) &&
        v[0] > 0 && v[2] > 0 && v[3] > 0)
      return "a llama2.c checkpoint";
  }
  return "not a tokenizer file";
}

}  // namespace

Tokenizer load_tokenizer(const std::filesystem::path& path) {
  const FileHead head = read_head(path, "tokenizer", 64);
  if (is_gguf(head.bytes)) return tokenizer_from_gguf(*open_gguf(path));
  const auto* text = reinterpret_cast<const char*>(head.bytes.data());
  const std::string_view start(text, head.bytes.size());
  const std::size_t first = start.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && start[first] == '{') return load_tokenizer_json(path);
  if (head.size <= kMaxTokenizerBinBytes) {
    const std::string bytes = read_small_file(path, "tokenizer file", kMaxTokenizerBinBytes);
    if (looks_like_llama2c_tokenizer(bytes)) return parse_llama2c_tokenizer(bytes, head.source);
  }
  throw InputError(head.source + ": " + other_kind(head) +
                   "; expected a tokenizer: tokenizer.json, a GGUF file or llama2.c's "
                   "tokenizer.bin");
}

}  // namespace attn
