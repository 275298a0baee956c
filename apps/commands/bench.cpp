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
#include "attn/kernels/detail/q8_dot.hpp"
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
// them at the bench's positions only, so it stays small. The decode starts at --depth, else
// right after the prefill. --quick shrinks all of it (quick_plan).
BenchPlan bench_plan(const Options& f) {
  const std::int64_t max_batch =
      f.overrides.max_batch_size > 0 ? f.overrides.max_batch_size : kBenchBatches.back();
  BenchPlan plan{{f.run.prefill, f.run.steps, f.depth > 0 ? f.depth : f.run.prefill}, {}, {}};
  for (std::int64_t B : kBenchBatches)
    if (B <= max_batch) plan.batches.push_back(B);
  plan.weight_types = f.weight_types;
  return f.quick ? quick_plan(plan) : plan;
}

// The layer's config with the flags' overrides, checked, its cache sized for the batched rows
// at the decode's depth.
attn::ModelArgs bench_args(const BenchPlan& p, const attn::ModelSpec& spec,
                           const attn::OpenedModel& model) {
  attn::ModelArgs args = attn::model_args(spec, model, attn::llama3_8b_layer_args);
  attn::check_shard(args, spec.shard);
  if (p.shape.prefill < 1 || p.shape.steps < 1)
    throw attn::InputError("bench needs --prefill and --steps >= 1");
  if (p.shape.depth < p.shape.prefill)
    throw attn::InputError("bench needs --depth >= --prefill (the depth is filled by prefills)");
  attn::check_capacity(args, {1, p.shape.depth, p.shape.steps});
  args.max_batch_size = p.batches.back();
  args.max_seq_len = std::min(args.max_seq_len, p.shape.depth + p.shape.steps);
  return args;
}

// Said before any work: what the run will do and cost, timed at half the FMA peak just probed
// and kAssumedGbs for reading weights (the stream itself is measured during the run).
void say_plan(const BenchPlan& p, const attn::ModelArgs& args, const MachineLimits& l,
              ProgressBar& progress) {
  constexpr double kAssumedGbs = 20;
  const auto text = [&](const BenchPlan& q) {
    const BenchCost c = expected_cost(q, args, l.fma_gflops / 2, kAssumedGbs);
    char line[160];
    std::snprintf(line, sizeof line, "about %.0f s and %s", c.seconds,
                  attn::bytes_text(c.bytes).c_str());
    return std::string(line);
  };
  std::string types;
  for (const std::string& t : p.weight_types) types += (types.empty() ? "" : ",") + t;
  progress.line("expected " + text(p) + " (prefill " + std::to_string(p.shape.prefill) + ", " +
                std::to_string(p.shape.steps) + " steps from depth " +
                std::to_string(p.shape.depth) + ", B up to " + std::to_string(p.batches.back()) +
                ", " + types + " weights; FMA peak now " + std::to_string(int(l.fma_gflops)) +
                " GFLOP/s)" +
                (p.shape.steps > quick_plan(p).shape.steps ? "; --quick: " + text(quick_plan(p))
                                                           : std::string()));
}

// The same layer in each weight type, and its input.
struct Workload {
  std::vector<float> x;
  std::vector<attn::Session> sessions;  // one per weight type, compared in the same rounds
  MachineLimits limits;                 // the FMA peak probed before the work
};

// A file runs as it is; drawn weights once per weight type, the same draws rounded. Every
// type's model is held at once: the engine's pre-flight counts them all before any is made.
// The FMA peak is probed first: the plan's expected time, and the first of the probes around
// the timed work.
void set_up_workload(const BenchPlan& p, const Options& f, const attn::Shard& shard,
                     ProgressBar& progress, Workload& w) {
  attn::ModelSpec spec = model_spec(f, shard);
  spec.drawn.clear();
  for (const std::string& t : p.weight_types)
    spec.drawn.push_back(*attn::find_weight_type(t));  // the flag checked it
  const attn::OpenedModel model = attn::open_model(spec);
  const std::int64_t rows = std::max(p.shape.prefill, p.batches.back());
  attn::ModelPlan plan = attn::plan_model(bench_args(p, spec, model), spec, model,
                                          {p.batches.back(), p.shape.prefill, p.shape.steps, rows});
  probe_fma_peak(plan.shape.threads, w.limits);
  BenchPlan said = p;  // a file's weights in its own type
  if (!plan.drawn) said.weight_types = {attn::weight_type_name(plan.shape.matrices.front())};
  say_plan(said, plan.args, w.limits, progress);
  const std::size_t n = plan.drawn ? spec.drawn.size() : 1;
  progress.line("drawing the weights (" + std::to_string(n) + " weight type(s)) and the input");
  w.x = attn::seeded_input(plan.args, {1, p.shape.prefill, p.shape.steps}, f.seed);
  w.sessions.reserve(n);
  for (std::size_t i = 0; i < n; ++i) w.sessions.push_back(attn::open_session(plan, spec, {}, i));
}

// The weight types --compute C changes (bf16: BF16; q8: Q8_0, Q4_K, Q6_K), by the names bench
// reports them under.
bool computes_otherwise(attn::Compute compute, const std::string& weight_type) {
  const std::optional<attn::WeightType> t = attn::find_weight_type(weight_type);
  if (!t) return false;
  if (compute == attn::Compute::bf16) return *t == attn::WeightType::bf16;
  return compute == attn::Compute::q8 && attn::q8_weights(*t);
}

// Every model in the same rounds, --compute bf16's or q8's error, then the machine's limits (the
// FMA peak probed again: the limit is the best probe, their spread is said).
std::vector<BenchResult> measure(const BenchPlan& p, Workload& w, ProgressBar& progress) {
  std::vector<attn::Transformer*> ms;
  for (attn::Session& s : w.sessions) ms.push_back(&s.model);
  const attn::Transformer& m = w.sessions.front().model;
  std::vector<BenchResult> results =
      bench_workload(ms, w.x, p.shape, p.batches, std::ref(progress));
  if (m.rt.compute != attn::Compute::f32) {
    progress.line(std::string("--compute ") + attn::compute_name(m.rt.compute) +
                  " against the exact path (one prefill each way)");
    for (std::size_t i = 0; i < results.size(); ++i)
      if (computes_otherwise(m.rt.compute, results[i].weight_type)) {
        results[i].compute_error = compute_error(*ms[i], w.x, p.shape.prefill);
        // vdpbf16ps: two products a lane for one FMA's slot; q8's vpmaddubsw and vpdpbusd, four
        results[i].peak_factor = m.rt.compute == attn::Compute::bf16 ? 2 : 4;
      }
  }
  progress.line("the machine's limits: OpenBLAS sgemm on the layer's shapes, the FMA peak again");
  MachineLimits machine = w.limits;
  measure_limits(m, p.shape.prefill, machine);
  for (BenchResult& r : results) {  // the stream read stays each type's own
    machine.stream_gbs = r.limits.stream_gbs;
    machine.stream_pattern = r.limits.stream_pattern;
    machine.stream_spread = r.limits.stream_spread;
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
  const BenchPlan plan = bench_plan(f);
  ranks::set_up(shard, [&] { set_up_workload(plan, f, shard, progress, w); });
  return ranks::or_abort(shard, [&] {
    report(f, shard, measure(plan, w, progress), w.sessions.front().model, progress);
    return 0;
  });
}

}  // namespace cli
