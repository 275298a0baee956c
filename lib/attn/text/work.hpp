#pragma once
// Steps of the tokenizers' inner loops on this thread (the added-token matcher's transitions and
// failure links, BPE's and SentencePiece's merges): tests and fuzz harnesses bound one input's
// work by a multiple of its bytes, not by wall time. Only ever incremented.
#include <cstdint>

namespace attn {

inline std::uint64_t& text_work() {
  thread_local std::uint64_t steps = 0;
  return steps;
}

}  // namespace attn
