#include "attn/engine/prompt.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>

#include "attn/error.hpp"
#include "attn/io/detail/json_checks.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"
#include "attn/text/llama_vocab.hpp"

namespace attn {

namespace {

using json = nlohmann::json;

constexpr std::uint64_t kMaxTextBytes = std::uint64_t(1) << 30;

// Ids as JSON nest two levels at most ([[1, 2], [3]], {"ids": [...]}); a deeper document is
// refused before nlohmann builds it (its DOM and its messages recurse).
constexpr JsonLimits kIdsLimits{4, std::size_t(1) << 25, std::size_t(1) << 25};

json parse_ids_json(const std::string& text, const std::string& what) {
  check_json_structure(
      text, kIdsLimits,
      [&](const JsonStructure&) {
        throw InputError(what + ": token ids nest deeper than " +
                         std::to_string(kIdsLimits.max_depth) + " levels");
      },
      [&](const JsonStructure&, const std::string& key) {
        throw InputError(what + ": key " + quoted(key, 60) + " twice");
      },
      [&](const JsonStructure&, const std::string& many) { throw InputError(what + ": " + many); });
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(what + ": not valid JSON: " + escape(e.what(), 160));
  }
}

std::vector<std::int32_t> ids_from_json(const json& j, const std::string& what) {
  const json& list = j.is_object() && j.contains("ids") ? j["ids"] : j;
  if (!list.is_array()) throw InputError(what + ": expected a JSON array of token ids");
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number_integer() || list[i].get<std::int64_t>() < 0 ||
        list[i].get<std::int64_t>() > INT32_MAX)
      throw InputError(what + ": token " + std::to_string(i) +
                       " is not a token id: " + quoted(list[i].dump(), 40));
    ids.push_back(list[i].get<std::int32_t>());
  }
  return ids;
}

std::vector<std::int32_t> ids_from_text(const std::string& text, const std::string& what) {
  std::vector<std::int32_t> ids;
  std::size_t i = 0;
  const auto separator = [](char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  while (i < text.size()) {
    while (i < text.size() && separator(text[i])) ++i;
    if (i == text.size()) break;
    std::size_t end = i;
    while (end < text.size() && !separator(text[end])) ++end;
    std::int32_t id = 0;
    const auto [p, ec] = std::from_chars(text.data() + i, text.data() + end, id);
    if (ec != std::errc() || p != text.data() + end || id < 0)
      throw InputError(what + ": token " + std::to_string(ids.size()) +
                       " is not a token id: " + quoted(text.substr(i, end - i), 40));
    ids.push_back(id);
    i = end;
  }
  return ids;
}

// Token ids as text: sequences separated by ';' or lines, ids by commas or spaces; or JSON: an
// array of ids, an array of such arrays, or {"ids": ...}.
std::vector<std::vector<std::int32_t>> parse_sequences(const std::string& text,
                                                       const std::string& what,
                                                       std::int64_t vocab) {
  std::vector<std::vector<std::int32_t>> out;
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[' &&
      text.find('[', first + 1) < text.find(']', first + 1)) {
    const json j = parse_ids_json(text, what);
    if (!j.is_array()) throw InputError(what + ": expected a JSON array of token id arrays");
    for (std::size_t b = 0; b < j.size(); ++b) {
      const std::string name = what + " sequence " + std::to_string(b);
      out.push_back(ids_from_json(j[b], name));
      check_token_ids(out.back(), vocab, name);
    }
    return out;
  }
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{'))
    return {parse_token_ids(text, what, vocab)};
  std::size_t from = 0;
  while (from <= text.size()) {
    const std::size_t end = std::min(text.find_first_of(";\n", from), text.size());
    const std::string part = text.substr(from, end - from);
    if (part.find_first_not_of(" \t\r,") != std::string::npos)
      out.push_back(parse_token_ids(part,
                                    out.empty() && end == text.size()
                                        ? what
                                        : what + " sequence " + std::to_string(out.size()),
                                    vocab));
    from = end + 1;
  }
  return out;
}

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

std::vector<std::int32_t> encode_prompt(const Tokenizer& tok, const TextInput& t,
                                        const std::string& text, std::int64_t vocab,
                                        std::int64_t max_tokens) {
  check_text_fits(tok, text, max_tokens, t.prompt_file.empty() ? "prompt" : escape(t.prompt_file));
  EncodeOptions o;
  if (t.no_bos) o.bos = false;
  if (t.add_bos) o.bos = true;
  std::vector<std::int32_t> ids = encode(tok, text, o);
  check_token_ids(ids, vocab, tok.source);
  return ids;
}

std::vector<std::int32_t> parse_token_ids(const std::string& text, const std::string& what,
                                          std::int64_t vocab_size) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  std::vector<std::int32_t> ids;
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{')) {
    ids = ids_from_json(parse_ids_json(text, what), what);
  } else {
    ids = ids_from_text(text, what);
  }
  check_token_ids(ids, vocab_size, what);
  return ids;
}

std::string read_text_input(const std::string& path, const char* what) {
  return read_small_file(path, what, kMaxTextBytes);
}

std::vector<std::vector<std::int32_t>> prompt_sequences(const TextInput& t, const Tokenizer* tok,
                                                        std::int64_t vocab,
                                                        std::int64_t max_tokens) {
  const int kinds =
      !t.prompt.empty() + !t.prompt_file.empty() + !t.tokens.empty() + !t.tokens_file.empty();
  if (kinds > 1)
    throw InputError("give one prompt: text, a text file, token ids or a file of ids", "prompt");
  try {
    if (!t.tokens.empty()) return parse_sequences(t.tokens, "token ids", vocab);
    if (!t.tokens_file.empty())
      return parse_sequences(read_text_input(t.tokens_file, "tokens"), escape(t.tokens_file),
                             vocab);
  } catch (const InputError& e) {  // the option the ids came from, for the front to name
    throw InputError(e.what(), t.tokens.empty() ? "tokens_file" : "tokens");
  }
  if (t.wants_text() && !tok)
    throw InputError("a tokenizer is needed to read a prompt's text (tokenizer.json)", "tokenizer");
  std::vector<std::vector<std::int32_t>> out;
  if (!t.prompt_file.empty())
    out.push_back(
        encode_prompt(*tok, t, read_text_input(t.prompt_file, "prompt"), vocab, max_tokens));
  for (const std::string& text : t.prompt)
    out.push_back(encode_prompt(*tok, t, text, vocab, max_tokens));
  return out;
}

std::vector<std::int32_t> one_sequence(std::vector<std::vector<std::int32_t>> sequences) {
  if (sequences.size() > 1)
    throw InputError("one sequence at a time here, got " + std::to_string(sequences.size()));
  return sequences.empty() ? std::vector<std::int32_t>{} : std::move(sequences.front());
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
