// llama2.c checkpoints (lib/attn/io/llama2c.hpp) and telling file formats apart by content
// (lib/attn/io/format.hpp). The layout is checked against run.c's memory_map_weights, written
// out here as run.c does it; the real stories260K.bin against the same model's GGUF when both
// are present.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/format.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/llama2c.hpp"
#include "attn/io/tensor_source.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using attn::FileFormat;

namespace {

const fs::path kModels = test::source_dir() / "weights";

struct Config {
  std::int32_t dim = 8, hidden_dim = 12, n_layers = 2, n_heads = 4, n_kv_heads = 2, vocab_size = 10,
               seq_len = 3;
};

// run.c's memory_map_weights: where each array starts, in floats after the header.
std::map<std::string, std::uint64_t> run_c_offsets(const Config& p, std::uint64_t* total) {
  const std::uint64_t head_size = p.dim / p.n_heads, n_layers = p.n_layers;
  const std::uint64_t vocab = std::uint64_t(std::abs(p.vocab_size));
  std::map<std::string, std::uint64_t> at;
  std::uint64_t ptr = 0;
  at["token_embedding_table"] = ptr;
  ptr += vocab * p.dim;
  at["rms_att_weight"] = ptr;
  ptr += n_layers * p.dim;
  at["wq"] = ptr;
  ptr += n_layers * p.dim * (p.n_heads * head_size);
  at["wk"] = ptr;
  ptr += n_layers * p.dim * (p.n_kv_heads * head_size);
  at["wv"] = ptr;
  ptr += n_layers * p.dim * (p.n_kv_heads * head_size);
  at["wo"] = ptr;
  ptr += n_layers * (p.n_heads * head_size) * p.dim;
  at["rms_ffn_weight"] = ptr;
  ptr += n_layers * p.dim;
  at["w1"] = ptr;
  ptr += n_layers * p.dim * p.hidden_dim;
  at["w2"] = ptr;
  ptr += n_layers * p.hidden_dim * p.dim;
  at["w3"] = ptr;
  ptr += n_layers * p.dim * p.hidden_dim;
  at["rms_final_weight"] = ptr;
  ptr += p.dim;
  ptr += p.seq_len * head_size / 2;  // freq_cis_real
  ptr += p.seq_len * head_size / 2;  // freq_cis_imag
  at["wcls"] = ptr;
  if (p.vocab_size < 0) ptr += vocab * p.dim;
  *total = ptr;
  return at;
}

// A checkpoint whose i-th float is i: each tensor's first value says where it starts.
fs::path write_checkpoint(const fs::path& path, const Config& p, std::int64_t extra_bytes = 0) {
  std::uint64_t total = 0;
  run_c_offsets(p, &total);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&p), sizeof p);
  std::vector<float> v(total);
  for (std::uint64_t i = 0; i < total; ++i) v[i] = float(i);
  out.write(reinterpret_cast<const char*>(v.data()),
            std::streamsize(v.size() * 4 + std::min<std::int64_t>(extra_bytes, 0)));
  for (std::int64_t i = 0; i < extra_bytes; ++i) out.put('\0');
  return path;
}

