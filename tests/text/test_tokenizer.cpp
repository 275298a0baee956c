// The tokenizers on small hand-made tokenizer.json files whose ids are worked out by hand below
// (the real vocabularies are compared with Hugging Face's tokenizers.js by tests/tokenizer/run.sh),
// UTF-8 repair as browsers do it, and files that cannot be read refused with the key named.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/text/regex.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/text/unicode.hpp"
#include "test_support.hpp"

namespace {

using json = nlohmann::json;
using Ids = std::vector<std::int32_t>;

std::filesystem::path write_json(const std::string& name, const json& j) {
  const auto dir = test::temp_path(name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << j.dump();
  return dir / "tokenizer.json";
}

// Llama 2's shape: "▁" for spaces, byte fallback <0xNN> = 3 + NN, <s> added by the template.
json sentencepiece_style() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  const char* pieces[] = {"▁",   "h",   "e",      "l", "o", "▁h", "ll",
                          "▁he", "llo", "▁hello", "w", "r", "d"};
  for (int i = 0; i < 13; ++i) vocab[pieces[i]] = 259 + i;
  return {{"added_tokens",
           {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
            {{"id", 1}, {"content", "<s>"}, {"special", true}},
            {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "▁"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
          {"pre_tokenizer", nullptr},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}}}}}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"byte_fallback", true},
            {"fuse_unk", true},
            {"vocab", vocab},
            {"merges", {"▁ h", "l l", "▁h e", "ll o", "▁he llo"}}}}};
}

// GPT-2's shape: every byte as a printable character (id = the byte), three merges.
json byte_level() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[attn::byte_to_unicode(static_cast<unsigned char>(b))] = b;
  vocab["Ġt"] = 256;
  vocab["he"] = 257;
  vocab["Ġthe"] = 258;
  return {
      {"added_tokens", json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", json::array({json::array({"Ġ", "t"}), json::array({"h", "e"}),
                                json::array({"Ġt", "he"})})}}}};
}

}  // namespace

TEST_CASE("tokenizer: SentencePiece-style BPE, merges by rank, byte fallback, added tokens") {
  const attn::Tokenizer t = attn::load_tokenizer(write_json("sp", sentencepiece_style()));
  // "▁hello": ▁h (rank 0), ll (1), ▁he (2), llo (3), ▁hello (4); "▁world" has no merge.
  CHECK(attn::encode(t, "hello world") == Ids{1, 268, 259, 269, 263, 270, 262, 271});
  // é is not a piece: its bytes C3 A9 as <0xC3> = 198, <0xA9> = 172.
  CHECK(attn::encode(t, "hé") == Ids{1, 264, 198, 172});
  // Each piece between added tokens is normalized on its own: "▁" before each.
  CHECK(attn::encode(t, "hello</s>hello") == Ids{1, 268, 2, 268});
  CHECK(attn::encode(t, "hello", {false, {}}) == Ids{268});
  CHECK(attn::encode(t, "hello", {true, false}) == Ids{268});  // --no-bos
  CHECK(attn::encode(t, "") == Ids{1});
  CHECK(attn::decode(t, {1, 264, 198, 172}) == "<s> hé");
  CHECK(attn::decode(t, {1, 264, 198, 172}, {true, {}}) == "hé");
  CHECK(attn::decode(t, {198}) == "\xEF\xBF\xBD");  // half a character: U+FFFD
  CHECK(attn::token_bytes(t, 198) == "\xC3");
  CHECK_THROWS_AS(attn::decode(t, {272}), attn::InputError);
  CHECK(t.bos == 1);  // no tokenizer_config.json beside it: the template's first token
}

TEST_CASE("tokenizer: tokenizer_config.json's add_bos_token and add_eos_token, as transformers") {
  const auto path = write_json("sp_config", sentencepiece_style());
  std::ofstream(path.parent_path() / "tokenizer_config.json")
      << R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": false,
            "add_eos_token": true})";
  const attn::Tokenizer t = attn::load_tokenizer(path);
  CHECK(t.bos == 1);
  CHECK(t.eos == Ids{2});
  CHECK(attn::encode(t, "hello") == Ids{268, 2});
  CHECK(attn::encode(t, "hello", {true, true}) == Ids{1, 268, 2});  // --add-bos wins
  CHECK(attn::encode(t, "hello", {false, {}}) == Ids{268});
}

