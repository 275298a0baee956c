// attn-cli bench runs and reports every figure; speed itself is never asserted here.
#include <doctest/doctest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "attn/engine/run.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/config.hpp"
#include "attn/model/input.hpp"
#include "attn/model/model.hpp"
#include "bench_report.hpp"
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

TEST_CASE("bench: --depth decodes after an untimed fill, --max-batch bounds the batched rows") {
  const std::string cfg = (test::source_dir() / "configs" / "llama-tiny.json").string();
  // Depth 11 from prefills of 4: chunks of 4, 4 and 3 positions; the config's max_seq_len is 32.
  test::CliResult r = test::run_cli("bench --config " + cfg +
                                    " --prefill 4 --steps 2 --depth 11 --max-batch 4 --threads 2 "
                                    "--json --weight-types f32,bf16");
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("decode_depth") == 11);
  CHECK(j.at("prefill_positions") == 4);
  CHECK(r.err.find("bench: depth") != std::string::npos);
  // The cache: 4 sequences of 11 + 2 positions, 2 layers x 2 KV heads x head_dim 4, K and V.
  CHECK(j.at("kv_cache_mb").get<double>() == doctest::Approx(4 * 13 * 2 * 2 * 4 * 2 * 4 / 1e6));
  for (const auto& t : j.at("weight_types")) {
    CHECK(t.at("decode_depth") == 11);
    const auto& rows = t.at("batched_decode");
    REQUIRE(rows.size() == 3);  // B = 1, 2, 4: those up to --max-batch
    CHECK(rows[2].at("batch") == 4);
  }
  // Without --depth the decode starts right after the prefill.
  r = test::run_cli("bench --config " + cfg +
                    " --prefill 4 --steps 2 --threads 1 --json "
                    "--weight-types f32 --max-batch 1");
  REQUIRE(r.status == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j.at("decode_depth") == 4);
  CHECK(j.at("batched_decode").size() == 1);
  // A depth below the prefill, or past the cache's capacity: exit 2 naming the flag to change.
  r = test::run_cli("bench --config " + cfg + " --prefill 4 --steps 2 --depth 3");
  CHECK(r.status == 2);
  CHECK(r.err.find("--depth") != std::string::npos);
  r = test::run_cli("bench --config " + cfg + " --prefill 4 --steps 2 --depth 31");
  CHECK(r.status == 2);
  CHECK(r.err.find("--max-seq-len") != std::string::npos);
}

TEST_CASE("bench: fill_depth writes the chunked prefill's rows into every sequence") {
  attn::ModelArgs a = test::small_llama_args(attn::Block::llama, 1);
  a.dim = 32;
  a.max_batch_size = 3;
  a.max_seq_len = 12;
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const attn::Runtime rt = attn::make_runtime(threads, 0);
    const std::int64_t P = 4, depth = 10;  // chunks of 4, 4, 2
    const std::vector<float> x = attn::seeded_input(a, {1, P, 1}, 3);
    attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 5), P, rt);
    std::int64_t calls = 0;
    cli::fill_depth(m, x, P, depth, [&](std::int64_t done, std::int64_t chunks) {
      CHECK(done == ++calls);
      CHECK(chunks == 3);
    });
    CHECK(calls == 3);
    // The reference: one prefill of the same 10 rows (x's first 4, 4 and 2) in one call.
    std::vector<float> x10;
    for (std::int64_t n : {4, 4, 2}) x10.insert(x10.end(), x.begin(), x.begin() + n * a.dim);
    attn::Transformer ref = attn::make_transformer(a, attn::seeded_weights(a, 5), depth, rt);
    std::vector<float> out(x10.size());
    attn::forward(ref, x10.data(), 1, depth, 0, out.data());
    const attn::KVCache& c = m.cache;
    const std::int64_t n = depth * c.head_dim;
    for (std::int64_t l = 0; l < c.n_layers; ++l)
      for (std::int64_t h = 0; h < c.n_kv_heads; ++h) {
        for (std::int64_t i = 0; i < n; ++i) {
          CHECK(c.k(l, 0, h)[i] == doctest::Approx(ref.cache.k(l, 0, h)[i]).epsilon(1e-5));
          CHECK(c.v(l, 0, h)[i] == doctest::Approx(ref.cache.v(l, 0, h)[i]).epsilon(1e-5));
        }
        for (std::int64_t b = 1; b < c.max_batch_size; ++b) {  // copies, bit for bit
          CHECK(std::equal(c.k(l, 0, h), c.k(l, 0, h) + n, c.k(l, b, h)));
          CHECK(std::equal(c.v(l, 0, h), c.v(l, 0, h) + n, c.v(l, b, h)));
          CHECK(c.k(l, b, h)[n] == 0.0f);  // past the depth: untouched
        }
      }
  }
}

