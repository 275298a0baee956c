// The tokenizers of GGUF files and llama2.c's tokenizer.bin against their own implementations:
// llama.cpp's test-tokenizer-0 vocabularies with their expected ids (.inp/.out, from the
// llama.cpp sources bench/llama_cpp.sh unpacks; skipped when absent), a hard corpus against
// llama.cpp's llama_tokenize/llama_detokenize and llama2.c's run.c (tests/golden/
// llama_tokens.json, written by make_llama_tokens.py), llama.cpp's round trips
// (test-tokenizer-1-spm), and files refused with the key or field named.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/text/added_tokens.hpp"
#include "attn/text/chat_template.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/text/unicode.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Ids = std::vector<std::int32_t>;

const fs::path kStoriesGguf = test::source_dir() / "weights" / "stories260K.gguf";

// llama.cpp's sources as bench/llama_cpp.sh unpacks them.
fs::path llama_cpp_src() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path cache = xdg && *xdg ? fs::path(xdg) : fs::path(home ? home : "/") / ".cache";
  return cache / "attn-cli" / "llama.cpp" / "3.22.1" / "src";
}

fs::path vocab_file(const std::string& name) {
  return llama_cpp_src() / "models" / ("ggml-vocab-" + name + ".gguf");
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2)
    out += char(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

std::string show(const Ids& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size() && i < 40; ++i)
    s += (i ? " " : "") + std::to_string(ids[i]);
  return s + (ids.size() > 40 ? " ..." : "");
}

attn::EncodeOptions plain() {  // test-tokenizer-0's call: add_special false, parse_special false
  attn::EncodeOptions o;
  o.add_special_tokens = false;
  o.parse_special = false;
  return o;
}

// test-tokenizer-0's files: inputs separated by "\n__ggml_vocab_test__\n", one line of ids each.
std::size_t test_tokenizer_0(const std::string& name) {
  const fs::path gguf = vocab_file(name);
  const attn::Tokenizer t = attn::load_tokenizer(gguf);
  const std::string inp = read_file(gguf.string() + ".inp");
  std::vector<std::string> inputs;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (std::size_t at = 0; at < inp.size();) {
    const std::size_t next = inp.find(sep, at);
    inputs.push_back(inp.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + sep.size();
  }
  std::ifstream out(gguf.string() + ".out");
  std::size_t differences = 0, count = 0;
  for (std::string line; std::getline(out, line); ++count) {
    REQUIRE(count < inputs.size());
    Ids want;
    std::istringstream ids(line);
    for (std::int32_t id; ids >> id;) want.push_back(id);
    const Ids got = attn::encode(t, inputs[count], plain());
    if (got != want && ++differences <= 5)
      MESSAGE(name << ": " << inputs[count] << "\n  got:  " << show(got)
                   << "\n  want: " << show(want));
  }
  CHECK(count == inputs.size());
  MESSAGE(name << ": " << count << " cases, " << differences << " differences");
  return differences;
}

void fnv(std::uint64_t& h, const std::string& s) {
  const auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  const auto n = std::uint32_t(s.size());
  for (int k = 0; k < 4; ++k) mix(static_cast<unsigned char>(n >> (8 * k)));
  for (const char c : s) mix(static_cast<unsigned char>(c));
}

// llama.cpp's llama_decode_text writes "[UNK_BYTE_0x<hex>" + the whole piece + "]" for each
// character of a byte-level piece outside GPT-2's map, where attn-cli writes the character
// itself (the contract): llama.cpp's text of token `id` from ours, `ours` counted in
// `not_itself` when it is not the piece's mapped bytes with such characters as they are.
std::string as_llama_cpp(const attn::Tokenizer& t, std::int32_t id, const std::string& ours,
                         std::size_t& not_itself) {
  const attn::LlamaVocab& v = *t.llama;
  if (v.kind != attn::LlamaVocab::Kind::bpe || ours.empty() ||
      !(v.attrs[std::size_t(id)] & attn::token_attr::normal))
    return ours;
  const std::string& piece = v.pieces[std::size_t(id)];
  std::string itself, theirs;
  char hex[3];
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t at = i;
    const int b = attn::unicode_to_byte(attn::next_code_point(piece, i));
    if (b >= 0) {
      itself += char(b);
      theirs += char(b);
      continue;
    }
    itself.append(piece, at, i - at);
    theirs += "[UNK_BYTE_0x";
    for (std::size_t k = at; k < i; ++k) {
      std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(piece[k]));
      theirs += hex;
    }
    theirs += piece + "]";
  }
  not_itself += ours != itself;
  return theirs;
}

std::string hex64(std::uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

const json& golden() {
  static const json j = json::parse(read_file(test::golden_dir() / "llama_tokens.json"));
  return j;
}

}  // namespace

TEST_CASE("llama tokenizers: llama.cpp's test-tokenizer-0 vocabularies, 0 differences") {
  if (!fs::exists(llama_cpp_src() / "models")) {
    MESSAGE("skipped: llama.cpp's sources are not in "
            << llama_cpp_src() << " (bash bench/llama_cpp.sh unpacks them)");
    return;
  }
  for (const char* name :
       {"llama-spm", "llama-bpe", "qwen2", "qwen35", "gpt-2", "phi-3", "deepseek-llm",
        "deepseek-coder", "falcon", "starcoder", "refact", "command-r", "mpt"}) {
    const std::string vocab = name;
    CAPTURE(vocab);
    CHECK(test_tokenizer_0(name) == 0);
  }
}

