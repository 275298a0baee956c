// Hostile files, odd paths and long runs (issue 6): each failure found by hand or by fuzzing,
// kept as a regression test. Every bad input must give exit status 2 and one short message
// naming the file and the key or tensor, quickly, with nothing left behind; a value that turns
// non-finite during the run gives exit status 1 with the trace so far kept.
#include <doctest/doctest.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/io/text.hpp"
#include "attn/model/memory.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using test::TempDir;

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out.write(text.data(), std::streamsize(text.size()));
  REQUIRE(out.good());
}

std::string q(const fs::path& p) {
  return "'" + p.string() + "'";
}

// A hang fails the test (exit 124) instead of stalling CI.
test::CliResult cli(const std::string& args) {
  return test::run_cli("run " + args);
}

std::string timeout_cli(const std::string& args) {
  return "timeout 20 " + std::string(ATTN_CLI) + " run " + args;
}

// Exit 2, one line on stderr containing every needle, nothing on stdout.
test::CliResult refused(const std::string& args, const std::vector<std::string>& needles) {
  const test::CliResult r = cli(args);
  INFO("attn-cli run " << args << "\nstderr: " << r.err.substr(0, 2000));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.size() < 2000);
  for (const std::string& n : needles) CHECK_MESSAGE(r.err.find(n) != std::string::npos, n);
  return r;
}

fs::path gqa(const std::string& file) {
  return test::golden_dir() / "seed_gqa" / file;
}

struct Tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

std::vector<Tensor> read_tensors(const fs::path& p) {
  const attn::SafetensorsFile f = attn::open_safetensors(p);
  std::vector<Tensor> out;
  for (const auto& [name, info] : f.header.tensors) {
    std::vector<float> storage;
    const float* v = attn::tensor_as_f32(f, name, storage);
    out.push_back({name, info.shape, std::vector<float>(v, v + info.numel())});
  }
  return out;
}

void write_tensors(const fs::path& p, const std::vector<Tensor>& tensors) {
  std::vector<attn::OutTensor> out;
  for (const Tensor& t : tensors) out.push_back({t.name, t.shape, t.values.data()});
  attn::write_safetensors(p, out);
}

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[std::size_t(i)] = char((v >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

// ---- The heap overflow ----

TEST_CASE("hostile: batched decode of an FFN wider than one block runs clean") {
  TempDir dir;
  const fs::path cfg = dir.path / "wide_ffn.json";
  write_text(
      cfg, R"({"dim":128,"n_heads":2,"multiple_of":1,"ffn_dim_multiplier":64,"max_batch_size":2})");
  const test::CliResult r = cli("--config " + q(cfg) + " --batch 2 --prefill 2 --steps 1 -t 2");
  INFO(r.err);
  CHECK(r.status == 0);
}

// ---- Configs ----

TEST_CASE("hostile: a config nested 100000 levels deep is refused without a crash") {
  TempDir dir;
  const fs::path cfg = dir.path / "deep.json";
  write_text(cfg, "{\"dim\":" + std::string(100000, '[') + std::string(100000, ']') + "}");
  refused("--config " + q(cfg), {cfg.string(), "nested deeper than 64", "'dim'"});
}

TEST_CASE("hostile: a config over 1 MiB is refused before it is read") {
  TempDir dir;
  const fs::path cfg = dir.path / "huge.json";
  write_text(cfg, R"({"dim":18,"n_heads":")" + std::string(64 << 20, 'A') + "\"}");
  refused("--config " + q(cfg), {cfg.string(), "over the limit of 1048576"});
}

TEST_CASE("hostile: a long string value is shown as a short excerpt") {
  TempDir dir;
  const fs::path cfg = dir.path / "long.json";
  write_text(cfg, R"({"dim":18,"n_heads":")" + std::string(900 << 10, 'A') + "\"}");
  const test::CliResult r = refused("--config " + q(cfg), {cfg.string(), "'n_heads'", "..."});
  CHECK(r.err.size() < 300);
}

