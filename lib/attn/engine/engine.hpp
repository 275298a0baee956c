#pragma once
// The engine: one opened model (its files, the model, its tokenizer and end-of-sequence ids) and
// where its cache stands, with the checked calls every front makes on it: forward over hidden
// states or token ids at a position, generation with sampling, cache session files saved and
// continued. attn-cli's generate and the Python module call exactly these.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "attn/engine/open.hpp"
#include "attn/engine/prompt.hpp"
#include "attn/io/output.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/input.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

struct Engine {
  ModelFiles files;
  Transformer model;
  std::optional<Tokenizer> tokenizer;  // none: ids in and out only
  std::vector<std::int32_t> eos;       // the tokenizer's end-of-sequence ids
  std::int64_t filled = 0, batch = 0;  // positions and sequences the cache holds
  std::vector<std::uint8_t> keep;      // [max_batch_size, max_seq_len]: the padding mask so far
  Generation generation;               // a token run: the ids the cache holds, the next logits
  bool resume = false;  // the next generation continues `generation` (a loaded cache session)
};

// What an engine is opened for: the largest call it will be given, for the buffers and the
// memory pre-flight.
struct EngineShape {
  std::int64_t batch = 1;      // sequences
  std::int64_t positions = 0;  // positions of the largest call; 0: the whole cache
  std::int64_t steps = 0;      // decode steps after it
  int logit_lens = 0;          // top tokens of the logit lens a front makes (make_logit_lens)
  // What the front allocates besides (view's probabilities): counted in the pre-flight too.
  std::vector<MemoryPart> front = {};
};

// Opens what `spec` names (config found beside the weights, or `args` given whole), as a token
// model when it has a vocabulary, checked against the memory the machine has before anything is
// mapped or allocated; the tokenizer too when there is one. Without a config and without
// `args`: InputError naming the setting "config".
// `tokenizer`: one the caller opened already (open_tokenizer) to read the prompt.
Engine open_engine(const ModelSpec& spec, EngineShape shape = {},
                   std::optional<ModelArgs> args = std::nullopt,
                   std::optional<Tokenizer> tokenizer = std::nullopt);

// The tokenizer the files name (none when no tokenizer.json is named or beside the config).
std::optional<Tokenizer> open_tokenizer(const ModelFiles& files);

// Refuses (InputError) a model that is not a token model, naming what needs one.
void require_token_model(const ModelArgs& a, const std::string& what);

// The padding mask of the positions a call writes: mask [batch, seqlen] of 0 and 1 (1 = a real
// position) or null (all real); the earlier positions keep theirs. A call at start_pos 0
// forgets the old one.
void set_padding(Engine& e, const float* mask, std::int64_t batch, std::int64_t seqlen,
                 std::int64_t start_pos);

// out [batch, seqlen, dim] = the blocks over x [batch, seqlen, dim] at start_pos (prefill or a
// decode step), the cache extended; checked against the cache and the batch the cache holds.
void forward_hidden(Engine& e, const float* x, std::int64_t batch, std::int64_t seqlen,
                    std::int64_t start_pos, float* out);

// Meta's Transformer.forward(tokens, start_pos): logits of each sequence's last position
// [batch, vocab_size], or every position's [batch, seqlen, vocab_size] with all_positions.
void forward_tokens(Engine& e, const std::int32_t* tokens, std::int64_t batch, std::int64_t seqlen,
                    std::int64_t start_pos, float* out, bool all_positions);

// Forgets the cache's positions: the next call starts at 0.
void reset(Engine& e);

// What generation stops after: the tokenizer's EOS ids, unless ignored.
std::vector<std::int32_t> stop_ids(const Engine& e, bool ignore_eos);

// The ids a generation reads and chooses from: the model's vocabulary, or the tokenizer's when
// it is smaller (embeddings padded past the tokenizer, as Hugging Face checkpoints often are:
// the logits past it are masked).
std::int64_t token_vocab(const ModelArgs& a, const std::optional<Tokenizer>& tok);
std::int64_t token_vocab(const Engine& e);

// Refuses (InputError naming the setting) a generation the cache cannot hold before any work:
// steps below 0 or alone past max_seq_len ("steps"), or the prompt and steps after `before`
// held positions past it ("max_seq_len"). For a caller with the config and no engine yet too.
void check_generation_fits(const ModelArgs& a, std::int64_t before, std::int64_t prompt,
                           std::int64_t steps);

// Everything generate(e, prompt, steps, s, ...) would refuse, checked before any output: the
// sampling's ranges, the ids against token_vocab, the capacity after the positions a loaded
// session holds.
void check_generation(const Engine& e, std::span<const std::int32_t> prompt, std::int64_t steps,
                      const Sampling& s);

// From position 0, or after a loaded cache session's tokens (e.resume), feeds
// `prompt` and chooses up to `steps` tokens, calling on_token after each; stops after an id of
// `stop`. feed_last: the last chosen token is fed too (a session saved after holds the logits
// that follow it). Checked against the cache and the vocabulary first.
void generate(Engine& e, std::span<const std::int32_t> prompt, std::int64_t steps,
              const Sampling& s, std::span<const std::int32_t> stop, bool feed_last,
              const std::function<void(const Generated&)>& on_token);

// The cache session file: the filled cache, its tokens and the next logits, staged beside
// `path` (committed by the caller), and read back into an engine with the same config and
// weights (InputError naming the file and what differs).
OutputFile stage_cache_session(const Engine& e, const std::filesystem::path& path);
void load_cache_session(Engine& e, const std::filesystem::path& path);

}  // namespace attn
