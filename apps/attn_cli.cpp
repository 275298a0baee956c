// attn-cli: the frontend. Flags in, trace out; the engine lives in lib/.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/kernels/probe.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/session.hpp"
#include "attn/model/weights.hpp"
#include "attn/version.hpp"
#include "ranks.hpp"
#include "setting_words.hpp"
#include "workloads/bench.hpp"
#include "workloads/generate.hpp"
#include "workloads/heatmap.hpp"
#include "workloads/trace.hpp"

namespace {

struct Flags {
  std::string config, weights, input, dump, log_level = "warn", layers;
  attn::ConfigOverrides overrides;
  attn::RunOptions run;
  std::uint64_t seed = 42;
  int threads = attn::cores();
  std::string compute = "f32";  // --compute
  bool json = false;
  CLI::Option* batch_option = nullptr;
  std::string mask;  // empty: the config's
  bool attention_weights = false, print_attention = false;
  std::int64_t layer = 0;                                          // heatmap
  std::string png;                                                 // heatmap --out
  std::vector<std::string> weight_types = {"f32", "bf16", "f16"};  // bench
  attn::TextInput text;  // token input: a prompt or ids instead of --input
  bool all_logits = false, logits = false;
  CLI::Option* prefill_option = nullptr;
  std::int64_t batch_row = 0;  // heatmap
  std::string scale;           // heatmap: linear, sqrt, log; empty: by the number of positions
};

// CLI11 would wrap -1 into 2^64 - 1 and clamp 2^64 to 2^64 - 1 for an unsigned seed.
std::string seed_in_range(const std::string& value) {
  if (value.starts_with('-')) return "must not be negative, got " + value;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec == std::errc::result_out_of_range) return "must be at most 2^64 - 1, got " + value;
  return "";
}

// An empty path must not quietly mean "no file" (drawn weights, the built-in config).
std::string non_empty(const std::string& value) {
  return value.empty() ? "must not be empty (leave the option out for the default)" : "";
}

