#include "attn/text/vocab_checks.hpp"

#include <cmath>

#include "attn/io/text.hpp"

namespace attn {

std::string bad_token_type(std::int64_t type) {
  if (type >= 1 && type <= 6) return {};
  return std::to_string(type) + " is not a token type (1-6)";
}

std::string bad_score(float score) {
  return std::isnan(score) ? "the score is NaN" : "";
}

bool split_merge(std::string_view m, std::string_view& left, std::string_view& right) {
  const std::size_t space = m.find(' ');
  if (space == 0 || space == std::string_view::npos || space + 1 == m.size() ||
      m.find(' ', space + 1) != std::string_view::npos)
    return false;
  left = m.substr(0, space);
  right = m.substr(space + 1);
  return true;
}

std::string add_merge(Bpe& bpe, std::string_view left, std::string_view right, std::int32_t rank) {
  std::string both;
  both.reserve(left.size() + right.size());
  both.append(left).append(right);
  const std::int32_t a = bpe.find(left), b = bpe.find(right), ab = bpe.find(both);
  if (a < 0 || b < 0 || ab < 0)
    return "the merge " + quoted(std::string(left) + " " + std::string(right), 60) +
           " names a piece the vocabulary lacks";
  bpe.merges.try_emplace(std::uint64_t(std::uint32_t(a)) << 32 | std::uint32_t(b),
                         Bpe::Merge{rank, ab});
  return {};
}

}  // namespace attn
