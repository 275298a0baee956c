#pragma once
// The regular expressions of tokenizer.json's Split pre-tokenizers, compiled by Oniguruma: the
// engine (and syntax, Ruby's) that Hugging Face's Rust tokenizers compile them with, so \p{L},
// \s and (?i:...) mean in attn-cli what they mean in the file's own tokenizer.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn {

class Regex {
 public:
  // Throws InputError "<source>: <what>: <Oniguruma's message>" for a pattern it cannot compile.
  Regex(const std::string& pattern, const std::string& source, const std::string& what);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // [begin, end) of every match in s (valid UTF-8), left to right, not overlapping; an empty
  // match advances one code point (Rust's find_iter).
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view s) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attn
