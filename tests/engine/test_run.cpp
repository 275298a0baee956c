// The session API, as a library user and examples/consumer call it: every golden case through
// plan_run / open_run / run against the PyTorch reference, the CLI's dump equal to the
// session's outputs bit for bit, and the refusals plan_run makes before any work.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "attn/engine/run.hpp"
#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "test_support.hpp"

namespace {

// The golden case `name` as a request: its config, weights and input files.
attn::RunRequest golden_request(const std::string& name, const nlohmann::json& c, int threads) {
  const auto dir = test::golden_dir() / name;
  attn::RunRequest r;
  r.args = attn::load_config(dir / "config.json");
  r.model.weights = dir / "weights.safetensors";
  r.input = dir / "input.safetensors";
  r.opts = {c.at("batch"), c.at("prefill"), c.at("steps")};
  r.model.threads = threads;
  return r;
}

// Every output the dump holds, from the session, against the file's tensor of that name.
// No tolerance: bit for bit.
void compare_outputs(const attn::Run& s, const attn::SafetensorsFile& f,
                     const std::optional<test::Tolerance>& tol) {
  const attn::RunOptions& o = s.request.opts;
  const attn::ModelArgs& a = s.request.args;
  const std::int64_t B = o.batch, T = o.prefill + o.steps, dim = a.dim;
  auto check = [&](const std::string& name, const float* got, std::int64_t n) {
    CAPTURE(name);
    REQUIRE(f.info(name).numel() == n);
    std::vector<float> storage;
    const float* expected = attn::tensor_as_f32(f, name, storage);
    if (!tol)  // bit for bit
      CHECK(std::memcmp(got, expected, std::size_t(n) * sizeof(float)) == 0);
    else
      CHECK(test::compare(got, expected, n, *tol).failures == 0);
  };
  check("prefill.output", s.out.prefill_output.data(), B * o.prefill * dim);
  for (std::int64_t i = 1; i <= o.steps; ++i)
    check("decode." + std::to_string(i) + ".output", s.out.decode_output.data() + (i - 1) * B * dim,
          B * dim);
  const std::int64_t cache_n = B * a.n_kv_heads * T * a.head_dim();
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    const std::string p = "cache." + std::to_string(l);
    check(p + ".k", attn::filled_k(s.session.model.cache, l, B, T).data(), cache_n);
    check(p + ".v", attn::filled_v(s.session.model.cache, l, B, T).data(), cache_n);
  }
}

nlohmann::json golden_cases() {
  std::ifstream in(test::golden_dir() / "cases.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("session: every golden case through plan_run, open_run and run matches PyTorch") {
  const nlohmann::json cases = golden_cases();
  REQUIRE(cases.size() >= 10);
  for (const nlohmann::json& c : cases) {
    const std::string name = c.at("name");
    CAPTURE(name);
    attn::Run s = attn::open_run(attn::plan_run(golden_request(name, c, 2)));
    std::int64_t events = 0;
    attn::run(s, [&](const attn::Event&) { ++events; });
    CHECK(events == (s.request.opts.prefill > 0) + s.request.opts.steps);
    const attn::SafetensorsFile expected =
        attn::open_safetensors(test::golden_dir() / name / "expected.safetensors");
    compare_outputs(s, expected,
                    test::Tolerance{c.at("tolerance").at("rtol"), c.at("tolerance").at("atol")});
  }
}

TEST_CASE("session: the CLI's dump holds the session's outputs bit for bit") {
  const nlohmann::json cases = golden_cases();
  const nlohmann::json& c = cases.at(0);
  const std::string name = c.at("name");
  attn::RunRequest r = golden_request(name, c, 2);
  r.dump = test::temp_path("session_dump.safetensors");
  const auto cli_dump = test::temp_path("session_cli_dump.safetensors");
  attn::Run s = attn::open_run(attn::plan_run(r));
  attn::run(s, [](const attn::Event&) {});
  attn::write_dump(s);
  const test::CliResult cli = test::run_cli(
      "run -t 2 --config " + (test::golden_dir() / name / "config.json").string() + " --weights " +
      r.model.weights.string() + " --input " + r.input.string() + " -b " +
      std::to_string(r.opts.batch) + " --prefill " + std::to_string(r.opts.prefill) + " --steps " +
      std::to_string(r.opts.steps) + " --dump " + cli_dump.string());
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  compare_outputs(s, attn::open_safetensors(cli_dump), std::nullopt);
  const attn::SafetensorsFile a = attn::open_safetensors(r.dump),
                              b = attn::open_safetensors(cli_dump);
  CHECK(a.header.tensors.size() == b.header.tensors.size());
}

TEST_CASE("session: plan_run refuses a run before any work, naming what is wrong") {
  attn::RunRequest r;
  r.args = attn::seed_args();
  r.opts = {1, r.args.max_seq_len, 1};
  CHECK_THROWS_WITH_AS(attn::plan_run(r), doctest::Contains("the cache is full"), attn::InputError);
  r.opts = {r.args.max_batch_size + 1, 4, 1};
  CHECK_THROWS_WITH_AS(attn::plan_run(r), doctest::Contains("max_batch_size"), attn::InputError);
  r.opts = {1, 4, 1};
  r.dump = test::temp_path("no_such_dir") / "dump.safetensors";
  CHECK_THROWS_WITH_AS(attn::plan_run(r), doctest::Contains("dump"), attn::InputError);
  r.dump.clear();
  r.model.weights = test::temp_path("no_such_weights.safetensors");
  CHECK_THROWS_WITH_AS(attn::plan_run(r), doctest::Contains("no_such_weights"), attn::InputError);
  r.model.weights.clear();
  r.args.n_layers = 64;
  r.args.max_seq_len = 8192;
  r.opts = {1, 8000, 1};
  r.attention_weights = true;
  CHECK_THROWS_WITH_AS(attn::plan_run(r), doctest::Contains("limit of 1 GiB"), attn::InputError);
  r.attention_weights = false;
  r.model.shard = {0, 4};  // n_kv_heads 2 does not split 4 ways
  CHECK_THROWS_AS(attn::plan_run(r), attn::InputError);
  r.model.shard = {};
  const attn::RunPlan ok = attn::plan_run(r);
  CHECK(ok.model.shape.max_rows == 8000);
  CHECK(ok.model.drawn);
}
