#include "attn/io/format.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/llama2c.hpp"
#include "attn/io/text.hpp"
#include "attn/io/utf8.hpp"

namespace attn {

namespace {

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// An 8-byte header length that fits the file, then the JSON header's '{'.
bool is_safetensors(std::span<const std::uint8_t> head, std::uint64_t size) {
  if (head.size() < 9 || size < 9) return false;
  const std::uint64_t n = load<std::uint64_t>(head.data());
  return n >= 2 && n <= size - 8 && head[8] == '{';
}

bool is_space(std::uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// The first key of the top-level object, as written (escapes kept), or empty.
std::string_view first_key(std::string_view text) {
  std::size_t i = 1;  // after '{'
  while (i < text.size() && is_space(std::uint8_t(text[i]))) ++i;
  if (i >= text.size() || text[i] != '"') return {};
  const std::size_t end = text.find('"', i + 1);
  return end == std::string_view::npos ? std::string_view() : text.substr(i + 1, end - i - 1);
}

// A JSON object (or array): told apart by its first key, which Hugging Face's writers put first.
FileFormat json_kind(std::span<const std::uint8_t> head) {
  std::size_t i = 0;
  if (head.size() >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF) i = 3;  // BOM
  while (i < head.size() && is_space(head[i])) ++i;
  if (i >= head.size() || (head[i] != '{' && head[i] != '[')) return FileFormat::unknown;
  if (head[i] == '[') return FileFormat::json;
  const std::string_view text(reinterpret_cast<const char*>(head.data()) + i, head.size() - i);
  const std::string_view key = first_key(text);
  for (const char* k : {"version", "truncation", "padding", "added_tokens", "normalizer",
                        "pre_tokenizer", "post_processor", "decoder"})
    if (key == k) return FileFormat::tokenizer_json;
  if (key == "weight_map" || (key == "metadata" && text.find("\"weight_map\"") != text.npos))
    return FileFormat::safetensors_index;
  return FileFormat::json;
}

// llama2.c's tokenizer.bin: int32 max_token_length, then per token f32 score, int32 length and
// the bytes. Plausible when the first records (up to 8, or all when the file ends sooner) walk
// cleanly: finite scores, lengths 1..max_token_length.
bool is_llama2c_tokenizer(std::span<const std::uint8_t> head, std::uint64_t size) {
  if (head.size() < 4 + 8) return false;
  const std::int32_t max_len = load<std::int32_t>(head.data());
  if (max_len < 1 || max_len > 65536) return false;
  std::uint64_t pos = 4;
  for (int record = 0; record < 8; ++record) {
    if (pos == size) return record > 0;  // the whole file walked
    if (pos + 8 > head.size()) return record >= 2;
    const float score = load<float>(head.data() + pos);
    const std::int32_t len = load<std::int32_t>(head.data() + pos + 4);
    if (!std::isfinite(score) || len < 1 || len > max_len) return false;
    pos += 8 + std::uint64_t(len);
    if (pos > size) return false;
  }
  return true;
}

// Well-formed UTF-8 without control characters but tabs and line ends (a sequence cut by the
// head's end is allowed).
bool is_text(std::span<const std::uint8_t> head) {
  const std::string_view s(reinterpret_cast<const char*>(head.data()), head.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::uint8_t c = std::uint8_t(s[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) return s.size() - i < 4 && c >= 0xC2;
    i += n;
  }
  return true;
}

}  // namespace

FileFormat detect_format(std::span<const std::uint8_t> head, std::uint64_t size) {
  if (is_gguf(head)) return FileFormat::gguf;
  if (llama2c_header(head, size)) return FileFormat::llama2c_checkpoint;
  if (is_safetensors(head, size)) return FileFormat::safetensors;
  if (const FileFormat j = json_kind(head); j != FileFormat::unknown) return j;
  if (is_llama2c_tokenizer(head, size)) return FileFormat::llama2c_tokenizer;
  return FileFormat::unknown;
}

FileFormat detect_format(const std::filesystem::path& path) {
  try {
    const FileHead h = read_head(path, "input", kFormatHeadBytes);
    return detect_format(h.bytes, h.size);
  } catch (const InputError&) {
    return FileFormat::unknown;
  }
}

const char* format_description(FileFormat f) {
  switch (f) {
    case FileFormat::gguf:
      return "a GGUF model file";
    case FileFormat::safetensors:
      return "a safetensors file";
    case FileFormat::safetensors_index:
      return "a safetensors index";
    case FileFormat::llama2c_checkpoint:
      return "a llama2.c checkpoint";
    case FileFormat::tokenizer_json:
      return "a tokenizer.json file";
    case FileFormat::llama2c_tokenizer:
      return "a llama2.c tokenizer (tokenizer.bin)";
    case FileFormat::json:
      return "a JSON file";
    case FileFormat::unknown:
      break;
  }
  return "a file of unknown format";
}

std::string unknown_look(std::span<const std::uint8_t> head, std::uint64_t size) {
  if (size == 0) return "an empty file";
  if (size >= 9 && head.size() >= 9 && head[8] == '{') return {};  // a safetensors header
  if (const std::string why = llama2c_lookalike(head, size); !why.empty())
    return "a llama2.c checkpoint whose " + why;
  // A header length the safetensors reader would read (its limit is 10^8 bytes).
  if (head.size() >= 8 && load<std::uint64_t>(head.data()) <= 100'000'000) return {};
  if (is_text(head)) return "text";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string look = "binary data starting";
  for (std::size_t i = 0; i < std::min<std::size_t>(head.size(), 8); ++i)
    look += std::string(" ") + kHex[head[i] >> 4] + kHex[head[i] & 15];
  return look;
}

void check_model_format(const FileHead& head, FileFormat f) {
  if (f != FileFormat::unknown) return;  // a known format: expect_format names it if wrong
  const std::string look = unknown_look(head.bytes, head.size);
  if (look.empty()) return;
  throw InputError(head.source + ": not a model file: it looks like " + look +
                   "; GGUF, safetensors (or its index), a llama2.c checkpoint or a Hugging Face "
                   "folder are read");
}

void check_config_format(const FileHead& head, FileFormat f) {
  if (f != FileFormat::unknown) return;
  const std::string look = unknown_look(head.bytes, head.size);
  if (look.empty() || look == "text") return;  // text: the JSON parser says where it is wrong
  throw InputError(head.source + ": not a config: it looks like " + look +
                   "; a JSON config, a GGUF or a llama2.c checkpoint are read");
}

void expect_format(const std::filesystem::path& path, std::initializer_list<FileFormat> wanted,
                   const std::string& what) {
  expect_format(detect_format(path), escape(path.string()), wanted, what);
}

void expect_format(FileFormat f, const std::string& source,
                   std::initializer_list<FileFormat> wanted, const std::string& what) {
  if (f == FileFormat::unknown || std::find(wanted.begin(), wanted.end(), f) != wanted.end())
    return;
  throw InputError(source + ": " + format_description(f) + ", not " + what);
}

}  // namespace attn
