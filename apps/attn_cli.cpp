// attn-cli: the frontend. Flags in, trace out; the engine lives in lib/. This file is main: the
// commands, their flags (flags.hpp) and where each one goes.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "attn/error.hpp"
#include "attn/version.hpp"
#include "commands/commands.hpp"
#include "flags.hpp"
#include "llama_cpp_flags.hpp"
#include "ranks.hpp"
#include "signals.hpp"
#include "usage.hpp"

namespace cli {

namespace {

// A subcommand: its name and summary, and the values its flags parse into.
struct Subcommand {
  Command command;
  const char* name;
  const char* about;
  Options options = {};
  CLI::App* app = nullptr;
};

// In the order `attn-cli --help` lists them.
std::array<Subcommand, 11> subcommands() {
  return {{
      {Command::run, "run", "prefill P positions, then N decode steps"},
      {Command::decode, "decode", "the token-by-token loop, the cache after every step"},
      {Command::heatmap, "heatmap",
       "run, then draw one layer's attention weights: a PNG panel per query head"},
      {Command::view, "view",
       "run or generate, then write one HTML page of every layer x head's attention"},
      {Command::bench, "bench", "time prefill and decode against the machine's limits"},
      {Command::generate, "generate",
       "from a prompt to text: the tokenizer and the whole model, token by token"},
      {Command::chat, "chat",
       "a conversation on stdin and stdout in the model's chat template, the cache kept"},
      {Command::tokenize, "tokenize",
       "text to token ids and back with a tokenizer (tokenizer.json, GGUF, tokenizer.bin)"},
      {Command::cvector, "cvector",
       "a control vector from prompt pairs, as llama-cvector-generator writes it"},
      {Command::capture, "capture",
       "hook sites' activations over a corpus, streamed to sharded safetensors files"},
      {Command::diff, "diff",
       "compare two dumps tensor by tensor in forward order: the first past a tolerance"},
  }};
}

// The subcommand the command line names: its first word that is not a flag (the main command's
// own flags, --help and --version, take no value, so CLI11 finds the subcommand there too).
// Only that subcommand's flags are built: building all nine's was half of the CPU time of a
// small `run` (issue 52, docs/perf/startup.md). nullptr: none named (--help, --version, an
// empty line); CLI11 then needs no subcommand's flags either.
const char* named_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') return argv[i];
  return nullptr;
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

int dispatch(const Subcommand& s, const attn::Shard& shard) {
  switch (s.command) {
    case Command::bench:
      return bench_command(s.options, shard);
    case Command::generate:
      return generate_command(s.options);
    case Command::tokenize:
      return tokenize_command(s.options);
    case Command::chat:
      return chat_command(s.options);
    case Command::view:
      return view_command(s.options);
    case Command::diff:
      return diff_command(s.options);
    case Command::cvector:
      return cvector_command(s.options);
    case Command::capture:
      return capture_command(s.options);
    default:
      return run_command(s.options, s.command, shard);
  }
}

// Parses the command line and runs the command it names; errors go to main's handlers.
int parse_and_run(CLI::App& app, std::array<Subcommand, 11>& subs, ranks::World& world, int argc,
                  char** argv) {
  world.open(argc, argv);              // MPI_Init under mpirun, before MPI's flags are parsed away
  install_signal_handlers();           // after MPI_Init, whose SIGBUS handler would hide ours
  refuse_llama_cpp_flags(argc, argv);  // before CLI11 splits -ngl into -n gl
  app.parse(argc, argv);
  for (Subcommand& s : subs)
    if (s.app->parsed()) {
      mark_given(*s.app, s.options);
      return dispatch(s, world.shard);
    }
  return 0;  // unreachable: require_subcommand(1)
}

int attn_cli(int argc, char** argv) {
  keep_standard_streams();
  ranks::World world;  // MPI_Finalize on return, when open() started MPI
  spdlog::set_default_logger(spdlog::stderr_color_mt("attn-cli"));
  CLI::App app{"attn-cli: runs LLaMA-style transformer blocks on the CPU and shows the KV cache.",
               "attn-cli"};
  app.set_version_flag("--version", std::string("attn-cli ") + ATTN_VERSION);
  app.require_subcommand(1);
  add_main_footer(app);
  std::array<Subcommand, 11> subs = subcommands();
  const char* named = named_command(argc, argv);
  for (Subcommand& s : subs) {
    s.app = app.add_subcommand(s.name, s.about);
    if (named && std::strcmp(named, s.name) == 0) add_flags(*s.app, s.options, s.command);
  }
  add_examples(app);
  try {
    return parse_and_run(app, subs, world, argc, argv);
  } catch (const ranks::Quiet& q) {
    return q.status;
  } catch (const CLI::Success& e) {
    return world.shard.rank == 0 ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    return world.shard.rank == 0 ? usage_error(app, e, argc, argv) : 2;
  } catch (const attn::InputError& e) {
    const std::string flag = cli_flags_for(e.setting);
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

}  // namespace

}  // namespace cli

int main(int argc, char** argv) {
  return cli::attn_cli(argc, argv);
}
