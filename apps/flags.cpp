#include "flags.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <system_error>

#include "attn/engine/lens.hpp"

namespace cli {

namespace {

constexpr Commands kRunLike = Command::run | Command::decode | Command::heatmap;
constexpr Commands kModel = kRunLike | Command::bench;
constexpr Commands kText = Command::generate | Command::tokenize;
constexpr Commands kView = Command::view;
constexpr Commands kRunView = kRunLike | kView;  // run's flags view takes with run's meaning

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

// CLI::Range compares with < and >, which NaN passes: a float flag is checked as !(in range).
CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec != std::errc() || end != value.data() + value.size() || !(v >= lo && v <= hi))
          return "must be a number in [" + CLI::detail::to_string(lo) + " - " +
                 CLI::detail::to_string(hi) + "], got " + value;
        return "";
      },
      "FLOAT in [" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]");
}

// A tolerance: a finite number, 0 or more (NaN fails the test too).
std::string not_negative_number(const std::string& value) {
  double v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || !(v >= 0) || !std::isfinite(v))
    return "must be a finite number, 0 or more, got " + value;
  return "";
}

// A count of positions, steps, sequences or a row: negative ones mean nothing.
std::string not_negative(const std::string& value) {
  return value.starts_with('-') ? "must not be negative, got " + value : "";
}

const CLI::Range kCapacity(std::int64_t{1}, std::int64_t{1} << 24);
const CLI::Range kThreads(1, 1024);
const CLI::IsMember kLogLevels({"trace", "debug", "info", "warn", "error", "critical", "off"});

using Names = const std::string&;
using Help = const std::string&;

CLI::Option* path(CLI::App& cmd, Names n, std::string& field, Help h) {
  return cmd.add_option(n, field, h)->check(non_empty);
}

// The shape of the run: options that show their default.
CLI::Option* count(CLI::App& cmd, Names n, std::int64_t& field, Help h) {
  return cmd.add_option(n, field, h)->check(not_negative)->capture_default_str();
}

CLI::Option* capacity(CLI::App& cmd, Names n, std::int64_t& field, Help h) {
  return cmd.add_option(n, field, h)->check(kCapacity);
}

CLI::Option* flag(CLI::App& cmd, Names n, bool& field, Help h) {
  return cmd.add_flag(n, field, h);
}

