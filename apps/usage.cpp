#include "usage.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include "attn/io/text.hpp"

namespace cli {

namespace {

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

}  // namespace

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

// Each --help ends with what people type.
void add_main_footer(CLI::App& app) {
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
}

void add_examples(CLI::App& app) {
  CLI::App* run = app.get_subcommand("run");
  CLI::App* decode = app.get_subcommand("decode");
  CLI::App* heatmap = app.get_subcommand("heatmap");
  CLI::App* bench = app.get_subcommand("bench");
  CLI::App* generate = app.get_subcommand("generate");
  app.get_subcommand("diff")->footer(
      "Examples:\n"
      "  attn-cli run -m M --tokens 1,2,3 -n 1 --dump a.safetensors --dump-activations all\n"
      "  attn-cli diff a.safetensors b.safetensors --rtol 1e-4 --atol 1e-5\n"
      "Exit status: 0 equal within the tolerance (same names and shapes), 1 different, 2 bad "
      "usage or input.");
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
  generate->footer(
      "Examples:\n"
      "  attn-cli generate -m model-folder -p 'Once upon a time' -n 64\n"
      "  attn-cli generate -m M --tokens 1,15043 -n 8 --save-session s.safetensors\n"
      "  attn-cli generate -m M --load-session s.safetensors -p ' and then' -n 8   (no BOS)\n"
      "Text mode on a terminal shows control characters of the prompt or of the tokens (ESC, "
      "BEL, CR, C1 such as U+009B) escaped as \\xNN or \\uNNNN, newlines and tabs kept; a pipe "
      "or a file gets the bytes as they are; --json always escapes.\n" +
      exit_status);
  bench->footer(
      "Examples:\n"
      "  attn-cli bench                                 one Llama-3-8B layer, prefill 512, 128 "
      "steps, F32, BF16 and F16 weights\n"
      "  attn-cli bench --quick                         the same, shorter: under 30 s\n"
      "  attn-cli bench --weight-types bf16             BF16 weights only (its peak memory)\n"
      "  attn-cli bench --weights l.safetensors --config C.json   a file, in its own dtype\n"
      "  attn-cli bench --threads 2 --json --prefill 128 --steps 32\n" +
      exit_status);
}

}  // namespace cli