TEST_CASE("llama tokenizers: a hard corpus against llama.cpp's tokenize and detokenize") {
  if (!fs::exists(llama_cpp_src() / "models")) {
    MESSAGE("skipped: llama.cpp's sources are not in " << llama_cpp_src());
    return;
  }
  const json& g = golden();
  for (const auto& entry : g["vocabs"].items()) {  // no structured binding: CAPTURE is a lambda
    const std::string name = entry.key();
    const json& v = entry.value();
    CAPTURE(name);
    const fs::path file = name == "stories260K"
                              ? kStoriesGguf
                              : llama_cpp_src() / "models" / v["file"].get<std::string>();
    if (!fs::exists(file)) {
      MESSAGE("skipped: " << file << " is absent");
      continue;
    }
    const attn::Tokenizer t = attn::load_tokenizer(file);
    REQUIRE(t.vocab_size() == v["n_tokens"].get<std::int64_t>());
    std::size_t differences = 0;
    for (std::size_t i = 0; i < g["corpus"].size(); ++i) {
      const std::string item = g["corpus"][i]["name"];
      const std::string text = unhex(g["corpus"][i]["hex"]);
      const json& want = v["items"][i];
      const Ids ids = attn::encode(t, text, plain());
      const Ids ids_special = attn::encode(t, text);
      const std::string decoded = attn::decode(t, want["ids_special"].get<Ids>());
      const std::string decoded_skip = attn::decode(t, want["ids_special"].get<Ids>(), {true, {}});
      const bool same = ids == want["ids"].get<Ids>() &&
                        ids_special == want["ids_special"].get<Ids>() &&
                        decoded == attn::valid_utf8(unhex(want["text"])) &&
                        decoded_skip == attn::valid_utf8(unhex(want["text_skip"]));
      if (!same && ++differences <= 5)
        MESSAGE(name << " " << item << "\n  ids " << show(ids) << "\n want "
                     << show(want["ids"].get<Ids>()) << "\n  special " << show(ids_special)
                     << "\n     want " << show(want["ids_special"].get<Ids>()) << "\n  text "
                     << decoded << "\n  want " << unhex(want["text"]) << "\n  skip " << decoded_skip
                     << "\n  want " << unhex(want["text_skip"]));
    }
    CHECK(differences == 0);
    // Every token's piece, with and without special tokens rendered.
    std::uint64_t h = 14695981039346656037ull, h_plain = h;
    std::size_t not_itself = 0;
    for (std::int32_t id = 0; id < t.vocab_size(); ++id) {
      fnv(h, as_llama_cpp(t, id, attn::token_bytes(t, id), not_itself));
      fnv(h_plain,
          as_llama_cpp(t, id, attn::llama_token_to_piece(*t.llama, id, false), not_itself));
    }
    CHECK(hex64(h) == v["pieces"].get<std::string>());
    CHECK(hex64(h_plain) == v["pieces_plain"].get<std::string>());
    CHECK(not_itself == 0);
  }
}

namespace {

// Items of the corpus where t differs from llama.cpp's want_items (ids with and without special
// tokens, decoded text with and without them), the first three shown under label.
std::size_t corpus_differences(const attn::Tokenizer& t, const json& corpus, const json& want_items,
                               const std::string& label) {
  std::size_t differences = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = unhex(corpus[i]["hex"]);
    const json& want = want_items[i];
    const Ids ids = attn::encode(t, text, plain());
    const Ids ids_special = attn::encode(t, text);
    const bool same =
        ids == want["ids"].get<Ids>() && ids_special == want["ids_special"].get<Ids>() &&
        attn::decode(t, ids_special) == attn::valid_utf8(unhex(want["text"])) &&
        attn::decode(t, ids_special, {true, {}}) == attn::valid_utf8(unhex(want["text_skip"]));
    if (!same && ++differences <= 3)
      MESSAGE(label << " " << corpus[i]["name"].get<std::string>() << "\n  ids " << show(ids)
                    << "\n want " << show(want["ids"].get<Ids>()) << "\n  special "
                    << show(ids_special) << "\n     want " << show(want["ids_special"].get<Ids>()));
  }
  return differences;
}

}  // namespace

