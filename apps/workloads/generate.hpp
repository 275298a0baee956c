#pragma once
// `attn-cli generate` and `attn-cli tokenize`: from a prompt, through the tokenizer and the whole
// model, to text; and the tokenizer alone, as llama.cpp's llama-tokenize.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attn/engine/open.hpp"
#include "attn/engine/prompt.hpp"
#include "attn/model/generate.hpp"
#include "attn/text/tokenizer.hpp"

namespace cli {

struct Options;
using attn::TextInput;

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

// The commands, from their flags (flags.hpp).
int generate_command(const Options& f);
int tokenize_command(const Options& f);

}  // namespace cli
