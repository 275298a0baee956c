#pragma once
// tokenizer.json's BPE model: a vocabulary, ranked merges, and what becomes of a character the
// vocabulary lacks (its bytes as <0xNN> tokens, or the unknown token). Merges as Hugging Face's
// Rust BPE applies them: the lowest rank first, the leftmost of equal ranks.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attn {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

struct Bpe {
  struct Merge {
    std::int32_t rank, id;  // the merged token
  };
  Vocab vocab;                                      // piece -> id
  std::unordered_map<std::uint64_t, Merge> merges;  // (left id << 32 | right id) -> merge
  std::int32_t unk = -1;                            // the unknown token's id, or -1
  bool byte_fallback = false, fuse_unk = false;
  bool ignore_merges = false;           // a word in the vocabulary is that token, unmerged
  std::array<std::int32_t, 256> bytes;  // <0xNN>'s id, or -1

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<std::int32_t>& ids) const;

  std::int32_t find(std::string_view piece) const {
    const auto it = vocab.find(piece);
    return it == vocab.end() ? -1 : it->second;
  }
};

}  // namespace attn