std::string header_refusal(const fs::path& path) {
  try {
    attn::read_llama2c_header(path);
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()).find(path.filename().string() + ": not a llama2.c checkpoint: ") !=
          std::string::npos);
    CHECK_THROWS_AS(attn::llama2c_tensor_source(path), attn::InputError);
    CHECK(attn::detect_format(path) != FileFormat::llama2c_checkpoint);
    return e.what();
  }
  FAIL("accepted");
  return {};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("llama2c: tensors lie where run.c maps them, under Meta's names") {
  test::TempDir dir;
  for (const bool shared : {true, false}) {
    CAPTURE(shared);
    Config p;
    if (!shared) p.vocab_size = -p.vocab_size;
    const fs::path path = write_checkpoint(dir.path / "m.bin", p);
    std::uint64_t total = 0;
    const auto at = run_c_offsets(p, &total);
    const attn::Llama2cHeader h = attn::read_llama2c_header(path);
    CHECK(h.dim == 8);
    CHECK(h.hidden_dim == 12);
    CHECK(h.n_layers == 2);
    CHECK(h.n_heads == 4);
    CHECK(h.n_kv_heads == 2);
    CHECK(h.vocab_size == 10);
    CHECK(h.seq_len == 3);
    CHECK(h.shared_classifier == shared);
    CHECK(attn::detect_format(path) == FileFormat::llama2c_checkpoint);
    const auto source = attn::open_tensor_source(path);
    CHECK(source->names().size() == 2 + 9 * 2 + (shared ? 0 : 1));
    CHECK(source->contains("output.weight") == !shared);
    // name, run.c's array, the layer's slice in floats, shape.
    struct Want {
      std::string name, array;
      std::uint64_t layer_floats;
      std::vector<std::int64_t> shape;
    };
    const std::int64_t dim = 8, hidden = 12, kv_dim = 4;
    std::vector<Want> wants = {{"tok_embeddings.weight", "token_embedding_table", 0, {10, dim}},
                               {"norm.weight", "rms_final_weight", 0, {dim}}};
    if (!shared) wants.push_back({"output.weight", "wcls", 0, {10, dim}});
    for (int l = 0; l < 2; ++l) {
      const std::string L = "layers." + std::to_string(l) + ".";
      const std::uint64_t ul = std::uint64_t(l);
      wants.push_back({L + "attention_norm.weight", "rms_att_weight", ul * dim, {dim}});
      wants.push_back({L + "attention.wq.weight", "wq", ul * dim * dim, {dim, dim}});
      wants.push_back({L + "attention.wk.weight", "wk", ul * kv_dim * dim, {kv_dim, dim}});
      wants.push_back({L + "attention.wv.weight", "wv", ul * kv_dim * dim, {kv_dim, dim}});
      wants.push_back({L + "attention.wo.weight", "wo", ul * dim * dim, {dim, dim}});
      wants.push_back({L + "ffn_norm.weight", "rms_ffn_weight", ul * dim, {dim}});
      wants.push_back({L + "feed_forward.w1.weight", "w1", ul * hidden * dim, {hidden, dim}});
      wants.push_back({L + "feed_forward.w2.weight", "w2", ul * dim * hidden, {dim, hidden}});
      wants.push_back({L + "feed_forward.w3.weight", "w3", ul * hidden * dim, {hidden, dim}});
    }
    for (const Want& w : wants) {
      CAPTURE(w.name);
      const attn::SourceTensor t = source->tensor(w.name);
      CHECK(t.dtype == "F32");
      CHECK(t.type == attn::WeightType::f32);
      CHECK(t.shape == w.shape);
      CHECK(t.size == std::uint64_t(t.numel()) * 4);
      const float* f = reinterpret_cast<const float*>(t.data);
      CHECK(f[0] == float(at.at(w.array) + w.layer_floats));
      CHECK(f[t.numel() - 1] == float(at.at(w.array) + w.layer_floats + t.numel() - 1));
      CHECK(source->describe(w.name).data == nullptr);
    }
    CHECK_THROWS_WITH_AS(source->tensor("output.weight" + std::string(shared ? "" : "x")),
                         doctest::Contains("m.bin: tensor 'output.weight"), attn::InputError);
  }
}

TEST_CASE("llama2c: bad headers, truncation and overflow are refused naming the value") {
  test::TempDir dir;
  const fs::path path = dir.path / "bad.bin";
  SUBCASE("one byte short and one byte over") {
    write_checkpoint(path, Config{}, -1);
    CHECK(header_refusal(path).find("the header implies") != std::string::npos);
    write_checkpoint(path, Config{}, 1);
    CHECK(header_refusal(path).find("the header implies") != std::string::npos);
  }
  SUBCASE("the classifier's sign disagreeing with the size") {
    Config p;
    write_checkpoint(path, p);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    const std::int32_t negative = -p.vocab_size;
    f.write(reinterpret_cast<const char*>(&negative), 4);
    f.close();
    CHECK(header_refusal(path).find("the header implies") != std::string::npos);
  }
  SUBCASE("values that are not positive") {
    for (int field = 0; field < 7; ++field) {
      Config p;
      std::int32_t* v = &p.dim + field;
      for (std::int32_t bad : {0, -8, INT32_MIN}) {
        if (field == 5 && bad == -8) continue;  // a negative vocab_size is an unshared classifier
        *v = bad;
        write_bytes(path, std::string(reinterpret_cast<const char*>(&p), sizeof p) +
                              std::string(4096, '\0'));
        CHECK(header_refusal(path).find(" is " + std::to_string(bad)) != std::string::npos);
      }
    }
  }
  SUBCASE("heads that do not divide") {
    Config p;
    p.n_heads = 3;
    write_checkpoint(path, Config{});  // any size: the ints are wrong first
    write_bytes(path, std::string(reinterpret_cast<const char*>(&p), sizeof p));
    CHECK(header_refusal(path).find("dim 8 is not n_heads 3 heads of an even size") !=
          std::string::npos);
    p.n_heads = 8;  // head size 1: odd
    write_bytes(path, std::string(reinterpret_cast<const char*>(&p), sizeof p));
    CHECK(header_refusal(path).find("of an even size") != std::string::npos);
    p.n_heads = 4;
    p.n_kv_heads = 3;
    write_bytes(path, std::string(reinterpret_cast<const char*>(&p), sizeof p));
    CHECK(header_refusal(path).find("n_heads 4 is not a multiple of n_kv_heads 3") !=
          std::string::npos);
    p.n_kv_heads = 8;
    write_bytes(path, std::string(reinterpret_cast<const char*>(&p), sizeof p));
    CHECK(header_refusal(path).find("not a multiple of n_kv_heads 8") != std::string::npos);
  }
  SUBCASE("sizes that overflow 64 bits") {
    Config p{INT32_MAX - 1, INT32_MAX, INT32_MAX, 2, 2, INT32_MAX, INT32_MAX};
    p.dim = 1 << 30;
    write_bytes(path, std::string(reinterpret_cast<const char*>(&p), sizeof p));
    CHECK(header_refusal(path).find("overflow 64 bits") != std::string::npos);
  }
  SUBCASE("shorter than the header") {
    write_bytes(path, "abc");
    CHECK(header_refusal(path).find("3 bytes, too short for the 28-byte header") !=
          std::string::npos);
  }
}

