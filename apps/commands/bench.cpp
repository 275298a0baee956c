// attn-cli bench: one layer in several weight types, timed in the same rounds against the
// machine's limits; the report is bench_report.cpp's.
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/error.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/weights.hpp"
#include "attn/weight_type.hpp"
#include "bench_report.hpp"
#include "commands/commands.hpp"
#include "commands/setup.hpp"
#include "flags.hpp"
#include "ranks.hpp"
#include "workloads/bench.hpp"

namespace cli {

namespace {

// bench's progress on stderr: a bar redrawn in place on a terminal, one line per phase otherwise
// (a log, a CI job). Rank 0 only.
struct ProgressBar {
  bool shown = true;
  bool tty = ::isatty(STDERR_FILENO) != 0;
  std::string phase;
  bool drawn = false;  // a bar is on the current line

  void line(const std::string& text) {
    if (!shown) return;
    if (drawn) std::fputc('\n', stderr);
    drawn = false;
    std::fprintf(stderr, "bench: %s\n", text.c_str());
  }
  void operator()(const char* p, std::int64_t done, std::int64_t total) {
    if (!shown) return;
    if (!tty) {
      if (phase != p) line(std::string(p) + " (" + std::to_string(total) + ")");
      phase = p;
      return;
    }
    constexpr int kWidth = 30;
    const int full = total > 0 ? int(kWidth * done / total) : 0;
    std::fprintf(
        stderr, "\rbench: %-8s [%s%s] %lld/%lld", p, std::string(std::size_t(full), '#').c_str(),
        std::string(std::size_t(kWidth - full), ' ').c_str(), (long long)done, (long long)total);
    std::fflush(stderr);
    drawn = true;
    phase = p;
  }
};

// The batched rows decode up to 16 sequences (--max-batch B: those up to B); the cache holds
// them at the bench's positions only, so it stays small.
std::int64_t max_batch(const Options& f) {
  return f.overrides.max_batch_size > 0 ? f.overrides.max_batch_size : kBenchBatches.back();
}

std::vector<std::int64_t> batches(const Options& f) {
  std::vector<std::int64_t> out;
  for (std::int64_t B : kBenchBatches)
    if (B <= max_batch(f)) out.push_back(B);
  return out;
}

// The position of the first decode step: --depth, else right after the prefill.
std::int64_t depth(const Options& f) {
  return f.depth > 0 ? f.depth : f.run.prefill;
}

// The layer's config with the flags' overrides, checked, its cache sized for the batched rows
// at the decode's depth.
attn::ModelArgs bench_args(const Options& f, const attn::ModelSpec& spec,
                           const attn::OpenedModel& model) {
  attn::ModelArgs args = attn::model_args(spec, model, attn::llama3_8b_layer_args);
  attn::check_shard(args, spec.shard);
  if (f.run.prefill < 1 || f.run.steps < 1)
    throw attn::InputError("bench needs --prefill and --steps >= 1");
  if (depth(f) < f.run.prefill)
    throw attn::InputError("bench needs --depth >= --prefill (the depth is filled by prefills)");
  attn::check_capacity(args, {1, depth(f), f.run.steps});
  args.max_batch_size = max_batch(f);
  args.max_seq_len = std::min(args.max_seq_len, depth(f) + f.run.steps);
  return args;
}

// The same layer in each weight type, and its input.
struct Workload {
  std::vector<float> x;
  std::vector<attn::Session> sessions;  // one per weight type, compared in the same rounds
};

// A file runs as it is; drawn weights once per weight type, the same draws rounded. Every
// type's model is held at once: the engine's pre-flight counts them all before any is made.
void set_up_workload(const Options& f, const attn::Shard& shard, ProgressBar& progress,
                     Workload& w) {
  attn::ModelSpec spec = model_spec(f, shard);
  spec.drawn.clear();
  for (const std::string& t : f.weight_types)
    spec.drawn.push_back(*attn::find_weight_type(t));  // the flag checked it
  const attn::OpenedModel model = attn::open_model(spec);
  const std::int64_t rows = std::max(f.run.prefill, max_batch(f));
  attn::ModelPlan plan = attn::plan_model(bench_args(f, spec, model), spec, model,
                                          {max_batch(f), f.run.prefill, f.run.steps, rows});
  const std::size_t n = plan.drawn ? spec.drawn.size() : 1;
  progress.line("drawing the weights (" + std::to_string(n) + " weight type(s)) and the input");
  w.x = attn::seeded_input(plan.args, {1, f.run.prefill, f.run.steps}, f.seed);
  w.sessions.reserve(n);
  for (std::size_t i = 0; i < n; ++i) w.sessions.push_back(attn::open_session(plan, spec, {}, i));
}

// Every model in the same rounds, --compute bf16's error, then the machine's limits.
std::vector<BenchResult> measure(const Options& f, Workload& w, ProgressBar& progress) {
  std::vector<attn::Transformer*> ms;
  for (attn::Session& s : w.sessions) ms.push_back(&s.model);
  const attn::Transformer& m = w.sessions.front().model;
  std::vector<BenchResult> results = bench_workload(ms, w.x, {f.run.prefill, f.run.steps, depth(f)},
                                                    batches(f), std::ref(progress));
  if (m.rt.compute == attn::Compute::bf16) {
    progress.line("--compute bf16 against the exact path (one prefill each way)");
    for (std::size_t i = 0; i < results.size(); ++i)
      if (results[i].weight_type == "BF16")
        results[i].compute_error = compute_error(*ms[i], w.x, f.run.prefill);
  }
  progress.line("the machine's limits: OpenBLAS sgemm on the layer's shapes, the FMA peak");
  MachineLimits machine;
  measure_limits(m, f.run.prefill, machine);
  for (BenchResult& r : results) {  // the stream read stays each type's own
    machine.stream_gbs = r.limits.stream_gbs;
    machine.stream_pattern = r.limits.stream_pattern;
    r.limits = machine;
  }
  return results;
}

// Every rank takes part in the collectives; rank 0 prints.
void report(const Options& f, const attn::Shard& shard, const std::vector<BenchResult>& results,
            const attn::Transformer& m, ProgressBar& progress) {
  const BenchResult& r = results.front();
  const std::vector<double> rss = attn::gather_values(shard, double(r.peak_rss_kb) / 1024);
  const double alone_us = shard.size > 1 ? allreduce_alone_us(shard, m.args.dim) : 0;
  if (shard.rank != 0) return;
  const nlohmann::json mp =
      shard.size > 1 ? bench_parallel(r, m, rss, alone_us) : nlohmann::json::object();
  progress.line("done");
  print_bench(results, m.rt, f.json, mp);
  if (shard.size > 1) print_bench_parallel(f.json ? stderr : stdout, mp, m.args.dim);
}

}  // namespace

int bench_command(const Options& f, const attn::Shard& shard) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  quiet_other_ranks(shard);
  ProgressBar progress;
  progress.shown = shard.rank == 0;
  Workload w;
  ranks::set_up(shard, [&] { set_up_workload(f, shard, progress, w); });
  return ranks::or_abort(shard, [&] {
    report(f, shard, measure(f, w, progress), w.sessions.front().model, progress);
    return 0;
  });
}

}  // namespace cli
