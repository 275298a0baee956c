// attn-cli bench runs and reports every figure; speed itself is never asserted here.
#include <doctest/doctest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "workloads/bench.hpp"

TEST_CASE("bench: one JSON object with the workload's and the machine's figures") {
  const test::CliResult r = test::run_cli(
      "bench --config " + (test::source_dir() / "configs" / "llama-tiny.json").string() +
      " --prefill 8 --steps 4 --threads 2 --json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("prefill_positions") == 8);
  CHECK(j.at("decode_steps") == 4);
  CHECK(j.at("threads") == 2);
  for (const char* key : {"prefill_ms", "decode_ms_median", "decode_gbs", "stream_gbs",
                          "sgemm_gflops", "fma_peak_gflops", "peak_rss_mb"}) {
    CAPTURE(key);
    CHECK(j.at(key).get<double>() > 0);
  }
  CHECK(r.err.find("prompt eval time") != std::string::npos);
  // Decode at B = 1, 2, 4, 8, 16 in the same rounds (the config's max_batch_size is 2: the
  // bench's own cache holds 16); batch 1's row is the decode above.
  const auto& rows = j.at("batched_decode");
  REQUIRE(rows.size() == 5);
  const std::int64_t batches[] = {1, 2, 4, 8, 16};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    CHECK(rows[i].at("batch") == batches[i]);
    CHECK(rows[i].at("ms_median").get<double>() > 0);
    CHECK(rows[i].at("tokens_per_s").get<double>() ==
          doctest::Approx(rows[i].at("steps_per_s").get<double>() * double(batches[i])));
  }
  CHECK(rows[0].at("ms_median") == j.at("decode_ms_median"));
  CHECK(rows[0].at("step_vs_batch1") == 1.0);
  // The kernels' ISA and the streaming read's winning pattern are named.
  CHECK(!j.at("matmul_isa").get<std::string>().empty());
  CHECK(j.at("matmul").get<std::string>().find(j.at("matmul_isa").get<std::string>()) !=
        std::string::npos);
  CHECK(!j.at("stream_pattern").get<std::string>().empty());
  CHECK(r.err.find("batched decode") != std::string::npos);
  // One row per weight type, F32 first; BF16 and F16 read half the bytes.
  const auto& types = j.at("weight_types");
  REQUIRE(types.size() == 3);
  const char* names[] = {"F32", "BF16", "F16"};
  for (std::size_t i = 0; i < types.size(); ++i) {
    CAPTURE(i);
    CHECK(types[i].at("weight_type") == names[i]);
    CHECK(types[i].at("batched_decode").size() == 5);
    CHECK(types[i].at("decode_steps_per_s").get<double>() > 0);
    CHECK(types[i].at("stream_gbs").get<double>() > 0);
  }
  CHECK(types[0].at("decode_vs_first") == 1.0);
  CHECK(types[1].at("weight_bytes").get<double>() < types[0].at("weight_bytes").get<double>());
  CHECK(types[0].at("decode_ms_median") == j.at("decode_ms_median"));
  // What ran where and when.
  CHECK(j.at("version").get<std::string>().find('.') != std::string::npos);
  CHECK(!j.at("cpu").get<std::string>().empty());
  CHECK(j.at("kernels") == j.at("matmul_isa"));
  CHECK(j.at("date").get<std::string>().size() == 20);  // 2026-11-25T09:40:13Z
  // Progress on stderr, a line per phase when stderr is not a terminal.
  for (const char* phase : {"bench: warm-up", "bench: prefill", "bench: decode", "bench: done"}) {
    CAPTURE(phase);
    CHECK(r.err.find(phase) != std::string::npos);
  }
}

TEST_CASE("bench: without --json the tables go to stdout") {
  const test::CliResult r = test::run_cli(
      "bench --config " + (test::source_dir() / "configs" / "llama-tiny.json").string() +
      " --prefill 4 --steps 2 --threads 1 --weight-types f32");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("prompt eval time") != std::string::npos);
  CHECK(r.out.find("batched decode") != std::string::npos);
  CHECK(r.err.find("prompt eval time") == std::string::npos);
  CHECK(r.err.find("bench: done") != std::string::npos);
}

TEST_CASE("bench: --weight-types picks the types, and a file runs as it is") {
  const std::string cfg = (test::source_dir() / "configs" / "llama-tiny.json").string();
  test::CliResult r = test::run_cli(
      "bench --config " + cfg + " --prefill 4 --steps 2 --threads 1 --json --weight-types bf16");
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("weight_types").size() == 1);
  CHECK(j.at("weight_type") == "BF16");
  r = test::run_cli("bench --config " + cfg + " --prefill 4 --steps 2 --weight-types q4");
  CHECK(r.status == 2);
  CHECK(r.err.find("--weight-types") != std::string::npos);
  const std::filesystem::path dir = test::golden_dir() / "f16_llama_gqa_interleaved";
  r = test::run_cli("bench --config " + (dir / "config.json").string() + " --weights " +
                    (dir / "weights.safetensors").string() +
                    " --prefill 4 --steps 2 --threads 1 --json --max-seq-len 64");
  INFO(r.err);
  REQUIRE(r.status == 0);
  j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("weight_types").size() == 1);
  CHECK(j.at("weight_type") == "F16");
}

TEST_CASE("bench: Q8_0 and Q4_0 are drawn as ggml quantizes, the K-quants are refused") {
  // Rows of whole 32-weight blocks: dim 64, FFN 192.
  const std::filesystem::path cfg = test::temp_path("bench_quant.json");
  std::ofstream(cfg) << R"({"dim": 64, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2,
    "multiple_of": 32, "norm_eps": 1e-5, "max_batch_size": 2, "max_seq_len": 32,
    "block": "llama", "rope": "interleaved"})";
  test::CliResult r = test::run_cli("bench --config " + cfg.string() +
                                    " --prefill 4 --steps 2 --threads 1 --json "
                                    "--weight-types q8_0,q4_0");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& types = j.at("weight_types");
  REQUIRE(types.size() == 2);
  CHECK(types[0].at("weight_type") == "Q8_0");
  CHECK(types[1].at("weight_type") == "Q4_0");
  CHECK(types[1].at("weight_bytes").get<double>() < types[0].at("weight_bytes").get<double>());
  r = test::run_cli("bench --config " + cfg.string() +
                    " --prefill 4 --steps 2 --threads 1 --weight-types q4_k");
  CHECK(r.status == 2);
  CHECK(r.err.find("Q4_K") != std::string::npos);
  CHECK(r.err.find("--weight-types") != std::string::npos);
}

TEST_CASE("bench: flop count of one Llama-3-8B layer's prefill") {
  // 2 * 512 * (4096 * (4096 + 1024 + 1024 + 4096) + 3 * 4096 * 14336) matrix flops, and
  // 4 * (512 * 513 / 2) * 4096 for q.k and p.v over the causal half.
  const attn::ModelArgs a = attn::llama3_8b_layer_args();
  CHECK(cli::prefill_flops(a, 1, 512, true) == doctest::Approx(223338299392.0));
  CHECK(cli::prefill_flops(a, 1, 512, false) ==
        doctest::Approx(223338299392.0 + 4.0 * 131328 * 4096));
}
