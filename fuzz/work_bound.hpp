#pragma once
// What every tokenizer harness holds the code under test to (issue 47): the tokenizers' steps
// for one input (attn::text_work: the matcher's, BPE's and SentencePiece's inner loops) and the
// size of what it gives back, each at most a fixed multiple of the bytes it came from. A harness
// aborts past either, so an input whose cost grows faster than its size is a finding on any
// machine (a timeout would only say "slow", and only on a slow one). Regex searches are bounded
// by their own budget (text/regex.hpp).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "attn/text/tokenizer.hpp"
#include "attn/text/work.hpp"

class WorkBound {
 public:
  // Steps per input byte: the matcher takes about 2, BPE about 3 per byte of a text its
  // normalizer may have made 16 times longer.
  static constexpr std::uint64_t kStepsPerByte = 256;
  // Output bytes per byte it came from: a normalizer's or decoder's growth (16), times U+FFFD's
  // 3 bytes for a byte that is not UTF-8.
  static constexpr std::uint64_t kBytesPerByte = 64;
  static constexpr std::uint64_t kSlack = 4096;

  explicit WorkBound(std::size_t input_bytes)
      : start_(attn::text_work()), limit_(kStepsPerByte * input_bytes + kSlack) {}

  void check_work() const {
    if (attn::text_work() - start_ > limit_) std::abort();
  }

  static void check_size(std::size_t made, std::size_t from) {
    if (made > kBytesPerByte * from + kSlack) std::abort();
  }

  // A decoded text against the pieces of the ids it came from (and a separator each).
  static void check_decoded(const attn::Tokenizer& t, const std::vector<std::int32_t>& ids,
                            const std::string& text) {
    std::size_t pieces = ids.size();
    for (const std::int32_t id : ids) pieces += t.pieces[std::size_t(id)].size();
    check_size(text.size(), pieces);
  }

 private:
  std::uint64_t start_, limit_;
};
