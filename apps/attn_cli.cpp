// attn-cli: the frontend. Flags in, trace out; the engine lives in lib/.
#include <omp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "attn/error.hpp"
#include "attn/matmul.hpp"
#include "attn/run.hpp"

namespace {

struct Flags {
  std::string config, weights, input, dump, log_level = "warn";
  attn::RunOptions run;
  std::uint64_t seed = 42;
  int threads = omp_get_num_procs();
  bool json = false;
  CLI::Option* batch_option = nullptr;
};

void add_common(CLI::App* cmd, Flags& f) {
  cmd->add_option("--config", f.config, "ModelArgs JSON (default: the seed notebook's GQA)");
  cmd->add_option("--weights", f.weights, "safetensors weights (default: drawn from --seed)");
  cmd->add_option("--input", f.input,
                  "safetensors with tensor x [B, T, dim] (default: from --seed)");
  f.batch_option =
      cmd->add_option("-b,--batch", f.run.batch, "batch size B")->capture_default_str();
  cmd->add_option("--prefill", f.run.prefill, "positions in the prefill P")->capture_default_str();
  cmd->add_option("-n,--steps", f.run.steps, "decode steps N after the prefill")
      ->capture_default_str();
  cmd->add_option("-s,--seed", f.seed, "seed for weights and input")->capture_default_str();
  cmd->add_option("-t,--threads", f.threads, "threads (default: the machine's cores)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--json", f.json, "JSON Lines trace on stdout");
  cmd->add_option("--dump", f.dump, "write inputs, outputs and caches to this safetensors file");
  cmd->add_option("--log-level", f.log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
}

// A dump must land next to where it is asked for: refuse a bad directory before any work.
void check_dump_path(const std::string& dump) {
  if (dump.empty()) return;
  std::filesystem::path dir = std::filesystem::path(dump).parent_path();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir) || access(dir.c_str(), W_OK) != 0)
    throw attn::InputError(dump + ": cannot write the dump: directory '" + dir.string() +
                           "' does not exist or is not writable");
}

attn::Summary summarize(const attn::RunOptions& o, const attn::RunOutputs& out) {
  std::vector<double> steps = out.decode_seconds;
  std::sort(steps.begin(), steps.end());
  double total = 0;
  for (double s : steps) total += s;
  return {o.prefill,        out.prefill_seconds * 1e3,
          o.steps,          steps.empty() ? 0 : steps[steps.size() / 2] * 1e3,
          total * 1e3,      attn::threads(),
          attn::blas_core()};
}

int run_command(const Flags& f, bool decode_only) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  attn::set_threads(f.threads);
  const attn::ModelArgs args = f.config.empty() ? attn::seed_args() : attn::load_config(f.config);
  attn::RunOptions opts = f.run;
  attn::check_capacity(args, opts);
  check_dump_path(f.dump);
  std::vector<float> x = f.input.empty()
                             ? attn::seeded_input(args, opts, f.seed)
                             : attn::load_input(f.input, args, opts, f.batch_option->count() > 0);
  attn::TransformerWeights w =
      f.weights.empty() ? attn::seeded_weights(args, f.seed) : attn::load_weights(args, f.weights);
  attn::Transformer m = attn::make_transformer(
      args, std::move(w), opts.batch * std::max<std::int64_t>(opts.prefill, 1));

  if (f.json)
    attn::print_config_json(std::cout, args);
  else
    attn::print_config_text(std::cout, args);
  const attn::RunOutputs out = attn::run(m, x, opts, [&](const attn::Event& e) {
    if (f.json)
      attn::print_event_json(std::cout, e);
    else
      attn::print_event_text(std::cout, e, decode_only);
  });
  const attn::Summary s = summarize(opts, out);
  if (f.json) attn::print_summary_json(std::cout, s);
  attn::print_summary_text(std::cerr, s);
  if (!f.dump.empty()) attn::write_dump(f.dump, m, x, opts, out);
  std::cout.flush();
  return std::cout ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
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
      "Exit status: 0 success, 2 bad usage or input, 1 anything else.");
  Flags run_flags, decode_flags;
  CLI::App* run = app.add_subcommand("run", "prefill P positions, then N decode steps");
  CLI::App* decode =
      app.add_subcommand("decode", "the token-by-token loop, the cache after every step");
  add_common(run, run_flags);
  add_common(decode, decode_flags);
  try {
    app.parse(argc, argv);
    if (run->parsed()) return run_command(run_flags, false);
    return run_command(decode_flags, true);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const attn::InputError& e) {
    std::fprintf(stderr, "attn-cli: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-cli: error: %s\n", e.what());
    return 1;
  }
}