TEST_CASE("hostile: FIFOs and devices as inputs are refused at once") {
  TempDir dir;
  const fs::path fifo = dir.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const char* flag : {"--config", "--weights", "--input"}) {
    CAPTURE(flag);
    const int status = std::system(
        (timeout_cli(std::string(flag) + " " + q(fifo)) + " >/dev/null 2>/dev/null </dev/null")
            .c_str());
    CHECK(WEXITSTATUS(status) == 2);  // 124: it blocked until the timeout
    refused(std::string(flag) + " " + q(fifo), {fifo.string(), "a FIFO, not a regular file"});
  }
  refused("--config /dev/zero", {"/dev/zero", "character device, not a regular file"});
  refused("--weights /dev/zero", {"/dev/zero", "character device"});
  refused("--config " + q(dir.path), {dir.path.string(), "a directory"});
}

TEST_CASE("hostile: duplicate config keys are refused naming the key") {
  TempDir dir;
  const fs::path cfg = dir.path / "dup.json";
  write_text(cfg, R"({"dim":18,"n_heads":6,"rope":"none","dim":24})");
  refused("--config " + q(cfg), {cfg.string(), "'dim'", "twice"});
}

TEST_CASE("hostile: numbers out of range name the file and the key") {
  TempDir dir;
  const fs::path cfg = dir.path / "big.json";
  write_text(cfg, R"({"dim":18,"n_heads":6,"rope":"none","rope_theta":1e400})");
  refused("--config " + q(cfg), {cfg.string(), "'rope_theta'"});
  write_text(cfg, R"({"dim":18,"n_heads":6,"rope":"none","rope_theta":1e-310})");
  refused("--config " + q(cfg), {cfg.string(), "'rope_theta'", "normal"});
  write_text(cfg, R"({"dim":1,"n_heads":1,"rope":"none","ffn_dim_multiplier":0.1})");
  refused("--config " + q(cfg), {cfg.string(), "'ffn_dim_multiplier'", "rounds to 0"});
  write_text(cfg, R"({"dim":18,"n_heads":99999999999999999999999})");
  refused("--config " + q(cfg), {cfg.string(), "'n_heads'"});
}

TEST_CASE("hostile: escape sequences and newlines from a file reach stderr escaped") {
  TempDir dir;
  const fs::path cfg = dir.path / "esc.json";
  write_text(cfg,
             "{\"dim\":18,\"n_heads\":6,\"rope\":\"none\",\"a\\u001b[31m\\nattn-cli: error: "
             "forged\":1,\"x\":1,\"y\":2,\"z\":3}");
  const test::CliResult r = cli("--config " + q(cfg) + " --steps 1");
  CHECK(r.status == 0);
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.err.find("\\x1b[31m\\x0aattn-cli: error: forged") != std::string::npos);
  CHECK(r.err.find("4 unknown keys, e.g.") != std::string::npos);
  CHECK(r.err.find("\nattn-cli: error") == std::string::npos);
}

// ---- Flags ----

TEST_CASE("hostile: empty paths and out-of-range seeds are refused") {
  for (const char* flag : {"--config", "--weights", "--input", "--dump"}) {
    CAPTURE(flag);
    refused(std::string(flag) + " ''", {flag, "must not be empty"});
  }
  refused("--seed 18446744073709551616", {"--seed", "2^64 - 1"});
  refused("--seed 99999999999999999999999999", {"--seed"});
  CHECK(cli("--seed 18446744073709551615 --steps 1").status == 0);
}

// ---- Memory ----