// The engine's half of the table: the model, the run's shape and the machine.
std::vector<Flag> model_flags() {
  return {
      {"--config",
       {{kRunView,
         "ModelArgs JSON (default: config.json beside the weights, else the seed notebook's GQA)"},
        {Command::bench,
         "ModelArgs JSON (default: config.json beside the weights, else one Llama-3-8B layer)"},
        {Command::generate,
         "ModelArgs or Hugging Face config.json with vocab_size (default: config.json beside "
         "the weights)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.config, h);
       }},
      {"-m,--weights",
       {{kModel | kView,
         "safetensors weights, a Hugging Face model.safetensors.index.json, a folder holding "
         "one, a GGUF file or a llama2.c checkpoint (their own config) (default: drawn from "
         "--seed)"},
        {Command::generate,
         "safetensors weights, a Hugging Face index, or a folder holding one with config.json "
         "and tokenizer.json; a GGUF file (its own config and tokenizer) or a llama2.c "
         "checkpoint (with --tokenizer tokenizer.bin) (default: drawn from --seed)"},
        {Command::tokenize, "a GGUF model file: its tokenizer, as --tokenizer F.gguf"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.weights, h);
       }},
      {"--layers",
       {{kModel, "run the checkpoint's layers A..B-1 only, as A:B"},
        {kView,
         "show layers A..B-1 only, as A:B (the model always runs whole; default: every layer)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command c) {
         return cmd.add_option(n, c == Command::view ? o.shown_layers : o.layers, h);
       }},
      {"-c,--max-seq-len",
       {{kModel | kView, "cache capacity in positions"},
        {Command::generate, "cache capacity in positions (context)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return capacity(cmd, n, o.overrides.max_seq_len, h);
       }},
      {"--max-batch",
       {{kModel | kView, "cache capacity in sequences"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return capacity(cmd, n, o.overrides.max_batch_size, h);
       }},
      {"--model-parallel",
       {{kModel,
         "split every layer across K MPI ranks (default: the config's; for a Hugging Face "
         "config.json, mpirun's number of ranks)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.overrides.model_parallel_size, h)->check(CLI::Range(1, 1024));
       }},
      {"--prefill",
       {{kRunLike, "positions in the prefill P (token input: all but the steps)"},
        {kView, "positions in the prefill P of drawn input or several prompts (one prompt: all)"},
        {Command::bench, "positions in the prefill P (token input: all but the steps)", "512"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.run.prefill, h);
       }},
      {"-n,--steps",
       {{kRunLike, "decode steps N after the prefill"},
        {kView, "decode steps N: tokens chosen after one prompt (several: its last N given)"},
        {Command::bench, "decode steps N after the prefill", "128"},
        {Command::generate, "tokens to generate at most", "32"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.run.steps, h);
       }},
      // Seeds the drawn weights and input; in generate, the sampler (and drawn weights).
      {"-s,--seed",
       {{kModel, "seed for weights and input"},
        {kView, "seed of drawn weights and input, and of the sampler"},
        {Command::generate, "seed of the sampler (and of drawn weights)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command c) {
         std::uint64_t& seed = c == Command::generate ? o.sampling.seed : o.seed;
         return cmd.add_option(n, seed, h)->check(seed_in_range)->capture_default_str();
       }},
      {"-t,--threads",
       {{kModel | Command::generate | kView, "threads (default: the machine's cores)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.threads, h)->check(kThreads);
       }},
      {"--compute",
       {{kModel | Command::generate | kView,
         "f32: exact (default); bf16: BF16 weights times activations rounded to BF16 "
         "(vdpbf16ps, AVX512-BF16; see docs/perf/bf16-compute.md)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.compute, h)
             ->check(CLI::IsMember({"f32", "bf16"}))
             ->capture_default_str();
       }},
      {"--log-level",
       {{kRunView | Command::generate, "trace, debug, info, warn, error, off"},
        {Command::bench, "trace, debug, info, warn, error, off", "info"},
        {Command::tokenize, "info: the encoding's speed on stderr"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.log_level, h)->check(kLogLevels)->capture_default_str();
       }},
  };
}

// What run, decode and heatmap read and write, and how they look at attention.
std::vector<Flag> run_flags() {
  return {
      {"--input",
       {{kRunView, "safetensors with tensor x [B, T, dim] (default: from --seed)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.input, h);
       }},
      {"-b,--batch",
       {{kRunView, "batch size B"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.run.batch, h);
       }},
      {"--json",
       {{kRunLike, "JSON Lines trace on stdout"},
        {Command::bench | Command::diff, "one JSON object on stdout"},
        {Command::generate, "JSON Lines: config, prompt, one event per token, summary"},
        {Command::tokenize, "one object: {\"ids\": [...], \"pieces\": [...]}"},
        {kView, "the per-head figures as one JSON object on stdout"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) { return flag(cmd, n, o.json, h); }},
      {"--dump",
       {{kRunLike, "write inputs, outputs and caches to this safetensors file"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) { return path(cmd, n, o.dump, h); }},
      {"--mask",
       {{kRunView, "causal or none (default: the config's mask)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.mask, h)->check(CLI::IsMember({"causal", "none"}));
       }},
      {"--attention-weights",
       {{kRunLike, "the dump also holds attn.{l}.prefill and attn.{l}.decode.{i} (limit 1 GiB)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.attention_weights, h);
       }},
      {"--dump-activations",
       {{kRunLike,
         "the dump also holds these activations, by TransformerLens hook name: all, or a comma "
         "list of names (blocks.0.attn.hook_pattern, ln_final.hook_normalized) and of a block's "
         "hooks for every block (hook_resid_post) (limit 1 GiB; needs --dump)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.dump_activations, h)->check(non_empty);
       }},
      {"--print-attention",
       {{kRunLike, "print the attention weights after each step's trace line (small runs)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.print_attention, h);
       }},
  };
}

// The prompt, as text or ids, and the tokenizer that reads it.
std::vector<Flag> text_flags() {
  constexpr Commands kTokens = kRunLike | kText | kView;
  return {
      {"-p,--prompt",
       {{kTokens, "the prompt's text (run: one sequence each)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.text.prompt, h);
       }},
      {"-f,--prompt-file",
       {{kTokens, "a file holding the prompt's text"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.text.prompt_file, h);
       }},
      {"--tokens",
       {{kTokens, "the prompt as token ids: 1,15043,29991 or [1, 15043]"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.text.tokens, h);
       }},
      {"--tokens-file",
       {{kTokens, "a file of token ids (text or JSON)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.text.tokens_file, h);
       }},
      {"--tokenizer",
       {{kTokens,
         "Hugging Face tokenizer.json, a GGUF file (its tokenizer) or llama2.c's tokenizer.bin "
         "(default: beside the config)"},
        {Command::tokenize,
         "Hugging Face tokenizer.json, a GGUF file (its tokenizer) or llama2.c's tokenizer.bin"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.text.tokenizer, h);
       }},
      {"--no-bos",
       {{kTokens, "no BOS token, whatever the tokenizer file says"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.text.no_bos, h);
       }},
      {"--add-bos",
       {{kTokens, "a BOS token first, whatever the tokenizer file says"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.text.add_bos, h);
       }},
      {"--all-logits",
       {{kRunLike, "token input: every prefill position's logits in the dump, not the last"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.all_logits, h);
       }},
      {"--logits",
       {{kRunLike,
         "token input with --layers A:B short of the last layer: apply the final norm and "
         "output head after layer B-1 anyway (a logit lens)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.logits, h);
       }},
      {"--logit-lens",
       {{kRunLike | Command::generate,
         "token input: each layer's output through the final norm and head, its K top tokens "
         "per position after every forward call (K default 5, at most 100; with --dump, "
         "lens.{l}.* logits, limit 1 GiB)"},
        {kView,
         "the lens panel: each layer's K top tokens per position (default: on, K 5, for a "
         "prompt to a token model; at most 100)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.logit_lens, h)
             ->expected(0, 1)
             ->default_str("5")
             ->type_name("[K]")
             ->check(CLI::Range(1, attn::kLensMaxK));
       }},
  };
}

std::vector<Flag> heatmap_and_bench_flags() {
  constexpr Commands kHeatmap = Command::heatmap;
  return {
      {"--layer",
       {{kHeatmap, "the layer to draw (of those run)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.layer, h);
       }},
      {"--batch-row",
       {{kHeatmap | kView, "the sequence to draw"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.batch_row, h);
       }},
      {"--scale",
       {{kHeatmap, "linear, sqrt or log (default: by positions: linear to 16, sqrt to 64, log)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.scale, h)->check(CLI::IsMember({"linear", "sqrt", "log"}));
       }},
      {"--out",
       {{kHeatmap, "the PNG to write"}, {kView, "the HTML page to write"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.png, h)->required();
       }},
      {"--no-logit-lens",
       {{kView, "no lens panel (META's lens is null)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.no_logit_lens, h);
       }},
      {"--heads",
       {{kView, "show query heads A..B-1 only, as A:B (default: every head)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.heads, h);
       }},
      {"--positions",
       {{kView, "show query rows A..B-1 only, as A:B (keys: all they see; default: every row)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.positions, h);
       }},
      {"--bits",
       {{kView, "bits per probability: 8 (sqrt code) or 16 (linear)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.bits, h)->check(CLI::IsMember({8, 16}))->capture_default_str();
       }},
      {"--max-size",
       {{kView, "refuse before any work a page that could be larger than this many MB"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.max_size, h)
             ->check(finite_range(1.0, 1e6))
             ->capture_default_str();
       }},
      {"--depth",
       {{Command::bench,
         "decode at depth D: every sequence's cache filled to D positions, untimed, by "
         "prefills of P positions and copies of the first sequence's (default: P)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.depth, h)->check(kCapacity);
       }},
      {"--weight-types",
       {{Command::bench,
         "the drawn layer's matrices in each of these types, decoded in the same rounds (with "
         "--weights: the file's type only)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.weight_types, h)
             ->delimiter(',')
             ->check(CLI::IsMember(weight_type_flag_names()))
             ->capture_default_str();
       }},
  };
}

std::vector<Flag> generate_flags() {
  constexpr Commands kGenerate = Command::generate;
  return {
      {"--temp",
       {{kGenerate | kView, "temperature; 0 is greedy"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.sampling.temp, h)
             ->capture_default_str()
             ->check(finite_range(0.0, 100.0));
       }},
      {"--top-k",
       {{kGenerate | kView, "sampling: keep the k likeliest (0: all)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.sampling.top_k, h)
             ->capture_default_str()
             ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 24));
       }},
      {"--top-p",
       {{kGenerate | kView, "sampling: the fewest reaching probability p"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.sampling.top_p, h)
             ->capture_default_str()
             ->check(finite_range(0.0, 1.0));
       }},
      {"--min-p",
       {{kGenerate | kView, "sampling: drop below min-p times the likeliest"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.sampling.min_p, h)
             ->capture_default_str()
             ->check(finite_range(0.0, 1.0));
       }},
      {"--ignore-eos",
       {{kGenerate | kView, "do not stop at the end-of-sequence token"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.ignore_eos, h);
       }},
      {"--save-session",
       {{kGenerate, "write the cache and tokens here at the end"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.save_session, h);
       }},
      {"--load-session",
       {{kGenerate, "continue from a saved session"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.load_session, h);
       }},
      {"--decode",
       {{Command::tokenize, "print the text of --tokens / --tokens-file"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.decode, h);
       }},
  };
}

// diff's files and tolerance (its --json is run_flags()'s).
std::vector<Flag> diff_flags() {
  constexpr Commands kDiff = Command::diff;
  return {
      {"A",
       {{kDiff, "a dump (safetensors: F32, F64, F16 or BF16 tensors)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.diff_a, h)->required();
       }},
      {"B",
       {{kDiff, "the dump to compare it with, the reference of the relative tolerance"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.diff_b, h)->required();
       }},
      {"--rtol",
       {{kDiff, "relative tolerance: |A - B| <= atol + rtol |B| passes (torch.allclose's)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.rtol, h)->check(not_negative_number)->capture_default_str();
       }},
      {"--atol",
       {{kDiff, "absolute tolerance"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.atol, h)->check(not_negative_number)->capture_default_str();
       }},
  };
}

std::vector<Flag> make_table() {
  std::vector<Flag> table;
  for (std::vector<Flag> part : {model_flags(), run_flags(), text_flags(),
                                 heatmap_and_bench_flags(), generate_flags(), diff_flags()})
    std::move(part.begin(), part.end(), std::back_inserter(table));
  return table;
}

// generate's and tokenize's help has always listed the prompt before the numbers that shape the
// run: their flags go in this order, the other commands' in the table's.
constexpr std::string_view kPromptFirst[] = {
    "--config",      "--weights",      "--prompt",       "--prompt-file", "--tokens",
    "--tokens-file", "--tokenizer",    "--no-bos",       "--add-bos",     "--steps",
    "--temp",        "--top-k",        "--top-p",        "--min-p",       "--seed",
    "--max-seq-len", "--threads",      "--compute",      "--ignore-eos",  "--json",
    "--logit-lens",  "--save-session", "--load-session", "--decode",      "--log-level"};

std::string_view long_name(const Flag& f) {
  return f.names.substr(f.names.rfind(',') + 1);
}

std::size_t prompt_first_rank(const Flag& f) {
  return std::size_t(std::find(std::begin(kPromptFirst), std::end(kPromptFirst), long_name(f)) -
                     std::begin(kPromptFirst));
}

const Use* use_in(const Flag& f, Command c) {
  for (const Use& u : f.uses)
    if (u.commands.has(c)) return &u;
  return nullptr;
}

}  // namespace

const std::vector<Flag>& flag_table() {
  static const std::vector<Flag> table = make_table();
  return table;
}

void add_flags(CLI::App& cmd, Options& o, Command c) {
  std::vector<const Flag*> flags;
  for (const Flag& f : flag_table())
    if (use_in(f, c)) flags.push_back(&f);
  if (kText.has(c))
    std::stable_sort(flags.begin(), flags.end(), [](const Flag* a, const Flag* b) {
      return prompt_first_rank(*a) < prompt_first_rank(*b);
    });
  for (const Flag* f : flags) {
    const Use& u = *use_in(*f, c);
    CLI::Option* opt = f->add(cmd, std::string(f->names), std::string(u.help), o, c);
    if (!u.default_value.empty()) opt->default_val(std::string(u.default_value));
  }
}

void mark_given(const CLI::App& cmd, Options& o) {
  const auto given = [&](const char* name) {
    const CLI::Option* opt = cmd.get_option_no_throw(name);
    return opt && opt->count() > 0;
  };
  o.batch_given = given("--batch");
  o.prefill_given = given("--prefill");
}

}  // namespace cli
