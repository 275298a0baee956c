// load_tokenizer: which kind of tokenizer file a path holds, told by its content.
#include "attn/error.hpp"
#include <unistd.h>

#include <algorithm>

#include "attn/io/files.hpp"
#include "attn/io/text.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

namespace {

// llama2.c's tokenizer.bin for a 128k vocabulary is about 2 MB.
constexpr std::uint64_t kMaxTokenizerBinBytes = std::uint64_t(1) << 28;

}  // namespace

Tokenizer load_tokenizer(const std::filesystem::path& path) {
  const std::string source = escape(path.string());
  std::string head;
  {
    const InputFile f = open_regular(path, "tokenizer");
    head.resize(std::size_t(std::min<std::uint64_t>(f.size, 8)));
    if (!head.empty() && ::pread(f.fd, head.data(), head.size(), 0) != ssize_t(head.size()))
      throw InputError(source + ": cannot read the tokenizer file");
  }
  const std::size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') return load_tokenizer_json(path);
  const std::string bytes = read_small_file(path, "tokenizer file", kMaxTokenizerBinBytes);
  if (looks_like_llama2c_tokenizer(bytes)) return parse_llama2c_tokenizer(bytes, source);
  return load_tokenizer_json(path);
}

}  // namespace attn