TEST_CASE("hostile: runs larger than memory are refused before any allocation") {
  TempDir dir;
  const fs::path cfg = dir.path / "c.json";
  write_text(cfg, R"({"dim":4096,"n_heads":32,"n_layers":16777216})");
  refused("--config " + q(cfg), {"memory", "largest part is the weights"});
  // A cache far past memory for a short run: it would write little, but reserves it all.
  write_text(cfg, R"({"dim":4096,"n_heads":32,"max_seq_len":16777216,"max_batch_size":1024})");
  refused("--config " + q(cfg),
          {"reserves", "largest reservation is the KV cache", "(set with --max-seq-len)"});
  // Every size at the cap: products far past 2^64.
  write_text(cfg, R"({"dim":16777216,"n_heads":16777216,"n_layers":16777216,"rope":"none",
                      "block":"attention","max_seq_len":16777216,"max_batch_size":16777216})");
  refused("--config " + q(cfg) + " --batch 16777216 --prefill 16777216 --steps 0", {"2^64"});
  // Scratch per thread: 1024 threads over a long cache.
  write_text(cfg,
             R"({"dim":8,"n_heads":1,"rope":"none","max_batch_size":1,"max_seq_len":16777216})");
  refused("--config " + q(cfg) + " --threads 1024 --prefill 1 --steps 1",
          {"largest reservation is the attention scratch (per thread)"});
}

TEST_CASE("memory: every part is listed and products past 2^64 are refused") {
  attn::ModelArgs a = attn::llama3_8b_layer_args();
  const auto parts = attn::memory_parts(a, {1, 512, 128, 512, 2, true});
  std::vector<std::string> names;
  for (const auto& p : parts) names.push_back(p.name);
  for (const char* want :
       {"weights", "KV cache", "RoPE table", "activations", "attention or FFN activations",
        "packed rows", "attention scratch (per thread)", "input", "outputs", "dump (cache copies)"})
    CHECK_MESSAGE(std::find(names.begin(), names.end(), want) != names.end(), want);
  // wq, wo [4096, 4096]; wk, wv [1024, 4096]; w1, w2, w3 [14336, 4096]; two norms [4096]
  CHECK(parts[0].bytes == (2ull * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096) * 4);
  CHECK_THROWS_AS(attn::checked_product({1ll << 32, 1ll << 32}, "x"), attn::InputError);
  CHECK_THROWS_AS(attn::checked_product({-1, 4}, "x"), attn::InputError);
  CHECK(attn::checked_product({1ll << 31, 1ll << 32}, "x") == 1ull << 63);
  CHECK_NOTHROW(attn::check_memory(parts, {1ull << 40, "MemAvailable"}));
  try {
    attn::check_memory(parts, {1 << 20, "MemAvailable"});
    FAIL("no error");
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()).find("largest part is the weights") != std::string::npos);
  }
}

// ---- Weights and input ----

TEST_CASE("hostile: NaN and Inf in weights or input are refused naming the tensor and index") {
  TempDir dir;
  const fs::path w = dir.path / "w.safetensors", x = dir.path / "x.safetensors";
  std::vector<Tensor> weights = read_tensors(gqa("weights.safetensors"));
  weights[1].values[5] = std::numeric_limits<float>::quiet_NaN();
  write_tensors(w, weights);
  refused("--config " + q(gqa("config.json")) + " --weights " + q(w),
          {w.string(), "'" + weights[1].name + "'", "NaN at flat index 5"});
  std::vector<Tensor> input = read_tensors(gqa("input.safetensors"));
  input[0].values[40] = -std::numeric_limits<float>::infinity();
  write_tensors(x, input);
  refused("--config " + q(gqa("config.json")) + " --input " + q(x),
          {x.string(), "'x'", "-Inf at flat index 40"});
}

TEST_CASE("hostile: a value turning non-finite mid-run names layer and step and keeps the trace") {
  TempDir dir;
  const fs::path x = dir.path / "x.safetensors";
  std::vector<Tensor> input = read_tensors(gqa("input.safetensors"));
  for (std::int64_t i = 0; i < 18; ++i) input[0].values[std::size_t(8 * 18 + i)] = 3e38f;
  write_tensors(x, input);  // position 8 (decode step 2 after a prefill of 7) overflows wq x
  const test::CliResult r =
      cli("--config " + q(gqa("config.json")) + " --weights " + q(gqa("weights.safetensors")) +
          " --input " + q(x) + " --prefill 7 --steps 3 --json");
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find("decode step 2: a non-finite value appeared in the output of layer 0 at "
                   "position 8") != std::string::npos);
  CHECK(r.out.find("\"event\":\"prefill\"") != std::string::npos);
  CHECK(r.out.find("\"step\":1") != std::string::npos);
  CHECK(r.out.find("\"step\":2") == std::string::npos);
}

