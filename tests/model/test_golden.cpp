// The engine against the PyTorch reference: fixtures from tests/golden/make_golden.py.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "attn/engine/run.hpp"
#include "attn/kernels/matmul.hpp"
#include "test_support.hpp"

namespace {

struct Case {
  std::string name;
  attn::RunOptions opts;
  test::Tolerance tol;
};

std::vector<Case> cases() {
  std::ifstream in(test::golden_dir() / "cases.json");
  REQUIRE(in);
  std::vector<Case> out;
  for (const auto& c : nlohmann::json::parse(in))
    out.push_back({c.at("name"),
                   {c.at("batch"), c.at("prefill"), c.at("steps")},
                   {c.at("tolerance").at("rtol"), c.at("tolerance").at("atol")}});
  return out;
}

// Checks one output tensor against the expected file; returns its worst error.
test::Diff check(const attn::SafetensorsFile& expected, const std::string& name, const float* got,
                 std::int64_t n, const test::Tolerance& tol) {
  const attn::TensorInfo& t = expected.info(name);
  REQUIRE(t.numel() == n);
  std::vector<float> storage;
  const test::Diff d = test::compare(got, attn::tensor_as_f32(expected, name, storage), n, tol);
  INFO(name << ": worst |error| " << d.worst_abs << ", " << d.worst_ratio << " of tolerance");
  CHECK(d.failures == 0);
  return d;
}

// ffn_rows: rows per FFN pass; a value below the default exercises several passes and a
// remainder, which only prefills of more than kFfnRows rows reach by default.
test::Diff run_case(const Case& c, int threads, std::int64_t ffn_rows = attn::kFfnRows) {
  // Fixtures are small: with 2 threads, make every product and attention run in parallel.
  const attn::Runtime rt = attn::make_runtime(threads, threads > 1 ? 0 : attn::kParallelFlops);
  const auto dir = test::golden_dir() / c.name;
  const attn::ModelArgs args = attn::load_config(dir / "config.json");
  attn::RunOptions opts = c.opts;
  const std::vector<float> x = attn::load_input(dir / "input.safetensors", args, opts, true);
  attn::Transformer m = attn::make_transformer(
      args, attn::load_weights(args, dir / "weights.safetensors"), opts.batch * opts.prefill, rt);
  m.act.ffn_rows = ffn_rows;
  const attn::RunOutputs out = attn::run(m, x, opts, [](const attn::Event&) {});
  const attn::SafetensorsFile expected = attn::open_safetensors(dir / "expected.safetensors");

  const std::int64_t B = opts.batch, dim = args.dim, T = opts.prefill + opts.steps;
  test::Diff worst;
  auto keep = [&](const test::Diff& d) {
    worst.worst_abs = std::max(worst.worst_abs, d.worst_abs);
    worst.worst_ratio = std::max(worst.worst_ratio, d.worst_ratio);
  };
  keep(check(expected, "prefill.output", out.prefill_output.data(), B * opts.prefill * dim, c.tol));
  for (std::int64_t i = 1; i <= opts.steps; ++i)
    keep(check(expected, "decode." + std::to_string(i) + ".output",
               out.decode_output.data() + (i - 1) * B * dim, B * dim, c.tol));
  const std::int64_t cache_n = B * args.n_kv_heads * T * args.head_dim();
  for (std::int64_t l = 0; l < args.n_layers; ++l) {
    const std::string p = "cache." + std::to_string(l);
    keep(check(expected, p + ".k", attn::filled_k(m.cache, l, B, T).data(), cache_n, c.tol));
    keep(check(expected, p + ".v", attn::filled_v(m.cache, l, B, T).data(), cache_n, c.tol));
  }
  return worst;
}

}  // namespace

TEST_CASE("golden: every case matches the PyTorch reference, on 1 and 2 threads") {
  const std::vector<Case> all = cases();
  REQUIRE(all.size() >= 10);
  for (const Case& c : all)
    for (int threads : {1, 2}) {
      CAPTURE(c.name);
      CAPTURE(threads);
      const test::Diff d = run_case(c, threads);
      MESSAGE("golden " << c.name << " threads " << threads << ": worst |error| " << d.worst_abs
                        << ", " << d.worst_ratio << " of tolerance");
    }
}

TEST_CASE("golden: the FFN in passes of 3 rows (several, with a remainder) matches too") {
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    const test::Diff d = run_case(c, 2, 3);
    MESSAGE("golden " << c.name << " ffn_rows 3: worst " << d.worst_ratio << " of tolerance");
  }
}

TEST_CASE("golden: the CLI's --dump matches the reference file tensor for tensor") {
  const auto dir = test::golden_dir() / "gqa_llama_interleaved_b2";
  const auto dump = std::filesystem::temp_directory_path() / "attn_golden_dump.safetensors";
  const test::CliResult r = test::run_cli("run --config " + (dir / "config.json").string() +
                                          " --weights " + (dir / "weights.safetensors").string() +
                                          " --input " + (dir / "input.safetensors").string() +
                                          " --prefill 6 --steps 3 --dump " + dump.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const attn::SafetensorsFile got = attn::open_safetensors(dump);
  const attn::SafetensorsFile expected = attn::open_safetensors(dir / "expected.safetensors");
  CHECK(got.header.tensors.size() == expected.header.tensors.size());
  for (const auto& [name_, info] : expected.header.tensors) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(name);
    REQUIRE(got.header.tensors.count(name) == 1);
    CHECK(got.info(name).shape == info.shape);
    std::vector<float> storage;
    check(expected, name, attn::tensor_as_f32(got, name, storage), info.numel(), {});
  }
  std::filesystem::remove(dump);
}
