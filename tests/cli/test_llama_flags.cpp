// attn-cli as llama.cpp's users type it (issue 49): its long names as aliases, its multi-letter
// single-dash flags refused before CLI11 splits them, -f - for standard input, -n -1, the
// penalty flags, numbers that do not fit their flag's type, capacity errors naming every fix,
// and the messages of the first hour.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

std::string stories() {
  return (test::source_dir() / "weights" / "stories260K.gguf").string();
}

test::CliResult generate(const std::string& args) {
  return test::run_cli("generate -t 1 " + args);
}

// Refused with exit status 2 and one line holding each of `words`.
test::CliResult refused(const std::string& args, const std::vector<std::string>& words) {
  const test::CliResult r = generate(args);
  INFO(args);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  for (const std::string& w : words) CHECK(r.err.find(w) != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  return r;
}

// The text of a greedy run.
std::string text_of(const std::string& args) {
  const test::CliResult r = generate(args);
  INFO(args);
  INFO(r.err);
  CHECK(r.status == 0);
  return r.out;
}

}  // namespace

TEST_CASE("llama.cpp flags: its long names are aliases of attn-cli's") {
  const std::string ours = text_of("-m " + stories() + " -p Once -n 6 -c 64 -s 3");
  CHECK(!ours.empty());
  CHECK(text_of("--model " + stories() + " -p Once --n-predict 6 --ctx-size 64 --seed 3") == ours);
  CHECK(text_of("--model=" + stories() + " -p Once --n-predict=6 --ctx-size=64") == ours);
  const fs::path prompt = test::temp_path("llama_prompt.txt");
  std::ofstream(prompt) << "Once";
  CHECK(text_of("-m " + stories() + " --file " + prompt.string() + " -n 6") == ours);
  // --temp, --top-k, --top-p, --min-p, --seed: llama.cpp's names already.
  CHECK(generate("-m " + stories() +
                 " -p Once -n 2 --temp 0.8 --top-k 10 --top-p 0.9 "
                 "--min-p 0.1 --seed 7")
            .status == 0);
}

TEST_CASE("llama.cpp flags: -f - and -f /dev/stdin read standard input") {
  const std::string ours = text_of("-m " + stories() + " -p Once -n 6");
  for (const std::string file : {"-", "/dev/stdin"}) {
    CAPTURE(file);
    const test::CliResult r =
        test::run_shell("{ printf Once | " + std::string(ATTN_CLI) + " generate -t 1 -m " +
                        stories() + " -f " + file + " -n 6; }");
    CHECK(r.status == 0);
    CHECK(r.out == ours);
  }
}

TEST_CASE("llama.cpp flags: multi-letter single-dash flags are never split") {
  const std::string m = "-m " + stories() + " -p Once ";
  refused(m + "-ngl 99", {"-ngl", "--n-gpu-layers", "GPU", "CPU"});
  refused(m + "--n-gpu-layers 99", {"--n-gpu-layers", "GPU"});
  refused(m + "-cnv", {"-cnv", "attn-cli chat"});
  refused(m + "-sys hi", {"-sys", "attn-cli chat"});
  refused(m + "-fa", {"-fa", "leave it out"});
  refused(m + "-tb 2", {"-tb", "--threads"});
  refused(m + "-hf some/repo", {"-hf", "-m FILE"});
  refused(m + "--prompt-cache p.bin", {"--prompt-cache", "--save-session", "--load-session"});
  // Never "could not convert: --steps = gl".
  CHECK(generate(m + "-ngl 99").err.find("--steps") == std::string::npos);
  // -no-cnv is what generate does anyway; after "--" a word is a value.
  CHECK(text_of(m + "-n 6 -no-cnv") == text_of(m + "-n 6"));
}

