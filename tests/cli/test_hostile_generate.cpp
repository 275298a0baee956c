// Hostile inputs to generate and its cache session files (issue 37): each refused with exit
// status 2 and one short message naming the flag, file or key, before any output; or working as
// a user expects (a model vocabulary padded past its tokenizer's, a prompt continuing a session).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "attn/io/safetensors.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path write_json(const std::string& name, const json& j) {
  const fs::path p = test::temp_path(name);
  std::ofstream(p) << j.dump();
  return p;
}

// GPT-2's byte-level BPE with no merges: id = the byte (256 ids), no BOS.
json byte_level_tokenizer() {
  // GPT-2's printable stand-ins for the bytes: themselves for '!'..'~', '¡'..'¬', '®'..'ÿ';
  // 256 + n for the others, in order.
  json vocab = json::object();
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    const char32_t cp = printable ? char32_t(b) : char32_t(256 + n++);
    std::string utf8;
    if (cp < 0x80) {
      utf8 = char(cp);
    } else {
      utf8 += char(0xc0 | (cp >> 6));
      utf8 += char(0x80 | (cp & 0x3f));
    }
    vocab[utf8] = b;
  }
  return {{"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"post_processor", {{"type", "ByteLevel"}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

// Llama 2's shape, letters only: "▁" for spaces, <s> (id 1) put first by the template.
json bos_tokenizer() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"▁", 3}};
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = 4 + (c - 'a');
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
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"}, {"unk_token", "<unk>"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

// A Hugging Face config of a tiny Llama with `vocab` ids and drawn weights (no -m): 600 is more
// than either tokenizer's, as padded embeddings are.
fs::path config(std::int64_t vocab) {
  json c = json::parse(std::ifstream(test::model_dir("hf_tied_bf16") / "config.json"));
  c["vocab_size"] = vocab;
  return write_json("config" + std::to_string(vocab) + ".json", c);
}

std::string drawn(const std::string& tokenizer) {
  return "generate --config " + config(600).string() + " --tokenizer " +
         write_json(tokenizer + ".json",
                    tokenizer == "bytes" ? byte_level_tokenizer() : bos_tokenizer())
             .string() +
         " -t 1 ";
}

std::string golden() {
  const fs::path d = test::model_dir("hf_tied_bf16");
  return "generate --config " + (d / "config.json").string() + " -m " +
         (d / "model.safetensors").string() + " -t 1 ";
}

json events(const std::string& out, const std::string& kind) {
  json all = json::array();
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (const json e = json::parse(line); e["event"] == kind) all.push_back(e);
  return all;
}

// Exit 2 before any output, one short line naming each needle.
void refused(const std::string& args, const std::vector<std::string>& needles) {
  const test::CliResult r = test::run_cli(args);
  INFO("attn-cli " << args << "\nstderr: " << r.err.substr(0, 2000));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.size() < 600);
  for (const std::string& n : needles) CHECK(r.err.find(n) != std::string::npos);
}

// A session of the golden model holding 8 positions (5 prompt tokens, 3 steps).
fs::path saved_session() {
  const fs::path s = test::temp_path("eight.safetensors");
  if (!fs::exists(s))
    REQUIRE(
        test::run_cli(golden() + "--tokens 1,2,3,4,5 -n 3 --save-session " + s.string()).status ==
        0);
  return s;
}

// The saved session with one metadata value or one tensor's values replaced.
fs::path altered(const std::string& name, const std::string& key, const std::string& value,
                 const std::string& tensor = "", float fill = 0, std::int64_t count = 0) {
  const attn::SafetensorsFile f = attn::open_safetensors(saved_session());
  std::map<std::string, std::vector<float>> data;
  std::vector<attn::OutTensor> out;
  for (const std::string t : {"cache_k", "cache_v", "logits"}) {
    std::vector<float> storage;
    const float* p = attn::tensor_as_f32(f, t, storage);
    std::vector<float>& v = data[t];
    v.assign(p, p + f.info(t).numel());
    if (t == tensor)
      for (std::int64_t i = 0; i < count && i < std::int64_t(v.size()); ++i)
        v[std::size_t(i)] = fill;
  }
  for (const std::string t : {"cache_k", "cache_v", "logits"})
    out.push_back({t, f.info(t).shape, data[t].data()});
  std::map<std::string, std::string> meta = f.header.metadata;
  if (!key.empty()) meta[key] = value;
  const fs::path p = test::temp_path(name + ".safetensors");
  attn::write_safetensors(p, out, meta);
  return p;
}

}  // namespace

TEST_CASE("generate: a model vocabulary padded past the tokenizer's chooses the tokenizer's ids") {
  // Unmasked, greedy reaches id 287 at step 6 and died there ("outside the vocabulary").
  for (const std::string sampling : {"", "--temp 0.9 --seed 3 "}) {
    CAPTURE(sampling);
    const test::CliResult r = test::run_cli(drawn("bytes") + sampling + "-p hello -n 40 --json");
    REQUIRE_MESSAGE(r.status == 0, r.err);
    const json tokens = events(r.out, "token");
    CHECK(tokens.size() == 40);
    for (const json& t : tokens) {
      CHECK(t["id"].get<int>() < 256);
      for (const json& top : t["top"]) CHECK(top["id"].get<int>() < 256);
    }
  }
  // Ids given as ids are checked against both vocabularies, before any output.
  refused(drawn("bytes") + "--tokens 104,300 -n 1", {"token 300", "[0, 256)"});
}