// --compute: exact F32 products (the default), or BF16 weights times x rounded to BF16.
void add_compute_option(CLI::App* cmd, std::string& compute) {
  cmd->add_option("--compute", compute,
                  "f32: exact (default); bf16: BF16 weights times activations rounded to BF16 "
                  "(vdpbf16ps, AVX512-BF16; see docs/perf/bf16-compute.md)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
}

// The options `run`, `decode` and `bench` share.
void add_model_options(CLI::App* cmd, Flags& f, const std::string& default_config) {
  cmd->add_option("--config", f.config, "ModelArgs JSON (default: " + default_config + ")")
      ->check(non_empty);
  cmd->add_option("-m,--weights", f.weights,
                  "safetensors weights, or a Hugging Face model.safetensors.index.json "
                  "(default: drawn from --seed)")
      ->check(non_empty);
  cmd->add_option("--layers", f.layers, "run the checkpoint's layers A..B-1 only, as A:B");
  cmd->add_option("-c,--max-seq-len", f.overrides.max_seq_len, "cache capacity in positions")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  cmd->add_option("--max-batch", f.overrides.max_batch_size, "cache capacity in sequences")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  cmd->add_option("--model-parallel", f.overrides.model_parallel_size,
                  "split every layer across K MPI ranks (default: the config's; for a Hugging "
                  "Face config.json, mpirun's number of ranks)")
      ->check(CLI::Range(1, 1024));
  f.prefill_option = cmd->add_option("--prefill", f.run.prefill,
                                     "positions in the prefill P (token input: all but the steps)")
                         ->capture_default_str();
  cmd->add_option("-n,--steps", f.run.steps, "decode steps N after the prefill")
      ->capture_default_str();
  cmd->add_option("-s,--seed", f.seed, "seed for weights and input")
      ->check(seed_in_range)
      ->capture_default_str();
  cmd->add_option("-t,--threads", f.threads, "threads (default: the machine's cores)")
      ->check(CLI::Range(1, 1024));
  add_compute_option(cmd, f.compute);
  cmd->add_option("--log-level", f.log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
}

// The mask and looking at the attention probabilities.
void add_attention_options(CLI::App* cmd, Flags& f) {
  cmd->add_option("--mask", f.mask, "causal or none (default: the config's mask)")
      ->check(CLI::IsMember({"causal", "none"}));
  cmd->add_flag("--attention-weights", f.attention_weights,
                "the dump also holds attn.{l}.prefill and attn.{l}.decode.{i} (limit 1 GiB)");
  cmd->add_flag("--print-attention", f.print_attention,
                "print the attention weights after each step's trace line (small runs)");
}

// The prompt, as text or ids, and the tokenizer that reads it: generate's and tokenize's.
void add_text_input(CLI::App* cmd, attn::TextInput& t) {
  cmd->add_option("-p,--prompt", t.prompt, "the prompt's text (run: one sequence each)");
  cmd->add_option("-f,--prompt-file", t.prompt_file, "a file holding the prompt's text")
      ->check(non_empty);
  cmd->add_option("--tokens", t.tokens, "the prompt as token ids: 1,15043,29991 or [1, 15043]");
  cmd->add_option("--tokens-file", t.tokens_file, "a file of token ids (text or JSON)")
      ->check(non_empty);
  cmd->add_option("--tokenizer", t.tokenizer,
                  "Hugging Face tokenizer.json (default: beside the config)")
      ->check(non_empty);
  cmd->add_flag("--no-bos", t.no_bos, "no BOS token, whatever the tokenizer file says");
  cmd->add_flag("--add-bos", t.add_bos, "a BOS token first, whatever the tokenizer file says");
}

void add_common(CLI::App* cmd, Flags& f) {
  add_model_options(cmd, f, "the seed notebook's GQA");
  cmd->add_option("--input", f.input,
                  "safetensors with tensor x [B, T, dim] (default: from --seed)")
      ->check(non_empty);
  f.batch_option =
      cmd->add_option("-b,--batch", f.run.batch, "batch size B")->capture_default_str();
  cmd->add_flag("--json", f.json, "JSON Lines trace on stdout");
  cmd->add_option("--dump", f.dump, "write inputs, outputs and caches to this safetensors file")
      ->check(non_empty);
  add_attention_options(cmd, f);
  add_text_input(cmd, f.text);
  cmd->add_flag("--all-logits", f.all_logits,
                "token input: every prefill position's logits in the dump, not the last");
  cmd->add_flag("--logits", f.logits,
                "token input with --layers A:B short of the last layer: apply the final norm and "
                "output head after layer B-1 anyway (a logit lens)");
}

// "A:B" -> [A, B): a range of the checkpoint's layers, both written out and not negative.
void parse_layers(const std::string& text, attn::ConfigOverrides& o) {
  if (text.empty()) return;
  auto number = [&](std::string_view part, std::int64_t& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc() && end == part.data() + part.size() && out >= 0;
  };
  const std::size_t colon = text.find(':');
  const std::string_view t = text;
  if (colon == std::string::npos || !number(t.substr(0, colon), o.layer_begin) ||
      !number(t.substr(colon + 1), o.layer_end))
    throw attn::InputError("--layers: expected A:B with 0 <= A < B (layers A to B-1), got " +
                           attn::quoted(text, 60));
}

// The config file (or the built-in default), with the command line's overrides applied. A
// Hugging Face config.json has no model_parallel_size: mpirun's number of ranks is it.
attn::ModelArgs model_args(const Flags& f, attn::ModelArgs (*fallback)(),
                           const attn::Shard& shard) {
  attn::ModelArgs args = f.config.empty() ? fallback() : attn::load_config(f.config);
  attn::ConfigOverrides o = f.overrides;
  parse_layers(f.layers, o);
  if (args.hugging_face && o.model_parallel_size == 0 && shard.size > 1)
    o.model_parallel_size = shard.size;
  attn::apply_overrides(args, o);
  return args;
}

attn::Summary summarize(const attn::RunOptions& o, const attn::RunOutputs& out,
                        const attn::Runtime& rt) {
  std::vector<double> steps = out.decode_seconds;
  std::sort(steps.begin(), steps.end());
  double total = 0;
  for (double s : steps) total += s;
  return {o.prefill,        out.prefill_seconds * 1e3,
          o.steps,          steps.empty() ? 0 : steps[steps.size() / 2] * 1e3,
          total * 1e3,      rt.threads,
          attn::blas_core()};
}

// Model parallel: rank 0 logs, prints the trace and writes the dump; the others stay quiet.
void quiet_other_ranks(const attn::Shard& shard) {
  if (shard.rank != 0 && spdlog::get_level() < spdlog::level::err)
    spdlog::set_level(spdlog::level::err);
}

// The --weights file with its headers read and nothing mapped, for the memory estimate to count
// the matrices in their dtypes (shape.matrices); none for drawn weights, whose type the caller
// knows (`run` draws F32).
std::optional<attn::WeightsSource> open_weights(const Flags& f, const attn::ModelArgs& args,
                                                const attn::Shard& shard, attn::RunShape& shape) {
  if (f.weights.empty()) return std::nullopt;
  attn::WeightsSource file = attn::open_weights(f.weights, shard);
  shape.matrices = attn::matrix_types(args, file);
  return file;
}

// The request the flags make: the config with its overrides, the shape, the files.
attn::RunRequest run_request(const Flags& f, const attn::Shard& shard, bool keep_attention,
                             const attn::PromptTokens& prompt) {
  attn::RunRequest r;
  r.args = model_args(f, attn::seed_args, shard);
  r.tokens = prompt.sequences;
  r.all_logits = f.all_logits;
  r.logits = f.logits;

  if (!f.mask.empty()) r.args.mask = f.mask == "none" ? attn::Mask::none : attn::Mask::causal;
  r.opts = f.run;
  std::int64_t longest = 0;
  for (const auto& t : r.tokens) longest = std::max(longest, std::int64_t(t.size()));
  if (!r.tokens.empty() && f.batch_option->count() > 0 &&
      f.run.batch != std::int64_t(r.tokens.size()))
    throw attn::InputError("--batch " + std::to_string(f.run.batch) +
                           ": token input's batch is its " + std::to_string(r.tokens.size()) +
                           " sequence(s)");
  if (!r.tokens.empty() && f.prefill_option->count() == 0)
    r.opts.prefill = std::max<std::int64_t>(0, longest - r.opts.steps);
  r.batch_given = f.input.empty() || f.batch_option->count() > 0;
  r.weights = f.weights;
  r.input = f.input;
  r.dump = f.dump;
  r.seed = f.seed;
  r.threads = f.threads;
  r.compute = attn::parse_compute(f.compute);
  r.attention_weights = keep_attention;
  r.dump_attention_weights = f.attention_weights;
  r.shard = shard;
  return r;
}

void check_print_attention(const attn::RunRequest& r) {
  const double values = attn::attention_weights_bytes(r.args, r.opts) / 4;
  if (values > attn::kPrintAttentionLimit)
    throw attn::InputError(
        "--print-attention would print " + std::to_string(std::int64_t(values)) +
        " probabilities (over 2^20, about 8 MB of text): use --attention-weights "
        "--dump F, or fewer positions");
}

// The heatmap's sequence, scale, padding and token labels (a prompt's pieces, or its ids).
attn::HeatmapOptions heatmap_options(const Flags& f, const attn::Session& se,
                                     const attn::PromptTokens& prompt) {
  const attn::RunOptions& o = se.request.opts;
  const std::int64_t T = o.prefill + o.steps;
  attn::HeatmapOptions h{f.batch_row,
                         f.scale.empty() ? attn::default_scale(T) : attn::parse_scale(f.scale),
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

int run_command(const Flags& f, bool decode_only, const attn::Shard& shard, bool heatmap = false) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  quiet_other_ranks(shard);
  std::optional<attn::Session> session;
  attn::PromptTokens prompt;
  // Every rank sets up, then all agree on one status before any collective.
  ranks::set_up(shard, [&] {
    if (shard.rank == 0 && !std::cout)  // see keep_standard_streams
      throw std::runtime_error(
          "stdout is closed: the trace has nowhere to go (send it to "
          "/dev/null to discard it)");
    if (f.text.given()) prompt = attn::prompt_tokens(f.text, f.config, 0);
    attn::RunPlan plan =
        attn::plan_run(run_request(f, shard, f.print_attention || heatmap, prompt));
    if (f.print_attention) check_print_attention(plan.request);
    if (heatmap) {
      attn::check_heatmap(plan.request.args, plan.request.opts, f.layer, f.batch_row);
      if (shard.rank == 0) attn::check_output(f.png, "PNG");
    }
    session.emplace(attn::open_session(std::move(plan)));
  });
  return ranks::or_abort(shard, [&] {
    attn::Session& se = *session;
    const attn::ModelArgs& args = se.request.args;
    std::ostream nowhere(nullptr);
    std::ostream& trace = shard.rank == 0 ? std::cout : nowhere;
    if (f.json)
      attn::print_config_json(trace, args);
    else
      attn::print_config_text(trace, args);
    attn::run(se, [&](const attn::Event& e) {
      if (f.json)
        attn::print_event_json(trace, e);
      else
        attn::print_event_text(trace, e, decode_only);
      if (f.print_attention && f.json) attn::print_attention_json(trace, args, e);
      if (f.print_attention && !f.json) attn::print_attention(trace, args, e);
      trace.flush();  // what is printed stays printed, whatever ends the run later
    });
    const attn::Summary s = summarize(se.request.opts, se.out, se.model.rt);
    if (f.json) attn::print_summary_json(trace, s);
    if (shard.rank == 0) attn::print_summary_text(std::cerr, s);
    // Files appear only once everything else has succeeded, the trace on stdout included.
    auto check_stdout = [] {
      std::cout.flush();
      if (!std::cout) throw std::runtime_error("cannot write the trace to stdout");
    };
    check_stdout();
    std::vector<attn::OutputFile> outputs;
    std::string png_size;
    if (std::optional<attn::OutputFile> dump = attn::stage_dump(se))
      outputs.push_back(std::move(*dump));
    if (heatmap && shard.rank == 0) {
      const attn::Image img = attn::render_heatmap(args, se.request.opts, se.out, f.layer,
                                                   heatmap_options(f, se, prompt));
      outputs.push_back(attn::stage_png(f.png, img));
      png_size = std::to_string(img.width) + " x " + std::to_string(img.height);
    }
    check_stdout();
    for (attn::OutputFile& o : outputs) o.commit();
    if (!png_size.empty())
      std::fprintf(stderr, "wrote %s (%s)\n", attn::escape(f.png).c_str(), png_size.c_str());
    return 0;
  });
}

void add_bench(CLI::App* cmd, Flags& f) {
  f.run = {1, 512, 128};
  f.log_level = "info";
  add_model_options(cmd, f, "one Llama-3-8B layer");
  cmd->add_flag("--json", f.json, "one JSON object on stdout");
  cmd->add_option("--weight-types", f.weight_types,
                  "the drawn layer's matrices in each of these types, decoded in the same "
                  "rounds (with --weights: the file's type only)")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
}

attn::WeightType weight_type(const std::string& name) {
  return name == "bf16"  ? attn::WeightType::bf16
         : name == "f16" ? attn::WeightType::f16
                         : attn::WeightType::f32;
}

// "2026-11-25T09:40:13Z": when a benchmark ran, for its JSON.
std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// bench's progress on stderr: a bar redrawn in place on a terminal, one line per phase otherwise
// (a log, a CI job). Rank 0 only.
struct BenchProgress {
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

// Decode at several batch sizes, as llama.cpp's batched-bench: B sequences, one row each per
// step; the ratio is to batch 1's median step in the same rounds.
void print_batched(std::FILE* out, const attn::BenchResult& r, const attn::Runtime& rt) {
  const double b1 = r.step_ms[r.step_ms.size() / 2];
  std::fprintf(out,
               "batched decode, %s weights, %lld steps each, same rounds (isa %s; stream read "
               "pattern: %s):\n"
               "      B   ms/step    p10    p90   steps/s  tokens/s  step vs B=1\n",
               r.weight_type.c_str(), (long long)r.steps, rt.kernels->name,
               r.limits.stream_pattern.c_str());
  for (const attn::BatchedDecode& d : r.batched) {
    const std::size_t n = d.step_ms.size();
    const double med = d.step_ms[n / 2];
    std::fprintf(out, "  %5lld  %8.2f %6.2f %6.2f  %8.2f  %8.1f  %10.2fx\n", (long long)d.batch,
                 med, d.step_ms[n / 10], d.step_ms[n * 9 / 10], 1e3 / med,
                 1e3 * double(d.batch) / med, med / b1);
  }
}

nlohmann::json batched_json(const attn::BenchResult& r) {
  const double b1 = r.step_ms[r.step_ms.size() / 2];
  nlohmann::json rows = nlohmann::json::array();
  for (const attn::BatchedDecode& d : r.batched) {
    const std::size_t n = d.step_ms.size();
    const double med = d.step_ms[n / 2];
    rows.push_back({{"batch", d.batch},
                    {"ms_median", med},
                    {"ms_p10", d.step_ms[n / 10]},
                    {"ms_p90", d.step_ms[n * 9 / 10]},
                    {"steps_per_s", 1e3 / med},
                    {"tokens_per_s", 1e3 * double(d.batch) / med},
                    {"step_vs_batch1", med / b1}});
  }
  return rows;
}

double median_ms(const std::vector<double>& sorted) {
  return sorted[sorted.size() / 2];
}

// One weight type's figures, against the limits and against the first type run (same rounds).
nlohmann::json weight_type_json(const attn::BenchResult& r, const attn::BenchResult& first,
                                const attn::MachineLimits& l) {
  const double pf_s = r.prefill_seconds, med = median_ms(r.step_ms);
  const double gbs = r.weight_bytes / (med * 1e-3) / 1e9;
  return {{"weight_type", r.weight_type},
          {"prefill_ms", pf_s * 1e3},
          {"prefill_positions_per_s", double(r.prefill) / pf_s},
          {"prefill_gflops", r.prefill_gflop / pf_s},
          {"prefill_fraction_of_fma_peak", r.prefill_gflop / pf_s / l.fma_gflops},
          {"decode_ms_median", med},
          {"decode_ms_p10", r.step_ms[r.step_ms.size() / 10]},
          {"decode_ms_p90", r.step_ms[r.step_ms.size() * 9 / 10]},
          {"decode_steps_per_s", 1e3 / med},
          {"decode_gbs", gbs},
          {"decode_fraction_of_stream", gbs / r.limits.stream_gbs},
          {"stream_gbs", r.limits.stream_gbs},
          {"stream_pattern", r.limits.stream_pattern},
          {"weight_bytes", r.weight_bytes},
          {"decode_vs_first", median_ms(first.step_ms) / med},
          {"prefill_vs_first", first.prefill_seconds / pf_s},
          {"batched_decode", batched_json(r)},
          {"compute_error", r.compute_error ? nlohmann::json{{"max_abs", r.compute_error->max_abs},
                                                             {"max_rel", r.compute_error->max_rel},
                                                             {"rms_rel", r.compute_error->rms_rel}}
                                            : nlohmann::json()}};
}

// The weight types side by side, each against its own streaming read and the first type.
void print_weight_types(std::FILE* out, const nlohmann::json& types) {
  std::fprintf(out,
               "weight types, same rounds (vs: the first row's rate):\n"
               "  type   prefill pos/s  GFLOP/s  of FMA peak   decode steps/s   GB/s  of its "
               "stream  weights MB  decode vs  prefill vs\n");
  for (const nlohmann::json& t : types)
    std::fprintf(
        out, "  %-5s  %13.1f  %7.1f  %10.0f%%  %15.2f  %5.2f  %12.0f%%  %10.1f  %8.2fx  %9.2fx\n",
        t["weight_type"].get<std::string>().c_str(), t["prefill_positions_per_s"].get<double>(),
        t["prefill_gflops"].get<double>(), 100 * t["prefill_fraction_of_fma_peak"].get<double>(),
        t["decode_steps_per_s"].get<double>(), t["decode_gbs"].get<double>(),
        100 * t["decode_fraction_of_stream"].get<double>(), t["weight_bytes"].get<double>() / 1e6,
        t["decode_vs_first"].get<double>(), t["prefill_vs_first"].get<double>());
}

// The report: the tables on stdout, or with --json one object on stdout and the tables on stderr.
void print_bench(const std::vector<attn::BenchResult>& results, const attn::Runtime& rt, bool json,
                 const nlohmann::json& extra = {}) {
  std::FILE* out = json ? stderr : stdout;
  const attn::BenchResult& r = results.front();
  const auto& l = r.limits;
  nlohmann::json types = nlohmann::json::array();
  for (const attn::BenchResult& t : results) types.push_back(weight_type_json(t, r, l));
  const double pf_s = r.prefill_seconds, pf_gflops = r.prefill_gflop / pf_s;
  const double med = r.step_ms[r.step_ms.size() / 2];
  const double p10 = r.step_ms[r.step_ms.size() / 10], p90 = r.step_ms[r.step_ms.size() * 9 / 10];
  const double gbs = r.weight_bytes / (med * 1e-3) / 1e9;
  const double matmul_rate = r.prefill_matmul_gflop / pf_s;
  std::fprintf(
      out,
      "%s weights:\n"
      "prompt eval time = %10.2f ms / %5lld positions (%8.2f ms per position, %8.2f "
      "positions per second)\n"
      "prompt eval rate = %8.1f GFLOP/s (%.1f GFLOP), %.0f%% of OpenBLAS sgemm's %.1f "
      "GFLOP/s on these shapes, %.0f%% of the %s FMA peak %.1f GFLOP/s\n"
      "        eval time = %10.2f ms / %5lld steps    (%8.2f ms per step median, p10 %.2f, "
      "p90 %.2f, %8.2f steps per second)\n"
      "        eval rate = %8.2f GB/s of weights (%.1f MB per step), %.0f%% of the %.2f "
      "GB/s streaming read\n"
      "peak resident memory = %.1f MB (the process: every weight type's model); threads = %d; "
      "matmul = %s; OpenBLAS core = %s\n",
      r.weight_type.c_str(), pf_s * 1e3, (long long)r.prefill, pf_s * 1e3 / double(r.prefill),
      double(r.prefill) / pf_s, pf_gflops, r.prefill_gflop, 100 * matmul_rate / l.sgemm_gflops,
      l.sgemm_gflops, 100 * pf_gflops / l.fma_gflops, l.fma_isa.c_str(), l.fma_gflops,
      med * double(r.steps), (long long)r.steps, med, p10, p90, 1e3 / med, gbs,
      r.weight_bytes / 1e6, 100 * gbs / l.stream_gbs, l.stream_gbs, double(r.peak_rss_kb) / 1024,
      rt.threads, attn::matmul_path(rt).c_str(), attn::blas_core().c_str());
  print_weight_types(out, types);
  for (const attn::BenchResult& t : results) print_batched(out, t, rt);
  for (const attn::BenchResult& t : results)
    if (t.compute_error)
      std::fprintf(out,
                   "--compute bf16, %s weights, against the exact path (the prefill's output): "
                   "max |error| %.3g (%.2g of max |output|), RMS error %.2g of RMS output\n",
                   t.weight_type.c_str(), t.compute_error->max_abs, t.compute_error->max_rel,
                   t.compute_error->rms_rel);
  std::fflush(out);
  if (!json) return;
  nlohmann::json j = {{"version", ATTN_VERSION},
                      {"cpu", attn::cpu_name()},
                      {"kernels", rt.kernels->name},
                      {"compute", attn::compute_name(rt.compute)},
                      {"date", utc_now()},
                      {"prefill_positions", r.prefill},
                      {"prefill_ms", pf_s * 1e3},
                      {"prefill_positions_per_s", double(r.prefill) / pf_s},
                      {"prefill_gflops", pf_gflops},
                      {"prefill_gflop", r.prefill_gflop},
                      {"prefill_matmul_gflops", matmul_rate},
                      {"prefill_fraction_of_sgemm", matmul_rate / l.sgemm_gflops},
                      {"prefill_fraction_of_fma_peak", pf_gflops / l.fma_gflops},
                      {"decode_steps", r.steps},
                      {"decode_ms_median", med},
                      {"decode_ms_p10", p10},
                      {"decode_ms_p90", p90},
                      {"decode_steps_per_s", 1e3 / med},
                      {"decode_gbs", gbs},
                      {"decode_fraction_of_stream", gbs / l.stream_gbs},
                      {"weight_bytes", r.weight_bytes},
                      {"peak_rss_mb", double(r.peak_rss_kb) / 1024},
                      {"stream_gbs", l.stream_gbs},
                      {"sgemm_gflops", l.sgemm_gflops},
                      {"sgemm_ms", l.sgemm_seconds * 1e3},
                      {"fma_peak_gflops", l.fma_gflops},
                      {"fma_isa", l.fma_isa},
                      {"threads", rt.threads},
                      {"matmul", attn::matmul_path(rt)},
                      {"openblas_core", attn::blas_core()},
                      {"matmul_isa", rt.kernels->name},
                      {"stream_pattern", l.stream_pattern},
                      {"kv_cache_mb", r.kv_cache_bytes / 1e6},
                      {"batched_decode", batched_json(r)},
                      {"weight_type", r.weight_type},
                      {"weight_types", types}};
  j.update(extra);
  std::cout << j.dump() << "\n";
}

void print_bench_parallel(std::FILE* out, const nlohmann::json& mp, std::int64_t dim) {
  std::string rss;
  for (std::size_t i = 0; i < mp.at("peak_rss_mb_per_rank").size(); ++i)
    rss += (i ? ", rank " : "rank ") + std::to_string(i) + " " +
           std::to_string(int(mp["peak_rss_mb_per_rank"][i].get<double>() + 0.5)) + " MB";
  std::fprintf(out,
               "model parallel = %d ranks (%s), weights per rank %.1f MB\n"
               "       allreduce = %8.3f ms per step (%.1f%% of a step; %lld allreduces of %lld "
               "floats), %.2f ms in the prefill (%.1f%%)\n"
               "                   (the step's figure includes waiting for the slower rank; one "
               "allreduce of %lld floats alone, ranks in step: %.1f us)\n"
               "peak resident memory per rank = %s\n",
               mp["model_parallel_size"].get<int>(), mp["split"].get<std::string>().c_str(),
               mp["weight_bytes_per_rank"].get<double>() / 1e6,
               mp["decode_allreduce_ms_per_step"].get<double>(),
               100 * mp["decode_allreduce_share"].get<double>(),
               (long long)mp["allreduces_per_step"].get<std::int64_t>(), (long long)dim,
               mp["prefill_allreduce_ms"].get<double>(),
               100 * mp["prefill_allreduce_share"].get<double>(), (long long)dim,
               mp["allreduce_alone_us"].get<double>(), rss.c_str());
}

// One allreduce of dim floats with the ranks already in step, in microseconds (the median of
// 200): what a step's allreduces cost without the wait for the slower rank that the step's
// figure includes.
double allreduce_alone_us(const attn::Shard& shard, std::int64_t dim) {
  std::vector<float> v(std::size_t(dim), 1.0f);
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) {
    attn::barrier(shard);
    const auto t0 = std::chrono::steady_clock::now();
    attn::allreduce_sum(shard, v.data(), dim);
    us.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() *
                 1e6);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Model parallel: what the ranks cost each other (allreduce time) and what each one holds.
nlohmann::json bench_parallel(const attn::BenchResult& r, const attn::Transformer& m,
                              const std::vector<double>& rss_mb, double alone_us) {
  double steps_ms = 0;
  for (double ms : r.step_ms) steps_ms += ms;
  const double step_ar = r.decode_allreduce_seconds * 1e3 / double(r.steps);
  const double share = r.decode_allreduce_seconds * 1e3 / steps_ms;
  const double pf_share = r.prefill_allreduce_seconds / r.prefill_seconds;
  const std::int64_t per_step = m.args.n_layers * (m.args.block == attn::Block::llama ? 2 : 1);
  return {{"split", attn::split_text(m.args)},
          {"allreduces_per_step", per_step},
          {"model_parallel_size", m.shard.size},
          {"weight_bytes_per_rank", r.weight_bytes},
          {"decode_allreduce_ms_per_step", step_ar},
          {"decode_allreduce_share", share},
          {"prefill_allreduce_ms", r.prefill_allreduce_seconds * 1e3},
          {"prefill_allreduce_share", pf_share},
          {"peak_rss_mb_per_rank", rss_mb},
          {"allreduce_alone_us", alone_us}};
}

int bench_command(const Flags& f, const attn::Shard& shard) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  quiet_other_ranks(shard);
  BenchProgress progress;
  progress.shown = shard.rank == 0;
  const attn::RunOptions opts{1, f.run.prefill, f.run.steps};
  // The batched rows decode up to 16 sequences; the cache holds them at the bench's positions
  // only, so it stays small.
  const std::int64_t max_batch = attn::kBenchBatches.back();
  std::vector<float> x;
  // A file runs as it is; drawn weights once per weight type, the same draws rounded.
  const std::vector<std::string> types =
      f.weights.empty() ? f.weight_types : std::vector<std::string>{"file"};
  std::vector<attn::Transformer> models;
  ranks::set_up(shard, [&] {
    attn::ModelArgs args = model_args(f, attn::llama3_8b_layer_args, shard);
    attn::check_shard(args, shard);
    attn::check_capacity(args, opts);
    if (f.run.prefill < 1 || f.run.steps < 1)
      throw attn::InputError("bench needs --prefill and --steps >= 1");
    args.max_batch_size = std::max(args.max_batch_size, max_batch);
    args.max_seq_len = std::min(args.max_seq_len, f.run.prefill + f.run.steps);
    attn::RunShape file_shape{max_batch,   f.run.prefill,
                              f.run.steps, std::max(f.run.prefill, max_batch),
                              f.threads,   false};
    std::optional<attn::WeightsSource> file = open_weights(f, args, shard, file_shape);
    std::vector<attn::MemoryPart> parts;  // every type's model at once, each in its own type
    for (const std::string& t : types) {
      attn::RunShape shape = file_shape;
      if (!file) shape.matrices = {weight_type(t)};
      for (attn::MemoryPart& p : attn::memory_parts(args, shape, shard))
        parts.push_back({t + " " + p.name, p.bytes, p.reserved});
    }
    attn::check_memory(parts, attn::available_memory(), args.source);
    progress.line("drawing the weights (" + std::to_string(types.size()) +
                  " weight type(s)) and the input");
    x = attn::seeded_input(args, opts, f.seed);
    models.reserve(types.size());
    for (const std::string& t : types) {
      attn::TransformerWeights w = file ? attn::load_weights(args, std::move(*file), shard)
                                        : attn::seeded_weights(args, f.seed, shard, weight_type(t));
      models.push_back(attn::make_transformer(
          args, std::move(w), std::max(f.run.prefill, max_batch),
          attn::make_runtime(f.threads, attn::kParallelFlops, "", attn::parse_compute(f.compute)),
          shard));
    }
  });
  return ranks::or_abort(shard, [&] {
    std::vector<attn::Transformer*> ms;
    for (attn::Transformer& m : models) ms.push_back(&m);
    attn::Transformer& m = models.front();
    std::vector<attn::BenchResult> results = attn::bench_workload(
        ms, x, f.run.prefill, f.run.steps, attn::kBenchBatches, std::ref(progress));
    if (m.rt.compute == attn::Compute::bf16) {
      progress.line("--compute bf16 against the exact path (one prefill each way)");
      for (std::size_t i = 0; i < results.size(); ++i)
        if (results[i].weight_type == "BF16")
          results[i].compute_error = attn::compute_error(*ms[i], x, f.run.prefill);
    }
    progress.line("the machine's limits: OpenBLAS sgemm on the layer's shapes, the FMA peak");
    attn::MachineLimits machine;
    attn::measure_limits(m, f.run.prefill, machine);
    for (attn::BenchResult& r : results) {  // the stream read stays each type's own
      machine.stream_gbs = r.limits.stream_gbs;
      machine.stream_pattern = r.limits.stream_pattern;
      r.limits = machine;
    }
    const attn::BenchResult& r = results.front();
    const std::vector<double> rss = attn::gather_values(shard, double(r.peak_rss_kb) / 1024);
    const double alone_us = shard.size > 1 ? allreduce_alone_us(shard, m.args.dim) : 0;
    if (shard.rank != 0) return 0;
    const nlohmann::json mp =
        shard.size > 1 ? bench_parallel(r, m, rss, alone_us) : nlohmann::json::object();
    progress.line("done");
    print_bench(results, m.rt, f.json, mp);
    if (shard.size > 1) print_bench_parallel(f.json ? stderr : stdout, mp, m.args.dim);
    return 0;
  });
}

void add_generate(CLI::App* cmd, attn::GenerateFlags& f) {
  cmd->add_option("--config", f.config,
                  "ModelArgs or Hugging Face config.json with vocab_size "
                  "(default: config.json beside the weights)")
      ->check(non_empty);
  cmd->add_option("-m,--weights", f.weights,
                  "safetensors weights or a Hugging Face index "
                  "(default: drawn from --seed)")
      ->check(non_empty);
  add_text_input(cmd, f.text);
  cmd->add_option("-n,--steps", f.steps, "tokens to generate at most")->capture_default_str();
  cmd->add_option("--temp", f.sampling.temp, "temperature; 0 is greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", f.sampling.top_k, "sampling: keep the k likeliest (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 24));
  cmd->add_option("--top-p", f.sampling.top_p, "sampling: the fewest reaching probability p")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", f.sampling.min_p, "sampling: drop below min-p times the likeliest")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("-s,--seed", f.sampling.seed, "seed of the sampler (and of drawn weights)")
      ->check(seed_in_range)
      ->capture_default_str();
  cmd->add_option("-c,--max-seq-len", f.max_seq_len, "cache capacity in positions (context)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  cmd->add_option("-t,--threads", f.threads, "threads (default: the machine's cores)")
      ->check(CLI::Range(1, 1024));
  add_compute_option(cmd, f.compute);
  cmd->add_flag("--ignore-eos", f.ignore_eos, "do not stop at the end-of-sequence token");
  cmd->add_flag("--json", f.json, "JSON Lines: config, prompt, one event per token, summary");
  cmd->add_option("--save-session", f.save_session, "write the cache and tokens here at the end")
      ->check(non_empty);
  cmd->add_option("--load-session", f.load_session, "continue from a saved session")
      ->check(non_empty);
  cmd->add_option("--log-level", f.log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
}

void add_tokenize(CLI::App* cmd, attn::TokenizeFlags& f) {
  add_text_input(cmd, f.text);
  cmd->add_flag("--json", f.json, "one object: {\"ids\": [...], \"pieces\": [...]}");
  cmd->add_flag("--decode", f.decode, "print the text of --tokens / --tokens-file");
  cmd->add_option("--log-level", f.log_level, "info: the encoding's speed on stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
}

// A closed stdout or stderr (`>&-`) would let the next file opened, an output's temporary file,
// take descriptor 1 or 2 and receive the trace. /dev/null holds the place; a closed stdout
// also marks std::cout failed, so a run that must print refuses to start.
void keep_standard_streams() {
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0 && null != fd) {
      ::dup2(null, fd);
      ::close(null);
    }
    if (fd == STDOUT_FILENO) std::cout.setstate(std::ios::badbit);
  }
}

// Levenshtein distance, for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// The flag or command closest to a word the command line did not know, if one is close.
std::string did_you_mean(const CLI::App& app, int argc, char** argv) {
  const CLI::App* cmd = &app;
  if (!app.get_subcommands().empty()) cmd = app.get_subcommands().front();
  std::vector<std::string> known;
  for (const CLI::Option* o : cmd->get_options())
    for (const std::string& n : o->get_lnames()) known.push_back("--" + n);
  if (cmd == &app)
    for (const CLI::App* sub : app.get_subcommands({})) known.push_back(sub->get_name());
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.size() > 100) continue;
    word = word.substr(0, word.find('='));
    if (std::find(known.begin(), known.end(), word) != known.end()) continue;
    if (!word.starts_with("--") && cmd != &app) continue;
    std::string best;
    std::size_t best_d = 3;  // more than two edits away is not a typo
    for (const std::string& k : known)
      if (const std::size_t d = edit_distance(word, k); d < best_d) best = k, best_d = d;
    if (!best.empty()) return "; did you mean " + best + "?";
  }
  return "";
}

// CLI11's parse errors in the style of every other error: one line, escaped, with a hint.
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  std::string msg = e.what();
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == '.')) msg.pop_back();
  std::string help = "attn-cli --help";
  if (!app.get_subcommands().empty())
    help = "attn-cli " + app.get_subcommands().front()->get_name() + " --help";
  std::fprintf(stderr, "attn-cli: error: %s%s (see %s)\n", attn::escape(msg, 400).c_str(),
               did_you_mean(app, argc, argv).c_str(), help.c_str());
  return 2;
}

}  // namespace

