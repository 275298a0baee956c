// Files that are not models, given where a model is (issue 47, cause 5): one "what is this file"
// step before any reader (io/format.hpp's check_model_format) names the file, what it looks
// like and what is read, through the library (open_model), `run -m`, `run --weights`,
// `generate` and `tokenize -m` alike; never "no config" or "a file of unknown format".
// tests/python/test_files_not_models.py checks Python's from_pretrained on the same files.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attn/engine/open.hpp"
#include "attn/error.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

constexpr const char* kAccepted =
    "GGUF, safetensors (or its index), a llama2.c checkpoint or a Hugging Face folder are read";

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

// stories260K.bin with header int `field` set to `value`.
fs::path with_header(const std::string& name, int field, std::int32_t value) {
  std::string b = read_all(test::source_dir() / "weights" / "stories260K.bin");
  REQUIRE(b.size() > 28);
  std::memcpy(b.data() + 4 * field, &value, 4);
  const fs::path p = test::temp_path(name);
  write_all(p, b);
  return p;
}

fs::path cut(const std::string& name, const fs::path& from, std::size_t bytes) {
  const fs::path p = test::temp_path(name);
  write_all(p, read_all(from).substr(0, bytes));
  return p;
}

struct NotModel {
  fs::path path;
  std::string says;  // after "<file>: "
};

// The inputs, each with what the library says of it (after the file's name).
std::vector<NotModel> not_models() {
  const fs::path weights = test::source_dir() / "weights";
  const fs::path fifo = test::temp_path("a.fifo");
  if (!fs::exists(fifo)) REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string looks = std::string("not a model file: it looks like ");
  const std::string tail = std::string("; ") + kAccepted;
  const std::string size = std::to_string(fs::file_size(weights / "stories260K.bin"));
  return {
      {with_header("dim.bin", 0, -5),
       looks + "a llama2.c checkpoint whose header dim is -5" + tail},
      {with_header("seq.bin", 6, 0),
       looks + "a llama2.c checkpoint whose header seq_len is 0" + tail},
      // run.c's sizes for stories260K's header with one unshared output row: 28 + 4 * (64 +
      // 5 * (2 * 64 + 2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64) + 64 + 512 * 8 + 64) bytes.
      {with_header("vocab.bin", 5, -1),
       looks + "a llama2.c checkpoint whose header implies 925980 bytes, the file has " + size +
           " (a negative vocab_size -1 says its classifier is stored apart)" + tail},
      {cut("cut.bin", weights / "stories260K.bin", 1000),
       looks + "a llama2.c checkpoint whose header implies " + size +
           " bytes, the file has 1000 (cut short)" + tail},
      {cut("cut.gguf", weights / "stories260K.gguf", 5000),
       "a GGUF file cut short at byte 5000: key 'tokenizer.ggml.tokens': array element 370 length "
       "at offset 4996 needs 8 bytes, past the end of the file (5000 bytes)"},
      {test::source_dir() / "README.md", looks + "text" + tail},
      {fifo, "the weights file is a FIFO, not a regular file"},
      {"/dev/zero", "the weights file is a character device, not a regular file"},
  };
}

std::string refusal(const fs::path& p) {
  try {
    attn::open_model(test::spec_of(p));
  } catch (const attn::InputError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("not models: the library names each file and what it looks like") {
  for (const NotModel& m : not_models()) {
    CAPTURE(m.path);
    CHECK(refusal(m.path) == m.path.string() + ": " + m.says);
  }
}

TEST_CASE(
    "not models: run -m, run --weights and tokenize -m say the same, generate names the file") {
  for (const NotModel& m : not_models()) {
    const std::string want = "attn-cli: error: " + m.path.string() + ": " + m.says;
    for (const std::string& args :
         {std::string("run -m '") + m.path.string() + "' --tokens 1",
          "run --weights '" + m.path.string() + "' --config '" +
              (test::source_dir() / "configs" / "mha.json").string() + "'",
          "generate -m '" + m.path.string() + "' -p hi -n 1",
          "tokenize -m '" + m.path.string() + "' --prompt hi"}) {
      const test::CliResult r = test::run_cli(args);
      INFO(args << "\nstderr: " << r.err);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      // generate may name a file of no format in its own first-hour words (hflags' "not a model
      // file; -m takes ..."): the file and that it is no model, never "no config".
      if (args.starts_with("generate"))
        CHECK(r.err.find("attn-cli: error: " + m.path.string() + ": ") == 0);
      else
        CHECK(r.err.find(want) == 0);
      CHECK(r.err.find("no config") == std::string::npos);
      CHECK(r.err.find("unknown format") == std::string::npos);
      CHECK(r.err.find("header length") == std::string::npos);
    }
  }
}

TEST_CASE("not models: tokenize -m on a folder or a model without a tokenizer names it") {
  const fs::path dir = test::temp_path("a folder");
  fs::create_directories(dir);
  test::CliResult r = test::run_cli("tokenize -m '" + dir.string() + "' --prompt hi");
  CHECK(r.status == 2);
  CHECK(r.err.find(dir.string() + ": the weights file is a directory, not a regular file") !=
        std::string::npos);
  const fs::path bin = test::source_dir() / "weights" / "stories260K.bin";
  r = test::run_cli("tokenize -m '" + bin.string() + "' --prompt hi");
  CHECK(r.status == 2);
  CHECK(r.err.find(bin.string() + ": a llama2.c checkpoint, which holds no tokenizer") !=
        std::string::npos);
}

TEST_CASE("not models: a binary file of no format given as the config is named as such") {
  const fs::path p = with_header("config dim.bin", 0, -5);
  const test::CliResult r = test::run_cli("run --config '" + p.string() + "'");
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find(p.string() +
                   ": not a config: it looks like a llama2.c checkpoint whose header dim is -5; a "
                   "JSON config, a GGUF or a llama2.c checkpoint are read") != std::string::npos);
}
