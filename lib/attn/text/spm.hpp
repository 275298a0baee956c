#pragma once
// SentencePiece's BPE as llama.cpp runs it from a vocabulary with scores (GGUF's
// tokenizer.ggml.model "llama", llama2.c's tokenizer.bin): the text's UTF-8 characters are the
// first symbols; the adjacent pair whose concatenation is a piece of the vocabulary with the
// highest score merges first (the leftmost of equal scores), whatever its two halves are; a
// symbol left that is not a piece becomes its bytes' tokens. No pre-tokenizer: the whole text is
// one word, so the merges run on a heap over a linked list (O(n log n)), never rescanning.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "attn/text/bpe.hpp"

namespace attn {

struct Spm {
  Vocab vocab;                          // piece -> id (every piece, control ones too)
  std::vector<float> scores;            // [vocab_size]
  std::array<std::int32_t, 256> bytes;  // <0xNN>'s id (else the one-byte piece's), or -1
  std::int32_t unk = -1;                // for a byte without a token, or -1: dropped
  // run.c's rules (llama2.c's tokenizer.bin): a character is a byte and the continuation bytes
  // after it (at most 4 in all), not the length its first byte announces; a merge needs a score
  // above -1e10.
  bool run_c = false;

  // Appends the ids of `text` (spaces already as the vocabulary writes them).
  void encode(std::string_view text, std::vector<std::int32_t>& ids) const;

  std::int32_t find(std::string_view piece) const {
    const auto it = vocab.find(piece);
    return it == vocab.end() ? -1 : it->second;
  }
};

}  // namespace attn