TEST_CASE("llama2c: stories260K.bin holds the same weights as stories260K.gguf") {
  const fs::path bin = kModels / "stories260K.bin", gguf = kModels / "stories260K.gguf";
  if (!fs::exists(bin) || !fs::exists(gguf)) {
    MESSAGE("skipped: " << bin << " or " << gguf << " is absent");
    return;
  }
  const attn::Llama2cHeader h = attn::read_llama2c_header(bin);
  CHECK(h.dim == 64);
  CHECK(h.hidden_dim == 172);
  CHECK(h.n_layers == 5);
  CHECK(h.n_heads == 8);
  CHECK(h.n_kv_heads == 4);
  CHECK(h.vocab_size == 512);
  CHECK(h.seq_len == 512);
  CHECK(h.shared_classifier);
  CHECK(attn::detect_format(bin) == FileFormat::llama2c_checkpoint);
  const auto b = attn::open_tensor_source(bin);
  const auto g = attn::open_tensor_source(gguf);
  CHECK(b->names().size() == 2 + 9 * 5);  // tied: no output.weight
  CHECK(g->names().size() == 3 + 9 * 5);
  // The GGUF writes the tied head out as output.weight: the embeddings' bytes.
  std::vector<std::pair<std::string, std::string>> pairs = {
      {"token_embd.weight", "tok_embeddings.weight"},
      {"output.weight", "tok_embeddings.weight"},
      {"output_norm.weight", "norm.weight"}};
  for (int l = 0; l < 5; ++l) {
    const std::string G = "blk." + std::to_string(l) + ".", M = "layers." + std::to_string(l) + ".";
    // llama.cpp's llama keeps Meta's row order for q and k: the same bytes, not permuted.
    pairs.insert(pairs.end(), {{G + "attn_q.weight", M + "attention.wq.weight"},
                               {G + "attn_k.weight", M + "attention.wk.weight"},
                               {G + "attn_v.weight", M + "attention.wv.weight"},
                               {G + "attn_output.weight", M + "attention.wo.weight"},
                               {G + "attn_norm.weight", M + "attention_norm.weight"},
                               {G + "ffn_norm.weight", M + "ffn_norm.weight"},
                               {G + "ffn_gate.weight", M + "feed_forward.w1.weight"},
                               {G + "ffn_down.weight", M + "feed_forward.w2.weight"},
                               {G + "ffn_up.weight", M + "feed_forward.w3.weight"}});
  }
  for (const auto& pair : pairs) {
    const std::string &gname = pair.first, &mname = pair.second;  // clang 14: no binding captures
    CAPTURE(mname);
    const attn::SourceTensor gt = g->tensor(gname), bt = b->tensor(mname);
    CHECK(gt.shape == bt.shape);
    REQUIRE(gt.size == bt.size);
    CHECK(std::memcmp(gt.data, bt.data, gt.size) == 0);
  }
}

