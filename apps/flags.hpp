#pragma once
// attn-cli's flags: one struct for every value a flag sets, and one table declaring each flag
// once, with the commands that take it (as llama.cpp's common/arg.cpp). Names, help, defaults
// and checks are a contract (docs/contract.md): `attn-cli CMD --help` must not change.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attn/kernels/runtime.hpp"
#include "attn/model/config.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/input.hpp"
#include "attn/weight_type.hpp"
#include "text_input.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace cli {

// --weight-types' spellings: the traits table's names in lower case, so that a new row is
// accepted, listed in the help and benchmarked without an edit here. By default (all: false) the
// types of one weight per block (F32, BF16, F16); ggml's quantized blocks when asked for.
inline std::vector<std::string> weight_type_flag_names(bool all = true) {
  std::vector<std::string> names;
  for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits) {
    if (!all && t.block > 1) continue;
    std::string n = t.name;
    for (char& c : n)
      if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');  // not tolower: no locale in a flag
    names.push_back(n);
  }
  return names;
}

// One bit each, so that a flag table entry can name several (Commands).
enum class Command : unsigned {
  run = 1,
  decode = 2,
  heatmap = 4,
  bench = 8,
  generate = 16,
  tokenize = 32,
  view = 64,
  diff = 128,
  chat = 256,
  cvector = 512,
  capture = 1024
};

// A set of commands; a Command is the set of itself.
struct Commands {
  unsigned bits = 0;
  constexpr Commands(Command c) : bits(unsigned(c)) {}  // implicit: an entry may name one
  constexpr explicit Commands(unsigned b) : bits(b) {}
  constexpr bool has(Command c) const { return (bits & unsigned(c)) != 0; }
};
constexpr Commands operator|(Commands a, Commands b) {
  return Commands(a.bits | b.bits);
}
constexpr Commands operator|(Command a, Command b) {  // two enums find no conversion
  return Commands(a) | Commands(b);
}

// Every flag's value; each command parses into an Options of its own. Defaults are the flags'
// own (a table entry may give a command another, as bench's --prefill 512).
struct Options {
  // The model and the run's shape: run, decode, heatmap, bench (generate takes some).
  std::string config, weights, layers;
  attn::ConfigOverrides overrides;  // -c, --max-batch, --model-parallel
  attn::RunOptions run;             // -b, --prefill, -n
  std::uint64_t seed = 42;          // weights and input (generate's --seed: sampling.seed)
  int threads = 0;  // 0: one per core, counted when the model opens (not per Options)
  std::string compute = "f32";
  std::string log_level = "warn";
  bool json = false;

  // run, decode, heatmap: files, attention, token input.
  std::string input, dump;
  std::string mask;  // empty: the config's
  bool attention_weights = false, print_attention = false;
  std::string dump_activations;  // hook names, "all"; empty: none
  TextInput text;  // token input: a prompt or ids instead of --input (generate, tokenize too)
  bool all_logits = false, logits = false;
  int logit_lens = 0;  // top tokens per position of each layer's logit lens (0: no lens)
  bool batch_given = false, prefill_given = false;  // on the command line (see mark_given)

  // heatmap (and view: --batch-row, --out)
  std::int64_t layer = 0, batch_row = 0;
  std::string scale;  // linear, sqrt, log; empty: by the number of positions
  std::string png;    // --out: the PNG, or view's HTML page

  // view: what the page shows (A:B each; empty: all), its cells' bits and its size bound in MB
  std::string shown_layers, heads, positions;
  int bits = 8;
  double max_size = 256;
  bool no_logit_lens = false;        // the lens panel is on by default where the model can have it
  std::vector<std::string> compare;  // view --compare CLEAN CORRUPTED: two prompts' texts

  // bench
  std::vector<std::string> weight_types = weight_type_flag_names(false);
  std::int64_t depth = 0;  // decode at this many cached positions; 0: right after the prefill
  bool quick = false;      // --quick: a short run (quick_plan in workloads/bench.hpp)

  // generate
  attn::Sampling sampling;
  bool ignore_eos = false;
  std::string save_session, load_session;
  bool chat = false;          // --chat: the prompt as a user turn in the chat template
  std::string chat_template;  // --chat-template: a file, or a name of the tokenizer's templates
  std::string system_prompt;  // chat's -sys / --system-prompt: the conversation's system message

  // generate, chat, view: llama.cpp's control vectors (engine/control_vector.hpp)
  std::vector<std::string> control_vectors;                      // FNAME, or a comma list
  std::vector<std::vector<std::string>> control_vectors_scaled;  // FNAME:SCALE,... or FNAME SCALE
  std::vector<std::int64_t> control_vector_layer_range;          // START END, both inclusive

  // cvector: llama-cvector-generator's prompt files, method and output
  std::string positive_file, negative_file;
  std::string cvector_method = "pca";
  std::int64_t pca_iterations = 1000, pca_batch = 20;
  std::string output = "control_vector.gguf";

  // capture: hook sites over a corpus into shards
  std::string hooks, corpus, shard_size = "256MB";
  bool jsonl = false;
  std::int64_t row_tokens = 128;

  // tokenize
  bool decode = false;

  // diff: the two dumps, and torch.allclose's tolerance (its defaults)
  std::string diff_a, diff_b;
  double rtol = 1e-5, atol = 1e-8;
};

// One command's use of a flag: its help text there and, where it differs from Options', the
// default it shows and starts from.
struct Use {
  Commands commands;
  std::string_view help;
  std::string_view default_value = {};
};

// Adds the flag to a command, bound to its field of `o`, with its type's checks.
using AddFlag = CLI::Option* (*)(CLI::App& cmd, const std::string& names, const std::string& help,
                                 Options& o, Command c);

// What a flag is called: on the command line, in the library, and where generate's and
// tokenize's help list it.
struct FlagNames {
  std::string_view cli;           // CLI11's form: "-s,--seed"
  std::string_view setting = {};  // the library's setting it sets (attn::InputError::setting)
  int text_place = 0;             // generate's and tokenize's help: 1 first; 0 after the others
};

// One flag, declared once: flag_table.cpp's rows.
struct Flag {
  FlagNames names;
  std::vector<Use> uses;  // the commands that take it (a command in one Use only)
  AddFlag add;
};

// The table, in the order run's --help lists the flags.
const std::vector<Flag>& flag_table();

// The flag that sets `setting` (an attn::InputError's), "--max-seq-len" for "max_seq_len", or ""
// where no flag of attn-cli sets it: how attn-cli says which of its flags fixes a refusal.
std::string cli_flag_for(std::string_view setting);

// The flags of a comma list of settings (an InputError's where several fix it), joined by "or":
// "--max-seq-len or --steps".
std::string cli_flags_for(std::string_view settings);

// Adds to `cmd` every flag `c` takes, bound to `o`, in the order of its --help.
void add_flags(CLI::App& cmd, Options& o, Command c);

// After parsing: the flags whose absence means "work it out" (--batch, --prefill) were given.
void mark_given(const CLI::App& cmd, Options& o);

}  // namespace cli
