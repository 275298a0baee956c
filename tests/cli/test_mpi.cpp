// Model parallel under mpirun (built only with MPI): K ranks give the single process's dump on
// the golden cases, per-rank files give the whole file's, and every refusal ends every rank
// with exit status 2 within seconds.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attn/io/safetensors.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using test::TempDir;

// Open MPI allocates at start-up what it never frees: LeakSanitizer would fail every rank of
// the ASan build at exit, so leak checking is off inside mpirun (ASan itself stays on). Open
// MPI's session directories go under this test process's own directory: two mpiruns starting
// at once (ctest -j2 runs two of these cases side by side) raced to create /tmp/ompi.<host>.<uid>
// and the loser failed with "mkdir ... File exists" (Open MPI issue #8510, seen once in CI).
std::string mpirun(int ranks) {
  return "ASAN_OPTIONS=detect_leaks=0:$ASAN_OPTIONS timeout 60 " ATTN_MPIEXEC
         " --allow-run-as-root --oversubscribe --mca orte_tmpdir_base " +
         test::temp_dir().string() + " -np " + std::to_string(ranks) + " " ATTN_CLI;
}

// A copy of `config` with model_parallel_size K, in dir.
fs::path config_for(const fs::path& config, int K, const fs::path& dir) {
  std::ifstream in(config);
  json j = json::parse(in);
  j["model_parallel_size"] = K;
  const fs::path out = dir / ("config_mp" + std::to_string(K) + ".json");
  std::ofstream(out) << j.dump();
  return out;
}

struct Golden {
  std::string name;
  std::int64_t prefill, steps;
};

Golden golden(const std::string& name) {
  std::ifstream in(test::golden_dir() / "cases.json");
  for (const auto& c : json::parse(in))
    if (c.at("name") == name) return {name, c.at("prefill"), c.at("steps")};
  FAIL("no golden case " << name);
  return {};
}

std::string golden_args(const Golden& g, const fs::path& config, const std::string& weights) {
  const fs::path dir = test::golden_dir() / g.name;
  return " run --config " + config.string() + " --weights '" + (dir / weights).string() +
         "' --input " + (dir / "input.safetensors").string() + " --prefill " +
         std::to_string(g.prefill) + " --steps " + std::to_string(g.steps) + " --threads 1";
}

// Every tensor of `expected` is in `got` with its shape, within 1e-5 + 1e-4 |x|.
double compare_files(const fs::path& expected_path, const fs::path& got_path) {
  return test::compare_files(got_path, expected_path).worst_ratio;
}

// K ranks on golden case `name`: the dump equals the single process's, tensor for tensor
// (same names and shapes), and the PyTorch reference; the trace is printed once.
void check_golden(const std::string& name, int K) {
  CAPTURE(name);
  CAPTURE(K);
  TempDir tmp;
  const Golden g = golden(name);
  const fs::path config = test::golden_dir() / name / "config.json";
  const fs::path single = tmp.path / "single.safetensors", multi = tmp.path / "multi.safetensors";
  const test::CliResult one =
      test::run_cli(golden_args(g, config, "weights.safetensors") + " --dump " + single.string());
  INFO(one.err);
  REQUIRE(one.status == 0);
  const test::CliResult r = test::run_shell(
      mpirun(K) + golden_args(g, config_for(config, K, tmp.path), "weights.safetensors") +
      " --dump " + multi.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("model parallel: " + std::to_string(K) + " ranks") != std::string::npos);
  std::istringstream lines(r.out);
  int prefills = 0;
  for (std::string l; std::getline(lines, l);) prefills += l.starts_with("prefill:");
  CHECK(prefills == 1);  // rank 0 alone prints
  CHECK(attn::open_safetensors(single).header.tensors.size() ==
        attn::open_safetensors(multi).header.tensors.size());
  const double vs_single = compare_files(single, multi);
  const double vs_torch = compare_files(test::golden_dir() / name / "expected.safetensors", multi);
  MESSAGE("mpi " << name << " K " << K << ": " << vs_single << " of tolerance against one "
                 << "process, " << vs_torch << " against PyTorch");
}