TEST_CASE("format: files told apart by content, not name") {
  test::TempDir dir;
  const fs::path golden = test::golden_dir();
  CHECK(attn::detect_format(golden / "gguf" / "v2_align64.gguf") == FileFormat::gguf);
  CHECK(attn::detect_format(golden / "mha_llama_interleaved" / "weights.safetensors") ==
        FileFormat::safetensors);
  CHECK(attn::detect_format(golden / "hf" / "llama_layers_1_3" / "model.safetensors.index.json") ==
        FileFormat::safetensors_index);
  CHECK(attn::detect_format(golden / "hf" / "llama_layers_1_3" / "config.json") ==
        FileFormat::json);
  CHECK(attn::detect_format(test::source_dir() / "fuzz" / "seeds" / "tokenizer" /
                            "byte_level.json") == FileFormat::tokenizer_json);
  write_bytes(dir.path / "tok.json", "\xEF\xBB\xBF \n{\"version\": \"1.0\", \"truncation\": null}");
  CHECK(attn::detect_format(dir.path / "tok.json") == FileFormat::tokenizer_json);
  // llama2.c's tokenizer.bin: max_token_length, then score, length and bytes per token.
  std::string tok;
  auto i32 = [&](std::int32_t v) { tok.append(reinterpret_cast<const char*>(&v), 4); };
  auto f32 = [&](float v) { tok.append(reinterpret_cast<const char*>(&v), 4); };
  i32(5);
  for (const std::string piece : {"<unk>", "<s>", "</s>", "a", " the"}) {
    f32(-1.5f);
    i32(std::int32_t(piece.size()));
    tok += piece;
  }
  write_bytes(dir.path / "tokenizer.bin", tok);
  CHECK(attn::detect_format(dir.path / "tokenizer.bin") == FileFormat::llama2c_tokenizer);
  write_bytes(dir.path / "short.bin", tok.substr(0, tok.size() - 1));
  CHECK(attn::detect_format(dir.path / "short.bin") == FileFormat::unknown);
  if (fs::exists(kModels / "tok512.bin"))
    CHECK(attn::detect_format(kModels / "tok512.bin") == FileFormat::llama2c_tokenizer);
  // A GGUF under any name.
  fs::copy_file(golden / "gguf" / "v3_align32.gguf", dir.path / "weights.safetensors");
  CHECK(attn::detect_format(dir.path / "weights.safetensors") == FileFormat::gguf);
  CHECK(attn::open_tensor_source(dir.path / "weights.safetensors")->contains("t.q8_0"));
  // What cannot be read is unknown: the reader it goes to says why.
  CHECK(attn::detect_format(dir.path / "absent") == FileFormat::unknown);
  CHECK(attn::detect_format(dir.path) == FileFormat::unknown);
  write_bytes(dir.path / "empty", "");
  CHECK(attn::detect_format(dir.path / "empty") == FileFormat::unknown);
  write_bytes(dir.path / "text.txt", "Once upon a time");
  CHECK(attn::detect_format(dir.path / "text.txt") == FileFormat::unknown);
}

TEST_CASE("format: a file given where another is expected says what it is") {
  test::TempDir dir;
  const std::string weights = "model weights (safetensors, GGUF or a llama2.c checkpoint)";
  auto refused = [&](const fs::path& p, const std::string& text) {
    CHECK_THROWS_WITH_AS(attn::open_tensor_source(p), (p.string() + ": " + text).c_str(),
                         attn::InputError);
  };
  const fs::path tok = test::source_dir() / "fuzz" / "seeds" / "tokenizer" / "byte_level.json";
  refused(tok, "a tokenizer.json file, not " + weights);
  refused(test::golden_dir() / "hf" / "llama_layers_1_3" / "config.json",
          "a JSON file, not " + weights);
  if (fs::exists(kModels / "tok512.bin"))
    refused(kModels / "tok512.bin", "a llama2.c tokenizer (tokenizer.bin), not " + weights);
  // The other layers' check.
  const fs::path gguf = test::golden_dir() / "gguf" / "v2_align64.gguf";
  const std::string want = gguf.string() + ": a GGUF model file, not a tokenizer (tokenizer.json)";
  CHECK_THROWS_WITH_AS(
      attn::expect_format(gguf, {FileFormat::tokenizer_json}, "a tokenizer (tokenizer.json)"),
      want.c_str(), attn::InputError);
  CHECK_NOTHROW(attn::expect_format(tok, {FileFormat::tokenizer_json}, "a tokenizer"));
  CHECK_NOTHROW(attn::expect_format(dir.path / "absent", {FileFormat::json}, "a config"));
  for (FileFormat f : {FileFormat::gguf, FileFormat::safetensors, FileFormat::safetensors_index,
                       FileFormat::llama2c_checkpoint, FileFormat::tokenizer_json,
                       FileFormat::llama2c_tokenizer, FileFormat::json, FileFormat::unknown})
    CHECK(std::string(attn::format_description(f)).rfind("a ", 0) == 0);
  // An index under another name is still read as one.
  fs::copy_file(test::golden_dir() / "hf" / "llama_layers_1_3" / "model.safetensors.index.json",
                dir.path / "idx.json");
  for (const auto& e : fs::directory_iterator(test::golden_dir() / "hf" / "llama_layers_1_3"))
    if (e.path().extension() == ".safetensors" &&
        e.path().filename().string().rfind("model", 0) == 0)
      fs::copy_file(e.path(), dir.path / e.path().filename());
  CHECK(!attn::open_tensor_source(dir.path / "idx.json")->names().empty());
}
