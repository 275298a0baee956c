// The tokenizers on small hand-made tokenizer.json files whose ids are worked out by hand below
// (the real vocabularies are compared with Hugging Face's tokenizers.js by tests/tokenizer/run.sh),
// UTF-8 repair as browsers do it, and files that cannot be read refused with the key named.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
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
