#include "attn/engine/prompt.hpp"

#include "attn/error.hpp"
#include "attn/text/llama_vocab.hpp"

namespace attn {

namespace {

// The bytes of decode(ids) that are final: a trailing U+FFFD may be a split character's start.
std::size_t settled(const std::string& text) {
  return text.size() - (text.ends_with("\xEF\xBF\xBD") ? 3 : 0);
}

constexpr std::size_t kChunkBytes = std::size_t(1) << 20;
constexpr std::int64_t kChunkMargin = 64;  // ids a chunk's two edges may add, at most

// Where the chunk starting at `from` ends: after the last space or newline in its second half,
// else at a character's start.
std::size_t chunk_end(std::string_view text, std::size_t from) {
  const std::size_t end = from + kChunkBytes;
  if (end >= text.size()) return text.size();
  const std::size_t space = text.substr(0, end).find_last_of(" \n");
  if (space != std::string_view::npos && space >= from + kChunkBytes / 2) return space + 1;
  std::size_t cut = end;
  while (cut > from && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return cut > from ? cut : end;
}

}  // namespace

void check_text_fits(const Tokenizer& tok, std::string_view text, std::int64_t max_tokens,
                     const std::string& what) {
  if (max_tokens <= 0 || text.size() <= kChunkBytes) return;
  std::int64_t ids = 0, chunks = 0;
  for (std::size_t from = 0; from < text.size();) {
    const std::size_t end = chunk_end(text, from);
    ids += std::int64_t(encode(tok, text.substr(from, end - from), {false, false}).size());
    ++chunks;
    if (ids > max_tokens + kChunkMargin * chunks)
      throw InputError(what + ": its first " + std::to_string(end) + " of " +
                           std::to_string(text.size()) + " bytes already make " +
                           std::to_string(ids) + " tokens, more than max_seq_len " +
                           std::to_string(max_tokens) + " holds",
                       "max_seq_len");
    from = end;
  }
}

namespace {

// The text a stream prints of `ids`: special tokens print nothing. A GGUF's SentencePiece
// vocabulary is detokenized after its BOS, as llama.cpp detokenizes a text's tokens: the space
// its encoding put before the first word goes (llama.cpp keeps it when BOS is among the ids,
// llama-simple printing "<s> Once"); run.c prints "Once", as do tokenizer.bin's decode (run.c's
// own) and tokenizer.json's SentencePiece decoders, given every id.
std::string stream_text(const Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  const bool after_bos = tok.llama && tok.llama->kind == LlamaVocab::Kind::spm && !ids.empty() &&
                         ids[0] == tok.llama->bos;
  if (!after_bos) return decode(tok, ids, {true, false});
  return decode(tok, std::vector<std::int32_t>(ids.begin() + 1, ids.end()), {true, false});
}

}  // namespace

TextStream::TextStream(const Tokenizer& t, std::vector<std::int32_t> printed_ids)
    : tok(t), ids(std::move(printed_ids)), printed(settled(stream_text(t, ids))) {}

std::string TextStream::next(std::int32_t id) {
  ids.push_back(id);
  const std::string text = stream_text(tok, ids);
  const std::size_t end = settled(text);
  if (end <= printed) return {};
  std::string out = text.substr(printed, end - printed);
  printed = end;
  return out;
}

}  // namespace attn