TEST_CASE("generate: a prompt continuing a session gets no BOS, unless asked for") {
  const fs::path s = test::temp_path("bos.safetensors");
  const test::CliResult first =
      test::run_cli(drawn("bos") + "-p hello -n 2 --json --save-session " + s.string());
  REQUIRE_MESSAGE(first.status == 0, first.err);
  CHECK(events(first.out, "prefill")[0]["ids"][0] == 1);  // the context's start: BOS
  const test::CliResult next =
      test::run_cli(drawn("bos") + "--load-session " + s.string() + " -p ' and then' -n 1 --json");
  REQUIRE_MESSAGE(next.status == 0, next.err);
  const json ids = events(next.out, "prefill")[0]["ids"];
  CHECK(ids.size() >= 8);
  CHECK(std::find(ids.begin(), ids.end(), 1) == ids.end());
  const test::CliResult bos = test::run_cli(drawn("bos") + "--load-session " + s.string() +
                                            " -p ' and then' -n 1 --json --add-bos");
  REQUIRE_MESSAGE(bos.status == 0, bos.err);
  CHECK(events(bos.out, "prefill")[0]["ids"][0] == 1);
}

TEST_CASE("generate: prompt and steps past the cache are refused before any output") {
  const fs::path s = test::temp_path("text.safetensors");
  REQUIRE(test::run_cli(drawn("bytes") + "-p hello -n 3 --save-session " + s.string()).status ==
          0);  // 8 positions
  const std::string load = "--load-session " + s.string() + " -c 12 ";
  // Text mode printed the prompt and 4 tokens before "the cache is full", and lost the session.
  refused(drawn("bytes") + load + "-n 10 --save-session " + test::temp_path("lost").string(),
          {"10 steps", "max_seq_len is 12", "--max-seq-len"});
  CHECK(!fs::exists(test::temp_path("lost")));
  refused(drawn("bytes") + load + "-p 'and then' -n 1",
          {"8 tokens and 1 steps", "positions 8..16", "--max-seq-len"});
  refused(golden() + "--tokens 1,2 -n 9223372036854775807",
          {"9223372036854775807 steps", "max_seq_len is 64", "--steps"});
}

TEST_CASE("generate: negative steps and NaN sampling settings are refused naming the flag") {
  refused(golden() + "--tokens 1,2 -n -2", {"--steps", "-2"});  // -1: until a full context
  for (const std::string flag : {"--temp", "--top-p", "--min-p"})
    for (const std::string value : {"nan", "-nan", "inf", "-1"}) {
      CAPTURE(flag);
      CAPTURE(value);
      refused(golden() + "--tokens 1,2 " + flag + " " + value, {flag, "got " + value});
    }
}

TEST_CASE(
    "generate: session values are checked at load: integral ids, finite tensors, shallow JSON") {
  const std::string load = golden() + "-n 1 --load-session ";
  refused(load + altered("wrapped", "tokens", "[1,2,3,4,5,4294967582,6,7]").string(),
          {"wrapped.safetensors", "'tokens'", "token 5", "4294967582", "outside the vocabulary"});
  refused(load + altered("bool", "tokens", "[1,2,3,4,5,true,6,7]").string(),
          {"'tokens'", "token 5", "'true'", "not an integer"});
  refused(load + altered("fraction", "tokens", "[1,2,3,4,5,286.9,6,7]").string(),
          {"'tokens'", "286.9", "not an integer"});
  refused(load + altered("negative", "tokens", "[1,2,3,4,5,-1,6,7]").string(),
          {"'tokens'", "outside the vocabulary"});
  refused(load + altered("deep_tokens", "tokens", std::string(100000, '[')).string(),
          {"'tokens' nests deeper"});
  json config = json::parse(attn::open_safetensors(saved_session()).header.metadata.at("config"));
  config["dim"] = json::parse(std::string(200, '[') + std::string(200, ']'));
  refused(load + altered("deep_config", "config", config.dump()).string(),
          {"deep_config.safetensors", "'config' nests deeper"});
  // A deeper value than the parser's DOM would survive: refused by the pass before it.
  refused(
      load + altered("very_deep_config", "config", "{\"dim\":" + std::string(200000, '[')).string(),
      {"'config' nests deeper"});
  refused(load + altered("nan_k", "", "", "cache_k", std::nanf(""), 3).string(),
          {"nan_k.safetensors", "tensor 'cache_k'", "NaN at flat index 0"});
  refused(load + altered("inf_v", "", "", "cache_v", INFINITY, 1).string(),
          {"tensor 'cache_v'", "Inf"});
  refused(load + altered("nan_logits", "", "", "logits", std::nanf(""), 300).string(),
          {"nan_logits.safetensors", "tensor 'logits'", "NaN"});
}

TEST_CASE("generate: a prompt far over the cache is refused after its first chunk, not whole") {
  const fs::path p = test::temp_path("long_prompt.txt");
  {
    std::ofstream out(p);
    const std::string line(1000, 'a');
    for (int i = 0; i < 3000; ++i) out << line << '\n';  // 3 MB
  }
  refused(drawn("bytes") + "-c 64 -f " + p.string(),
          {"long_prompt.txt", "first 10", "of 3003000 bytes", "max_seq_len 64", "--max-seq-len"});
  const test::CliResult fits = test::run_cli(drawn("bytes") + "-c 64 -n 1 -p hello");
  CHECK(fits.status == 0);
}

TEST_CASE("generate: a FIFO as the prompt file is refused, its message saying file once") {
  const fs::path fifo = test::temp_path("prompt_fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  refused(drawn("bytes") + "-f " + fifo.string(), {"the prompt file is a FIFO"});
}