TEST_CASE("hostile: unused tensors are summarised in one warning with escaped names") {
  TempDir dir;
  const fs::path w = dir.path / "w.safetensors";
  std::vector<Tensor> tensors = read_tensors(gqa("weights.safetensors"));
  tensors.push_back({"evil\x1b[2J\nattn-cli: error: forged", {1}, {0.0f}});
  for (int i = 0; i < 50000; ++i) tensors.push_back({"unused." + std::to_string(i), {0}, {}});
  write_tensors(w, tensors);
  const test::CliResult r =
      cli("--config " + q(gqa("config.json")) + " --weights " + q(w) + " --steps 1");
  CHECK(r.status == 0);
  CHECK(r.err.find("50001 tensors, e.g.") != std::string::npos);
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.err.size() < 1000);
}

TEST_CASE("hostile: a NUL byte after the safetensors header is refused") {
  TempDir dir;
  const fs::path w = dir.path / "nul.safetensors";
  const std::string header = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  write_text(w, le64(header.size() + 1) + header + std::string(1, '\0') + std::string(4, '\0'));
  CHECK_THROWS_WITH_AS(attn::open_safetensors(w), doctest::Contains("NUL byte"), attn::InputError);
}

TEST_CASE("hostile: a header with a million-dimension shape gives a short message") {
  TempDir dir;
  const fs::path w = dir.path / "shape.safetensors";
  std::string dims;
  for (int i = 0; i < 200000; ++i) dims += (i ? ",1099511627776" : "1099511627776");
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[)" + dims + R"(],"data_offsets":[0,4]}})";
  write_text(w, le64(header.size()) + header + std::string(4, '\0'));
  const test::CliResult r = cli("--weights " + q(w));
  CHECK(r.status == 2);
  CHECK(r.err.find("an array of more than 1024 elements") != std::string::npos);
  CHECK(r.err.size() < 1000);
}

// A mapped weights file that shrinks under the run: apps/test_cli_signals.cpp (attn-cli's SIGBUS
// handler names it).

// The output files' rules: cli/test_outputs.cpp.

// ---- Long runs ----

TEST_CASE("hostile: a run to the full cache works and one step more is refused before work") {
  const test::CliResult full = cli("--prefill 7 --steps 10 --json");  // max_seq_len 17
  CHECK(full.status == 0);
  CHECK(full.out.find("\"step\":10") != std::string::npos);
  const test::CliResult over = refused("--prefill 7 --steps 11", {"the cache is full", "17"});
  CHECK(over.out.empty());
}

TEST_CASE("text: escape cuts and escapes and summarise counts") {
  CHECK(attn::escape("a\x1b[1m\n\x7f", 100) == "a\\x1b[1m\\x0a\\x7f");
  CHECK(attn::escape(std::string(300, 'a'), 10) == std::string(10, 'a') + "...");
  // C1 controls (U+009B is CSI), separators and bidi overrides; lone and overlong bytes.
  CHECK(attn::escape("a\xc2\x9b"
                     "31mb") == "a\\u009b31mb");
  CHECK(attn::escape("x\xe2\x80\xaey\xe2\x80\xa8z") == "x\\u202ey\\u2028z");
  CHECK(attn::escape("\x9b\xc0\xaf\xed\xa0\x80") == "\\x9b\\xc0\\xaf\\xed\\xa0\\x80");
  CHECK(attn::escape("caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80") ==
        "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80");
  CHECK(attn::escape("\xe2\x96", 100) == "\\xe2\\x96");  // cut short
  CHECK(attn::summarise({"a", "b", "c", "d"}, "tensors") == "4 tensors, e.g. 'a', 'b', 'c'");
}