// The hard corpus of the test above, as llama.cpp tokenizes and detokenizes it under every
// tokenizer.ggml.pre value attn-cli accepts, each written into GPT-2's vocabulary file (tests/
// golden/llama_pre_tokens.json, written by make_pre_tokens.py): every row of the table, each
// value of a row, with its flags (merges ignored, spaces cleaned, BOS).
TEST_CASE("llama tokenizers: every accepted tokenizer.ggml.pre as llama.cpp splits the corpus") {
  const json g = json::parse(read_file(test::golden_dir() / "llama_pre_tokens.json"));
  const fs::path base = llama_cpp_src() / "models" / g["base"].get<std::string>();
  if (!fs::exists(base)) {
    MESSAGE("skipped: " << base << " is absent (bash bench/llama_cpp.sh unpacks it)");
    return;
  }
  const std::shared_ptr<const attn::GgufFile> file = attn::open_gguf(base);
  attn::GgufFile f = *file;
  const auto at = std::find_if(f.kv.begin(), f.kv.end(),
                               [](const auto& kv) { return kv.first == "tokenizer.ggml.pre"; });
  REQUIRE(at != f.kv.end());
  std::size_t checked = 0;
  for (const auto& entry : g["pre"].items()) {
    const std::string pre = entry.key();
    CAPTURE(pre);
    std::string value(8, '\0');  // a GGUF string: its u64 length, then its bytes
    const std::uint64_t n = pre.size();
    std::memcpy(value.data(), &n, 8);
    value += pre;
    at->second.data = reinterpret_cast<const std::uint8_t*>(value.data());
    const attn::Tokenizer t = attn::tokenizer_from_gguf(f);
    const json& want_items = g["results"][entry.value().get<std::size_t>()];
    CHECK(corpus_differences(t, g["corpus"], want_items, pre) == 0);
    ++checked;
  }
  CHECK(checked == g["pre"].size());
  CHECK(checked >= 70);
}

// Gemma's SentencePiece files set tokenizer.ggml.add_space_prefix false: the same corpus in Llama
// 2's vocabulary with that key in place of its add_eos_token (false, llama.cpp's default too).
TEST_CASE("llama tokenizers: SentencePiece without the space prefix (Gemma's) as llama.cpp") {
  const json g = json::parse(read_file(test::golden_dir() / "llama_pre_tokens.json"));
  const json& spm = g["spm_no_space_prefix"];
  const fs::path base = llama_cpp_src() / "models" / spm["base"].get<std::string>();
  if (!fs::exists(base)) {
    MESSAGE("skipped: " << base << " is absent (bash bench/llama_cpp.sh unpacks it)");
    return;
  }
  attn::GgufFile f = *attn::open_gguf(base);
  const auto at = std::find_if(f.kv.begin(), f.kv.end(), [](const auto& kv) {
    return kv.first == "tokenizer.ggml.add_eos_token";
  });
  REQUIRE(at != f.kv.end());
  const std::uint8_t no = 0;
  at->first = "tokenizer.ggml.add_space_prefix";
  at->second.data = &no;
  const attn::Tokenizer t = attn::tokenizer_from_gguf(f);
  CHECK(corpus_differences(t, g["corpus"], spm["items"], "spm") == 0);
  // llama.cpp's ids: "Hello" without "▁" (Llama 2's 15043 with it), then "▁world".
  CHECK(attn::encode(t, "Hello world", plain()) == Ids{10994, 3186});
}

// llama.cpp's vocabulary files without .inp/.out (Aquila's and GPT-NeoX's BPE without
// tokenizer.ggml.pre, Baichuan's SentencePiece) on the same corpus, as they are.
TEST_CASE("llama tokenizers: llama.cpp's other vocabulary files on the corpus") {
  const json g = json::parse(read_file(test::golden_dir() / "llama_pre_tokens.json"));
  for (const auto& entry : g["files"].items()) {
    const std::string name = entry.key();
    CAPTURE(name);
    const fs::path file = vocab_file(name);
    if (!fs::exists(file)) {
      MESSAGE("skipped: " << file << " is absent");
      continue;
    }
    const attn::Tokenizer t = attn::load_tokenizer(file);
    CHECK(corpus_differences(t, g["corpus"], entry.value(), name) == 0);
  }
}

TEST_CASE("llama tokenizers: llama2.c's tokenizer.bin as run.c encodes and decodes") {
  const json& g = golden()["llama2c"];
  const attn::Tokenizer t =
      attn::load_tokenizer(test::source_dir() / "weights" / g["file"].get<std::string>());
  CHECK(t.vocab_size() == g["vocab_size"].get<std::int64_t>());
  CHECK(t.bos == 1);
  CHECK(t.eos == std::vector<std::int32_t>{2});
  std::map<std::string, std::string> texts;
  for (const json& c : golden()["corpus"]) texts[c["name"]] = unhex(c["hex"]);
  std::size_t differences = 0;
  for (const json& item : g["items"]) {
    const std::string name = item["name"];
    const Ids ids = attn::encode(t, texts[name]);
    const std::string decoded = attn::decode(t, item["ids"].get<Ids>(), {true, {}});
    if ((ids != item["ids"].get<Ids>() || decoded != attn::valid_utf8(unhex(item["text"]))) &&
        ++differences <= 5)
      MESSAGE(name << "\n  ids  " << show(ids) << "\n  want " << show(item["ids"].get<Ids>())
                   << "\n  text " << decoded << "\n  want " << unhex(item["text"]));
  }
  CHECK(differences == 0);
  CHECK(g["items"].size() + 1 == golden()["corpus"].size());  // all but the one with a NUL
}