// Each command's --help ends with what people type.
void add_examples(CLI::App* run, CLI::App* decode, CLI::App* heatmap, CLI::App* bench) {
  const std::string exit_status = "Exit status: 0 success, 2 bad usage or input, 1 anything else.";
  run->footer(
      "Examples:\n"
      "  attn-cli run                                   the seed notebook's GQA block, seeded\n"
      "  attn-cli run --config configs/llama-tiny.json --json\n"
      "  attn-cli run --config C --weights W --input X --dump out.safetensors\n"
      "  attn-cli run --config configs/gqa.json --mask none --print-attention -n 1\n"
      "  attn-cli run --config hf/config.json --weights hf/model.safetensors.index.json "
      "--layers 0:1 --max-seq-len 64\n" +
      exit_status);
  decode->footer(
      "Examples:\n"
      "  attn-cli decode --steps 4                      the notebook's cache line per step\n"
      "  attn-cli decode --config configs/mha.json --weights weights/mha.safetensors "
      "--prefill 10 --steps 4\n" +
      exit_status);
  heatmap->footer(
      "Examples:\n"
      "  attn-cli heatmap --config configs/gqa.json --out gqa.png\n"
      "  attn-cli heatmap --config configs/llama-tiny.json --layer 1 --prefill 12 -n 4 "
      "--out l1.png\n" +
      exit_status);
  bench->footer(
      "Examples:\n"
      "  attn-cli bench                                 one Llama-3-8B layer, prefill 512, 128 "
      "steps, F32, BF16 and F16 weights\n"
      "  attn-cli bench --weight-types bf16             BF16 weights only (its peak memory)\n"
      "  attn-cli bench --weights l.safetensors --config C.json   a file, in its own dtype\n"
      "  attn-cli bench --threads 2 --json --prefill 128 --steps 32\n" +
      exit_status);
}