TEST_CASE("tokenizer: byte-level BPE after GPT-2's pre-tokenizer") {
  const attn::Tokenizer t = attn::load_tokenizer(write_json("bl", byte_level()));
  // "the the" splits as "the", " the" -> "the", "Ġthe": t he | Ġt he -> Ġthe.
  CHECK(attn::encode(t, "the the") == Ids{116, 257, 258});
  CHECK(attn::decode(t, {116, 257, 258}) == "the the");
  CHECK(attn::encode(t, "\xF0\x9F\x98") == Ids{239, 191, 189});  // one U+FFFD, as its bytes
  CHECK(attn::decode(t, {0xF0, 0x9F}) == "\xEF\xBF\xBD");
}

TEST_CASE("tokenizer: bytes that are not UTF-8 are replaced as browsers do (maximal subparts)") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(attn::valid_utf8("\xF8\x88\x80\x80\x80") == r + r + r + r + r);
  CHECK(attn::valid_utf8("\xED\xA0\x80") == r + r + r);  // a surrogate
  CHECK(attn::valid_utf8("\xF0\x9F\x98") == r);          // truncated
  CHECK(attn::valid_utf8("\xE2\x82\xE2\x82\xAC") == r + "\xE2\x82\xAC");
  CHECK(attn::valid_utf8("\xC0\xAF") == r + r);  // overlong
  CHECK(attn::valid_utf8("ok \xC3\xA9") == "ok \xC3\xA9");
}

TEST_CASE("tokenizer: files it cannot read are refused, naming the file and the key") {
  const auto refused = [](const json& j, const std::vector<std::string>& words) {
    const auto path = write_json("bad", j);
    try {
      attn::load_tokenizer(path);
      FAIL("no InputError for " << j.dump().substr(0, 200));
    } catch (const attn::InputError& e) {
      const std::string m = e.what();
      CHECK_MESSAGE(m.find(path.string()) != std::string::npos, m);
      for (const std::string& w : words) CHECK_MESSAGE(m.find(w) != std::string::npos, m);
    }
  };
  json j = byte_level();
  j["model"]["type"] = "Unigram";
  refused(j, {"model.type", "Unigram"});
  j = byte_level();
  j["model"]["merges"].push_back("x zz");
  refused(j, {"model.merges[3]", "x zz"});
  for (const char* m : {"he", "h ", " e", "h e e"}) {  // GGUF's merges by the same rule
    j = byte_level();
    j["model"]["merges"].push_back(m);
    refused(j, {"model.merges[3]", "expected \"left right\""});
  }
  j = byte_level();
  j["model"].erase("vocab");
  refused(j, {"model.vocab", "missing"});
  j = byte_level();
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  refused(j, {"pre_tokenizer.pattern"});
  j = byte_level();
  j["normalizer"] = {{"type", "NFKC"}};
  refused(j, {"normalizer", "NFKC", "not supported"});
  j = byte_level();
  j["model"]["vocab"]["Ġthe"] = -5;
  refused(j, {"model.vocab.Ġthe", "-5"});
  const auto deep = test::temp_path("deep");
  std::filesystem::create_directories(deep);
  std::ofstream(deep / "tokenizer.json") << std::string(100000, '[') << std::string(100000, ']');
  CHECK_THROWS_AS(attn::load_tokenizer(deep / "tokenizer.json"), attn::InputError);
  CHECK_THROWS_AS(attn::load_tokenizer(test::temp_path("none.json")), attn::InputError);
}

