// generate --chat: the prompt rendered as one user turn by a chat template (a file, or one of
// the tokenizer's), encoded as transformers' apply_chat_template encodes it (the template's
// special tokens read as tokens, none added), and the refusals naming the flag.
#include <doctest/doctest.h>

#include <cstring>
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

// attn-cli chat: a conversation fed through a pipe, each turn checked against an independent
// path: the template rendered here (tests/golden/chat_templates/turns.jinja is this loop),
// tokenized by `tokenize` and continued greedily by `generate --tokens` from a fresh cache.
namespace {

const std::string kTurns = (test::golden_dir() / "chat_templates" / "turns.jinja").string();

std::string file_with(const std::string& name, const std::string& text) {
  const auto path = test::temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string ids_text(const nlohmann::json& ids) {
  std::string s;
  for (const auto& id : ids) s += (s.empty() ? "" : ",") + std::to_string(id.get<int>());
  return s;
}

// The tokens each turn prefilled, from the "prompt eval time" lines on stderr.
std::vector<long> prefilled(const std::string& err) {
  std::vector<long> counts;
  for (std::size_t at = 0; (at = err.find("prompt eval time", at)) != std::string::npos; ++at) {
    const std::size_t slash = err.find('/', at);
    counts.push_back(std::stol(err.substr(slash + 1)));
  }
  return counts;
}

std::string chat_cli(const std::string& input, const std::string& flags) {
  return "cat " + file_with("chat_input.txt", input) + " | " + std::string(ATTN_CLI) + " chat" +
         kModel + " --chat-template " + kTurns + " --temp 0 " + flags;
}

}  // namespace

TEST_CASE("chat: five turns through a pipe prefill only their new tokens, replies as generate's") {
  const std::vector<std::string> lines = {"Once upon a time", "The cat sat", "Lily said hi",
                                          "They went home", "The end"};
  std::string input;
  for (const auto& l : lines) input += l + "\n";
  const test::CliResult r = test::run_shell("(" + chat_cli(input, "-n 8") + ")");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::vector<long> counts = prefilled(r.err);
  REQUIRE(counts.size() == lines.size());
  std::string conversation = "<s>", want_out;
  nlohmann::json cache = nlohmann::json::array();  // what chat's cache holds after a turn
  for (std::size_t k = 0; k < lines.size(); ++k) {
    conversation += "<|user|>" + lines[k] + "</s><|assistant|>";
    const test::CliResult t = test::run_cli("tokenize" + kModel + " --no-bos --json -f " +
                                            file_with("chat_render.txt", conversation));
    REQUIRE_MESSAGE(t.status == 0, t.err);
    const auto ids = nlohmann::json::parse(t.out)["ids"];
    std::size_t common = 0;
    while (common < cache.size() && common + 1 < ids.size() && cache[common] == ids[common])
      ++common;
    CHECK_MESSAGE(counts[k] == long(ids.size() - common), "turn " << k + 1);
    if (k > 0) CHECK(counts[k] < long(ids.size()) / 2);  // the earlier turns were kept
    const std::string g = "generate" + kModel + " --no-bos --temp 0 --tokens " + ids_text(ids);
    const test::CliResult full = test::run_cli(g + " -n 8"), none = test::run_cli(g + " -n 0");
    const test::CliResult json = test::run_cli(g + " -n 8 --json");
    REQUIRE_MESSAGE(full.status == 0, full.err);
    REQUIRE(full.out.starts_with(none.out.substr(0, none.out.size() - 1)));
    const std::string reply = full.out.substr(none.out.size() - 1);  // ends with its '\n'
    want_out += reply;
    conversation += reply.substr(0, reply.size() - 1) + "</s>";
    cache = ids;
    for (std::size_t from = 0, end; (end = json.out.find('\n', from)) != std::string::npos;
         from = end + 1) {
      const auto j = nlohmann::json::parse(json.out.substr(from, end - from));
      if (j.value("event", "") == "token") cache.push_back(j["id"]);
    }
  }
  CHECK(r.out == want_out);
}

TEST_CASE("chat: /exit and the end of input end the conversation, -sys is the system message") {
  test::CliResult r = test::run_shell("(" + chat_cli("Once\n/exit\nnever read\n", "-n 2") + ")");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(prefilled(r.err).size() == 1);
  r = test::run_shell("(" + chat_cli("Once\nTwice", "-n 2") + ")");  // no final newline
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(prefilled(r.err).size() == 2);
  r = test::run_shell("(" + chat_cli("Once\n", "-n 2 -sys 'Be brief'") + ")");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const test::CliResult t =
      test::run_cli("tokenize" + kModel +
                    " --no-bos --json -p '<s><|system|>Be brief</s><|user|>Once</s><|assistant|>'");
  REQUIRE_MESSAGE(t.status == 0, t.err);
  CHECK(prefilled(r.err) == std::vector<long>{long(nlohmann::json::parse(t.out)["ids"].size())});
}

TEST_CASE("chat: a conversation past the context is refused naming --max-seq-len") {
  const std::string long_line(400, 'a');
  const test::CliResult r =
      test::run_shell("(" + chat_cli("Once\n" + long_line + "\n", "-n 2 -c 64") + ")");
  CHECK(r.status == 2);
  CHECK(prefilled(r.err).size() == 1);
  CHECK(r.err.find("the context holds 64 positions") != std::string::npos);
  CHECK(r.err.find("--max-seq-len") != std::string::npos);
  // A reply that fills the context stops there, said on stderr; the conversation ends well.
  const test::CliResult full = test::run_shell("(" + chat_cli("Once\n", "-c 40") + ")");
  CHECK_MESSAGE(full.status == 0, full.err);
  CHECK(full.err.find("the context is full (40 positions)") != std::string::npos);
}

TEST_CASE("chat: a line of standard input past 1 MiB is refused, not held") {
  // No newline at all: the line would otherwise grow with the input.
  const test::CliResult r =
      test::run_shell("(head -c 2000000 /dev/zero | tr '\\0' a | " + std::string(ATTN_CLI) +
                      " chat" + kModel + " --chat-template " + kTurns + " -n 2)");
  CHECK(r.status == 2);
  CHECK(r.err.find("longer than 1 MiB") != std::string::npos);
}

TEST_CASE("chat: on a pseudo-terminal, a prompt before each turn and /exit") {
  const auto script = test::source_dir() / "tests" / "cli" / "chat_pty.py";
  const test::CliResult r =
      test::run_shell("/usr/bin/python3 " + script.string() + " exit " + std::string(ATTN_CLI) +
                      " " + kModel.substr(4) + " " + kTurns);
  CHECK_MESSAGE(r.status == 0, r.out << r.err);
  CHECK(r.out.starts_with("> "));
  CHECK(r.out.find("prompt eval time") != std::string::npos);  // stderr is the terminal too
  CHECK(r.out.find("\n> ") != std::string::npos);
}

TEST_CASE("chat: on a pseudo-terminal, Ctrl-C stops a reply and the conversation goes on") {
  // chat_pty.py pauses the terminal (Ctrl-S), sends a turn, waits until attn-cli is blocked
  // writing the reply, then Ctrl-C; a second turn; Ctrl-C at the prompt (killed by SIGINT) and,
  // in a second process, Ctrl-D at the prompt (exit 0): the script checks those endings.
  const auto script = test::source_dir() / "tests" / "cli" / "chat_pty.py";
  const test::CliResult r =
      test::run_shell("/usr/bin/python3 " + script.string() + " interrupt " +
                      std::string(ATTN_CLI) + " " + kModel.substr(4) + " " + kTurns);
  REQUIRE_MESSAGE(r.status == 0, r.out << r.err);
  CHECK(r.err.find("[reply stopped]") != std::string::npos);
  const std::vector<long> counts = prefilled(r.err);
  REQUIRE(counts.size() == 2);
  // The terminal showed "> ", the stopped reply, "\n", "> ", the second reply, "\n", "> ".
  REQUIRE(r.out.starts_with("> "));
  const std::size_t end = r.out.find('\n');
  REQUIRE(end != std::string::npos);
  const std::string stopped = r.out.substr(2, end - 2);
  CHECK(!stopped.empty());
  CHECK(r.out.find("\n> ", end) != std::string::npos);
  // The second turn renders the stopped reply as the assistant's message and prefills only what
  // follows the first turn (its prompt, at most its last token again, and the new ids).
  const test::CliResult t = test::run_cli(
      "tokenize" + kModel + " --no-bos --json -f " +
      file_with("chat_stopped.txt", "<s><|user|>Once upon a time</s><|assistant|>" + stopped +
                                        "</s><|user|>The end</s><|assistant|>"));
  REQUIRE_MESSAGE(t.status == 0, t.err);
  const long second = long(nlohmann::json::parse(t.out)["ids"].size());
  CHECK(counts[1] > 0);
  CHECK(counts[1] <= second - counts[0] + 1);
}

TEST_CASE("chat: --save-session and --load-session hold a conversation across processes") {
  const std::string whole_input = "Once upon a time\nThe cat sat\nLily said hi\n";
  const test::CliResult whole = test::run_shell("(" + chat_cli(whole_input, "-n 8") + ")");
  REQUIRE_MESSAGE(whole.status == 0, whole.err);
  const std::string saved = test::temp_path("chat.session").string();
  const test::CliResult first = test::run_shell(
      "(" + chat_cli("Once upon a time\nThe cat sat\n", "-n 8 --save-session " + saved) + ")");
  REQUIRE_MESSAGE(first.status == 0, first.err);
  const test::CliResult second =
      test::run_shell("(" + chat_cli("Lily said hi\n", "-n 8 --load-session " + saved) + ")");
  REQUIRE_MESSAGE(second.status == 0, second.err);
  CHECK(first.out + second.out == whole.out);
  // The loaded turn prefills what the third turn of one process does: the cache was kept.
  REQUIRE(prefilled(whole.err).size() == 3);
  CHECK(prefilled(second.err) == std::vector<long>{prefilled(whole.err)[2]});
}

TEST_CASE("chat: a session without a conversation, or with a broken one, is refused") {
  const std::string g = test::temp_path("chat_generate.session").string();
  REQUIRE(test::run_cli("generate" + kModel + " -p hi -n 2 --save-session " + g).status == 0);
  test::CliResult r = test::run_shell("(" + chat_cli("hi\n", "--load-session " + g) + ")");
  CHECK(r.status == 2);
  CHECK(r.err.find("a session of generate, not of chat") != std::string::npos);
  CHECK(r.err.find("--load-session") != std::string::npos);
  const std::string c = test::temp_path("chat_saved.session").string();
  REQUIRE(test::run_shell("(" + chat_cli("hi\n", "-n 2 --save-session " + c) + ")").status == 0);
  r = test::run_shell("(" + chat_cli("hi\n", "--load-session " + c + " -sys 'Be brief'") + ")");
  CHECK(r.status == 2);
  CHECK(r.err.find("--system-prompt") != std::string::npos);
  // The file's conversation replaced by one that is not a list of messages (safetensors: a
  // u64 header length, the JSON header, then the data its offsets address).
  std::ifstream in(c, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  for (const std::string bad : {"{\"role\": 1}", "[{\"role\": \"user\"}]", "not json"}) {
    header["__metadata__"]["conversation"] = bad;
    const std::string h = header.dump();
    std::string out(8, '\0');
    const std::uint64_t size = h.size();
    std::memcpy(out.data(), &size, 8);
    out += h + bytes.substr(8 + n);
    const std::string broken = file_with("chat_broken.session", out);
    r = test::run_shell("(" + chat_cli("hi\n", "--load-session " + broken) + ")");
    CHECK(r.status == 2);
    CHECK_MESSAGE(r.err.find("metadata 'conversation'") != std::string::npos, r.err);
  }
}
