#pragma once
// The prompt as attn-cli's prompt flags give it (--prompt, --prompt-file, --tokens,
// --tokens-file, --tokenizer, --no-bos, --add-bos) turned into token sequences: text encoded with
// the model's tokenizer, ids parsed from the flag or a file. The library takes ids and text; the
// ways a command line spells them are the CLI's.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attn/engine/open.hpp"
#include "attn/text/tokenizer.hpp"

namespace cli {

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
std::vector<std::vector<std::int32_t>> prompt_sequences(const TextInput& t,
                                                        const attn::Tokenizer* tok,
                                                        std::int64_t vocab_size,
                                                        std::int64_t max_tokens = 0);

// `text` encoded as the input asks (BOS added or left out whatever the file says), every id
// checked against the model's vocabulary; max_tokens as prompt_sequences.
std::vector<std::int32_t> encode_prompt(const attn::Tokenizer& tok, const TextInput& t,
                                        const std::string& text, std::int64_t vocab_size,
                                        std::int64_t max_tokens = 0);

// The one sequence generation and decoding take (none: a cache session continues).
std::vector<std::int32_t> one_sequence(std::vector<std::vector<std::int32_t>> sequences);

// A text file the user names (a prompt, ids), read whole up to 1 GiB.
std::string read_text_input(const std::string& path, const char* what);

// A prompt's text needs a tokenizer: none named and none found is said in the files' terms.
void require_tokenizer(const TextInput& t, const attn::ModelFiles& files);

// The token sequences a run's text input makes (--tokens "1,2;3,4" and a tokens file's lines or
// JSON array of arrays give several; so do several --prompt), with the tokenizer that read
// them, if any (kept for labels and decoding). The model's files locate the tokenizer as the
// engine finds it (named, tokenizer.json beside the config, a GGUF's own).
struct PromptTokens {
  std::vector<std::vector<std::int32_t>> sequences;
  std::optional<attn::Tokenizer> tokenizer;
};
PromptTokens prompt_tokens(const TextInput& t, const attn::OpenedModel& model,
                           std::int64_t vocab_size);

}  // namespace cli