TEST_CASE("llama tokenizers: tok512.bin and stories260K.gguf hold the same tokenizer") {
  if (!fs::exists(kStoriesGguf)) {
    MESSAGE("skipped: " << kStoriesGguf << " is absent");
    return;
  }
  const attn::Tokenizer bin = attn::load_tokenizer(test::source_dir() / "weights/tok512.bin");
  const attn::Tokenizer gguf = attn::load_tokenizer(kStoriesGguf);
  REQUIRE(bin.vocab_size() == gguf.vocab_size());
  std::size_t compared = 0;
  for (const json& c : golden()["corpus"]) {
    const std::string text = unhex(c["hex"]);
    // run.c reads a C string and splits bytes its own way: valid UTF-8 without NUL only. In the
    // GGUF "▁" is the space mark and control tokens' text is parsed: not in run.c.
    if (text.find('\0') != std::string::npos || attn::valid_utf8(text) != text ||
        text.find("▁") != std::string::npos || text.find("<s>") != std::string::npos)
      continue;
    CAPTURE(c["name"].get<std::string>());
    CHECK(attn::encode(bin, text) == attn::encode(gguf, text));
    ++compared;
  }
  CHECK(compared > 40);
}

TEST_CASE("llama tokenizers: llama.cpp's round trips (test-tokenizer-1-spm), every token") {
  const fs::path file =
      fs::exists(vocab_file("llama-spm")) ? vocab_file("llama-spm") : kStoriesGguf;
  if (!fs::exists(file)) {
    MESSAGE("skipped: neither llama-spm's vocabulary nor stories260K.gguf is here");
    return;
  }
  const attn::Tokenizer t = attn::load_tokenizer(file);
  const attn::LlamaVocab& v = *t.llama;
  attn::EncodeOptions o;
  o.add_special_tokens = false;
  for (std::int32_t id = 0; id < t.vocab_size(); ++id) {
    const std::string s = attn::llama_detokenize(v, {id}, false, true, false);
    const std::string back = attn::llama_detokenize(v, attn::encode(t, s, o), false, true, false);
    if (back != s) FAIL_CHECK("token " << id << " '" << s << "' comes back as '" << back << "'");
  }
  // Every code point (a sample of them: every 61st), as text of its own.
  for (char32_t c = 1; c < 0x110000; c += c < 0x3000 ? 1 : 61) {
    if ((c >= 0xD800 && c <= 0xDFFF) || (c >= 0x40000 && c <= 0xE0000) || c == 0x2581) continue;
    std::string s;
    attn::append_utf8(s, c);
    const std::string back = attn::llama_detokenize(v, attn::encode(t, s, o), false, true, false);
    if (back != s)
      FAIL_CHECK("U+" << std::hex << std::uint32_t(c) << " comes back as '" << back << "'");
  }
}

TEST_CASE("llama tokenizers: SentencePiece merges of a long text stay fast (no quadratic step)") {
  if (!fs::exists(kStoriesGguf)) {
    MESSAGE("skipped: " << kStoriesGguf << " is absent");
    return;
  }
  const attn::Tokenizer t = attn::load_tokenizer(kStoriesGguf);
  std::string text;
  while (text.size() < 400000) text += "Once upon a time, there was a little girl named Lily. ";
  const Ids ids = attn::encode(t, text);
  CHECK(ids.size() > 60000);
  CHECK(attn::decode(t, ids, {true, {}}) == " " + text);  // llama.cpp keeps the prefix space
}

namespace {

// A GGUF file (version 3, no tensors) holding the given metadata, written by hand.
struct GgufWriter {
  std::string kv;
  std::uint64_t count = 0;

  void u32(std::string& o, std::uint32_t v) { o.append(reinterpret_cast<const char*>(&v), 4); }
  void u64(std::string& o, std::uint64_t v) { o.append(reinterpret_cast<const char*>(&v), 8); }
  void str(std::string& o, std::string_view s) {
    u64(o, s.size());
    o.append(s);
  }
  void key(std::string_view k, std::uint32_t type) {
    str(kv, k);
    u32(kv, type);
    ++count;
  }
  GgufWriter& text(std::string_view k, std::string_view v) {
    key(k, 8);
    str(kv, v);
    return *this;
  }
  GgufWriter& flag(std::string_view k, bool v) {
    key(k, 7);
    kv += char(v);
    return *this;
  }
  GgufWriter& id(std::string_view k, std::uint32_t v) {
    key(k, 4);
    u32(kv, v);
    return *this;
  }
  GgufWriter& strings(std::string_view k, const std::vector<std::string>& v) {
    key(k, 9);
    u32(kv, 8);
    u64(kv, v.size());
    for (const std::string& s : v) str(kv, s);
    return *this;
  }
  GgufWriter& floats(std::string_view k, const std::vector<float>& v) {
    key(k, 9);
    u32(kv, 6);
    u64(kv, v.size());
    for (const float f : v) kv.append(reinterpret_cast<const char*>(&f), 4);
    return *this;
  }
  GgufWriter& ints(std::string_view k, const std::vector<std::int32_t>& v) {
    key(k, 9);
    u32(kv, 5);
    u64(kv, v.size());
    for (const std::int32_t x : v) kv.append(reinterpret_cast<const char*>(&x), 4);
    return *this;
  }
  fs::path write(const std::string& name) const {
    std::string o = "GGUF";
    GgufWriter w;
    w.u32(o, 3);
    w.u64(o, 0);
    w.u64(o, count);
    o += kv;
    o.resize((o.size() + 31) / 32 * 32, '\0');
    const fs::path p = test::temp_path(name);
    std::ofstream(p, std::ios::binary) << o;
    return p;
  }
};

// A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens (3 + byte), then `extra`
// pieces from id 259 with their scores, and their token types (default normal).
GgufWriter spm_gguf(const std::vector<std::pair<std::string, float>>& extra,
                    const std::vector<std::int32_t>& extra_types = {}) {
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores(3, 0.0f);
  std::vector<std::int32_t> types = {2, 3, 3};
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    pieces.push_back(name);
    scores.push_back(0.0f);
    types.push_back(6);
  }
  for (const auto& [p, s] : extra) {
    types.push_back(types.size() - 259 < extra_types.size() ? extra_types[types.size() - 259] : 1);
    pieces.push_back(p);
    scores.push_back(s);
  }
  GgufWriter w;
  w.text("general.architecture", "llama")
      .text("tokenizer.ggml.model", "llama")
      .strings("tokenizer.ggml.tokens", pieces)
      .floats("tokenizer.ggml.scores", scores)
      .ints("tokenizer.ggml.token_type", types);
  return w;
}

}  // namespace

