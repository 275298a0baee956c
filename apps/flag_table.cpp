// attn-cli's flag table: every flag declared once, with its names, the library's setting it sets,
// its place in generate's and tokenize's help, the commands that take it (help and default in
// each) and how its value is bound and checked. flags.cpp adds a command's flags from it.
#include "flags.hpp"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <system_error>
#include <type_traits>

#include "attn/engine/lens.hpp"

namespace cli {

namespace {

constexpr Commands kRunLike = Command::run | Command::decode | Command::heatmap;
constexpr Commands kModel = kRunLike | Command::bench;
constexpr Commands kText = Command::generate | Command::tokenize;
constexpr Commands kView = Command::view;
constexpr Commands kRunView = kRunLike | kView;  // run's flags view takes with run's meaning
constexpr Commands kChat = Command::chat;
constexpr Commands kCvector = Command::cvector;
constexpr Commands kCapture = Command::capture;

// A type's bound as people read it: 2^63 - 1, not 9223372036854775807.
template <class T>
std::string bound_text(T v) {
  if constexpr (std::is_integral_v<T>) {
    if (v == std::numeric_limits<T>::max() && v > INT32_MAX)
      return "2^" + std::to_string(std::numeric_limits<T>::digits) + " - 1";
    if constexpr (std::is_signed_v<T>)
      if (v == std::numeric_limits<T>::min() && v < INT32_MIN)
        return "-2^" + std::to_string(std::numeric_limits<T>::digits);
  }
  return CLI::detail::to_string(v);
}

// Every number a flag takes is read here first, whole and in the type of the field it sets,
// before any range check: CLI11's own conversion would clamp 99999999999999999999 to 2^63 - 1
// (a "full cache" later) and wrap -1 into 2^64 - 1. CLI11 prefixes the flag's name.
template <class T>
std::string fits(const std::string& value) {
  T v{};
  const char* end = value.data() + value.size();
  const auto [stop, ec] = std::from_chars(value.data(), end, v);
  const std::string range = "[" + bound_text(std::numeric_limits<T>::lowest()) + ", " +
                            bound_text(std::numeric_limits<T>::max()) + "]";
  if (ec == std::errc::result_out_of_range)
    return std::is_integral_v<T> ? "is out of range " + range + ", got " + value
                                 : "is out of a double's range, got " + value;
  if (ec != std::errc() || stop != end)
    return std::string(std::is_integral_v<T> ? "must be an integer in " + range
                                             : "must be a number") +
           ", got " + value;
  return "";
}

// A flag that takes a number: its text checked by fits<T> before any other check.
template <class T>
CLI::Option* number(CLI::App& cmd, const std::string& names, T& field, const std::string& help) {
  return cmd.add_option(names, field, help)->check(fits<T>);
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
  return number(cmd, n, field, h)->check(not_negative)->capture_default_str();
}

CLI::Option* capacity(CLI::App& cmd, Names n, std::int64_t& field, Help h) {
  return number(cmd, n, field, h)->check(kCapacity);
}

CLI::Option* flag(CLI::App& cmd, Names n, bool& field, Help h) {
  return cmd.add_flag(n, field, h);
}

// The engine's half of the table: the model, the run's shape and the machine.
std::vector<Flag> model_flags() {
  return {
      {{"--config", "config", 1},
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
      {{"-m,--weights,--model", "weights", 2},
       {{kModel | kView,
         "safetensors weights, a Hugging Face model.safetensors.index.json, a folder holding "
         "one, a GGUF file or a llama2.c checkpoint (their own config) (default: drawn from "
         "--seed)"},
        {Command::generate,
         "safetensors weights, a Hugging Face index, or a folder holding one with config.json "
         "and tokenizer.json; a GGUF file (its own config and tokenizer) or a llama2.c "
         "checkpoint (with --tokenizer tokenizer.bin) (default: drawn from --seed)"},
        {Command::tokenize, "a GGUF model file: its tokenizer, as --tokenizer F.gguf"},
        {kChat, "a GGUF file, or a Hugging Face folder with its tokenizer (and its chat template)"},
        {kCvector | kCapture, "a GGUF file, or a Hugging Face folder with its tokenizer"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.weights, h);
       }},
      {{"--layers", "layers"},
       {{kModel, "run the checkpoint's layers A..B-1 only, as A:B"},
        {kView,
         "show layers A..B-1 only, as A:B (the model always runs whole; default: every layer)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command c) {
         return cmd.add_option(n, c == Command::view ? o.shown_layers : o.layers, h);
       }},
      {{"-c,--max-seq-len,--ctx-size", "max_seq_len", 16},
       {{kModel | kView, "cache capacity in positions"},
        {Command::generate | kChat, "cache capacity in positions (context)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return capacity(cmd, n, o.overrides.max_seq_len, h);
       }},
      {{"--max-batch", "max_batch_size"},
       {{kModel | kView, "cache capacity in sequences"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return capacity(cmd, n, o.overrides.max_batch_size, h);
       }},
      {{"--model-parallel", "model_parallel_size"},
       {{kModel,
         "split every layer across K MPI ranks (default: the config's; for a Hugging Face "
         "config.json, mpirun's number of ranks)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.overrides.model_parallel_size, h)->check(CLI::Range(1, 1024));
       }},
      {{"--prefill", "prefill"},
       {{kRunLike, "positions in the prefill P (token input: all but the steps)"},
        {kView, "positions in the prefill P of drawn input or several prompts (one prompt: all)"},
        {Command::bench, "positions in the prefill P (token input: all but the steps)", "512"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.run.prefill, h);
       }},
      {{"-n,--steps,--n-predict", "steps", 10},
       {{kRunLike, "decode steps N after the prefill"},
        {kView, "decode steps N: tokens chosen after one prompt (several: its last N given)"},
        {Command::bench, "decode steps N after the prefill", "128"},
        {Command::generate,
         "tokens to generate at most (-1: until the end of text or a full context)", "32"},
        {kChat, "tokens per reply at most (-1: until the turn ends or the context is full)", "-1"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command c) {
         if (c != Command::generate && c != Command::chat) return count(cmd, n, o.run.steps, h);
         return number(cmd, n, o.run.steps, h)
             ->check(CLI::Range(std::int64_t{-1}, std::numeric_limits<std::int64_t>::max()))
             ->capture_default_str();
       }},
      // Seeds the drawn weights and input; in generate, the sampler (and drawn weights).
      {{"-s,--seed", "seed", 15},
       {{kModel, "seed for weights and input"},
        {kView, "seed of drawn weights and input, and of the sampler"},
        {Command::generate | kChat, "seed of the sampler (and of drawn weights)"},
        {kCvector, "seed of the PCA's random start"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command c) {
         std::uint64_t& seed =
             c == Command::generate || c == Command::chat ? o.sampling.seed : o.seed;
         return number(cmd, n, seed, h)->capture_default_str();
       }},
      {{"-t,--threads", "threads", 17},
       {{kModel | Command::generate | kView | kChat | kCvector | kCapture,
         "threads (default: the machine's cores)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.threads, h)->check(kThreads);
       }},
      {{"--compute", "compute", 18},
       {{kModel | Command::generate | kView | kChat,
         "f32: exact (default); bf16: BF16 weights times activations rounded to BF16 "
         "(vdpbf16ps, AVX512-BF16; see docs/perf/bf16-compute.md); q8: Q8_0, Q4_K and Q6_K "
         "weights times activations quantized to 8 bits as llama.cpp does (AVX512-VNNI; see "
         "docs/perf/q8-compute.md)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.compute, h)
             ->check(CLI::IsMember({"f32", "bf16", "q8"}))
             ->capture_default_str();
       }},
      {{"--log-level", "", 25},
       {{kRunView | Command::generate | kChat | kCvector | kCapture,
         "trace, debug, info, warn, error, off"},
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
      {{"--input", "input"},
       {{kRunView, "safetensors with tensor x [B, T, dim] (default: from --seed)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.input, h);
       }},
      {{"-b,--batch", "batch"},
       {{kRunView, "batch size B"}, {kCapture, "rows per forward call", "8"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.run.batch, h);
       }},
      {{"--json", "", 20},
       {{kRunLike, "JSON Lines trace on stdout"},
        {Command::bench | Command::diff, "one JSON object on stdout"},
        {Command::generate, "JSON Lines: config, prompt, one event per token, summary"},
        {Command::tokenize, "one object: {\"ids\": [...], \"pieces\": [...]}"},
        {kView, "the per-head figures as one JSON object on stdout"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) { return flag(cmd, n, o.json, h); }},
      {{"--dump"},
       {{kRunLike, "write inputs, outputs and caches to this safetensors file"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) { return path(cmd, n, o.dump, h); }},
      {{"--mask", "mask"},
       {{kRunView, "causal or none (default: the config's mask)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.mask, h)->check(CLI::IsMember({"causal", "none"}));
       }},
      {{"--attention-weights", "attention_weights"},
       {{kRunLike, "the dump also holds attn.{l}.prefill and attn.{l}.decode.{i} (limit 1 GiB)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.attention_weights, h);
       }},
      {{"--dump-activations", "dump_activations"},
       {{kRunLike,
         "the dump also holds these activations, by TransformerLens hook name: all, or a comma "
         "list of names (blocks.0.attn.hook_pattern, ln_final.hook_normalized) and of a block's "
         "hooks for every block (hook_resid_post) (limit 1 GiB; needs --dump)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.dump_activations, h)->check(non_empty);
       }},
      {{"--print-attention"},
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
      {{"-p,--prompt", "prompt", 3},
       {{kTokens, "the prompt's text (run: one sequence each)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.text.prompt, h);
       }},
      {{"-f,--prompt-file,--file", "", 4},
       {{kTokens, "a file holding the prompt's text"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.text.prompt_file, h);
       }},
      {{"--tokens", "tokens", 5},
       {{kTokens, "the prompt as token ids: 1,15043,29991 or [1, 15043]"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.text.tokens, h);
       }},
      {{"--tokens-file", "tokens_file", 6},
       {{kTokens, "a file of token ids (text or JSON)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.text.tokens_file, h);
       }},
      {{"--tokenizer", "tokenizer", 7},
       {{kTokens,
         "Hugging Face tokenizer.json, a GGUF file (its tokenizer) or llama2.c's tokenizer.bin "
         "(default: beside the config)"},
        {Command::tokenize | kChat,
         "Hugging Face tokenizer.json, a GGUF file (its tokenizer) or llama2.c's tokenizer.bin"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.text.tokenizer, h);
       }},
      {{"--no-bos", "", 8},
       {{kTokens, "no BOS token, whatever the tokenizer file says"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.text.no_bos, h);
       }},
      {{"--add-bos", "", 9},
       {{kTokens, "a BOS token first, whatever the tokenizer file says"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.text.add_bos, h);
       }},
      {{"--all-logits"},
       {{kRunLike, "token input: every prefill position's logits in the dump, not the last"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.all_logits, h);
       }},
      {{"--logits"},
       {{kRunLike,
         "token input with --layers A:B short of the last layer: apply the final norm and "
         "output head after layer B-1 anyway (a logit lens)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.logits, h);
       }},
      {{"--logit-lens", "logit_lens", 21},
       {{kRunLike | Command::generate,
         "token input: each layer's output through the final norm and head, its K top tokens "
         "per position after every forward call (K default 5, at most 100; with --dump, "
         "lens.{l}.* logits, limit 1 GiB)"},
        {kView,
         "the lens panel: each layer's K top tokens per position (default: on, K 5, for a "
         "prompt to a token model; at most 100)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.logit_lens, h)
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
      {{"--layer"},
       {{kHeatmap, "the layer to draw (of those run)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.layer, h);
       }},
      {{"--batch-row", "batch_row"},
       {{kHeatmap | kView, "the sequence to draw"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return count(cmd, n, o.batch_row, h);
       }},
      {{"--scale"},
       {{kHeatmap, "linear, sqrt or log (default: by positions: linear to 16, sqrt to 64, log)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.scale, h)->check(CLI::IsMember({"linear", "sqrt", "log"}));
       }},
      {{"--out"},
       {{kHeatmap, "the PNG to write"},
        {kView, "the HTML page to write"},
        {kCapture, "the folder of the shards and manifest.json (made if absent)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.png, h)->required();
       }},
      {{"--no-logit-lens"},
       {{kView, "no lens panel (META's lens is null)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.no_logit_lens, h);
       }},
      {{"--compare", "compare"},
       {{kView, "two prompts, CLEAN CORRUPTED, of equal length: both runs and their difference"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.compare, h)->expected(2);
       }},
      {{"--heads", "heads"},
       {{kView, "show query heads A..B-1 only, as A:B (default: every head)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.heads, h);
       }},
      {{"--positions", "positions"},
       {{kView, "show query rows A..B-1 only, as A:B (keys: all they see; default: every row)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.positions, h);
       }},
      {{"--bits"},
       {{kView, "bits per probability: 8 (sqrt code) or 16 (linear)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.bits, h)->check(CLI::IsMember({8, 16}))->capture_default_str();
       }},
      {{"--max-size", "max_size"},
       {{kView, "refuse before any work a page that could be larger than this many MB"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.max_size, h)->check(finite_range(1.0, 1e6))->capture_default_str();
       }},
      {{"--depth"},
       {{Command::bench,
         "decode at depth D: every sequence's cache filled to D positions, untimed, by "
         "prefills of P positions and copies of the first sequence's (default: P)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.depth, h)->check(kCapacity);
       }},
      {{"--quick"},
       {{Command::bench,
         "a short run, under 30 s on 2 cores: prefill 64, 16 steps, B up to 4, the first weight "
         "type only (replaces --prefill, --steps, --depth)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.quick, h);
       }},
      {{"--weight-types", "weight_types"},
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
      {{"--temp", "", 11},
       {{kGenerate | kView | kChat, "temperature; 0 is greedy"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.sampling.temp, h)
             ->capture_default_str()
             ->check(finite_range(0.0, 100.0));
       }},
      {{"--top-k", "", 12},
       {{kGenerate | kView | kChat, "sampling: keep the k likeliest (0: all)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.sampling.top_k, h)
             ->capture_default_str()
             ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 24));
       }},
      {{"--top-p", "", 13},
       {{kGenerate | kView | kChat, "sampling: the fewest reaching probability p"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.sampling.top_p, h)
             ->capture_default_str()
             ->check(finite_range(0.0, 1.0));
       }},
      {{"--min-p", "", 14},
       {{kGenerate | kView | kChat, "sampling: drop below min-p times the likeliest"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.sampling.min_p, h)
             ->capture_default_str()
             ->check(finite_range(0.0, 1.0));
       }},
      // llama.cpp's penalties, first in its sampler chain.
      {{"--repeat-penalty", "repeat_penalty", 26},
       {{kGenerate | kView | kChat, "divide a repeated token's logit by this (1: off)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.sampling.repeat_penalty, h)
             ->capture_default_str()
             ->check(finite_range(0.0, 100.0));
       }},
      {{"--repeat-last-n", "repeat_last_n", 27},
       {{kGenerate | kView | kChat, "the penalties look at the last N tokens (0: none, -1: all)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.sampling.repeat_last_n, h)
             ->capture_default_str()
             ->check(CLI::Range(std::int64_t{-1}, std::int64_t{INT32_MAX}));
       }},
      {{"--presence-penalty", "presence_penalty", 28},
       {{kGenerate | kView | kChat, "take this off a repeated token's logit (0: off)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.sampling.presence_penalty, h)
             ->capture_default_str()
             ->check(finite_range(-100.0, 100.0));
       }},
      {{"--frequency-penalty", "frequency_penalty", 29},
       {{kGenerate | kView | kChat,
         "take this times its count off a repeated token's logit (0: off)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.sampling.frequency_penalty, h)
             ->capture_default_str()
             ->check(finite_range(-100.0, 100.0));
       }},
      {{"--ignore-eos", "", 19},
       {{kGenerate | kView, "do not stop at the end-of-sequence token"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.ignore_eos, h);
       }},
      {{"--save-session", "save_session", 22},
       {{kGenerate, "write the cache and tokens here at the end"},
        {kChat, "write the cache and the conversation here when it ends (/exit, end of input)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.save_session, h);
       }},
      {{"--load-session", "load_session", 23},
       {{kGenerate, "continue from a saved session"},
        {kChat, "continue the conversation a chat --save-session wrote"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.load_session, h);
       }},
      {{"--chat", "", 30},
       {{kGenerate,
         "the prompt as one user turn in the model's chat template, until its turn ends"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) { return flag(cmd, n, o.chat, h); }},
      {{"--chat-template", "chat_template", 31},
       {{kGenerate, "with --chat: a template file, or the name of one of the tokenizer's"},
        {kChat, "a template file, or the name of one of the tokenizer's (default: the model's)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.chat_template, h)->check(non_empty);
       }},
      {{"--system-prompt", "system_prompt"},
       {{kChat, "the conversation's system message (llama.cpp's -sys TEXT too)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.system_prompt, h);
       }},
      // llama.cpp's control vectors (common/arg.cpp), with its spellings.
      {{"--control-vector", "control_vector", 32},
       {{kGenerate | kView | kChat,
         "add llama.cpp's control vector F (a comma list adds several) after each layer"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.control_vectors, h)->check(non_empty)->delimiter(',');
       }},
      {{"--control-vector-scaled", "control_vector_scaled", 33},
       {{kGenerate | kView | kChat,
         "add a control vector times SCALE: F:SCALE (a comma list), or F SCALE"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.control_vectors_scaled, h)->expected(1, 2);
       }},
      {{"--control-vector-layer-range", "control_vector_layer_range", 34},
       {{kGenerate | kView | kChat,
         "the layers the control vectors apply to, START END both inclusive (default: 1 to "
         "the layer count, as llama.cpp)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.control_vector_layer_range, h)
             ->expected(2)
             ->check(fits<std::int64_t>)
             ->check(not_negative);
       }},
      {{"--decode", "", 24},
       {{Command::tokenize, "print the text of --tokens / --tokens-file"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.decode, h);
       }},
  };
}

// cvector's: llama-cvector-generator's flags (common/arg.cpp), with its defaults.
std::vector<Flag> cvector_flags() {
  return {
      {{"--positive-file"},
       {{kCvector, "positive prompts, one per line (empty lines skipped, \\n escapes read)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.positive_file, h)->required();
       }},
      {{"--negative-file"},
       {{kCvector, "negative prompts, one per line, as many as the positive ones"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.negative_file, h)->required();
       }},
      {{"--method"},
       {{kCvector, "pca: each layer's first principal direction; mean: the mean difference"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.cvector_method, h)
             ->check(CLI::IsMember({"pca", "mean"}))
             ->capture_default_str();
       }},
      {{"--pca-iter", "pca_iterations"},
       {{kCvector, "power iterations of the PCA at most (a multiple of --pca-batch)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.pca_iterations, h)
             ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
             ->capture_default_str();
       }},
      {{"--pca-batch", "pca_batch"},
       {{kCvector, "llama.cpp's iterations per batch (attn-cli checks the convergence each step)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.pca_batch, h)
             ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
             ->capture_default_str();
       }},
      {{"-o,--output,--output-file", "output"},
       {{kCvector, "the control vector GGUF to write"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.output, h)->capture_default_str();
       }},
  };
}

// capture's: the sites, the corpus and the shards.
std::vector<Flag> capture_flags() {
  return {
      {{"--hooks", "hooks"},
       {{kCapture,
         "hook names, a comma list (blocks.L.hook_resid_pre, _resid_mid, _resid_post, "
         "hook_attn_out, hook_mlp_out)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.hooks, h)->required();
       }},
      {{"--corpus", "corpus"},
       {{kCapture, "plain text, or JSON Lines of {\"text\": ...} (--jsonl, or a .jsonl name)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return path(cmd, n, o.corpus, h)->required();
       }},
      {{"--jsonl"},
       {{kCapture, "the corpus is JSON Lines"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return flag(cmd, n, o.jsonl, h);
       }},
      {{"--row-tokens", "ctx"},
       {{kCapture, "positions per row: BOS, then the corpus's next ids"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.row_tokens, h)->check(kCapacity)->capture_default_str();
       }},
      {{"--shard-size", "shard_size"},
       {{kCapture, "bytes per shard at most (K, M, G: powers of 1024)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.shard_size, h)->capture_default_str();
       }},
  };
}

// diff's files and tolerance (its --json is run_flags()'s).
std::vector<Flag> diff_flags() {
  constexpr Commands kDiff = Command::diff;
  return {
      {{"A"},
       {{kDiff, "a dump (safetensors: F32, F64, F16 or BF16 tensors)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.diff_a, h)->required();
       }},
      {{"B"},
       {{kDiff, "the dump to compare it with, the reference of the relative tolerance"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return cmd.add_option(n, o.diff_b, h)->required();
       }},
      {{"--rtol"},
       {{kDiff, "relative tolerance: |A - B| <= atol + rtol |B| passes (torch.allclose's)"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.rtol, h)->check(not_negative_number)->capture_default_str();
       }},
      {{"--atol"},
       {{kDiff, "absolute tolerance"}},
       [](CLI::App& cmd, Names n, Help h, Options& o, Command) {
         return number(cmd, n, o.atol, h)->check(not_negative_number)->capture_default_str();
       }},
  };
}

std::vector<Flag> make_table() {
  std::vector<Flag> table;
  for (std::vector<Flag> part :
       {model_flags(), run_flags(), text_flags(), heatmap_and_bench_flags(), generate_flags(),
        diff_flags(), cvector_flags(), capture_flags()})
    std::move(part.begin(), part.end(), std::back_inserter(table));
  return table;
}

}  // namespace

const std::vector<Flag>& flag_table() {
  static const std::vector<Flag> table = make_table();
  return table;
}

}  // namespace cli
