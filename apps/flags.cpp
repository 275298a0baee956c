// What follows from the flag table (flag_table.cpp): a command's flags in the order of its help,
// the flag that sets a library setting, and which flags were given.
#include "flags.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

namespace cli {

namespace {

// The first long name: "--weights" of "-m,--weights,--model" (the others are llama.cpp's).
std::string_view long_name(const Flag& f) {
  const std::string_view n = f.names.cli;
  const std::size_t start = n.find("--") == std::string_view::npos ? 0 : n.find("--");
  return n.substr(start, n.find(',', start) - start);
}

const Use* use_in(const Flag& f, Command c) {
  for (const Use& u : f.uses)
    if (u.commands.has(c)) return &u;
  return nullptr;
}

// generate's and tokenize's help has always listed the prompt before the numbers that shape the
// run: their flags go by text_place (a flag without one last), the other commands' in the
// table's order.
bool by_text_place(const Flag* a, const Flag* b) {
  const auto place = [](const Flag* f) {
    return f->names.text_place > 0 ? unsigned(f->names.text_place) : ~0u;
  };
  return place(a) < place(b);
}

}  // namespace

void add_flags(CLI::App& cmd, Options& o, Command c) {
  std::vector<const Flag*> flags;
  for (const Flag& f : flag_table())
    if (use_in(f, c)) flags.push_back(&f);
  if (c == Command::generate || c == Command::tokenize)
    std::stable_sort(flags.begin(), flags.end(), by_text_place);
  for (const Flag* f : flags) {
    const Use& u = *use_in(*f, c);
    CLI::Option* opt = f->add(cmd, std::string(f->names.cli), std::string(u.help), o, c);
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

std::string cli_flag_for(std::string_view setting) {
  if (setting.empty()) return "";
  for (const Flag& f : flag_table())
    if (f.names.setting == setting) return std::string(long_name(f));
  return "";
}

}  // namespace cli

namespace cli {

std::string cli_flags_for(std::string_view settings) {
  std::string flags;
  while (!settings.empty()) {
    const std::size_t comma = settings.find(',');
    const std::string flag = cli_flag_for(settings.substr(0, comma));
    if (!flag.empty()) flags += (flags.empty() ? "" : " or ") + flag;
    settings = comma == std::string_view::npos ? "" : settings.substr(comma + 1);
  }
  return flags;
}

}  // namespace cli