TEST_CASE("tokenizer: a space mark after a short character, and an empty Metaspace mark") {
  // "a▁b": the mark follows a one-byte character, fewer bytes than the mark itself. The
  // vocabulary then has a mark inside a piece, so no word is cut before it, and the text
  // encodes as it does without that piece.
  json j = sentencepiece_style();
  j["model"]["vocab"]["a\u2581b"] = 272;
  const attn::Tokenizer with = attn::load_tokenizer(write_json("mark_after_a", j));
  CHECK(with.word_start.empty());
  const attn::Tokenizer plain =
      attn::load_tokenizer(write_json("mark_plain", sentencepiece_style()));
  CHECK(plain.word_start == "\u2581");
  CHECK(attn::encode(with, "hello world  hello", {}) ==
        attn::encode(plain, "hello world  hello", {}));
  // An empty replacement would never advance the search for it: refused, naming the key.
  j = sentencepiece_style();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", ""}};
  const auto path = write_json("metaspace_empty", j);
  CHECK_THROWS_WITH_AS(attn::load_tokenizer(path), doctest::Contains("replacement"),
                       attn::InputError);
}

// Issue 37, the tokenizer's hostile inputs: each refused with one short message naming the file
// and the key, escaped, or handled in time linear in the text.
namespace {

bool has_raw_control(const std::string& m) {
  for (std::size_t i = 0; i < m.size(); ++i) {
    const auto c = static_cast<unsigned char>(m[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xC2 && i + 1 < m.size() && static_cast<unsigned char>(m[i + 1]) < 0xA0)
      return true;                                          // U+0080..U+009F (CSI is U+009B)
    if (m.compare(i, 3, "\xE2\x80\xAE") == 0) return true;  // U+202E, right-to-left override
  }
  return false;
}

// InputError whose message names every needle, is short, escaped and not the JSON library's.
void refused_with(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    FAIL("no InputError");
  } catch (const attn::InputError& e) {
    const std::string m = e.what();
    INFO(m.substr(0, 2000));
    for (const std::string& n : needles) CHECK_MESSAGE(m.find(n) != std::string::npos, n);
    CHECK(m.size() < 1000);
    CHECK(!has_raw_control(m));
    CHECK(m.find("json.exception") == std::string::npos);
  }
}

json with_split(const std::string& pattern) {
  json j = byte_level();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  return j;
}

std::string repeat(const std::string& s, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("tokenizer: a catastrophic regex ends in an error naming the step, not fewer splits") {
  // (\w+\s?)+$ against runs of 20 letters that end in '!': each start backtracks ~2^20 times
  // and no match is found (15 s before the limit). Hugging Face would search on; attn-cli stops
  // with an error, at the same retry count on every machine, instead of silently splitting less.
  const auto path = write_json("catastrophic", with_split("(\\w+\\s?)+$"));
  const attn::Tokenizer t = attn::load_tokenizer(path);
  const std::string text = repeat("aaaaaaaaaaaaaaaaaaaa!", 209);  // 4,389 bytes
  refused_with([&] { attn::encode(t, text); },
               {path.string(), "pre_tokenizer.pretokenizers[0].pattern", "4389 bytes", "retries"});
  // Within the limit it splits as before: one match to the end of the text.
  CHECK(attn::encode(t, "ab cd", {false, {}}) == Ids{97, 98, 32, 99, 100});
}

TEST_CASE("tokenizer: regex searches are bounded in CPU time and stack, not only in retries") {
  // a+b on a run of a's fails late at every start without backtracking (one retry a start, each
  // scanning to the end): quadratic, so the CPU-time backstop ends it. A small allowance here;
  // the default is 5 s + 5 us a byte.
  const attn::Regex a_then_b("a+b", "t.json", "key 'p'");
  const std::string as(50000, 'a');
  attn::RegexBudget budget(as.size());
  budget.cpu_seconds = 0.02;
  CHECK_THROWS_WITH_AS(a_then_b.find_all(as, budget, "t.json: key 'p'"),
                       doctest::Contains("t.json: key 'p': the regex search on a text of 50000 "
                                         "bytes exceeds its limit of 0.02 s of CPU time"),
                       attn::InputError);
  // Backtracking stack: one entry per repetition of a group that may give back.
  const attn::Regex groups("(?:a|b)*c", "t.json", "key 'p'");
  attn::RegexBudget small(as.size());
  small.stack_entries = 1000;
  CHECK_THROWS_WITH_AS(groups.find_all(as + "c", small, "t.json: key 'p'"),
                       doctest::Contains("entries of backtracking stack"), attn::InputError);
  attn::RegexBudget enough(as.size());
  CHECK(groups.find_all(as + "c", enough, "t.json: key 'p'") ==
        std::vector<std::pair<std::size_t, std::size_t>>{{0, as.size() + 1}});
}

TEST_CASE("tokenizer: added tokens, lstrip, rstrip and single_word, worked out by hand") {
  json j = byte_level();  // ids: a byte's own value ("x" 120, " " 32), merges t+he, Ġ+t
  const auto added = [](int id, const char* content, bool lstrip, bool rstrip, bool single) {
    return json{{"id", id},         {"content", content}, {"special", true},
                {"lstrip", lstrip}, {"rstrip", rstrip},   {"single_word", single}};
  };
  j["added_tokens"] = {
      added(300, "ab", false, false, true),   added(301, "abc", false, false, false),
      added(302, "abcd", false, false, true), added(303, "<a>", true, false, false),
      added(304, "<b>", false, true, false),  added(305, "dup", false, false, true),
      added(306, "dup", false, false, false)};
  for (int id = 259; id < 300; ++id) j["model"]["vocab"]["<pad" + std::to_string(id) + ">"] = id;
  const attn::Tokenizer t = attn::load_tokenizer(write_json("added_flags", j));
  const auto ids = [&](const std::string& s) { return attn::encode(t, s, {false, {}}); };
  CHECK(ids("x ab y") == Ids{120, 32, 300, 32, 121});  // "ab" alone: single_word holds
  CHECK(ids("xab") == Ids{120, 97, 98});               // a word character before it
  CHECK(ids("abcd!") == Ids{302, 33});                 // the longest, alone
  CHECK(ids("abcde") == Ids{301, 100, 101});           // "abcd" touches 'e': the next longest
  CHECK(ids("x  <a>y") == Ids{120, 303, 121});         // lstrip takes the spaces before
  CHECK(ids("x<b>  y") == Ids{120, 304, 121});         // rstrip the spaces after
  CHECK(ids("xdup") == Ids{120, 306});                 // same content: the first that holds
  CHECK(ids(" dup ") == Ids{32, 305, 32});
  CHECK(ids("<a><a>") == Ids{303, 303});
}

TEST_CASE("tokenizer: 50,000 added tokens against a 400 KB text, in one pass") {
  // Every added token tried at every position took 16 s; the automaton reads the text once.
  // The text is built from known tokens and plain 'q's, so its ids are known without the code.
  std::string list;  // the file as text: building 50,000 JSON objects is slower than encoding
  for (int k = 0; k < 50000; ++k)
    list += (k ? ",{\"id\":" : "{\"id\":") + std::to_string(259 + k) + ",\"content\":\"<tok" +
            std::to_string(k) + ">\"}";
  std::string doc = byte_level().dump();
  const std::string empty = "\"added_tokens\":[]";
  REQUIRE(doc.find(empty) != std::string::npos);
  doc.replace(doc.find(empty), empty.size(), "\"added_tokens\":[" + list + "]");
  const attn::Tokenizer t = attn::parse_tokenizer(doc, "many_added.json");
  std::string text;
  Ids expected;
  for (int k = 0; text.size() < 400000; ++k) {
    const int token = (k * 7919) % 50000;
    text += "<tok" + std::to_string(token) + ">q";
    expected.push_back(259 + token);
    expected.push_back('q');
  }
  CHECK(attn::encode(t, text, {false, {}}) == expected);
}

TEST_CASE("tokenizer: steps in the wrong list and values of the wrong type name their key") {
  const auto refused_file = [](const json& j, const std::vector<std::string>& words) {
    const auto path = write_json("wrong_list", j);
    std::vector<std::string> needles = words;
    needles.push_back(path.string());
    refused_with([&] { attn::load_tokenizer(path); }, needles);
  };
  json j = byte_level();
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers", {{{"type", "Prepend"}, {"prepend", "x"}}, {{"type", "ByteLevel"}}}}};
  refused_file(j, {"normalizer.normalizers[1].type", "'ByteLevel' cannot be a normalizer"});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "Metaspace"}, {"replacement", "_"}}}}};
  refused_file(j, {"normalizer.normalizers[0].type", "'Metaspace' cannot be a normalizer"});
  j = byte_level();
  j["decoder"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}};
  refused_file(j, {"decoder.type", "'Split' cannot be a decoder"});
  j = byte_level();
  j["pre_tokenizer"] = {{"type", "Fuse"}};
  refused_file(j, {"pre_tokenizer.type", "'Fuse' cannot be a pre-tokenizer"});
  j = byte_level();
  j["post_processor"] = {
      {"type", "TemplateProcessing"}, {"single", "$A"}, {"special_tokens", json::object()}};
  refused_file(j, {"post_processor.single", "expected an array"});
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", "1"}}}}}};
  refused_file(j, {"post_processor.special_tokens.<s>.ids", "expected an array"});
  j["post_processor"] = {{"type", "Sequence"}, {"processors", 5}};
  refused_file(j, {"post_processor.processors", "expected an array"});
  j = byte_level();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {"ByteLevel"}}};
  refused_file(j, {"pre_tokenizer.pretokenizers[0]", "expected an object"});
  j = byte_level();
  j["model"]["vocab"]["Ġthe"] = 18446744073709551615u;
  refused_file(j, {"model.vocab.Ġthe", "18446744073709551615"});
}

