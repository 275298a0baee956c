#include "attn/engine/session.hpp"

#include <algorithm>

#include "attn/engine/lens.hpp"
#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/model/cache_session.hpp"

namespace attn {

namespace {

ModelArgs session_args(const ModelSpec& spec, const OpenedModel& model,
                       std::optional<ModelArgs> args) {
  ModelArgs a = args ? *args : model_args(spec, model, nullptr);
  if (a.model_parallel_size > 1)
    throw InputError(a.source + ": model_parallel_size " + std::to_string(a.model_parallel_size) +
                         " needs one process per rank (mpirun); this engine is one process",
                     "model_parallel_size");
  return a;
}

void check_tokenizer(const std::optional<Tokenizer>& tok, const ModelArgs& a) {
  if (tok && a.vocab_size > 0 && tok->vocab_size() > a.vocab_size)
    throw InputError(tok->source + ": " + std::to_string(tok->vocab_size()) +
                     " tokens, more than the model's vocab_size " + std::to_string(a.vocab_size));
}

void check_batch(const Session& e, std::int64_t batch, std::int64_t start_pos,
                 const std::string& what) {
  if (start_pos > 0 && start_pos > e.filled)
    throw InputError(what + ": start_pos " + std::to_string(start_pos) + " is past the " +
                         std::to_string(e.filled) + " positions the cache holds",
                     "start_pos");
  if (start_pos > 0 && batch != e.batch)
    throw InputError(what + ": batch " + std::to_string(batch) + " differs from the " +
                     std::to_string(e.batch) + " sequences the cache holds");
}

void advance(Session& e, std::int64_t batch, std::int64_t start_pos, std::int64_t seqlen) {
  e.filled = start_pos + seqlen;
  e.batch = batch;
  e.generation.tokens.clear();  // the cache no longer holds one generation's ids
  e.resume = false;             // nor a loaded session for generate to continue
}

}  // namespace

Session open_session(const ModelSpec& spec, SessionShape shape, std::optional<ModelArgs> args,
                     std::optional<Tokenizer> tok) {
  return open_session(open_model(spec), spec, std::move(shape), std::move(args), std::move(tok));
}

Session open_session(OpenedModel model, const ModelSpec& spec, SessionShape shape,
                     std::optional<ModelArgs> args, std::optional<Tokenizer> tok) {
  const ModelArgs a = session_args(spec, model, std::move(args));
  if (!tok) tok = open_tokenizer(model);
  check_tokenizer(tok, a);
  const std::int64_t positions = shape.positions > 0 ? shape.positions : a.max_seq_len;
  RunShape run{shape.batch, positions, shape.steps,
               std::max<std::int64_t>(1, shape.batch * positions)};
  run.ends = token_ends(a);
  run.logit_lens = logit_lens_bytes(a, run.max_rows, shape.logit_lens);
  ModelPlan plan = plan_model(a, spec, model, run, std::move(shape.front));
  Session e{
      std::move(model.files), load_model(plan, spec), std::move(tok), {}, 0, 0, {}, {}, false};
  if (e.tokenizer) e.eos = e.tokenizer->eos;
  return e;
}

Session open_session(ModelPlan& plan, const ModelSpec& spec, ModelFiles files,
                     std::size_t drawn_index) {
  return {std::move(files), load_model(plan, spec, drawn_index), {}, {}, 0, 0, {}, {}, false};
}

void require_token_model(const ModelArgs& a, const std::string& what) {
  if (a.vocab_size <= 0)
    throw InputError(a.source + ": " + what +
                     " needs a token model (vocab_size > 0, with tok_embeddings, norm and "
                     "output); this one reads hidden states, vocab_size " +
                     std::to_string(a.vocab_size));
}

void set_mask(Session& e, Mask kind) {
  e.model.mask.kind = kind;
}

void set_padding(Session& e, const float* mask, std::int64_t B, std::int64_t T,
                 std::int64_t start_pos) {
  const ModelArgs& a = e.model.args;
  AttentionMask& m = e.model.mask;
  if (!mask) {
    if (start_pos == 0) m.keep = nullptr;
    if (m.keep)
      for (std::int64_t b = 0; b < B; ++b)
        std::fill_n(e.keep.begin() + b * a.max_seq_len + start_pos, T, std::uint8_t(1));
    return;
  }
  for (std::int64_t i = 0; i < B * T; ++i)  // checked whole before the old mask changes
    padding_value(mask[i], "attention_mask", i / T, i % T);
  if (!m.keep || start_pos == 0) e.keep.assign(std::size_t(a.max_batch_size * a.max_seq_len), 1);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      e.keep[std::size_t(b * a.max_seq_len + start_pos + t)] = mask[b * T + t] != 0;
  m.keep = e.keep.data();
  m.ld = a.max_seq_len;
}

void forward_hidden(Session& e, const float* x, std::int64_t B, std::int64_t T,
                    std::int64_t start_pos, float* out) {
  check_fits(e.model.args, B, start_pos, T, "x");
  if (T < 1) throw InputError("x: no positions");
  check_batch(e, B, start_pos, "x");
  if (B * T > e.model.act.plan.max_rows)
    throw InputError("x: " + std::to_string(B * T) + " rows in one call, over the " +
                     std::to_string(e.model.act.plan.max_rows) + " the engine was opened for");
  forward(e.model, x, B, T, start_pos, out);
  advance(e, B, start_pos, T);
}

void forward_tokens(Session& e, const std::int32_t* tokens, std::int64_t B, std::int64_t T,
                    std::int64_t start_pos, float* out, bool all_positions) {
  require_token_model(e.model.args, "forward(tokens)");
  check_fits(e.model.args, B, start_pos, T, "tokens");
  if (T < 1) throw InputError("tokens: no positions");
  check_batch(e, B, start_pos, "tokens");
  check_token_ids({tokens, std::size_t(B * T)}, e.model.args.vocab_size, "tokens");
  if (start_pos == 0) e.model.mask.keep = nullptr;
  forward(e.model, tokens, B, T, start_pos, out, all_positions);
  advance(e, B, start_pos, T);
}

void reset(Session& e) {
  e.filled = e.batch = 0;
  e.model.mask.keep = nullptr;
  e.generation = {};
  e.resume = false;
}

std::vector<std::int32_t> stop_ids(const Session& e, bool ignore_eos) {
  return ignore_eos ? std::vector<std::int32_t>{} : e.eos;
}

std::int64_t token_vocab(const ModelArgs& a, const std::optional<Tokenizer>& tok) {
  return tok && tok->vocab_size() < a.vocab_size ? tok->vocab_size() : a.vocab_size;
}

std::int64_t token_vocab(const Session& e) {
  return token_vocab(e.model.args, e.tokenizer);
}

void check_generation_fits(const ModelArgs& a, std::int64_t before, std::int64_t prompt,
                           std::int64_t steps) {
  if (steps < 0)
    throw InputError("steps must be at least 0, got " + std::to_string(steps), "steps");
  // A larger cache fixes it; fewer steps too where the prompt fits without them: the error
  // names each (terms compared alone: no sum can overflow).
  const bool fewer_steps =
      steps > 0 && before >= 0 && before <= a.max_seq_len && prompt <= a.max_seq_len - before;
  const std::string fixes = fewer_steps ? "max_seq_len,steps" : "max_seq_len";
  const std::string what =
      "the prompt's " + std::to_string(prompt) + " tokens and " + std::to_string(steps) + " steps";
  if (steps > a.max_seq_len)  // alone first: the sum below cannot overflow
    throw InputError(what + " cannot fit the cache: max_seq_len is " +
                         std::to_string(a.max_seq_len) + " (" + a.source + ")",
                     fixes);
  try {
    check_fits(a, 1, before, prompt + steps, what);
  } catch (const InputError& e) {
    throw InputError(e.what(), fixes);
  }
}

void check_generation(const Session& e, std::span<const std::int32_t> prompt, std::int64_t steps,
                      const Sampling& s) {
  const ModelArgs& a = e.model.args;
  require_token_model(a, "generation");
  const bool resume = e.resume && !e.generation.logits.empty();
  if (prompt.empty() && !resume)
    throw InputError("generation needs a prompt (or a cache session to continue)", "prompt");
  check_sampling(s);
  check_token_ids(prompt, token_vocab(e), "prompt");
  const std::int64_t before = resume ? std::int64_t(e.generation.tokens.size()) : 0;
  check_generation_fits(a, before, std::int64_t(prompt.size()), steps);
  if (std::int64_t(prompt.size()) > e.model.act.plan.max_rows)
    throw InputError("prompt: " + std::to_string(prompt.size()) + " tokens in one call, over the " +
                     std::to_string(e.model.act.plan.max_rows) + " the engine was opened for");
}

void generate(Session& e, std::span<const std::int32_t> prompt, std::int64_t steps,
              const Sampling& s, std::span<const std::int32_t> stop, bool feed_last,
              const std::function<void(const Generated&)>& on_token) {
  check_generation(e, prompt, steps, s);
  if (!e.resume) reset(e);
  e.resume = false;
  e.model.mask.keep = nullptr;
  attn::generate(e.model, e.generation, prompt, steps, session_sampling(e, s), stop, feed_last,
                 on_token);
  e.filled = std::int64_t(e.generation.tokens.size());
  e.batch = 1;
}

Sampling session_sampling(const Session& e, Sampling s) {
  s.n_vocab = token_vocab(e);
  return s;
}

std::int32_t next_token(Session& e, const Sampling& s) {
  Generation& g = e.generation;
  return sample(g.logits, session_sampling(e, s), std::uint64_t(g.tokens.size()), g.candidates,
                g.tokens);
}

std::optional<bool> prompt_bos(bool continues, std::optional<bool> asked) {
  if (asked) return asked;
  if (continues) return false;
  return std::nullopt;
}

OutputFile stage_cache_session(const Session& e, const std::filesystem::path& path,
                               std::string_view conversation) {
  if (e.generation.tokens.empty() || e.generation.logits.empty())
    throw InputError("nothing to save: the cache holds no generation", "save_session");
  return stage_session(path, e.model, e.generation, conversation);
}

void load_cache_session(Session& e, const std::filesystem::path& path, std::string* conversation) {
  require_token_model(e.model.args, "a cache session");
  reset(e);
  try {
    load_session(path, e.model, e.generation, conversation);
    // The next generation prints the tokens as text: the tokenizer's ids only.
    check_token_ids(e.generation.tokens, token_vocab(e),
                    escape(path.string()) + ": metadata 'tokens'");
  } catch (...) {
    reset(e);  // nothing of a refused file stays
    throw;
  }
  e.filled = std::int64_t(e.generation.tokens.size());
  e.batch = 1;
  e.resume = true;
}

}  // namespace attn
