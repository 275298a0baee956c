#pragma once
// The rules every tokenizer reader holds its vocabulary's data to, in one place: GGUF's
// tokenizer.ggml.* keys, llama2.c's tokenizer.bin and tokenizer.json. Each check returns what is
// wrong (a message's tail, after the reader's "FILE: key 'K'[i]: "), or an empty string. Data
// these refuse would otherwise load silently and give wrong text: a token type llama.cpp does
// not know decodes to nothing, a NaN score makes every merge order undefined.
#include <cstdint>
#include <string>
#include <string_view>

#include "attn/text/bpe.hpp"

namespace attn {

// tokenizer.ggml.token_type: llama.cpp's 1 (normal) to 6 (byte).
std::string bad_token_type(std::int64_t type);

// A piece's score (SentencePiece merges by it): any float but NaN.
std::string bad_score(float score);

// A merge written "left right": exactly one space, both halves non-empty. False otherwise.
bool split_merge(std::string_view m, std::string_view& left, std::string_view& right);

// Adds the merge of rank `rank` to `bpe` (whose vocab is read): what is wrong when either half
// or their concatenation is not a piece.
std::string add_merge(Bpe& bpe, std::string_view left, std::string_view right, std::int32_t rank);

}  // namespace attn
