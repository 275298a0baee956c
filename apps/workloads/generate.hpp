#pragma once
// `attn-cli generate` and `attn-cli tokenize`: from a prompt, through the tokenizer and the whole
// model, to text; and the tokenizer alone, as llama.cpp's llama-tokenize.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attn/model/generate.hpp"
#include "attn/text/tokenizer.hpp"

namespace cli {

struct Options;

struct TextInput {
  std::vector<std::string> prompt;  // one sequence each
  std::string prompt_file, tokens, tokens_file, tokenizer;
  bool no_bos = false, add_bos = false;

  bool given() const {
    return !prompt.empty() || !prompt_file.empty() || !tokens.empty() || !tokens_file.empty();
  }
};

// The token sequences a run's text input makes (--tokens "1,2;3,4" and a tokens file's lines or
// JSON array of arrays give several; so do several --prompt), with the tokenizer that read
// them, if any (kept for labels and decoding). `config` locates the default tokenizer.json.
struct PromptTokens {
  std::vector<std::vector<std::int32_t>> sequences;
  std::optional<attn::Tokenizer> tokenizer;
};
PromptTokens prompt_tokens(const TextInput& t, const std::string& config, std::int64_t vocab_size);

// "1,15043 29991" or "[1, 15043]" or {"ids": [...]}: ids, each checked to be in [0, vocab_size)
// when vocab_size > 0. `what` names the flag or file in messages.
std::vector<std::int32_t> parse_token_ids(const std::string& text, const std::string& what,
                                          std::int64_t vocab_size);

// The tokenizer file a run uses: --tokenizer, or tokenizer.json beside the config.
std::filesystem::path tokenizer_path(const TextInput& t, const std::string& config);

// The commands, from their flags (flags.hpp).
int generate_command(const Options& f);
int tokenize_command(const Options& f);

}  // namespace cli
