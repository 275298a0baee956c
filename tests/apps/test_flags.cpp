// The flag table (apps/flag_table.cpp) is the one place a flag is declared: what derives from it
// holds only if its rows agree with each other.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "flags.hpp"
#include "llama_cpp_flags.hpp"

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
  // llama.cpp's names are aliases after attn-cli's own: messages name attn-cli's.
  CHECK(cli::cli_flag_for("weights") == "--weights");
  CHECK(cli::cli_flag_for("steps") == "--steps");
  CHECK(cli::cli_flag_for("repeat_penalty") == "--repeat-penalty");
  // Several settings that each fix an error: every flag.
  CHECK(cli::cli_flags_for("max_seq_len,steps") == "--max-seq-len or --steps");
  CHECK(cli::cli_flags_for("max_seq_len") == "--max-seq-len");
  CHECK(cli::cli_flags_for("max_seq_len,no_such_setting") == "--max-seq-len");
}

namespace {

// argv after refuse_llama_cpp_flags, its words joined by spaces.
std::string pass(std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  int argc = int(argv.size());
  cli::refuse_llama_cpp_flags(argc, argv.data());
  std::string kept;
  for (int i = 0; i < argc; ++i) kept += std::string(argv[std::size_t(i)]) + " ";
  return kept;
}

}  // namespace

TEST_CASE("flags: llama.cpp's flags are refused before CLI11 parses, -no-cnv dropped") {
  CHECK(pass({"attn-cli", "generate", "-no-cnv", "-p", "hi"}) == "attn-cli generate -p hi ");
  CHECK(pass({"attn-cli", "generate", "-p", "hi", "--", "-ngl"}) ==
        "attn-cli generate -p hi -- -ngl ");
  CHECK_THROWS_WITH_AS(pass({"attn-cli", "generate", "-ngl", "99"}),
                       doctest::Contains("-ngl (llama.cpp's --n-gpu-layers)"), attn::InputError);
  CHECK_THROWS_AS(pass({"attn-cli", "generate", "-ctk=q8_0"}), attn::InputError);
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

TEST_CASE("flags: in chat -sys is --system-prompt and -cnv and -i are what chat is") {
  CHECK(pass({"attn-cli", "chat", "-cnv", "-sys", "Be brief", "-i"}) ==
        "attn-cli chat --system-prompt Be brief ");
  CHECK(pass({"attn-cli", "chat", "-sys=hi", "--system-prompt", "x"}) ==
        "attn-cli chat --system-prompt=hi --system-prompt x ");
  CHECK_THROWS_WITH_AS(pass({"attn-cli", "chat", "-st"}), doctest::Contains("generate --chat"),
                       attn::InputError);
  CHECK_THROWS_WITH_AS(pass({"attn-cli", "generate", "-sys", "hi"}),
                       doctest::Contains("use attn-cli chat -sys TEXT"), attn::InputError);
  CHECK_THROWS_WITH_AS(pass({"attn-cli", "generate", "-cnv"}),
                       doctest::Contains("use attn-cli chat"), attn::InputError);
}