TEST_CASE("tokenizer: tokenizer_config.json and generation_config.json must be objects") {
  for (const char* name : {"tokenizer_config.json", "generation_config.json"}) {
    const auto path = write_json(std::string("config_array_") + name, byte_level());
    std::ofstream(path.parent_path() / name) << "[1]";
    refused_with([&] { attn::load_tokenizer(path); },
                 {(path.parent_path() / name).string(), "expected a JSON object"});
  }
}

TEST_CASE("tokenizer: values quoted from the file are escaped and cut, ids included") {
  const std::string evil = "\x1b]0;owned\x07\xC2\x9B\xE2\x80\xAE" + std::string(1 << 18, 'x');
  json j = byte_level();
  j["model"]["vocab"][evil] = -5;
  refused_with([&] { attn::load_tokenizer(write_json("evil_piece", j)); },
               {"model.vocab.\\x1b]0;owned\\x07\\u009b\\u202exxx", "..."});
  j = byte_level();  // a special token's id, as the template names it, missing
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", evil}}}}}},
                         {"special_tokens", json::object()}};
  refused_with([&] { attn::load_tokenizer(write_json("evil_special", j)); },
               {"post_processor.special_tokens.\\x1b]0;owned", "is missing"});
  j = byte_level();  // Oniguruma's own message quotes the group's name
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", "\\k<\x1b[31m\xC2\x9Bname>"}}},
                        {"behavior", "Isolated"}};
  refused_with([&] { attn::load_tokenizer(write_json("evil_regex", j)); },
               {"pre_tokenizer.pattern", "\\x1b[31m\\u009bname"});
  j = byte_level();
  const auto path = write_json("evil_config", j);
  std::ofstream(path.parent_path() / "tokenizer_config.json") << json{{"bos_token", evil}}.dump();
  refused_with([&] { attn::load_tokenizer(path); }, {"bos_token", "\\x1b]0;owned"});
}

