// The flag table (apps/flag_table.cpp) is the one place a flag is declared: what derives from it
// holds only if its rows agree with each other.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "flags.hpp"

TEST_CASE("flags: a setting names one flag, and cli_flag_for finds it") {
  std::set<std::string_view> settings;
  for (const cli::Flag& f : cli::flag_table())
    if (!f.names.setting.empty())
      CHECK_MESSAGE(settings.insert(f.names.setting).second, std::string(f.names.cli));
  CHECK(cli::cli_flag_for("max_seq_len") == "--max-seq-len");
  CHECK(cli::cli_flag_for("max_batch_size") == "--max-batch");
  CHECK(cli::cli_flag_for("tokens_file") == "--tokens-file");
  CHECK(cli::cli_flag_for("no_such_setting").empty());
  CHECK(cli::cli_flag_for("").empty());
}

TEST_CASE("flags: every flag of generate and tokenize has its own place in their help") {
  std::set<int> places;
  for (const cli::Flag& f : cli::flag_table()) {
    bool text = false;
    for (const cli::Use& u : f.uses)
      text =
          text || u.commands.has(cli::Command::generate) || u.commands.has(cli::Command::tokenize);
    CHECK_MESSAGE(text == (f.names.text_place > 0), std::string(f.names.cli));
    if (f.names.text_place > 0)
      CHECK_MESSAGE(places.insert(f.names.text_place).second, std::string(f.names.cli));
  }
}
