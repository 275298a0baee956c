#pragma once
// A prompt as a user gives it (text, a text file, token ids, a file of ids) turned into token
// sequences, and generated ids turned back into text as they come.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attn/model/model.hpp"  // check_token_ids
#include "attn/text/tokenizer.hpp"

namespace attn {

struct TextInput {
  std::vector<std::string> prompt;  // one sequence each
  std::string prompt_file, tokens, tokens_file, tokenizer;
  bool no_bos = false, add_bos = false;

  bool given() const {
    return !prompt.empty() || !prompt_file.empty() || !tokens.empty() || !tokens_file.empty();
  }
  bool wants_text() const { return !prompt.empty() || !prompt_file.empty(); }
};

// "1,15043 29991" or "[1, 15043]" or {"ids": [...]}: ids, each checked against the vocabulary.
// `what` names the option or file in messages.
std::vector<std::int32_t> parse_token_ids(const std::string& text, const std::string& what,
                                          std::int64_t vocab_size);

// The token sequences the input makes: token ids (several sequences separated by ';' or lines,
// or a JSON array of arrays), or each prompt encoded with `tok` (needed for text), every id
// checked against the model's vocabulary (vocab_size <= 0: not checked). max_tokens > 0: a text
// far longer than that many tokens is refused (setting max_seq_len) before it is encoded whole.
std::vector<std::vector<std::int32_t>> prompt_sequences(const TextInput& t, const Tokenizer* tok,
                                                        std::int64_t vocab_size,
                                                        std::int64_t max_tokens = 0);

// `text` encoded as the input asks (BOS added or left out whatever the file says), every id
// checked against the model's vocabulary; max_tokens as prompt_sequences.
std::vector<std::int32_t> encode_prompt(const Tokenizer& tok, const TextInput& t,
                                        const std::string& text, std::int64_t vocab_size,
                                        std::int64_t max_tokens = 0);

// Refuses (InputError naming `what` and the setting max_seq_len) a text whose ids would be far
// more than max_tokens, measured by encoding it a chunk of about a MiB at a time and stopping
// as soon as the chunks' ids are too many: memory bounded by a chunk, not by the text (its
// whole pieces and ids cost ~14 bytes per byte). A chunk's edges can change a few ids (a word
// cut, a space prefixed), so only a count past max_tokens plus a margin per chunk is refused; a
// text of one chunk or less is left to the caller's exact count.
void check_text_fits(const Tokenizer& tok, std::string_view text, std::int64_t max_tokens,
                     const std::string& what);

// The one sequence generation and decoding take (none: a cache session continues).
std::vector<std::int32_t> one_sequence(std::vector<std::vector<std::int32_t>> sequences);

// A text file the user names (a prompt, ids), read whole up to 1 GiB.
std::string read_text_input(const std::string& path, const char* what);

// The text of the tokens as they grow, holding back an incomplete UTF-8 character (a byte
// token whose continuation has not come yet). Special tokens (BOS, EOS, a chat template's
// markers) are not text: they print nothing, as in llama.cpp's generation output and
// llama2.c's run.c, so a story prints as its reference prints it.
struct TextStream {
  const Tokenizer& tok;
  std::vector<std::int32_t> ids;
  std::size_t printed = 0;  // bytes of decode(ids) already out

  TextStream(const Tokenizer& tok, std::vector<std::int32_t> printed_ids);
  std::string next(std::int32_t id);
};

}  // namespace attn
