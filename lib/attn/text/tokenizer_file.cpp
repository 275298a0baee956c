// load_tokenizer: which kind of tokenizer file a path holds, told by its content (io/format).
#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/format.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/text.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

namespace {

// llama2.c's tokenizer.bin for a 128k vocabulary is about 2 MB.
constexpr std::uint64_t kMaxTokenizerBinBytes = std::uint64_t(1) << 28;

constexpr const char* kExpected =
    "a tokenizer (tokenizer.json, a GGUF file with its tokenizer.ggml.* keys, or llama2.c's "
    "tokenizer.bin)";

}  // namespace

Tokenizer load_tokenizer(const std::filesystem::path& path) {
  const FileHead head = read_head(path, "tokenizer", kFormatHeadBytes);
  const FileFormat format = detect_format(head.bytes, head.size);
  const std::string_view text(reinterpret_cast<const char*>(head.bytes.data()), head.bytes.size());
  switch (format) {
    case FileFormat::gguf:
      return tokenizer_from_gguf(*open_gguf(path));
    case FileFormat::tokenizer_json:
      return load_tokenizer_json(path);
    case FileFormat::json:  // a tokenizer.json whose writer put other keys first
      if (text.find("\"model\"") != std::string_view::npos) return load_tokenizer_json(path);
      break;
    case FileFormat::unknown:  // the reader closest to its first byte says what is wrong
      if (text.find_first_not_of(" \t\r\n") != std::string_view::npos &&
          text[text.find_first_not_of(" \t\r\n")] == '{')
        return load_tokenizer_json(path);
      [[fallthrough]];
    case FileFormat::llama2c_tokenizer:
      return parse_llama2c_tokenizer(read_small_file(path, "tokenizer file", kMaxTokenizerBinBytes),
                                     head.source);
    default:
      break;
  }
  throw InputError(head.source + ": " + format_description(format) + ", not " + kExpected);
}

}  // namespace attn