TEST_CASE("tokenizer: token_bytes of an id outside the vocabulary is refused") {
  const attn::Tokenizer t = attn::load_tokenizer(write_json("bytes_range", byte_level()));
  for (const std::int32_t id : {-1, 259, INT32_MAX, INT32_MIN})
    refused_with(
        [&] { attn::token_bytes(t, id); },
        {"token id " + std::to_string(id), "outside the vocabulary [0, 259)", "bytes_range"});
  CHECK(attn::token_bytes(t, 258) == " the");
}

TEST_CASE("tokenizer: attn-cli tokenize refuses the hostile files with exit 2, escaped") {
  const auto refused_cli = [](const std::string& args, const std::vector<std::string>& needles) {
    const test::CliResult r = test::run_cli("tokenize " + args);
    INFO("attn-cli tokenize " << args << "\nstderr: " << r.err.substr(0, 2000));
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err.size() < 1000);
    CHECK(!has_raw_control(r.err.substr(0, r.err.size() - 1)));  // but its closing newline
    for (const std::string& n : needles) CHECK_MESSAGE(r.err.find(n) != std::string::npos, n);
  };
  const auto regex = write_json("cli_catastrophic", with_split("(\\w+\\s?)+$"));
  const auto prompt = regex.parent_path() / "prompt.txt";
  std::ofstream(prompt) << repeat("aaaaaaaaaaaaaaaaaaaa!", 209);
  refused_cli("--tokenizer " + regex.string() + " --prompt-file " + prompt.string(),
              {regex.string(), "pre_tokenizer.pretokenizers[0].pattern", "retries"});
  json j = byte_level();
  j["decoder"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}};
  const auto decoder = write_json("cli_split_decoder", j);
  refused_cli("--tokenizer " + decoder.string() + " --decode --tokens 1,2",
              {decoder.string(), "decoder.type", "'Split' cannot be a decoder"});
  const auto config = write_json("cli_config_array", byte_level());
  std::ofstream(config.parent_path() / "tokenizer_config.json") << "[1]";
  refused_cli("--tokenizer " + config.string() + " -p hi",
              {"tokenizer_config.json", "expected a JSON object"});
}