struct Timed {
  test::CliResult r;
  double seconds;
};

Timed timed(const std::string& command) {
  const auto t0 = std::chrono::steady_clock::now();
  test::CliResult r = test::run_shell(command);
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

// Refused with exit status 2, every rank gone within seconds, the message naming `culprit`.
void check_refused(const std::string& command, const std::string& culprit) {
  CAPTURE(command);
  const Timed t = timed(command);
  INFO(t.r.err);
  CHECK(t.r.status == 2);
  CHECK(t.seconds < 20);
  CHECK(t.r.err.find(culprit) != std::string::npos);
  CHECK(t.r.out.empty());
}

}  // namespace

TEST_CASE("mpi: 2 ranks give the single process's dump on every golden case whose heads split") {
  // Both blocks, the three RoPE layouts, biases, batch 2, 3 layers, F16 weights.
  for (const char* name :
       {"seed_gqa", "gqa_llama_interleaved_b2", "attention_bias_interleaved",
        "llama_3layers_ffnmult_half", "f16_llama_gqa_interleaved", "mha_llama_interleaved"})
    check_golden(name, 2);
}

TEST_CASE("mpi: a Hugging Face config.json splits over mpirun's ranks with no key for it") {
  TempDir tmp;
  const fs::path d = test::golden_dir() / "hf" / "llama31_gqa_bf16";
  const std::string args = " run --config " + (d / "config.json").string() + " --weights " +
                           (d / "model.safetensors.index.json").string() + " --input " +
                           (d / "input.safetensors").string() +
                           " --prefill 5 --steps 3 --max-seq-len 16 --dump ";
  const fs::path single = tmp.path / "single.safetensors", multi = tmp.path / "multi.safetensors";
  const test::CliResult one = test::run_cli(args + single.string());
  INFO(one.err);
  REQUIRE(one.status == 0);
  const test::CliResult r = test::run_shell(mpirun(2) + args + multi.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("model parallel: 2 ranks") != std::string::npos);
  MESSAGE("mpi hf: " << compare_files(single, multi) << " of tolerance against one process");
  // --model-parallel says it too, and must agree with mpirun.
  const test::CliResult three =
      test::run_shell(mpirun(2) + args + multi.string() + " --model-parallel 3");
  CHECK(three.status == 2);
  CHECK(three.err.find("model_parallel_size 3") != std::string::npos);
  CHECK(three.err.find("(set with --model-parallel)") != std::string::npos);
}

TEST_CASE("mpi: 3 ranks where the heads divide by 3") {
  check_golden("mha_attention_half", 3);
}

TEST_CASE("mpi: per-rank files ({rank}) give the same dump as the whole file") {
  for (auto [name_, K] :
       {std::pair{"gqa_llama_interleaved_b2", 2}, std::pair{"attention_bias_interleaved", 2},
        std::pair{"mha_attention_half", 3}}) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(name);
    TempDir tmp;
    const Golden g = golden(name);
    const fs::path config = config_for(test::golden_dir() / name / "config.json", K, tmp.path);
    const fs::path whole = tmp.path / "whole.safetensors", split = tmp.path / "split.safetensors";
    const test::CliResult a = test::run_shell(
        mpirun(K) + golden_args(g, config, "weights.safetensors") + " --dump " + whole.string());
    const test::CliResult b =
        test::run_shell(mpirun(K) + golden_args(g, config, "weights.rank{rank}.safetensors") +
                        " --dump " + split.string());
    INFO(a.err << b.err);
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK(compare_files(whole, split) == 0.0);  // the same numbers, read two ways
  }
}

