// llama2.c's tokenizer.bin (run.c's build_tokenizer): int32 max_token_length, then for each
// token f32 score, int32 length, the piece's bytes; little-endian. The file holds no count:
// records are read to the end of the file (which must end on a record), and the model's
// vocab_size is checked against it where both are known, as for any tokenizer.
#include <cstring>

#include "attn/error.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/text/vocab_checks.hpp"

namespace attn {

namespace {

// A real file's longest piece is a few dozen bytes (Llama 2's: 16 of 32,000 pieces); run.c
// sizes its merge buffer from this number.
constexpr std::int32_t kMaxPieceBytes = 1 << 16;
constexpr std::size_t kMaxTokens = std::size_t(1) << 22;

template <class T>
bool read_at(std::string_view bytes, std::size_t& at, T& out) {
  if (bytes.size() - at < sizeof(T)) return false;
  std::memcpy(&out, bytes.data() + at, sizeof(T));
  at += sizeof(T);
  return true;
}

bool is_byte_piece(const std::string& p) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && hex(p[3]) && hex(p[4]) && p[5] == '>';
}

}  // namespace

Tokenizer parse_llama2c_tokenizer(std::string_view bytes, const std::string& source) {
  auto v = std::make_shared<LlamaVocab>();
  v->kind = LlamaVocab::Kind::llama2c;
  std::size_t at = 0;
  std::int32_t max_len = 0;
  if (!read_at(bytes, at, max_len) || max_len < 1 || max_len > kMaxPieceBytes)
    throw InputError(source + ": max_token_length " + std::to_string(max_len) + " is not in [1, " +
                     std::to_string(kMaxPieceBytes) + "] (is this llama2.c's tokenizer.bin?)");
  while (at < bytes.size()) {
    const std::string token = "token " + std::to_string(v->pieces.size());
    float score;
    std::int32_t len;
    if (!read_at(bytes, at, score) || !read_at(bytes, at, len))
      throw InputError(source + ": " + token + ": the file ends inside its score and length");
    if (const std::string what = bad_score(score); !what.empty())
      throw InputError(source + ": " + token + ": " + what);
    if (len < 0 || len > max_len)
      throw InputError(source + ": " + token + ": length " + std::to_string(len) +
                       " is not in [0, max_token_length " + std::to_string(max_len) + "]");
    if (bytes.size() - at < std::size_t(len))
      throw InputError(source + ": " + token + ": the file ends inside its " + std::to_string(len) +
                       " bytes");
    if (v->pieces.size() >= kMaxTokens)
      throw InputError(source + ": more than " + std::to_string(kMaxTokens) + " tokens");
    v->pieces.emplace_back(bytes.substr(at, std::size_t(len)));
    v->spm.scores.push_back(score);
    at += std::size_t(len);
  }
  // run.c's fixed ids: <unk> 0, <s> 1, </s> 2, then the 256 byte tokens.
  if (v->pieces.size() < 3)
    throw InputError(source + ": " + std::to_string(v->pieces.size()) +
                     " tokens; llama2.c's vocabulary has <unk>, <s>, </s> first");
  v->attrs.assign(v->pieces.size(), token_attr::normal);
  v->attrs[0] = token_attr::unknown;
  v->attrs[1] = v->attrs[2] = token_attr::control;
  for (std::size_t i = 3; i < v->pieces.size(); ++i)
    if (is_byte_piece(v->pieces[i])) v->attrs[i] = token_attr::byte;
  v->unk = 0;
  v->bos = 1;
  v->eos = 2;
  v->add_bos = true;  // run.c's generate: encode(prompt, bos 1, eos 0)
  finish_llama_vocab(*v, {});
  return tokenizer_from_vocab(std::move(v), source);
}

}  // namespace attn
