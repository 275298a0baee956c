// Real models as people have them: stories260K (weights/, llama2.c's TinyStories model) as a GGUF
// and as a llama2.c checkpoint. Its greedy text equals llama2.c's run.c, the exact F32 reference
// (tests/golden/make_stories.sh), from both files; both files give the same logits, bit for
// bit; a GGUF's metadata reads as llama.cpp reads it, and every refusal names the file and the
// GGUF key.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/llama2c.hpp"
#include "attn/model/config.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

fs::path weights(const std::string& name) {
  return test::source_dir() / "weights" / name;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// tests/golden/stories260K/cases.tsv: name, prompt.
std::vector<std::pair<std::string, std::string>> story_cases() {
  std::vector<std::pair<std::string, std::string>> cases;
  std::istringstream in(read_file(test::golden_dir() / "stories260K" / "cases.tsv"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t tab = line.find('\t');
    cases.emplace_back(line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1));
  }
  return cases;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A GGUF v3 of metadata only (no tensors), as llama.cpp's gguf writer lays it out.
struct GgufWriter {
  std::string bytes;
  std::uint64_t count = 0;

  template <class T>
  void put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& s) {
    put<std::uint64_t>(s.size());
    bytes += s;
  }
  void key(const std::string& k, std::uint32_t type) {
    str(k);
    put<std::uint32_t>(type);
    ++count;
  }
  GgufWriter& u32(const std::string& k, std::uint32_t v) {
    key(k, 4);
    put(v);
    return *this;
  }
  GgufWriter& f32(const std::string& k, float v) {
    key(k, 6);
    put(v);
    return *this;
  }
  GgufWriter& string(const std::string& k, const std::string& v) {
    key(k, 8);
    str(v);
    return *this;
  }
  GgufWriter& strings(const std::string& k, std::size_t n) {
    key(k, 9);
    put<std::uint32_t>(8);
    put<std::uint64_t>(n);
    for (std::size_t i = 0; i < n; ++i) str("t" + std::to_string(i));
    return *this;
  }
  std::vector<std::uint8_t> file() const {
    std::string out = "GGUF";
    const std::uint32_t version = 3;
    const std::uint64_t tensors = 0;
    out.append(reinterpret_cast<const char*>(&version), 4);
    out.append(reinterpret_cast<const char*>(&tensors), 8);
    out.append(reinterpret_cast<const char*>(&count), 8);
    out += bytes;
    return {out.begin(), out.end()};
  }
};

// stories260K's shape under `arch`, with the keys llama.cpp requires and a 512-token vocabulary;
// `omit`: one of them left out ("context_length").
GgufWriter llama_keys(const std::string& arch = "llama", const std::string& omit = "") {
  GgufWriter w;
  w.string("general.architecture", arch);
  const std::pair<const char*, std::uint32_t> sizes[] = {{"context_length", 2048},
                                                         {"embedding_length", 64},
                                                         {"block_count", 5},
                                                         {"feed_forward_length", 172},
                                                         {"attention.head_count", 8}};
  for (const auto& [key, v] : sizes)
    if (key != omit) w.u32(arch + "." + key, v);
  if (omit != "attention.layer_norm_rms_epsilon")
    w.f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.strings("tokenizer.ggml.tokens", 512);
  return w;
}

attn::ModelArgs config_of(const GgufWriter& w) {
  const std::vector<std::uint8_t> bytes = w.file();
  const attn::GgufFile f = attn::parse_gguf(bytes, "m.gguf");
  return attn::gguf_config(f);
}

std::string refusal(const GgufWriter& w) {
  try {
    config_of(w);
  } catch (const attn::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("stories260K: greedy text equals llama2.c's run.c, from the GGUF and the .bin") {
  const auto cases = story_cases();
  REQUIRE(cases.size() >= 4);
  for (const auto& c : cases) {  // no structured bindings: INFO captures them (clang 14)
    const std::string &name = c.first, &prompt = c.second;
    INFO(name << ": " << prompt);
    const std::string expected = read_file(test::golden_dir() / "stories260K" / (name + ".txt"));
    REQUIRE(!expected.empty());
    const std::string models[] = {"-m " + weights("stories260K.gguf").string(),
                                  "-m " + weights("stories260K.bin").string() + " --tokenizer " +
                                      weights("tok512.bin").string()};
    for (const std::string& model : models) {
      INFO(model);
      const test::CliResult r =
          test::run_cli("generate " + model + " -p " + shell_quote(prompt) + " -n 200 -t 2");
      CHECK(r.status == 0);
      CHECK(r.out == expected);
      if (r.out != expected) MESSAGE(r.err);
    }
  }
}

TEST_CASE("stories260K: a story saved after 20 tokens and continued prints the rest of it") {
  const std::string gguf = "-m " + weights("stories260K.gguf").string() + " -t 2 ";
  const std::string session = test::temp_path("stories.session").string();
  const test::CliResult a =
      test::run_cli("generate " + gguf + "-p 'Once upon a time' -n 20 --save-session " + session);
  const test::CliResult b = test::run_cli("generate " + gguf + "-n 180 --load-session " + session);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  // Each run ends its text with a newline; the story's own lines stay.
  const std::string expected = read_file(test::golden_dir() / "stories260K" / "once.txt");
  CHECK(a.out.substr(0, a.out.size() - 1) + b.out == expected);
}

TEST_CASE("stories260K: the GGUF and the llama2.c checkpoint give the same logits") {
  // The same weights in both files (the GGUF's q/k rows in Meta's order, as llama2.c's): the
  // same arithmetic, so the same bits, every position of a prefill and of decode steps.
  attn::Session gguf =
      attn::open_session(test::spec_of(weights("stories260K.gguf"), {}, 2), {1, 8, 4});
  attn::Session bin =
      attn::open_session(test::spec_of(weights("stories260K.bin"), {}, 2), {1, 8, 4});
  REQUIRE(gguf.model.args.vocab_size == 512);
  REQUIRE(bin.model.args.vocab_size == 512);
  const std::vector<std::int32_t> prompt = {1, 403, 407, 261, 378};  // BOS "Once upon a time"
  std::vector<float> a(5 * 512), b(5 * 512);
  attn::forward_tokens(gguf, prompt.data(), 1, 5, 0, a.data(), true);
  attn::forward_tokens(bin, prompt.data(), 1, 5, 0, b.data(), true);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  for (std::int32_t t : {11, 372, 1}) {  // decode steps at positions 5, 6, 7
    const std::int64_t pos = gguf.filled;
    attn::forward_tokens(gguf, &t, 1, 1, pos, a.data(), false);
    attn::forward_tokens(bin, &t, 1, 1, pos, b.data(), false);
    CHECK(std::memcmp(a.data(), b.data(), 512 * 4) == 0);
  }
  // A different row order (Hugging Face's, half RoPE) would not give these bits: the q rows of
  // block 0 are read as the checkpoint stores them.
  CHECK(gguf.model.args.rope == attn::Rope::interleaved);
}

TEST_CASE("stories260K in Q8_0: the bits of its F32 twin dequantized by gguf-py") {
  // tests/golden/make_stories_q8.py: llama.cpp's llama-quantize made the Q8_0 file (ffn_down
  // falls back to F16), gguf-py's numpy dequantized it into the F32 twin. Each path the products
  // take by size: prefill (40 rows: the GEMM), a batch of rows (5), decode (1 row); 1 and 2
  // threads.
  const fs::path golden = test::source_dir() / "tests" / "golden";
  std::vector<std::int32_t> prompt(40);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = std::int32_t(1 + (i * 37) % 511);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    attn::ModelSpec qs = test::spec_of(golden / "stories260K-q8_0.gguf", {}, 2);
    attn::ModelSpec fs = test::spec_of(golden / "stories260K-q8_0-f32.gguf", {}, 2);
    qs.threads = fs.threads = threads;
    attn::Session q = attn::open_session(qs, {1, 64, 8});
    attn::Session f = attn::open_session(fs, {1, 64, 8});
    REQUIRE(q.model.weights.layers[0].wq.type == attn::WeightType::q8_0);
    REQUIRE(f.model.weights.layers[0].wq.type == attn::WeightType::f32);
    std::vector<float> a(40 * 512), b(40 * 512);
    for (std::int64_t n : {40, 5}) {
      attn::reset(q);
      attn::reset(f);
      attn::forward_tokens(q, prompt.data(), 1, n, 0, a.data(), true);
      attn::forward_tokens(f, prompt.data(), 1, n, 0, b.data(), true);
      CHECK(std::memcmp(a.data(), b.data(), std::size_t(n) * 512 * 4) == 0);
    }
    for (std::int32_t t : {11, 372, 1}) {
      const std::int64_t pos = q.filled;
      attn::forward_tokens(q, &t, 1, 1, pos, a.data(), false);
      attn::forward_tokens(f, &t, 1, 1, pos, b.data(), false);
      CHECK(std::memcmp(a.data(), b.data(), 512 * 4) == 0);
    }
  }
}

TEST_CASE("stories260K: the GGUF's metadata is the model its llama2.c header describes") {
  const attn::ModelArgs g = attn::gguf_config(*attn::open_gguf(weights("stories260K.gguf")));
  attn::ModelSpec s = test::spec_of(weights("stories260K.bin"), {}, 2);
  const attn::ModelArgs b = attn::model_args(s, attn::open_model(s), nullptr);
  // weights/stories260K.md: dim 64, 5 layers, 8 heads, 4 KV heads, FFN 172, 512 tokens.
  for (const attn::ModelArgs* a : {&g, &b}) {
    CHECK(a->dim == 64);
    CHECK(a->n_layers == 5);
    CHECK(a->n_heads == 8);
    CHECK(a->n_kv_heads == 4);
    CHECK(a->ffn_hidden() == 172);
    CHECK(a->vocab_size == 512);
    CHECK(a->head_dim() == 8);
    CHECK(a->rope == attn::Rope::interleaved);
    CHECK(a->rope_theta == 10000);
    CHECK(float(a->norm_eps) == 1e-5f);
    CHECK(a->block == attn::Block::llama);
    CHECK(!a->attention_bias);
  }
  CHECK(g.format == attn::ConfigFormat::gguf);
  CHECK(g.max_seq_len == 2048);   // llama.context_length
  CHECK(!g.tie_word_embeddings);  // the GGUF stores output.weight (a copy of the embeddings)
  CHECK(b.format == attn::ConfigFormat::llama2c);
  CHECK(b.max_seq_len == 512);   // seq_len
  CHECK(b.tie_word_embeddings);  // vocab_size > 0 in the header: shared classifier
  CHECK(attn::config_key(g, "dim") == "llama.embedding_length");
  CHECK(attn::config_key(g, "max_seq_len") == "llama.context_length");
  CHECK(attn::config_key(b, "ffn_hidden") == "hidden_dim");
}

TEST_CASE("gguf_config: llama.cpp's keys and its defaults where one is absent") {
  const attn::ModelArgs a = config_of(llama_keys());
  CHECK(a.n_kv_heads == 8);      // head_count_kv absent: head_count
  CHECK(a.rope_theta == 10000);  // rope.freq_base absent
  CHECK(a.head_dim() == 8);      // attention.key_length absent: embedding / heads
  CHECK(a.vocab_size == 512);    // the tokenizer's tokens
  CHECK(a.tie_word_embeddings);  // no output.weight
  CHECK(a.max_seq_len == 2048);
  CHECK(!a.rope_scaling);
  CHECK(a.rope == attn::Rope::interleaved);
  CHECK(config_of(llama_keys("mistral")).rope == attn::Rope::interleaved);
  CHECK(config_of(llama_keys("qwen2")).rope == attn::Rope::half);  // NEOX: Hugging Face's rows

  GgufWriter w = llama_keys();
  w.u32("llama.vocab_size", 600)
      .u32("llama.attention.head_count_kv", 2)
      .f32("llama.rope.freq_base", 500000)
      .u32("llama.attention.key_length", 16)
      .u32("llama.attention.value_length", 16)
      .u32("llama.rope.dimension_count", 16)
      .string("llama.rope.scaling.type", "linear")
      .f32("llama.rope.scaling.factor", 1);
  const attn::ModelArgs b = config_of(w);
  CHECK(b.vocab_size == 600);  // the key before the token count
  CHECK(b.n_kv_heads == 2);
  CHECK(b.rope_theta == 500000);
  CHECK(b.head_dim() == 16);
  CHECK(!b.rope_scaling);

  // A context length past the default cache is kept and capped, as a Hugging Face config's.
  GgufWriter c;
  c.string("general.architecture", "llama")
      .u32("llama.context_length", 131072)
      .u32("llama.embedding_length", 64)
      .u32("llama.block_count", 1)
      .u32("llama.feed_forward_length", 172)
      .u32("llama.attention.head_count", 8)
      .f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .u32("llama.vocab_size", 32);
  const attn::ModelArgs d = config_of(c);
  CHECK(d.max_seq_len == 4096);
  CHECK(d.max_position_embeddings == 131072);
}

TEST_CASE("gguf_config: metadata as llama.cpp's gguf-py writes it (make_gguf_configs.py)") {
  const fs::path dir = test::golden_dir() / "gguf_config";
  const attn::ModelArgs l = attn::gguf_config(*attn::open_gguf(dir / "llama.gguf"));
  CHECK(l.dim == 64);
  CHECK(l.n_layers == 5);
  CHECK(l.n_heads == 8);
  CHECK(l.n_kv_heads == 4);
  CHECK(l.ffn_hidden() == 172);
  CHECK(l.vocab_size == 64);  // its 64 tokens
  CHECK(l.rope == attn::Rope::interleaved);
  CHECK(l.rope_theta == 10000);
  CHECK(l.max_seq_len == 2048);
  const attn::ModelArgs q = attn::gguf_config(*attn::open_gguf(dir / "qwen2.gguf"));
  CHECK(q.arch == "qwen2");
  CHECK(q.rope == attn::Rope::half);
  CHECK(q.rope_theta == 1e6);
  CHECK(q.head_dim() == 8);
  CHECK(!q.rope_scaling);  // linear by 1
  CHECK(q.vocab_size == 64);
  CHECK(attn::config_key(q, "n_kv_heads") == "qwen2.attention.head_count_kv");
}

TEST_CASE("gguf_config: a refusal names the file and the GGUF key") {
  const auto has = [](const std::string& msg, std::initializer_list<const char*> parts) {
    INFO(msg);
    CHECK(msg.starts_with("m.gguf: "));
    for (const char* p : parts) CHECK(msg.find(p) != std::string::npos);
  };
  has(refusal(llama_keys("gpt2")), {"'general.architecture'", "'gpt2'", "llama"});
  GgufWriter none;
  none.u32("llama.block_count", 1);
  has(refusal(none), {"'general.architecture'", "missing"});
  for (const char* key :
       {"context_length", "embedding_length", "block_count", "feed_forward_length",
        "attention.head_count", "attention.layer_norm_rms_epsilon"})
    has(refusal(llama_keys("llama", key)),
        {("'llama." + std::string(key) + "'").c_str(), "missing"});
  has(refusal(llama_keys().u32("llama.rope.dimension_count", 4)),
      {"'llama.rope.dimension_count'", "partial"});
  has(refusal(llama_keys().string("llama.rope.scaling.type", "yarn")),
      {"'llama.rope.scaling.type'", "'yarn'"});
  has(refusal(llama_keys().f32("llama.rope.scaling.factor", 4)), {"'llama.rope.scaling.factor'"});
  has(refusal(llama_keys().u32("llama.attention.value_length", 4)),
      {"'llama.attention.value_length'"});
  has(refusal(llama_keys().u32("llama.expert_count", 8)), {"'llama.expert_count'"});
  has(refusal(llama_keys().u32("llama.attention.key_length", 0)),
      {"'llama.attention.key_length'", "at least 1"});
  has(refusal(llama_keys("llama", "attention.layer_norm_rms_epsilon")
                  .f32("llama.attention.layer_norm_rms_epsilon", INFINITY)),
      {"'llama.attention.layer_norm_rms_epsilon'", "finite"});
  has(refusal(llama_keys().f32("llama.rope.freq_base", NAN)), {"'llama.rope.freq_base'"});
  // The checks every config passes, in the GGUF's words.
  has(refusal(llama_keys().u32("llama.attention.head_count_kv", 3)),
      {"'llama.attention.head_count_kv'", "not divisible"});
  GgufWriter zero;
  zero.string("general.architecture", "llama")
      .u32("llama.context_length", 64)
      .u32("llama.embedding_length", 0)
      .u32("llama.block_count", 1)
      .u32("llama.feed_forward_length", 4)
      .u32("llama.attention.head_count", 1)
      .f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .u32("llama.vocab_size", 8);
  has(refusal(zero), {"'llama.embedding_length'", "at least 1"});
  GgufWriter no_vocab;
  no_vocab.string("general.architecture", "llama")
      .u32("llama.context_length", 64)
      .u32("llama.embedding_length", 64)
      .u32("llama.block_count", 1)
      .u32("llama.feed_forward_length", 4)
      .u32("llama.attention.head_count", 8)
      .f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  has(refusal(no_vocab), {"'llama.vocab_size'", "tokenizer.ggml.tokens"});
  // A value of another type: the reader's typed read names the key.
  has(refusal(llama_keys().string("llama.attention.head_count_kv", "4")),
      {"'llama.attention.head_count_kv'"});
}

TEST_CASE("models from files: a config beside a GGUF, and files given as what they are not") {
  const std::string gguf = weights("stories260K.gguf").string();
  const std::string config = (test::source_dir() / "configs" / "gqa.json").string();
  test::CliResult r = test::run_cli("generate -m " + gguf + " --config " + config + " -p a");
  CHECK(r.status == 2);
  CHECK(r.err.find(gguf) != std::string::npos);
  CHECK(r.err.find(config) != std::string::npos);
  CHECK(r.err.find("--config") != std::string::npos);  // the front names its flag

  r = test::run_cli("run --config " + gguf + " --prefill 2 --steps 1");
  CHECK(r.status == 2);
  CHECK(r.err.find("GGUF") != std::string::npos);

  r = test::run_cli("generate -m " + weights("tok512.bin").string() + " -p a");
  CHECK(r.status == 2);
  CHECK(r.err.find("tokenizer") != std::string::npos);
  CHECK(r.err.find("weights") != std::string::npos);

  r = test::run_cli("generate -m " + weights("stories260K.bin").string() + " -p a");
  CHECK(r.status == 2);
  CHECK(r.err.find("--tokenizer") != std::string::npos);
}