TEST_CASE(
    "mpi: seeded weights on 2 ranks are the one seeded model and the JSON trace has local shapes") {
  TempDir tmp;
  const fs::path config = test::source_dir() / "configs" / "llama-tiny.json";
  const fs::path single = tmp.path / "single.safetensors", multi = tmp.path / "multi.safetensors";
  const test::CliResult one = test::run_cli("run --config " + config.string() +
                                            " --steps 2 --threads 1 --dump " + single.string());
  REQUIRE(one.status == 0);
  const test::CliResult r =
      test::run_shell(mpirun(2) + " run --json --steps 2 --threads 1 --config " +
                      config_for(config, 2, tmp.path).string() + " --dump " + multi.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  compare_files(single, multi);
  std::istringstream lines(r.out);
  std::vector<json> events;
  for (std::string l; std::getline(lines, l);) events.push_back(json::parse(l));
  REQUIRE(events.size() == 5);  // config, prefill, 2 decode steps, summary: rank 0 only
  CHECK(events[0].at("model_parallel_size") == 2);
  CHECK(events[0].at("n_local_heads") == 3);
  CHECK(events[0].at("n_local_kv_heads") == 1);
  CHECK(events[0].at("local_cache_capacity") == json::array({2, 1, 32, 4}));
  CHECK(events[0].at("cache_capacity") == json::array({2, 2, 32, 4}));
  CHECK(events[2].at("cache_k") == json::array({1, 2, 8, 4}));
  CHECK(events[2].at("local_cache_k") == json::array({1, 1, 8, 4}));
  CHECK(events[2].at("local_cache_v") == json::array({1, 1, 8, 4}));
}

TEST_CASE("mpi: bench on 2 ranks reports the allreduce time and each rank's memory") {
  TempDir tmp;
  const fs::path config =
      config_for(test::source_dir() / "configs" / "llama-tiny.json", 2, tmp.path);
  const test::CliResult r = test::run_shell(mpirun(2) + " bench --json --threads 1 --prefill 8 " +
                                            "--steps 4 --config " + config.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("model_parallel_size") == 2);
  CHECK(j.at("peak_rss_mb_per_rank").size() == 2);
  CHECK(j.at("decode_allreduce_ms_per_step").get<double>() > 0);
  CHECK(j.at("allreduces_per_step") == 4);
  CHECK(j.at("allreduce_alone_us").get<double>() > 0);
  CHECK(r.err.find("allreduce") != std::string::npos);
}

TEST_CASE("mpi: every refusal ends every rank with exit status 2 within seconds") {
  TempDir tmp;
  const fs::path seed = test::source_dir() / "configs" / "gqa.json";  // 6 heads, 2 KV heads
  const std::string tail = " --dump " + (tmp.path / "d.safetensors").string();
  SUBCASE("K not dividing n_kv_heads") {
    check_refused(mpirun(3) + " run --config " + config_for(seed, 3, tmp.path).string() + tail,
                  "n_kv_heads 2 is not divisible by model_parallel_size 3");
  }
  SUBCASE("model_parallel_size other than the number of ranks") {
    check_refused(mpirun(3) + " run --config " + config_for(seed, 2, tmp.path).string() + tail,
                  "started 3 ranks");
    check_refused(mpirun(2) + " decode --config " + seed.string() + tail, "started 2 ranks");
  }
  SUBCASE("a bad per-rank file on rank 1 only") {
    const fs::path dir = test::golden_dir() / "gqa_llama_interleaved_b2";
    fs::copy_file(dir / "weights.rank0.safetensors", tmp.path / "w0.safetensors");
    fs::copy_file(dir / "weights.safetensors", tmp.path / "w1.safetensors");  // whole shapes
    const Golden g = golden("gqa_llama_interleaved_b2");
    const std::string run = golden_args(g, config_for(dir / "config.json", 2, tmp.path), "");
    const std::string args = run.substr(0, run.find(" --weights ")) + " --weights '" +
                             (tmp.path / "w{rank}.safetensors").string() + "'" +
                             run.substr(run.find(" --input "));
    check_refused(mpirun(2) + args + tail,
                  "w1.safetensors: tensor 'layers.0.attention.wq.weight': expected shape "
                  "[24, 48] (rank 1's slice of 2), got [48, 48]");
    fs::remove(tmp.path / "w1.safetensors");  // and missing on rank 1
    check_refused(mpirun(2) + args + tail, "w1.safetensors");
  }
  CHECK(!fs::exists(tmp.path / "d.safetensors"));  // nothing written on any refusal
}
