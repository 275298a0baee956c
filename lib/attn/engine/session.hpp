#pragma once
// The session: one opened model (its files, the model, its tokenizer and end-of-sequence ids),
// where its cache stands, and the recorders its callers attach to the model (model.hpp's attach:
// kept probabilities, the logit lens, hooks by name, the page's recorder, the dump's activations;
// the model merges them into the one observer its forward reports to). Every front runs on one:
// attn-cli's generate, view and (through Run, run.hpp) run, decode and heatmap, the Python
// module and examples/consumer. The checked calls: forward over hidden states or token ids at a
// position, generation with sampling, cache session files saved and continued.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attn/engine/open.hpp"
#include "attn/engine/prompt.hpp"
#include "attn/io/output.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/input.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

struct Session {
  ModelFiles files;
  Transformer model;
  std::optional<Tokenizer> tokenizer;  // none: ids in and out only
  std::vector<std::int32_t> eos;       // the tokenizer's end-of-sequence ids
  std::int64_t filled = 0, batch = 0;  // positions and sequences the cache holds
  std::vector<std::uint8_t> keep;      // [max_batch_size, max_seq_len]: the padding mask so far
  Generation generation;               // a token run: the ids the cache holds, the next logits
  bool resume = false;  // the next generation continues `generation` (a loaded cache session)
};

// What a session is opened for: the largest call it will be given, for the buffers and the
// memory pre-flight.
struct SessionShape {
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
Session open_session(const ModelSpec& spec, SessionShape shape = {},
                     std::optional<ModelArgs> args = std::nullopt,
                     std::optional<Tokenizer> tokenizer = std::nullopt);
// The same on a model opened already (open_model): nothing is opened or parsed again.
Session open_session(OpenedModel model, const ModelSpec& spec, SessionShape shape = {},
                     std::optional<ModelArgs> args = std::nullopt,
                     std::optional<Tokenizer> tokenizer = std::nullopt);

// A session over a model planned already (plan_model: the run's and the benchmark's own checks
// done), its weights mapped or drawn in spec.drawn[drawn_index]'s type; no tokenizer.
Session open_session(ModelPlan& plan, const ModelSpec& spec, ModelFiles files = {},
                     std::size_t drawn_index = 0);

// Refuses (InputError) a model that is not a token model, naming what needs one.
void require_token_model(const ModelArgs& a, const std::string& what);

// The mask the next calls apply (causal or none; the config's until set).
void set_mask(Session& e, Mask kind);

// The padding mask of the positions a call writes: mask [batch, seqlen] of 0 and 1 (1 = a real
// position) or null (all real); the earlier positions keep theirs. A call at start_pos 0
// forgets the old one.
void set_padding(Session& e, const float* mask, std::int64_t batch, std::int64_t seqlen,
                 std::int64_t start_pos);

// out [batch, seqlen, dim] = the blocks over x [batch, seqlen, dim] at start_pos (prefill or a
// decode step), the cache extended; checked against the cache and the batch the cache holds.
void forward_hidden(Session& e, const float* x, std::int64_t batch, std::int64_t seqlen,
                    std::int64_t start_pos, float* out);

// Meta's Transformer.forward(tokens, start_pos): logits of each sequence's last position
// [batch, vocab_size], or every position's [batch, seqlen, vocab_size] with all_positions.
void forward_tokens(Session& e, const std::int32_t* tokens, std::int64_t batch, std::int64_t seqlen,
                    std::int64_t start_pos, float* out, bool all_positions);

// Forgets the cache's positions: the next call starts at 0.
void reset(Session& e);

// What generation stops after: the tokenizer's EOS ids, unless ignored.
std::vector<std::int32_t> stop_ids(const Session& e, bool ignore_eos);

// The ids a generation reads and chooses from: the model's vocabulary, or the tokenizer's when
// it is smaller (embeddings padded past the tokenizer, as Hugging Face checkpoints often are:
// the logits past it are masked).
std::int64_t token_vocab(const ModelArgs& a, const std::optional<Tokenizer>& tok);
std::int64_t token_vocab(const Session& e);

// Refuses (InputError naming the setting) a generation the cache cannot hold before any work:
// steps below 0 or alone past max_seq_len ("steps"), or the prompt and steps after `before`
// held positions past it ("max_seq_len"). For a caller with the config and no engine yet too.
void check_generation_fits(const ModelArgs& a, std::int64_t before, std::int64_t prompt,
                           std::int64_t steps);

// Everything generate(e, prompt, steps, s, ...) would refuse, checked before any output: the
// sampling's ranges, the ids against token_vocab, the capacity after the positions a loaded
// session holds.
void check_generation(const Session& e, std::span<const std::int32_t> prompt, std::int64_t steps,
                      const Sampling& s);

// From position 0, or after a loaded cache session's tokens (e.resume), feeds
// `prompt` and chooses up to `steps` tokens, calling on_token after each; stops after an id of
// `stop`. feed_last: the last chosen token is fed too (a session saved after holds the logits
// that follow it). Checked against the cache and the vocabulary first.
void generate(Session& e, std::span<const std::int32_t> prompt, std::int64_t steps,
              const Sampling& s, std::span<const std::int32_t> stop, bool feed_last,
              const std::function<void(const Generated&)>& on_token);

// The sampling generate(e, ...) chooses with: the ids of token_vocab(e) only.
Sampling session_sampling(const Session& e, Sampling s);

// The token the next decode step would feed after e.generation, chosen as generate chooses (the
// same draw, the same masked vocabulary): what the page shows as its next token.
std::int32_t next_token(Session& e, const Sampling& s);

// The BOS a prompt gets: `asked` (the user's --add-bos or --no-bos, Python's bos=) when given;
// none when the prompt continues a context the session holds (a loaded cache session: BOS
// marks a context's start, never its middle); otherwise the tokenizer's own (nullopt).
std::optional<bool> prompt_bos(bool continues, std::optional<bool> asked = std::nullopt);

// The cache session file: the filled cache, its tokens and the next logits, staged beside
// `path` (committed by the caller), and read back into an engine with the same config and
// weights (InputError naming the file and what differs).
// `conversation`: a chat's messages kept in the file (attn-cli chat's), read back when given.
OutputFile stage_cache_session(const Session& e, const std::filesystem::path& path,
                               std::string_view conversation = {});
void load_cache_session(Session& e, const std::filesystem::path& path,
                        std::string* conversation = nullptr);

}  // namespace attn