TEST_CASE("llama tokenizers: SentencePiece merges by score, any piece, then bytes (by hand)") {
  // 259 "▁", 260 "a", 261 "b", 262 "ab", 263 "▁a", 264 "xy" (neither x nor y is a piece),
  // 265 "ba" (as "ab" in the second vocabulary).
  const auto vocab = [](float ab, float space_a) {
    return attn::load_tokenizer(
        spm_gguf(
            {{"▁", 0}, {"a", 0}, {"b", 0}, {"ab", ab}, {"▁a", space_a}, {"xy", -9}, {"ba", ab}})
            .write("spm.gguf"));
  };
  attn::EncodeOptions o;
  o.add_special_tokens = false;
  // " ab" as "▁ab": "ab" (-0.5) beats "▁a" (-1): [▁, ab]; the other way round: [▁a, b].
  CHECK(attn::encode(vocab(-0.5f, -1.0f), "ab", o) == Ids{259, 262});
  CHECK(attn::encode(vocab(-2.0f, -1.0f), "ab", o) == Ids{263, 261});
  const attn::Tokenizer t = vocab(-0.5f, -1.0f);
  // Equal scores: the leftmost pair first.
  CHECK(attn::encode(t, "aba", o) == Ids{259, 262, 260});
  CHECK(attn::encode(t, "bab", o) == Ids{259, 265, 261});
  CHECK(attn::encode(t, "xy", o) == Ids{259, 264});  // a piece, though its halves are not
  CHECK(attn::encode(t, "é", o) == Ids{259, 3 + 0xC3, 3 + 0xA9});
  CHECK(attn::encode(t, "ab") == Ids{1, 259, 262});  // add_bos_token defaults to true for SPM
  // The space prefix again after a control token the text names; not without parse_special.
  CHECK(attn::encode(t, "a</s>a", o) == Ids{263, 2, 263});
  o.parse_special = false;
  CHECK(attn::encode(t, "a</s>", o) == Ids{263, 3 + '<', 3 + '/', 3 + 's', 3 + '>'});
  // Decoding: "▁" as a space, bytes as bytes, the first space dropped; control tokens shown
  // unless skipped (then BOS keeps the space after it, as llama.cpp).
  CHECK(attn::decode(t, {259, 262, 3 + 0xC3, 3 + 0xA9}) == "abé");
  CHECK(attn::decode(t, {1, 259, 262}) == "<s> ab");
  CHECK(attn::decode(t, {1, 259, 262}, {true, {}}) == " ab");
  CHECK(attn::token_bytes(t, 3 + 0xC3) == "\xC3");
}

