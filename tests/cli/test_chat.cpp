// generate --chat: the prompt rendered as one user turn by a chat template (a file, or one of
// the tokenizer's), encoded as transformers' apply_chat_template encodes it (the template's
// special tokens read as tokens, none added), and the refusals naming the flag.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.hpp"

namespace {

const std::string kModel = " -m " + (test::source_dir() / "weights" / "stories260K.gguf").string();

std::string simple_template() {
  const auto path = test::temp_path("chat_simple.jinja");
  std::ofstream(path) << "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>"
                         "{{ m.content }}{{ eos_token }}{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}";
  return path.string();
}

nlohmann::json line_with(const std::string& out, const std::string& event) {
  std::size_t from = 0;
  for (std::size_t end; (end = out.find('\n', from)) != std::string::npos; from = end + 1) {
    const auto j = nlohmann::json::parse(out.substr(from, end - from));
    if (j.value("event", "") == event) return j;
  }
  return {};
}

}  // namespace

TEST_CASE("generate --chat renders the prompt as a user turn and encodes the template's tokens") {
  const test::CliResult r = test::run_cli("generate" + kModel + " --chat --chat-template " +
                                          simple_template() + " -p 'Once upon a time' -n 3 --json");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  // The text the template renders, tokenized with its special tokens read as tokens, no BOS added.
  const test::CliResult t = test::run_cli(
      "tokenize" + kModel + " --no-bos --json -p '<s><|user|>Once upon a time</s><|assistant|>'");
  REQUIRE_MESSAGE(t.status == 0, t.err);
  const auto want = nlohmann::json::parse(t.out)["ids"];
  CHECK(line_with(r.out, "prefill")["ids"] == want);
  CHECK(want[0] == 1);  // <s> from the template, as the token
}

TEST_CASE(
    "generate --chat refuses a model without a template and an unknown name, naming the flag") {
  test::CliResult r = test::run_cli("generate" + kModel + " --chat -p hi -n 2");
  CHECK(r.status == 2);
  CHECK(r.err.find("has no chat template") != std::string::npos);
  CHECK(r.err.find("--chat-template") != std::string::npos);
  r = test::run_cli("generate" + kModel + " --chat --chat-template nope -p hi -n 2");
  CHECK(r.status == 2);
  CHECK(r.err.find("'nope' is neither a file nor one of the tokenizer's chat templates") !=
        std::string::npos);
  const auto bad = test::temp_path("chat_bad.jinja");
  std::ofstream(bad) << "{% include 'x' %}";
  r = test::run_cli("generate" + kModel + " --chat --chat-template " + bad.string() +
                    " -p hi -n 2");
  CHECK(r.status == 2);
  CHECK(r.err.find("line 1: 'include' is not supported") != std::string::npos);
}