TEST_CASE("bench: flop count of one Llama-3-8B layer's prefill") {
  // 2 * 512 * (4096 * (4096 + 1024 + 1024 + 4096) + 3 * 4096 * 14336) matrix flops, and
  // 4 * (512 * 513 / 2) * 4096 for q.k and p.v over the causal half.
  const attn::ModelArgs a = attn::llama3_8b_layer_args();
  CHECK(cli::prefill_flops(a, 1, 512, true) == doctest::Approx(223338299392.0));
  CHECK(cli::prefill_flops(a, 1, 512, false) ==
        doctest::Approx(223338299392.0 + 4.0 * 131328 * 4096));
}

// Fed numbers, no timing: a prefill above the FMA peak or a decode above its streaming read is
// a measurement error, said with the probes' spread; at or under 100% it is not.
TEST_CASE("bench report: a fraction of the FMA peak or the stream above 100% is flagged") {
  cli::BenchResult r;
  r.weight_type = "F32";
  r.prefill_gflop = 313;
  r.prefill_seconds = 1;  // 313 GFLOP/s
  r.step_ms = {10, 10, 10};
  r.weight_bytes = 0.4e9;  // 40 GB/s at 10 ms a step
  r.limits.fma_gflops = 100;
  r.limits.fma_samples = {100, 55};
  r.limits.stream_gbs = 50;
  r.limits.stream_spread = 0.2;
  std::vector<std::string> errors = cli::measurement_errors({r});
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("F32 prefill at 313% of the FMA peak 100.0 GFLOP/s") != std::string::npos);
  CHECK(errors[0].find("2 probes around the run spread 45%") != std::string::npos);

  r.limits.fma_gflops = 400;  // 78%: not an error
  r.limits.stream_gbs = 32;   // 125%
  errors = cli::measurement_errors({r});
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("F32 decode at 125% of the streaming read 32.0 GB/s") != std::string::npos);
  CHECK(errors[0].find("spread 20%") != std::string::npos);

  r.limits.stream_gbs = 40;  // exactly 100%
  CHECK(cli::measurement_errors({r}).empty());
}

// --compute bf16's vdpbf16ps makes two products a lane for one FMA's slot: its BF16 prefill is
// held to twice the FMA peak, and said to be.
TEST_CASE("bench report: a BF16 prefill under --compute bf16 is held to twice the FMA peak") {
  cli::BenchResult r;
  r.weight_type = "BF16";
  r.prefill_gflop = 150;
  r.prefill_seconds = 1;  // 150 GFLOP/s: 150% of one peak, 75% of two
  r.step_ms = {10};
  r.weight_bytes = 0.1e9;
  r.limits.fma_gflops = 100;
  r.limits.fma_samples = {100};
  r.limits.stream_gbs = 50;
  REQUIRE(cli::measurement_errors({r}).size() == 1);
  r.peak_factor = 2;
  CHECK(cli::measurement_errors({r}).empty());
  r.prefill_gflop = 250;
  const std::vector<std::string> errors = cli::measurement_errors({r});
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("BF16 prefill at 125% of the vdpbf16ps peak 200.0 GFLOP/s") !=
        std::string::npos);
}

// --quick's plan, and its expected cost at this Zen 4's rates (221 GFLOP/s peak, of which the
// plan counts half; weights read at 20 GB/s), for the default layer: no timing is measured.
TEST_CASE("bench --quick: a small plan expected under 30 s, and the full one said to cost more") {
  const cli::BenchPlan full{{512, 128, 512}, {1, 2, 4, 8, 16}, {"F32", "BF16", "F16"}};
  const cli::BenchPlan quick = cli::quick_plan(full);
  CHECK(quick.shape.prefill == 64);
  CHECK(quick.shape.steps == 16);
  CHECK(quick.shape.depth == 64);
  CHECK(quick.batches == std::vector<std::int64_t>{1, 2, 4});
  CHECK(quick.weight_types == std::vector<std::string>{"F32"});
  const attn::ModelArgs layer = attn::llama3_8b_layer_args();
  const cli::BenchCost q = cli::expected_cost(quick, layer, 110, 20);
  const cli::BenchCost f = cli::expected_cost(full, layer, 110, 20);
  CHECK(q.seconds < 30);
  // One F32 layer: 218 M weights, 0.87 GB; all three types: 1.75 GB of weights, 1.9 GB measured.
  CHECK(q.bytes > 870'000'000);
  CHECK(q.bytes < 1'200'000'000);
  CHECK(f.bytes > 1'750'000'000);
  CHECK(f.bytes < 2'500'000'000);
  CHECK(f.seconds > 60);  // about 3 minutes measured
}

TEST_CASE("bench --quick: runs the quick plan and says the expected cost first") {
  const test::CliResult r = test::run_cli(
      "bench --config " + (test::source_dir() / "configs" / "llama-tiny.json").string() +
      " -c 96 --quick --threads 2 --json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("prefill_positions") == 64);
  CHECK(j.at("decode_steps") == 16);
  CHECK(j.at("batched_decode").size() == 3);
  CHECK(j.at("weight_types").size() == 1);
  CHECK(j.at("fma_peak_samples_gflops").size() == 2);  // before and after the work
  CHECK(j.at("measurement_errors").is_array());
  const std::size_t said = r.err.find("bench: expected about ");
  REQUIRE(said != std::string::npos);
  CHECK(said < r.err.find("drawing the weights"));
}