TEST_CASE("llama.cpp flags: -n -1 generates until the end of text or a full context") {
  const test::CliResult r = generate("-m " + stories() + " --tokens 1,403 -n -1 -c 12 --json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The prompt's 2 positions and 10 tokens fill the 12 (or a token ended the text before).
  const std::size_t tokens = std::size_t(std::count(r.out.begin(), r.out.end(), '\n')) - 3;
  CHECK(tokens >= 1);
  CHECK(tokens <= 10);
  CHECK(text_of("-m " + stories() + " -p Once -n -1 -c 10").size() >=
        text_of("-m " + stories() + " -p Once -n 1 -c 10").size());
  refused("-m " + stories() + " -p Once -n -2", {"--steps", "-2"});
}

TEST_CASE("flags: a number that does not fit its flag's type is refused naming the flag") {
  const std::string m = "-m " + stories() + " -p Once ";
  refused(m + "--steps 99999999999999999999", {"--steps", "out of range", "99999999999999999999"});
  refused(m + "-n 99999999999999999999", {"--steps", "out of range"});
  refused(m + "-c 99999999999999999999", {"--max-seq-len", "out of range"});
  refused(m + "-t 99999999999", {"--threads", "out of range"});
  refused(m + "--top-k 1.5", {"--top-k", "integer", "1.5"});
  refused(m + "--seed -1", {"--seed", "2^64 - 1", "-1"});
  refused(m + "--temp 1e999", {"--temp", "range", "1e999"});
  refused(m + "--repeat-last-n 3x", {"--repeat-last-n", "integer", "3x"});
  refused(m + "--repeat-penalty nan", {"--repeat-penalty", "nan"});
  refused(m + "--repeat-penalty 0", {"repeat_penalty", "--repeat-penalty"});
}

TEST_CASE("flags: a capacity error names every setting that fixes it") {
  const std::string m = "-m " + stories() + " ";
  // Today's "32 steps cannot fit the cache ... (set with --steps)": the prompt alone is over the
  // cache, so only --max-seq-len fixes it.
  const test::CliResult over =
      refused(m + "-p 'Once upon a time there was' -c 3",
              {"prompt's 7 tokens and 32 steps", "max_seq_len is 3", "(set with --max-seq-len)"});
  CHECK(over.err.find("--steps") == std::string::npos);
  refused(m + "-p Once -n 100 -c 50",
          {"prompt's 2 tokens and 100 steps", "(set with --max-seq-len or --steps)"});
  refused(m + "-p Once -n 40 -c 41", {"prompt's 2 tokens and 40 steps", "positions 0..41",
                                      "(set with --max-seq-len or --steps)"});
  refused(m + "-p 'Once upon a time there was' -c 3 -n 0", {"(set with --max-seq-len)"});
  // A session of 8 positions continued with -c 4.
  const fs::path s = test::temp_path("llama_flags_session.safetensors");
  REQUIRE(generate(m + "--tokens 1,403,407,408 -n 4 --save-session " + s.string()).status == 0);
  refused(m + "--load-session " + s.string() + " -c 4 -n 2",
          {"holds 8 positions", "max_seq_len 4", "(set with --max-seq-len)"});
}

TEST_CASE("first hour: generate without a model, or with a file that is none, asks for one") {
  const std::string readme = (test::source_dir() / "README.md").string();
  for (const std::string& args : {std::string("-p hi"), "-m " + readme + " -p hi"}) {
    CAPTURE(args);
    const test::CliResult r = test::run_cli("generate " + args);
    INFO(r.err);
    CHECK(r.status == 2);
    for (const char* w : {"-m", "GGUF", "safetensors", "config.json", "llama2.c", "Hugging Face",
                          "weights/stories260K.gguf"})
      CHECK(r.err.find(w) != std::string::npos);
    CHECK(r.err.find("no config") == std::string::npos);
  }
  // A folder of GGUF files and no config.json: the file inside.
  const fs::path dir = test::temp_path("gguf_folder");
  fs::create_directories(dir);
  fs::copy_file(stories(), dir / "model.gguf", fs::copy_options::overwrite_existing);
  const test::CliResult r = test::run_cli("generate -m " + dir.string() + " -p hi");
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("-m " + (dir / "model.gguf").string()) != std::string::npos);
}
