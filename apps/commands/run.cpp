// attn-cli run, decode and heatmap: one run of the model, its trace printed (the notebook's
// cache line per step for decode) and, for heatmap, one layer's attention drawn.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <ostream>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/kernels/runtime.hpp"
#include "commands/commands.hpp"
#include "commands/setup.hpp"
#include "flags.hpp"
#include "ranks.hpp"
#include "text_input.hpp"
#include "workloads/heatmap.hpp"
#include "workloads/trace.hpp"

namespace cli {

namespace {

Summary summarize(const attn::RunOptions& o, const attn::RunOutputs& out, const attn::Runtime& rt) {
  std::vector<double> steps = out.decode_seconds;
  std::sort(steps.begin(), steps.end());
  double total = 0;
  for (double s : steps) total += s;
  return {o.prefill,        out.prefill_seconds * 1e3,
          o.steps,          steps.empty() ? 0 : steps[steps.size() / 2] * 1e3,
          total * 1e3,      rt.threads,
          attn::blas_core()};
}

// The request the flags make: the config with its overrides, the shape, the files.
attn::RunRequest run_request(const Options& f, const attn::Shard& shard, bool keep_attention,
                             const PromptTokens& prompt, const attn::OpenedModel& model) {
  attn::RunRequest r;
  r.model = model_spec(f, shard);
  r.args = attn::model_args(r.model, model, attn::seed_args);
  r.tokens = prompt.sequences;
  r.all_logits = f.all_logits;
  r.logits = f.logits;
  r.logit_lens = f.logit_lens;

  set_run_shape(f, r);
  r.dump = f.dump;
  r.attention_weights = keep_attention;
  r.dump_attention_weights = f.attention_weights;
  if (!f.dump_activations.empty() && f.dump.empty())
    throw attn::InputError("--dump-activations needs --dump F: the activations go into the dump");
  r.dump_activations = f.dump_activations;
  return r;
}

void check_print_attention(const attn::RunRequest& r) {
  const double values = attn::attention_weights_bytes(r.args, r.opts) / 4;
  if (values > kPrintAttentionLimit)
    throw attn::InputError(
        "--print-attention would print " + std::to_string(std::int64_t(values)) +
        " probabilities (over 2^20, about 8 MB of text): use --attention-weights "
        "--dump F, or fewer positions");
}

// The heatmap's sequence, scale, padding and token labels (a prompt's pieces, or its ids).
HeatmapOptions heatmap_options(const Options& f, const attn::Run& se, const PromptTokens& prompt) {
  const attn::RunOptions& o = se.request.opts;
  const std::int64_t T = o.prefill + o.steps;
  HeatmapOptions h{f.batch_row,
                   f.scale.empty() ? default_scale(T) : parse_scale(f.scale),
                   {},
                   {},
                   se.request.args.first_layer};
  if (!se.inspect.attention_mask.empty())
    h.keep.assign(se.inspect.attention_mask.begin() + f.batch_row * T,
                  se.inspect.attention_mask.begin() + (f.batch_row + 1) * T);
  if (prompt.sequences.empty()) return h;
  const std::vector<std::int32_t>& ids = prompt.sequences[std::size_t(f.batch_row)];
  for (std::int64_t t = 0; t < T; ++t) {
    if (t >= std::int64_t(ids.size())) {
      h.labels.push_back("");  // padding
      continue;
    }
    const std::int32_t id = ids[std::size_t(t)];
    h.labels.push_back(prompt.tokenizer ? attn::token_bytes(*prompt.tokenizer, id)
                                        : std::to_string(id));
  }
  return h;
}

// Every rank's setup: the prompt's tokens, the plan, the checks, the session.
// The heatmap's PNG as a writer of the run: rank 0 draws it once the run is done; `size` says
// what it drew.
attn::RunWriter png_writer(const Options& f, const attn::Shard& shard, const PromptTokens& prompt,
                           std::string& size) {
  return {"PNG", f.png, [&f, &prompt, &size, rank = shard.rank](const attn::Run& se) {
            std::optional<attn::OutputFile> out;
            if (rank != 0) return out;
            const Image img = render_heatmap(se.request.args, se.request.opts, se.out, f.layer,
                                             heatmap_options(f, se, prompt));
            size = std::to_string(img.width) + " x " + std::to_string(img.height);
            out.emplace(stage_png(f.png, img));
            return out;
          }};
}

attn::Run set_up_run(const Options& f, Command c, const attn::Shard& shard, PromptTokens& prompt,
                     std::string& png_size) {
  const bool heatmap = c == Command::heatmap;
  if (shard.rank == 0 && !std::cout)  // see keep_standard_streams (attn_cli.cpp)
    throw std::runtime_error(
        "stdout is closed: the trace has nowhere to go (send it to "
        "/dev/null to discard it)");
  attn::OpenedModel model = attn::open_model(model_spec(f, shard));
  if (f.text.given()) prompt = prompt_tokens(f.text, model, 0);
  attn::RunRequest r = run_request(f, shard, f.print_attention || heatmap, prompt, model);
  if (heatmap) r.writers.push_back(png_writer(f, shard, prompt, png_size));
  attn::RunPlan plan = attn::plan_run(std::move(r), std::move(model));
  if (f.print_attention) check_print_attention(plan.request);
  if (heatmap) check_heatmap(plan.request.args, plan.request.opts, f.layer, f.batch_row);
  return attn::open_run(std::move(plan));
}

// Runs the session, printing the config, each step (flushed as it comes) and the summary.
void run_traced(const Options& f, bool decode_only, attn::Run& se, const PromptTokens& prompt,
                std::ostream& trace, bool rank0) {
  const attn::ModelArgs& args = se.request.args;
  if (f.json)
    print_config_json(trace, args);
  else
    print_config_text(trace, args);
  attn::run(se, [&](const attn::Event& e) {
    if (f.json)
      print_event_json(trace, e);
    else
      print_event_text(trace, e, decode_only);
    if (f.print_attention && f.json) print_attention_json(trace, args, e);
    if (f.print_attention && !f.json) print_attention(trace, args, e);
    if (e.lens) {
      const char* of = e.kind == attn::Event::Kind::prefill ? "prefill" : "decode";
      if (f.json)
        print_lens_json(trace, *e.lens, of, e.step, args.first_layer);
      else
        print_lens_text(trace, *e.lens, of, e.step, args.first_layer,
                        prompt.tokenizer ? &*prompt.tokenizer : nullptr);
    }
    trace.flush();  // what is printed stays printed, whatever ends the run later
  });
  const Summary s = summarize(se.request.opts, se.out, se.session.model.rt);
  if (f.json) print_summary_json(trace, s);
  if (rank0) print_summary_text(std::cerr, s);
}

void check_stdout() {
  std::cout.flush();
  if (!std::cout) throw std::runtime_error("cannot write the trace to stdout");
}

}  // namespace

int run_command(const Options& f, Command c, const attn::Shard& shard) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  quiet_other_ranks(shard);
  std::optional<attn::Run> session;
  PromptTokens prompt;
  std::string png_size;  // what the heatmap drew
  // Every rank sets up, then all agree on one status before any collective.
  ranks::set_up(shard, [&] { session.emplace(set_up_run(f, c, shard, prompt, png_size)); });
  return ranks::or_abort(shard, [&] {
    const bool rank0 = shard.rank == 0;
    std::ostream nowhere(nullptr);
    run_traced(f, c == Command::decode, *session, prompt, rank0 ? std::cout : nowhere, rank0);
    check_stdout();
    attn::write_outputs(*session, check_stdout);
    if (!png_size.empty())
      std::fprintf(stderr, "wrote %s (%s)\n", attn::escape(f.png).c_str(), png_size.c_str());
    return 0;
  });
}

}  // namespace cli
