#include "text_input.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "attn/engine/prompt.hpp"
#include "attn/error.hpp"
#include "attn/io/detail/json_checks.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"
#include "attn/model/model.hpp"

namespace cli {

using namespace attn;  // the library's names; this file reads what the flags give it

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

}  // namespace

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

namespace {

// `-f -` and `-f /dev/stdin` (as llama.cpp users type them): standard input, read to its end
// with the files' limit. A pipe is no regular file, which read_small_file requires.
std::string read_standard_input(const char* what) {
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0)
      throw InputError(std::string("standard input: cannot read the ") + what + ": " +
                       std::strerror(errno));
    if (n == 0) return text;
    text.append(buf, std::size_t(n));
    if (text.size() > kMaxTextBytes)
      throw InputError(std::string("standard input: the ") + what + " is over the limit of " +
                       std::to_string(kMaxTextBytes) + " bytes");
  }
}

}  // namespace

std::string read_text_input(const std::string& path, const char* what) {
  if (path == "-" || path == "/dev/stdin") return read_standard_input(what);
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

void require_tokenizer(const TextInput& t, const ModelFiles& files) {
  if (!t.wants_text() || !files.tokenizer.empty()) return;
  if (!files.config.empty() && files.config == files.weights)  // a llama2.c checkpoint
    throw InputError("--tokenizer is needed to read a prompt: " + escape(files.weights.string()) +
                     " holds no tokenizer (llama2.c's tokenizer.bin goes with it)");
  throw InputError(
      "--tokenizer is needed to read a prompt (no tokenizer.json beside " +
      (files.config.empty() ? std::string("the config") : escape(files.config.string())) + ")");
}

PromptTokens prompt_tokens(const TextInput& t, const OpenedModel& model, std::int64_t vocab) {
  // Ids need no tokenizer, but one that is named or found labels them.
  PromptTokens p;
  require_tokenizer(t, model.files);
  p.tokenizer = open_tokenizer(model);
  p.sequences = prompt_sequences(t, p.tokenizer ? &*p.tokenizer : nullptr, vocab);
  return p;
}

}  // namespace cli
