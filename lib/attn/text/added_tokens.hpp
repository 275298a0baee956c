#pragma once
// Where a text's added tokens are, found in one pass over the text whatever their number: an
// Aho-Corasick automaton over the tokens' contents reversed, run from the text's end to its
// start, knows at every position the tokens that start there, longest first. 50,000 added
// tokens against a 400 KB prompt: one pass, not 50,000 comparisons at each position.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/text/work.hpp"

namespace attn {

struct AddedToken;

class AddedTokenIndex {
 public:
  // added: Tokenizer::added (longest first, then file order), whose indices the matches give.
  explicit AddedTokenIndex(const std::vector<AddedToken>& added);
  // Plain tokens (no single_word): a GGUF vocabulary's typed pieces, in the order they win.
  explicit AddedTokenIndex(const std::vector<std::string_view>& contents);

  // (start, index into added) at every start where a token can be taken, ascending: the longest
  // token whose content starts there and whose single_word holds (no word character touching it
  // on either side), the first in `added` among tokens of the same content.
  std::vector<std::pair<std::size_t, std::int32_t>> longest_at(std::string_view s) const;

 private:
  struct Node {
    std::int32_t fail = 0;         // the node of the longest proper suffix in the trie
    std::int32_t terminal = -1;    // the nearest node on the fail chain (this one first) ending a
                                   // token, or -1
    std::int32_t plain = -1;       // the same, for a token without single_word
    std::int32_t depth = 0;        // bytes from the root
    std::int32_t first_edge = 0;   // children: edges [first_edge, next node's first_edge)
    std::int32_t first_token = 0;  // tokens ending here: tokens_[first_token, next's)
  };
  void build(const std::vector<std::string_view>& contents);
  std::int32_t child(std::int32_t node, unsigned char c) const;         // or -1
  std::int32_t taken(std::int32_t node, bool single_word_holds) const;  // a token, or -1

  std::vector<Node> nodes_;  // [0] is the root; one more at the end closes the ranges
  std::vector<unsigned char> edge_byte_;
  std::vector<std::int32_t> edge_child_;
  std::vector<std::int32_t> tokens_;  // indices into added, ascending per node
  std::vector<bool> single_word_;     // [tokens], all false for plain tokens
  std::int32_t root_[256];
};

}  // namespace attn