TEST_CASE("tokenizer: a tokenizer path that is not a regular file is named once as a file") {
  const auto dir = test::temp_path("fifo_dir");
  std::filesystem::create_directories(dir);
  const auto fifo = dir / "tokenizer.json";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  refused_with([&] { attn::load_tokenizer(fifo); },
               {fifo.string() + ": the tokenizer file is a FIFO, not a regular file"});
}

TEST_CASE("tokenizer: normalizer and decoder steps lengthen a text at most 16 times") {
  // A Replace whose content is 1,000 times its pattern, or several in a row, would multiply the
  // text past any memory (Hugging Face's library tries): refused as it happens, naming the step.
  const std::string long_content(1000, 'x');
  json j = sentencepiece_style();
  j["normalizer"]["normalizers"][1]["content"] = long_content;
  const attn::Tokenizer t = attn::load_tokenizer(write_json("replace_growth", j));
  CHECK_THROWS_WITH_AS(
      attn::encode(t, "h h h"),
      doctest::Contains("key 'normalizer.normalizers[1]': makes 2006 bytes of 5 (at most 16 a byte)"),
      attn::InputError);
  CHECK(attn::encode(t, "hello").size() == 2);  // no space: nothing replaced
  j = sentencepiece_style();
  j["decoder"]["decoders"][0]["content"] = long_content;
  const attn::Tokenizer d = attn::load_tokenizer(write_json("decoder_growth", j));
  CHECK_THROWS_WITH_AS(attn::decode(d, {259, 260, 259, 260}),
                       doctest::Contains("key 'decoder.decoders[0]': makes 2002 bytes of 8"),
                       attn::InputError);
  CHECK(attn::decode(d, {260}) == "h");
  // Metaspace's replacement is one character (Hugging Face's is a char): "▁▁" would double each
  // space, a longer one multiply it.
  j = sentencepiece_style();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581\u2581"}};
  CHECK_THROWS_WITH_AS(attn::load_tokenizer(write_json("metaspace_two", j)),
                       doctest::Contains("key 'pre_tokenizer.replacement': must be one character"),
                       attn::InputError);
}