TEST_CASE("llama tokenizers: GGUF metadata it cannot use is refused, naming the key") {
  const auto refused = [](const GgufWriter& w, const std::string& what) {
    CHECK_THROWS_WITH_AS(attn::load_tokenizer(w.write("bad.gguf")), doctest::Contains(what.c_str()),
                         attn::InputError);
  };
  GgufWriter no_model;
  no_model.text("general.architecture", "llama");
  refused(no_model, "key 'tokenizer.ggml.model': is missing: the file holds no tokenizer");
  GgufWriter bert = spm_gguf({});
  bert.text("tokenizer.ggml.model", "bert");  // a repeated key: the GGUF reader refuses it
  refused(bert, "bad.gguf");
  GgufWriter w;
  w.text("tokenizer.ggml.model", "bert\x1b[2J").strings("tokenizer.ggml.tokens", {"a"});
  refused(w, "key 'tokenizer.ggml.model': the tokenizer 'bert\\x1b[2J' is not supported");
  // Values llama.cpp reads with its own splitters or other rules than expressions
  // (docs/contract.md).
  for (const char* value : {"kimi-k2", "afmoe", "tiny_aya", "cohere2moe", "superbpe", "gemma4",
                            "granite-embed-multi-311m", "sarvam-moe", "whitespace", "jina-v1-en",
                            "jina-v2-code", "roberta-bpe", "qwen-unknown"}) {
    GgufWriter pre;
    pre.text("tokenizer.ggml.model", "gpt2")
        .text("tokenizer.ggml.pre", value)
        .strings("tokenizer.ggml.tokens", {"a", "b", "ab"})
        .strings("tokenizer.ggml.merges", {"a b"});
    refused(pre, "key 'tokenizer.ggml.pre': the pre-tokenizer '" + std::string(value) +
                     "' is not supported");
  }
  GgufWriter merges;
  merges.text("tokenizer.ggml.model", "gpt2").strings("tokenizer.ggml.tokens", {"a"});
  refused(merges, "key 'tokenizer.ggml.merges': is missing");
  GgufWriter scores;
  scores.text("tokenizer.ggml.model", "llama")
      .strings("tokenizer.ggml.tokens", {"a", "b"})
      .floats("tokenizer.ggml.scores", {0.0f});
  refused(scores, "key 'tokenizer.ggml.scores': 1 scores for 2 tokens");
  GgufWriter types;
  types.text("tokenizer.ggml.model", "llama")
      .strings("tokenizer.ggml.tokens", {"a", "b"})
      .ints("tokenizer.ggml.token_type", {1});
  refused(types, "key 'tokenizer.ggml.token_type': 1 types for 2 tokens");
  GgufWriter kind;
  kind.text("tokenizer.ggml.model", "llama").floats("tokenizer.ggml.tokens", {1.0f});
  refused(kind, "tokenizer.ggml.tokens");
  // Ids outside the vocabulary are ignored, as llama.cpp does (with its defaults).
  GgufWriter ids = spm_gguf({});
  ids.id("tokenizer.ggml.bos_token_id", 4000000000u).id("tokenizer.ggml.eos_token_id", 5);
  const attn::Tokenizer t = attn::load_tokenizer(ids.write("ids.gguf"));
  CHECK(t.bos == 1);
  CHECK(t.eos.front() == 5);
}

TEST_CASE("llama tokenizers: files of another kind, and broken tokenizer.bin, are refused") {
  const auto refused = [](const fs::path& p, const std::string& what) {
    CHECK_THROWS_WITH_AS(attn::load_tokenizer(p), doctest::Contains(what.c_str()),
                         attn::InputError);
  };
  refused(test::model_dir("hf_tied_bf16") / "model.safetensors",
          "a safetensors file, not a tokenizer (tokenizer.json, a GGUF file");
  refused(test::model_dir("hf_tied_bf16") / "config.json", "a JSON file, not a tokenizer");
  const std::string tok = read_file(test::source_dir() / "weights/tok512.bin");
  const auto write = [](const std::string& bytes) {
    const fs::path p = test::temp_path("tokenizer.bin");
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  };
  refused(write(tok.substr(0, tok.size() - 2)), "token 511: the file ends inside its 3 bytes");
  refused(write(tok.substr(0, tok.size() - 8)),
          "tokenizer.bin: token 511: the file ends inside its score and length");
  std::string long_piece = tok;
  long_piece[4 + 4] = 100;  // token 0's length past max_token_length (7)
  refused(write(long_piece), "token 0: length 100 is not in [0, max_token_length 7]");
  const attn::Tokenizer t = attn::load_tokenizer(write(tok));
  CHECK(t.vocab_size() == 512);
}

TEST_CASE("llama tokenizers: attn-cli tokenize -m F.gguf reads the model's tokenizer") {
  if (!fs::exists(kStoriesGguf)) {
    MESSAGE("skipped: " << kStoriesGguf << " is absent");
    return;
  }
  const test::CliResult r =
      test::run_cli("tokenize -m " + kStoriesGguf.string() + " -p 'Once upon a time' --json");
  CHECK(r.status == 0);
  CHECK(r.out ==
        "{\"ids\":[1,403,407,261,378],\"pieces\":[\"<s>\",\"▁Once\",\"▁upon\",\"▁a\","
        "\"▁time\"]}\n");
  const test::CliResult bin = test::run_cli(
      "tokenize -m " + (test::source_dir() / "weights" / "stories260K.bin").string() + " -p x");
  CHECK(bin.status == 2);
  CHECK(bin.err.find("a llama2.c checkpoint, which holds no tokenizer") != std::string::npos);
}

