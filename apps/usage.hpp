#pragma once
// What attn-cli says about its command line: the help's footers (examples, exit status) and
// usage errors, in the style of every other error, with a "did you mean".
namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace cli {

// The top-level footer; subcommands added after it inherit it (generate's and tokenize's help).
void add_main_footer(CLI::App& app);

// run's, decode's, heatmap's and bench's own examples, replacing the inherited footer.
void add_examples(CLI::App& app);

// Prints the parse error as one line with a hint; returns the exit status, 2.
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

}  // namespace cli
