#pragma once
// From token ids to more token ids: the prompt's prefill, then one token at a time, each chosen
// from the last position's logits, greedily (the default: bit-reproducible) or drawn after
// llama.cpp's sampler chain (top-k, top-p, min-p, then the temperature).
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "attn/model/model.hpp"

namespace attn {

struct Sampling {
  double temp = 0;  // 0: greedy (the argmax, the lowest id on ties)
  std::int64_t top_k = 40;
  double top_p = 0.95, min_p = 0.05;
  std::uint64_t seed = 42;
  // Ids chosen from [0, n_vocab) only (0: the whole vocabulary): a tokenizer's, when the model's
  // embeddings are padded past it (the logits above are masked, as llama.cpp and HF do).
  std::int64_t n_vocab = 0;
  // llama.cpp's penalties (penalty_repeat, penalty_last_n, penalty_present, penalty_freq), applied
  // first, to the tokens of the last repeat_last_n positions (-1: the whole context, 0: none).
  double repeat_penalty = 1.0;
  std::int64_t repeat_last_n = 64;
  double presence_penalty = 0.0, frequency_penalty = 0.0;
};

// Refuses (InputError naming the setting: temp, top_k, top_p, min_p, repeat_penalty, ...) a value
// out of range or NaN: temp in [0, 100], top_k in [0, 2^24], top_p and min_p in [0, 1],
// repeat_penalty in (0, 100], repeat_last_n in [-1, 2^31 - 1], presence_penalty and
// frequency_penalty in [-100, 100].
void check_sampling(const Sampling& s);

// A token the sampler still considers, with its probability.
struct SampleCandidate {
  std::int32_t id;
  float logit;
  double p = 0;
};

// The token to take from logits[vocab]; `draw` numbers the draw (the position it fills), so
// that a run continued from a saved session draws what one run would have. `scratch` holds the
// candidates (sized once: a step allocates nothing). `context` is the tokens before the one
// drawn (the prompt's too, as llama.cpp's samplers accept them): the penalties look at its last
// repeat_last_n.
std::int32_t sample(std::span<const float> logits, const Sampling& s, std::uint64_t draw,
                    std::vector<SampleCandidate>& scratch,
                    std::span<const std::int32_t> context = {});

// True when s's penalties change no logit (llama.cpp's test: none asked for, or no window).
bool penalties_off(const Sampling& s);

// llama.cpp's penalties (llama_sampler_penalties_apply) on c, indexed by id, from the last
// repeat_last_n tokens of `context`: what sample applies before top-k. Uses c's p as counts
// (left 0).
void apply_penalties(std::span<SampleCandidate> c, const Sampling& s,
                     std::span<const std::int32_t> context);

struct Generation {
  std::vector<std::int32_t> tokens;         // every token whose keys and values the cache holds
  std::vector<float> logits;                // [vocab_size]: the last position's, to choose the next
  std::vector<SampleCandidate> candidates;  // the sampler's scratch
  double prompt_seconds = 0, eval_seconds = 0;
  std::int64_t prompt_tokens = 0, eval_tokens = 0;  // positions computed in each phase
};

struct Generated {
  std::int32_t id;
  std::int64_t step;              // 0-based
  std::span<const float> logits;  // the logits it was chosen from
};

// Feeds `prompt` after g.tokens (a prefill at position g.tokens.size()), then chooses up to
// `steps` tokens, calling on_token after each; stops after a token of `stop`. Each chosen token is
// fed back before the next choice; the last one too when feed_last (a session to save must hold
// the logits that follow it). m's cache must hold g.tokens (a fresh model: none).
void generate(Transformer& m, Generation& g, std::span<const std::int32_t> prompt,
              std::int64_t steps, const Sampling& s, std::span<const std::int32_t> stop,
              bool feed_last, const std::function<void(const Generated&)>& on_token);

}  // namespace attn