namespace {

// spm_gguf's vocabulary with `typed` pieces from id 259 of the given types and no space prefix:
// text outside them is its byte tokens (3 + byte), so the ids show where the text was cut.
attn::Tokenizer typed_vocab(const std::vector<std::pair<std::string, std::int32_t>>& typed,
                            const std::string& name) {
  std::vector<std::pair<std::string, float>> extra;
  std::vector<std::int32_t> types;
  for (const auto& [piece, type] : typed) {
    extra.emplace_back(piece, 0.0f);
    types.push_back(type);
  }
  return attn::load_tokenizer(
      spm_gguf(extra, types).flag("tokenizer.ggml.add_space_prefix", false).write(name));
}

Ids bytes_of(std::string_view s) {
  Ids ids;
  for (const char c : s) ids.push_back(3 + static_cast<unsigned char>(c));
  return ids;
}

Ids cat(std::initializer_list<Ids> parts) {
  Ids all;
  for (const Ids& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

}  // namespace

TEST_CASE(
    "llama tokenizers: typed tokens are matched in one pass, work linear in text and pieces") {
  // 50,000 user-defined pieces and 200 KB of text naming some and cutting others short:
  // llama.cpp's partition scans the text once per piece (10^10 steps, over a minute); the
  // matcher's steps are bounded by a small multiple of the bytes of both.
  std::vector<std::pair<std::string, std::int32_t>> typed;
  std::size_t piece_bytes = 0;
  for (int k = 0; k < 50000; ++k) {
    typed.emplace_back("<u" + std::to_string(k) + ">", 4);
    piece_bytes += typed.back().first.size();
  }
  const std::uint64_t before = attn::text_work();
  const attn::Tokenizer t = typed_vocab(typed, "many.gguf");
  std::string text;
  std::size_t named = 0;
  for (int k = 0; text.size() < 200000; k = (k + 7919) % 50000, ++named)
    text += "<u" + std::to_string(k) + "> <u" + std::to_string(k) + "x";
  attn::EncodeOptions o;
  o.add_special_tokens = false;
  const Ids ids = attn::encode(t, text, o);
  const std::uint64_t work = attn::text_work() - before;
  CHECK(work <= 4 * (text.size() + piece_bytes));
  CHECK(std::count_if(ids.begin(), ids.end(), [](std::int32_t id) { return id >= 259; }) ==
        std::ptrdiff_t(named));
  CHECK(attn::encode(t, "<u42>-<u42", o) == cat({{259 + 42}, bytes_of("-<u42")}));
}

TEST_CASE("llama tokenizers: typed tokens nested, overlapping and repeated, as llama.cpp cuts") {
  // What llama.cpp 3.22.1's llama-tokenize (--ids, with and without --no-parse-special) gives
  // for this vocabulary written by gguf-py, the second "<a>" made "<d>" (llama.cpp asserts on a
  // repeated piece): each piece, longest first, takes its leftmost occurrences in what is left.
  // 259.. as listed; type 3 is control (parse_special only).
  const attn::Tokenizer t = typed_vocab({{"<a>", 4},
                                         {"<a><b>", 4},
                                         {"xyz", 4},
                                         {"xy", 4},
                                         {"aa", 4},
                                         {"<c>", 3},
                                         {"<a>", 4},
                                         {"ab", 4},
                                         {"bcd", 4}},
                                        "typed.gguf");
  attn::EncodeOptions o;
  o.add_special_tokens = false;
  CHECK(attn::encode(t, "<a><b><a>", o) == Ids{260, 259});
  CHECK(attn::encode(t, "<a><b", o) == cat({{259}, bytes_of("<b")}));
  CHECK(attn::encode(t, "xyzxy-xy", o) == cat({{261, 262}, bytes_of("-"), {262}}));
  CHECK(attn::encode(t, "aaaaa", o) == cat({{263, 263}, bytes_of("a")}));
  CHECK(attn::encode(t, "<c><a>", o) == Ids{264, 259});
  o.parse_special = false;  // control tokens are text then; user-defined ones still match
  CHECK(attn::encode(t, "<c><a>", o) == cat({bytes_of("<c>"), {259}}));
  // Where two overlap, the shorter starting first, the one starting first is taken; llama.cpp
  // gives [3 + 'a', 267] ("bcd" first): the one place one pass differs (contract).
  CHECK(attn::encode(t, "abcd", o) == cat({{266}, bytes_of("cd")}));
}

TEST_CASE(
    "llama tokenizers: a byte-level piece of characters outside GPT-2's map decodes to them") {
  // llama.cpp writes "[UNK_BYTE_0x..." + the whole piece + "]" per such character: 3,000 CJK
  // characters (9 KB) would give 27 MB (30,000: 2.7 GB). Each stands for itself instead.
  std::string cjk;
  for (int k = 0; k < 3000; ++k) cjk += "中";
  GgufWriter w;
  w.text("tokenizer.ggml.model", "gpt2")
      .text("tokenizer.ggml.pre", "gpt-2")
      .strings("tokenizer.ggml.tokens", {"a", "Ġ" + cjk + "a", "Ġ"})
      .ints("tokenizer.ggml.token_type", {1, 1, 1})
      .strings("tokenizer.ggml.merges", {});
  const attn::Tokenizer t = attn::load_tokenizer(w.write("cjk.gguf"));
  CHECK(attn::token_bytes(t, 1) == " " + cjk + "a");
  CHECK(attn::decode(t, {0, 1, 1}).size() <= 2 * t.pieces[1].size() + 1);
  CHECK(attn::decode(t, {0, 1}) == "a " + cjk + "a");
}

TEST_CASE(
    "llama tokenizers: malformed token types, scores and merges are refused, naming the index") {
  const auto refused = [](const GgufWriter& w, const std::string& what) {
    CHECK_THROWS_WITH_AS(attn::load_tokenizer(w.write("bad.gguf")), doctest::Contains(what.c_str()),
                         attn::InputError);
  };
  std::vector<std::string> pieces;
  for (int k = 0; k < 20; ++k) pieces.push_back("p" + std::to_string(k));
  for (const std::int32_t bad : {99, 0, -1}) {
    std::vector<std::int32_t> types(20, 1);
    types[17] = bad;
    GgufWriter w;
    w.text("tokenizer.ggml.model", "llama")
        .strings("tokenizer.ggml.tokens", pieces)
        .ints("tokenizer.ggml.token_type", types);
    refused(w, "bad.gguf: key 'tokenizer.ggml.token_type'[17]: " + std::to_string(bad) +
                   " is not a token type (1-6)");
  }
  std::vector<float> scores(20, 0.0f);
  scores[3] = std::nanf("");
  GgufWriter nan;
  nan.text("tokenizer.ggml.model", "llama")
      .strings("tokenizer.ggml.tokens", pieces)
      .floats("tokenizer.ggml.scores", scores);
  refused(nan, "bad.gguf: key 'tokenizer.ggml.scores'[3]: the score is NaN");
  const auto gpt2 = [](const std::vector<std::string>& merges) {
    GgufWriter w;
    w.text("tokenizer.ggml.model", "gpt2")
        .strings("tokenizer.ggml.tokens", {"h", "e", "he"})
        .strings("tokenizer.ggml.merges", merges);
    return w;
  };
  refused(gpt2({"h e", "he"}),
          "bad.gguf: key 'tokenizer.ggml.merges'[1]: expected \"left right\", got 'he'");
  refused(gpt2({"h e", " he"}), "key 'tokenizer.ggml.merges'[1]: expected \"left right\"");
  refused(gpt2({"h e", "h e e"}), "key 'tokenizer.ggml.merges'[1]: expected \"left right\"");
  refused(gpt2({"h x"}),
          "key 'tokenizer.ggml.merges'[0]: the merge 'h x' names a piece the vocabulary lacks");
  CHECK(attn::encode(attn::load_tokenizer(gpt2({"h e"}).write("he.gguf")), "he",
                     {false, {}, true}) == Ids{2});
  // llama2.c's tokenizer.bin: token 5's score (after max_token_length and five records).
  std::string tok = read_file(test::source_dir() / "weights/tok512.bin");
  std::size_t at = 4;
  for (int k = 0; k < 5; ++k) {
    std::int32_t len;
    std::memcpy(&len, tok.data() + at + 4, 4);
    at += 8 + std::size_t(len);
  }
  const float nan_score = std::nanf("");
  std::memcpy(tok.data() + at, &nan_score, 4);
  const fs::path p = test::temp_path("tokenizer.bin");
  std::ofstream(p, std::ios::binary) << tok;
  CHECK_THROWS_WITH_AS(attn::load_tokenizer(p),
                       doctest::Contains("tokenizer.bin: token 5: the score is NaN"),
                       attn::InputError);
}

TEST_CASE("llama tokenizers: a GGUF's named chat templates, as llama.cpp's converter writes them") {
  // gguf-py's add_chat_template: tokenizer.chat_template (default), tokenizer.chat_template.NAME
  // each, and the names' list tokenizer.chat_templates.
  GgufWriter w = spm_gguf({});
  w.text("tokenizer.chat_template", "D{{ messages[0].content }}")
      .text("tokenizer.chat_template.tool_use", "T{{ messages[0].content }}")
      .strings("tokenizer.chat_templates", {"tool_use", "rag"})
      .text("tokenizer.chat_template.rag", "R{{ messages[0].content }}");
  const attn::Tokenizer t = attn::load_tokenizer(w.write("named.gguf"));
  REQUIRE(t.chat_templates.size() == 3);
  CHECK(t.chat_templates[0].first == "default");
  CHECK(t.chat_templates[1].first == "tool_use");
  CHECK(t.chat_templates[2].first == "rag");
  const std::vector<attn::ChatMessage> hi = {{"user", "hi"}};
  CHECK(attn::chat_template_for(t, "").render(hi, {}) == "Dhi");
  CHECK(attn::chat_template_for(t, "tool_use").render(hi, {}) == "Thi");
  CHECK(attn::chat_template_for(t, "rag").render(hi, {}) == "Rhi");
  CHECK_THROWS_WITH_AS(attn::chat_template_for(t, "nope"),
                       doctest::Contains("'nope' is neither a file nor one of the tokenizer's "
                                         "chat templates ('default', 'tool_use', 'rag')"),
                       attn::InputError);
  // Named templates without a default: no default, the named ones still chosen by name.
  GgufWriter only = spm_gguf({});
  only.text("tokenizer.chat_template.tool_use", "T");
  const attn::Tokenizer o = attn::load_tokenizer(only.write("named_only.gguf"));
  CHECK_THROWS_WITH_AS(attn::chat_template_for(o, ""), doctest::Contains("has no chat template"),
                       attn::InputError);
  CHECK(attn::chat_template_for(o, "tool_use").render(hi, {}) == "T");
  // A named template that is not a string, or one named "default" (the unnamed key's name).
  GgufWriter number = spm_gguf({});
  number.id("tokenizer.chat_template.rag", 7);
  CHECK_THROWS_WITH_AS(attn::load_tokenizer(number.write("named_bad.gguf")),
                       doctest::Contains("tokenizer.chat_template.rag"), attn::InputError);
  GgufWriter twice = spm_gguf({});
  twice.text("tokenizer.chat_template", "D").text("tokenizer.chat_template.default", "E");
  CHECK_THROWS_WITH_AS(attn::load_tokenizer(twice.write("named_default.gguf")),
                       doctest::Contains("key 'tokenizer.chat_template.default'"),
                       attn::InputError);
}