int main(int argc, char** argv) {
  keep_standard_streams();
  // Past a file-size limit (`ulimit -f`) a write fails with EFBIG, reported as an error with
  // the temporary files removed, instead of a kill that leaves them.
  ::signal(SIGXFSZ, SIG_IGN);
  ranks::Session session;  // MPI_Finalize on return, when open() started MPI
  spdlog::set_default_logger(spdlog::stderr_color_mt("attn-cli"));
  CLI::App app{"attn-cli: runs LLaMA-style transformer blocks on the CPU and shows the KV cache.",
               "attn-cli"};
  app.set_version_flag("--version", std::string("attn-cli ") + ATTN_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  attn-cli run                                  the seed notebook's GQA block, seeded\n"
      "  attn-cli run --config configs/llama-tiny.json --json\n"
      "  attn-cli decode --config configs/mha.json --prefill 10 --steps 4\n"
      "  attn-cli run --config C --weights W --input X --dump out.safetensors\n"
      "  attn-cli heatmap --config configs/gqa.json --out gqa.png   one panel per query head\n"
      "  attn-cli bench --threads 2 --json             one Llama-3-8B layer, prefill 512, 128 "
      "steps\n"
      "Exit status: 0 success, 2 bad usage or input, 1 anything else.");
  Flags run_flags, decode_flags;
  CLI::App* run = app.add_subcommand("run", "prefill P positions, then N decode steps");
  CLI::App* decode =
      app.add_subcommand("decode", "the token-by-token loop, the cache after every step");
  add_common(run, run_flags);
  add_common(decode, decode_flags);
  Flags heatmap_flags;
  CLI::App* heatmap = app.add_subcommand(
      "heatmap", "run, then draw one layer's attention weights: a PNG panel per query head");
  add_common(heatmap, heatmap_flags);
  heatmap->add_option("--layer", heatmap_flags.layer, "the layer to draw (of those run)")
      ->capture_default_str();
  heatmap->add_option("--batch-row", heatmap_flags.batch_row, "the sequence to draw")
      ->capture_default_str();
  heatmap
      ->add_option("--scale", heatmap_flags.scale,
                   "linear, sqrt or log (default: by positions: linear to 16, sqrt to 64, log)")
      ->check(CLI::IsMember({"linear", "sqrt", "log"}));
  heatmap->add_option("--out", heatmap_flags.png, "the PNG to write")->required();
  Flags bench_flags;
  CLI::App* bench =
      app.add_subcommand("bench", "time prefill and decode against the machine's limits");
  add_bench(bench, bench_flags);
  attn::GenerateFlags generate_flags;
  CLI::App* generate = app.add_subcommand(
      "generate", "from a prompt to text: the tokenizer and the whole model, token by token");
  add_generate(generate, generate_flags);
  attn::TokenizeFlags tokenize_flags;
  CLI::App* tokenize =
      app.add_subcommand("tokenize", "text to token ids and back with a tokenizer.json");
  add_tokenize(tokenize, tokenize_flags);
  add_examples(run, decode, heatmap, bench);
  try {
    session.open(argc, argv);  // MPI_Init under mpirun, before MPI's flags are parsed away
    app.parse(argc, argv);
    if (run->parsed()) return run_command(run_flags, false, session.shard);
    if (bench->parsed()) return bench_command(bench_flags, session.shard);
    if (heatmap->parsed()) return run_command(heatmap_flags, false, session.shard, true);
    if (generate->parsed()) return attn::generate_command(generate_flags);
    if (tokenize->parsed()) return attn::tokenize_command(tokenize_flags);
    return run_command(decode_flags, true, session.shard);
  } catch (const ranks::Quiet& q) {
    return q.status;
  } catch (const CLI::Success& e) {
    return session.shard.rank == 0 ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    return session.shard.rank == 0 ? usage_error(app, e, argc, argv) : 2;
  } catch (const attn::InputError& e) {
    const std::string flag = attn_cli::cli_flag_for(e.setting);
    if (flag.empty())
      std::fprintf(stderr, "attn-cli: error: %s\n", e.what());
    else
      std::fprintf(stderr, "attn-cli: error: %s (set with %s)\n", e.what(), flag.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-cli: error: %s\n", e.what());
    return 1;
  }
}
