#pragma once
// The regular expressions of tokenizer.json's Split pre-tokenizers, compiled by Oniguruma: the
// engine (and syntax, Ruby's) that Hugging Face's Rust tokenizers compile them with, so \p{L},
// \s and (?i:...) mean in attn-cli what they mean in the file's own tokenizer.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn {

// What the regex searches of one text (one encode, every pre-tokenizer step) may spend, in
// proportion to the text: Oniguruma's retries (backtracking steps: deterministic, the same ids
// or the same error on every machine) and, as a backstop for patterns that fail late without
// backtracking (`a+b` on a run of a's: quadratic, one retry per start), this thread's CPU time.
// A catastrophic pattern such as `(\w+\s?)+$` ends in an error, never in silently fewer splits.
struct RegexBudget {
  explicit RegexBudget(std::size_t text_bytes);
  std::size_t bytes;  // the text's, for messages
  std::uint64_t retries, retries_left;
  double cpu_seconds;  // this thread's CPU time allowed from start_cpu
  double start_cpu;
  std::chrono::steady_clock::time_point next_clock_check;  // when to read the CPU clock again
  std::size_t stack_entries;  // Oniguruma's backtracking stack, per search (32 bytes an entry)
};

class Regex {
 public:
  // Throws InputError "<source>: <what>: <Oniguruma's message>" for a pattern it cannot compile.
  Regex(const std::string& pattern, const std::string& source, const std::string& what);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // [begin, end) of every match in s (valid UTF-8), left to right, not overlapping; an empty
  // match advances one code point (Rust's find_iter). Spends from `budget`; throws InputError
  // "<where>: ..." when it runs out (where: the file and the key of the step, escaped).
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view s, RegexBudget& budget,
                                                            const std::string& where) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attn
