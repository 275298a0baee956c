// attn-cli view: one self-contained HTML page of the attention of every shown layer x head. One
// prompt of a token model is generated from (the prompt's prefill, then -n tokens chosen and fed
// one per decode call); anything else (drawn or --input x, several prompts) runs as `run` does.
// The page's bound is printed and checked before any work; the model always runs whole.
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "attn/engine/lens.hpp"
#include "attn/engine/run.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"
#include "commands/commands.hpp"
#include "commands/setup.hpp"
#include "flags.hpp"
#include "text_input.hpp"
#include "workloads/view.hpp"

namespace cli {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The longest token's bytes: what one position's text can take in META.
std::int64_t longest_token(const std::optional<attn::Tokenizer>& tok) {
  std::int64_t n = 24;  // an index, or an id without text
  if (tok)
    for (const std::string& p : tok->pieces) n = std::max(n, std::int64_t(p.size()));
  return n;
}

std::string page_title(const Options& f) {
  if (!f.weights.empty()) return fs::path(f.weights).filename().string();
  if (!f.config.empty()) return fs::path(f.config).filename().string();
  return "seeded model";
}

json token_json(const std::optional<attn::Tokenizer>& tok, std::int32_t id) {
  return {{"id", id}, {"text", tok ? attn::token_bytes(*tok, id) : std::to_string(id)}};
}

// The bound printed, then checked; before any work.
void announce(const ViewShape& v, std::int64_t bound, const ViewSettings& s,
              std::int64_t lens_vocab) {
  std::fprintf(stderr, "%s\n", view_estimate(v, bound).c_str());
  check_view_bound(v, bound, s.max_size, lens_vocab);
}

// The lens panel's K: --logit-lens K, else 5 where the run has the output head (a prompt to a
// token model), else none. `ends` as the run will build them. An asked-for lens the run cannot
// have is refused (check_logit_lens).
int lens_k(const Options& f, const attn::ModelArgs& a, const attn::ModelEnds& ends) {
  if (f.no_logit_lens && f.logit_lens > 0)
    throw attn::InputError("--logit-lens and --no-logit-lens: one or the other");
  if (f.no_logit_lens) return 0;
  if (f.logit_lens > 0) {
    attn::check_logit_lens(a, ends, f.logit_lens);
    return f.logit_lens;
  }
  return a.vocab_size > 0 && ends.logits_out ? 5 : 0;
}

// Writes the page (and --json's figures), then says what it wrote.
void finish(const Options& f, const ViewRecorder& rec, json meta) {
  if (f.json) {
    std::cout << json{{"layers", meta["layers"]},
                      {"heads", meta["heads"]},
                      {"stats", meta["stats"]}}
                     .dump()
              << '\n';
    std::cout.flush();
    if (!std::cout) throw std::runtime_error("cannot write the figures to stdout");
  }
  attn::OutputFile out = stage_view_page(f.png, std::move(meta), rec);
  out.commit();
  std::error_code ec;
  const auto size = fs::file_size(f.png, ec);
  std::fprintf(stderr, "view: wrote %s (%s MB)\n", attn::escape(f.png).c_str(),
               megabytes(ec ? 0.0 : double(size)).c_str());
}

// One prompt of a token model: the engine's generate, every decode call recorded.
int view_generated(const Options& f, const ViewSettings& s, attn::ModelSpec spec,
                   attn::OpenedModel model, const attn::ModelArgs& a, PromptTokens& pt) {
  const std::vector<std::int32_t> prompt = pt.sequences[0];
  const auto P = std::int64_t(prompt.size());
  const std::int64_t N = f.run.steps;
  if (P == 0) throw attn::InputError("view needs a prompt of at least one token", "prompt");
  // A prompt generated from is its own prefill and batch; x is its embeddings.
  if (f.prefill_given || f.batch_given || !f.input.empty())
    throw attn::InputError(
        "view of one prompt: its prefill is the prompt, its batch 1 and its input the tokens' "
        "embeddings (--prefill, --batch and --input are for drawn input or several prompts)");
  attn::check_generation_fits(a, 0, P, N);
  attn::Sampling sampling = f.sampling;
  sampling.seed = f.seed;
  const ViewShape v = plan_view(a, {1, P, N}, s);
  attn::ModelEnds whole;  // the engine opens the token model with its head
  whole.logits_out = a.vocab_size > 0;
  const int k = lens_k(f, a, whole);
  announce(v, view_page_bound(v, longest_token(pt.tokenizer), k), s, k > 0 ? a.vocab_size : 0);

  spec.overrides.max_batch_size = 1;
  attn::Session e = attn::open_session(std::move(model), spec, {1, P, N, 0, view_memory(v, a, k)},
                                       std::nullopt, std::move(pt.tokenizer));
  attn::require_token_model(e.model.args, "view");
  apply_control_vectors(f, e);
  attn::check_generation(e, prompt, N, sampling);
  ViewRecorder rec(v);
  if (k > 0) rec.record_lens(e.model, k);
  {
    const attn::Attached recording(e.model, rec.observer());
    attn::generate(e, prompt, N, sampling, attn::stop_ids(e, f.ignore_eos), true,
                   [](const attn::Generated&) {});
  }

  const std::int32_t next = attn::next_token(e, sampling);
  const std::vector<std::int32_t>& ids = e.generation.tokens;

  json meta = view_meta(e.model.args, rec, page_title(f), e.tokenizer ? &*e.tokenizer : nullptr);
  json tokens = json::array();
  for (std::size_t t = 0; t < std::size_t(rec.positions_seen()); ++t)
    tokens.push_back(token_json(e.tokenizer, ids[t]));
  meta["tokens"] = std::move(tokens);
  meta["chosen"] = token_json(e.tokenizer, next);
  finish(f, rec, std::move(meta));
  return 0;
}

// Drawn or --input x, or several prompts (teacher forcing): a run as `run` makes it.
int view_run(const Options& f, const ViewSettings& s, const attn::ModelSpec& spec,
             attn::OpenedModel model, const attn::ModelArgs& a, PromptTokens& pt) {
  attn::RunRequest r;
  r.model = spec;
  r.args = a;
  r.tokens = pt.sequences;
  set_run_shape(f, r);
  // The page planned for the run's final args and shape, inside plan_run: its buffers join the
  // memory pre-flight.
  ViewShape v;
  int k = 0;
  r.front_parts = [&](const attn::ModelArgs& args, const attn::ModelEnds& ends,
                      const attn::RunOptions& o) {
    v = plan_view(args, o, s);
    k = lens_k(f, args, ends);
    announce(v, view_page_bound(v, longest_token(pt.tokenizer), k), s, k > 0 ? a.vocab_size : 0);
    return view_memory(v, args, k);
  };
  attn::RunPlan plan = attn::plan_run(std::move(r), std::move(model));
  plan.request.front_parts = nullptr;  // its references end with this function

  attn::Run se = attn::open_run(std::move(plan));
  apply_control_vectors(f, se.session);
  const std::int64_t T = v.positions();
  ViewRecorder rec(v);
  if (!se.inspect.attention_mask.empty()) {
    const auto row = se.inspect.attention_mask.begin() + v.batch_row * T;
    rec.set_keep({row, row + T});
  }
  if (k > 0) rec.record_lens(se.session.model, k);
  {
    const attn::Attached recording(se.session.model, rec.observer());
    attn::run(se, [](const attn::Event&) {});
  }

  json meta =
      view_meta(se.request.args, rec, page_title(f), pt.tokenizer ? &*pt.tokenizer : nullptr);
  // Said on the page: a reader of a page made from a seed must not take its heads for a model's.
  const bool drawn_weights = spec.weights.empty(),
             drawn_input = pt.sequences.empty() && f.input.empty();
  if (drawn_weights || drawn_input)
    meta["drawn"] = {{"weights", drawn_weights}, {"input", drawn_input}};
  json tokens = json::array();
  const std::vector<std::int32_t>* ids =
      pt.sequences.empty() ? nullptr : &pt.sequences[std::size_t(v.batch_row)];
  for (std::int64_t t = 0; t < T; ++t) {
    if (!ids)
      tokens.push_back({{"id", nullptr}, {"text", std::to_string(t)}});
    else if (t < std::int64_t(ids->size()))
      tokens.push_back(token_json(pt.tokenizer, (*ids)[std::size_t(t)]));
    else
      tokens.push_back({{"id", nullptr}, {"text", ""}});  // padding
  }
  meta["tokens"] = std::move(tokens);
  meta["chosen"] = nullptr;
  finish(f, rec, std::move(meta));
  return 0;
}

}  // namespace

int view_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (f.json && !std::cout)
    throw std::runtime_error("stdout is closed: the figures have nowhere to go");
  attn::check_output(f.png, "page");
  const ViewSettings s{f.shown_layers, f.heads, f.positions, f.batch_row, f.bits, f.max_size};
  const attn::ModelSpec spec = model_spec(f, attn::Shard{});
  attn::OpenedModel model = attn::open_model(spec);
  const attn::ModelArgs a = attn::model_args(spec, model, attn::seed_args);
  PromptTokens pt;
  if (f.text.given()) pt = prompt_tokens(f.text, model, std::max<std::int64_t>(0, a.vocab_size));
  if (pt.sequences.size() == 1 && a.vocab_size > 0)
    return view_generated(f, s, spec, std::move(model), a, pt);
  return view_run(f, s, spec, std::move(model), a, pt);
}

}  // namespace cli
