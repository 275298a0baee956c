#pragma once
// `attn-cli generate` and `attn-cli tokenize`: from a prompt, through the engine, to text; and
// the tokenizer alone, as llama.cpp's llama-tokenize.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attn/engine/prompt.hpp"
#include "attn/model/generate.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

// The token sequences a run's text input makes (--tokens "1,2;3,4" and a tokens file's lines or
// JSON array of arrays give several; so do several --prompt), with the tokenizer that read
// them, if any (kept for labels). `config` locates the default tokenizer.json.
struct PromptTokens {
  std::vector<std::vector<std::int32_t>> sequences;
  std::optional<Tokenizer> tokenizer;
};
PromptTokens prompt_tokens(const TextInput& t, const std::string& config, std::int64_t vocab_size);

struct GenerateFlags {
  std::string config, weights, log_level = "warn";
  TextInput text;
  std::int64_t steps = 32, max_seq_len = 0;
  Sampling sampling;
  int threads = 0;
  std::string compute = "f32";  // --compute
  bool json = false, ignore_eos = false;
  std::string save_session, load_session;
};

int generate_command(const GenerateFlags& f);

struct TokenizeFlags {
  TextInput text;
  bool json = false, decode = false;
  std::string log_level = "warn";  // info: the encoding's bytes, ids and MB/s on stderr
};
int tokenize_command(const TokenizeFlags& f);

}  // namespace attn
